"""Drive the runner from the `validate` command: one fresh process per shape (the protocol's default) or
one process for all of them, through the same runner command as plans; the records read back; the
summary the command ends with."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.registry import check_shape
from livebytes.estimator.shapes import parse_shape_list, shape_list_spec

from .batch import PlanRun, run_plan
from .batch import load_plan
from ..check.records import records_from


def gpu_reason(impl: str) -> str | None:
    try:
        from .harnesses import decline_reason  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    except ImportError as err:  # torch missing altogether
        return f"the validate extra is not installed ({err.__class__.__name__}: {err})"
    return decline_reason(impl)


def check_runnable(groups: list[dict]) -> None:
    """Refuse before starting anything: a machine that cannot run an implementation, a shape its model refuses."""
    for g in groups:
        reason = gpu_reason(g["impl"])
        if reason:
            raise LivebytesError(f"cannot validate {g['impl']} here: {reason}")
        for shape in parse_shape_list(g["shapes"]):
            check_shape(g["impl"], shape, None)


def run(impl: str, shapes: str, contract: str | None, recompute: bool, forward_only: bool, same_process: bool,
        out: Path, triton_cache: str | None = None, alloc_conf: str | None = None) -> PlanRun:
    if forward_only and impl == "fla-kda@0.6.0":
        impl = "fla-kda-fwd@0.6.0"
    group = {"impl": impl, "shapes": shape_list_spec(parse_shape_list(shapes)), "contract": contract,
             "no_recompute": not recompute, "forward_only": forward_only, "fresh": not same_process,
             "triton_cache": triton_cache, "alloc_conf": alloc_conf}
    check_runnable([group])
    done = run_plan([group], out, deadline=float("inf"), parallel=False)
    failed = [g["shapes"] for g, code in done.exits if code]
    if failed:
        raise LivebytesError(f"runner failed on {'; '.join(failed)} (records written so far are in {out})")
    return done


def run_plan_file(path: Path, out: Path) -> PlanRun:
    """``validate --plan``: every group of the plan file, refused before anything starts where it cannot run here."""
    groups = load_plan(path)
    check_runnable(groups)
    return run_plan(groups, out)


def measured_records(source: str, impl: str | None = None) -> tuple[list, list[str]]:
    """``validate --from-records``: the measured records of ``source`` (a file, a folder, a committed file's name, or
    all), ``impl``'s only when given, and the note that says how many others that leaves out (said, not silent)."""
    measured = [r for r in records_from(source) if r.origin == "measured"]
    records = [r for r in measured if not impl or r.impl == impl]
    if not records:
        raise LivebytesError(f"no measured records in {source!r}" + (f" for {impl}" if impl else ""))
    left_out = len(measured) - len(records)
    return records, ([f"--impl {impl}: re-checking its {len(records)} of the {len(measured)} measured records in "
                      f"{source}; the other {left_out} are other models'"] if left_out else [])


def judge(record, tolerance: float):
    """The comparison of one record (``compare.compare``); one the models cannot judge (unknown impl, device, option)
    names its file."""
    from ..check import compare as cmp  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    try:
        return cmp.compare(record, tolerance)
    except LivebytesError as err:
        raise LivebytesError(f"{record.path}: {err}") from None


def judge_all(records: list, tolerance: float, progress=None) -> list:
    """Each record's comparison in order; ``progress(done, total, file name)`` hears of each."""
    out = []
    for r in records:
        out.append(judge(r, tolerance))
        if progress:
            progress(len(out), len(records), r.path.name)
    return out


@dataclass(frozen=True)
class Summary:
    passed: int
    failed: int
    out_of_memory: int
    device_seconds: float | None


def summarize(comparisons, device_seconds: float | None = None) -> Summary:
    """Counts for the summary line: passed (measured and matched), failed (anything that did not pass, an
    out-of-memory the model said would fit included), out of memory (every out-of-memory record)."""
    ooms = [c for c in comparisons if c.measured is None]
    rest = [c for c in comparisons if c.measured is not None]
    return Summary(sum(c.passed for c in rest), sum(not c.passed for c in comparisons), len(ooms), device_seconds)

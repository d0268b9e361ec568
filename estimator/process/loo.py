"""Leave-one-out over the committed process-memory data: for every case whose stack limit or modules were measured on a
GPU or derived by a compile, the figure the tool gives with that case withheld, against the committed one.

The rows are the error of ``process.estimate``'s rules, measured: ``error`` (estimate - committed, bytes of device
memory on the device asked) per kind of estimate. A verdict that rests on an estimate counts its high end: the estimate
plus the largest amount by which the rule fell short on a withheld case (``margin``), never a fitted constant. A
whole model whose step was derived on the CPU (``process.model_frames``) takes no estimate: its row
(``whole-model limit, derived``) is its own derived limit against the limit its record measured, one row per record. What
the tool answers for each measured whole-model point with that point withheld (``whole-model limit, as answered``) is
its derived step where one was derived, else the case at its other lengths, else the rule: ``answered_rows``. A length
between measured ones takes the next longer one's limit; ``length_rows`` measures that tier alone
(``whole-model limit, another length``). The
table is docs/validation.md's "Process memory where nothing was measured" (``python -m livebytes.cli.docgen`` does not
write it: ``tests/test_process_estimate.py`` keeps the document equal to these rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from . import estimate as est
from . import model_frames
from .driver import data_files, driver_stack_limit, stack_reservation_bytes
from ..devices import Device, get_device

KINDS = ("kernel frames", "whole-model limit", "modules", "whole-model limit, derived", "whole-model limit, as answered",
         "whole-model limit, another length", "whole-model rule, against a step no GPU ran")


@dataclass(frozen=True)
class Row:
    """One withheld case: which data, what kind of figure, the committed and estimated values (bytes per thread for a
    stack, bytes for modules), and the error in device bytes on the device (reservation or modules)."""
    data_file: str
    kind: str
    case: str
    tokens: int | None
    source: str                 # "GPU" (a process measured) or "CPU" (frames compiled for the GPU's architecture)
    committed: int
    estimated: int
    tier: str
    error: int


def _reservation_error(estimated: int, committed: int, device: Device) -> int:
    return (stack_reservation_bytes(driver_stack_limit(estimated), device)
            - stack_reservation_bytes(driver_stack_limit(committed), device))


def kernel_rows(name: str, data: dict, siblings: tuple[dict, ...], device: Device) -> list[Row]:
    """Each complete cold case's limit (its kernels' largest frame) against the one its kernels' frames estimated
    with the case withheld give (``process.estimate.estimate_frames``)."""
    cpu = data.get("derived_on_cpu", {})
    sibling_cases = tuple(est.frame_cases(s) for s in siblings)
    rows = []
    for case, frames in est.frame_cases(data).items():
        others = est.frame_cases(data, frozenset({case.key}))
        guessed = est.estimate_frames(tuple(frames), case, others, sibling_cases)
        top = max(guessed.values(), key=lambda e: e.value)
        committed, estimated = max(frames.values()), top.value
        rows.append(Row(name, KINDS[0], case.key, None, "CPU" if case.key in cpu else "GPU", committed, estimated,
                        top.tier, _reservation_error(estimated, committed, device)))
    return rows


def model_rows(name: str, data: dict, device: Device) -> list[Row]:
    """Each whole model's measured limit (every length measured) against ``process.estimate.model_limit`` with its
    case withheld. A family's only case is not withheld (a family measured at one case, as FLA's GLA model): the rule's error within
    a family needs a second case of it, and an answer for a one-case family says its figure is unbounded rather than
    estimated with this error (``memory._model_limit_estimate``)."""
    cases = est.model_cases(data)
    rows = []
    for case, points in cases.items():
        others = est.model_cases(data, withheld=frozenset({case.key}))
        if not any(c.family == case.family for c in others):
            continue
        for p in points:
            guess = est.model_limit(case, p["tokens"], others, est.cold_frames(data))
            if guess is None:
                continue
            rows.append(Row(name, KINDS[1], case.key, p["tokens"], "GPU", p["limit_bytes"], guess.value, guess.words,
                            _reservation_error(guess.value, p["limit_bytes"], device)))
    return rows


def derived_model_rows(name: str, device: Device, derived: tuple | None = None) -> list[Row]:
    """Each whole model's step derived under the data's Triton (``process.model_frames``: every Triton kernel the
    traced step launches compiled on the CPU, the largest frame rounded by ``driver_stack_limit``) against the limit
    its record measured after the first step. No other case is used, so nothing needs withholding."""
    triton = data_triton(name)
    rows = []
    for step in (model_frames.steps() if derived is None else derived):
        if step.triton != triton or step.measured is None:
            continue
        limit = driver_stack_limit(step.frame)
        rows.append(Row(name, KINDS[3], step.case, step.tokens, "GPU", step.measured, limit,
                        f"{step.name}: its step compiled on the CPU, largest frame {step.kernel}",
                        _reservation_error(limit, step.measured, device)))
    return rows


def unmeasured_step_rows(name: str, data: dict, device: Device, derived: tuple | None = None) -> list[Row]:
    """The whole-model rule (``estimate.model_limit`` over every measured case, its own case key at any length
    skipped, as for a config it never saw) against each committed step derived on the CPU that no process measured
    (``process.model_frames``: the presets at the lengths users ask, configs no GPU ran) of a family these data hold
    measured cases of: how far the rule is from the compile where nothing was measured. The derived figure is the
    committed one here (its source "CPU"): the derived steps matched every measured limit they were checked against."""
    triton, cases = data_triton(name), est.model_cases(data)
    families = {c.family for c in cases}
    rows = []
    for step in (model_frames.steps() if derived is None else derived):
        case = est.parse_case(step.case)
        if step.triton != triton or step.measured is not None or case.family not in families:
            continue
        guess = est.model_limit(case, step.tokens, cases, est.cold_frames(data))
        limit = driver_stack_limit(step.frame)
        rows.append(Row(name, KINDS[6], step.case, step.tokens, "CPU", limit, guess.value,
                        f"{guess.words} (against {step.name})", _reservation_error(guess.value, limit, device)))
    return rows


def answered_rows(name: str, data: dict, device: Device, derived: tuple | None = None) -> list[Row]:
    """Each whole model's measured point withheld alone, against the figure the tool then answers, in
    ``memory._model_limit``'s order: the step's own limit where that step was derived on the CPU (any record of the
    point); else the case's limit at the next longer length measured (``limit_at``); above its longest, the larger of
    the longest's and the rule's (``memory._above_longest``); else ``estimate.model_limit`` over the other cases. The
    rule's own error over every point is ``model_rows``'."""
    triton = data_triton(name)
    rows = []
    for case, points in est.model_cases(data).items():
        others = est.model_cases(data, withheld=frozenset({case.key}))
        for p in points:
            step = _derived_point(case.key, p, triton, derived)
            rest = [q for q in points if q is not p]
            guess = est.model_limit(case, p["tokens"], others, est.cold_frames(data))
            if step is not None:
                value, tier = driver_stack_limit(step.frame), f"{step.name}: its step compiled on the CPU"
            elif any(q["tokens"] > p["tokens"] for q in rest):
                value, tier = est.limit_at(rest, p["tokens"]), "this case measured at a longer length"
            elif rest:
                value = max(rest[-1]["limit_bytes"], guess.value if guess else 0)
                tier = "above this case's longest length measured: the larger of its limit and the rule's"
            elif guess is not None:
                value, tier = guess.value, guess.words
            else:
                continue
            rows.append(Row(name, KINDS[4], case.key, p["tokens"], "GPU", p["limit_bytes"], value, tier,
                            _reservation_error(value, p["limit_bytes"], device)))
    return rows


def length_rows(name: str, data: dict, device: Device) -> list[Row]:
    """Each whole model's measured point withheld alone where its case was measured at a longer length, against the
    next longer one's limit (``memory._model_limit``'s tier for a length between measured ones): how far "the limit
    does not shrink as the length grows" is from each committed point."""
    rows = []
    for case, points in est.model_cases(data).items():
        for p in points:
            longer = [q for q in points if q["tokens"] > p["tokens"]]
            if longer:
                value = est.limit_at(longer, p["tokens"])
                rows.append(Row(name, KINDS[5], case.key, p["tokens"], "GPU", p["limit_bytes"], value,
                                f"the next longer length measured ({longer[0]['tokens']:,} tokens)",
                                _reservation_error(value, p["limit_bytes"], device)))
    return rows


def _derived_point(case: str, point: dict, triton: str, derived: tuple | None):
    """The derived step (the largest frame where several) of a measured point: the same case, length and Triton, a
    build the point's records ran (``memory``'s ``model_frames.for_step`` keys it the same way)."""
    builds = {b["architecture"] for b in point.get("builds", [])}
    found = [s for s in (model_frames.steps() if derived is None else derived)
             if (s.case, s.tokens, s.triton) == (case, point["tokens"], triton) and s.architecture in builds]
    return max(found, key=lambda s: (s.frame, s.record)) if found else None


def data_triton(name: str) -> str:
    """The Triton version of a process data file's name (``fla-core-0.6.0_triton-3.6.0_H200.json`` -> ``3.6.0``)."""
    return name.split("triton-")[1].split("_")[0]


def module_rows(name: str, data: dict) -> list[Row]:
    """Each case's own measured modules (cold) against its family's largest figure measured at other cases (the rule
    ``memory._modules`` takes at a case not measured)."""
    by_case = data.get("modules_by_case", {}).get("cold", {})
    rows = []
    for key, entry in by_case.items():
        case = est.parse_case(key)
        guess = module_estimate(data, case.family, key)
        if guess is None:
            continue
        rows.append(Row(name, KINDS[2], key, None, "GPU", int(entry["bytes"]), guess.value, guess.tier,
                        guess.value - int(entry["bytes"])))
    return rows


def module_estimate(data: dict, family: str, withheld: str | None = None) -> est.Estimate | None:
    """The family's largest cold module figure measured at cases other than ``withheld``: its own cases' and the
    family figure where that was measured at another case. None: the family has no other measured case."""
    by_case = data.get("modules_by_case", {}).get("cold", {})
    found = [(int(v["bytes"]), k) for k, v in by_case.items() if k != withheld and est.parse_case(k).family == family]
    entry = data.get("modules", {}).get(family, {}).get("cold")
    if entry is not None and any(c != withheld for c in entry.get("measured_at", [])):
        found.append((int(entry["bytes"]), f"{family} (the family's figure)"))
    if not found:
        return None
    return est.Estimate(max(v for v, _ in found), "the family's largest measured at another case",
                        tuple(sorted(k for _, k in found)))


@lru_cache(maxsize=None)
def rows(device_name: str = "H200") -> tuple[Row, ...]:
    """Every leave-one-out row of the process-memory data ``device_name``'s figures come from."""
    device = get_device(device_name)
    files = data_files(device)
    out = []
    for name, data in files:
        siblings = tuple(d for n, d in files if n != name)
        out += (kernel_rows(name, data, siblings, device) + model_rows(name, data, device) + module_rows(name, data)
                + derived_model_rows(name, device) + answered_rows(name, data, device) + length_rows(name, data, device)
                + unmeasured_step_rows(name, data, device))
    return tuple(out)


def margin(kind: str, device_name: str = "H200") -> int:
    """The largest amount by which ``kind``'s estimate fell short of a withheld case (0: it never did)."""
    return max([0] + [-r.error for r in rows(device_name) if r.kind == kind])


def error_range(kind: str, device_name: str = "H200") -> tuple[int, int, int]:
    """(smallest error, largest error, rows) of ``kind``'s estimate over the withheld cases."""
    errors = [r.error for r in rows(device_name) if r.kind == kind]
    return (min(errors), max(errors), len(errors)) if errors else (0, 0, 0)

"""``livebytes validate``: run the real kernels under the protocol on this machine's GPU and check every prediction, or
re-check committed records (exit 3 on a failing row)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import options as o
from livebytes.choose import check_options_taken, what_if
from .. import render
from ..render import Column, T, g
from ..errors import EXIT_VALIDATION_FAILED, LivebytesError, UsageProblem, warn
from ..progress import progress
from livebytes import report

NAME = "validate"


DEFAULT_RECORDS_DIR = "livebytes-records"


def command(impl: Optional[str] = typer.Option(None, "--impl", metavar="KEY",
                                               help=o.IMPL_HELP + "; runs it on this machine's GPU; with --from-records: "
                                                    "re-check only its records (a warning says how many others are left "
                                                    "out)"),
             shapes: Optional[str] = typer.Option(None, "--shapes", metavar="SHAPES",
                                                  help='shapes separated by ";", each key=value with the JSON\'s shape '
                                                       'keys, e.g. "seq_len=8K, num_heads=96; seq_len=8K, '
                                                       'num_heads=16, num_v_heads=32" (batch_size 1 and head_dim 128 '
                                                       'by default; the old MBS,SEQ,HEADS[,DIM][,hv=HV][,dv=DV] reads '
                                                       'too)'),
             tolerance: str = typer.Option("0.1%", "--tolerance", metavar="PERCENT",
                                   help="largest error that passes, a percentage of the measured peak with its sign: 0.1%"),
             contract: Optional[str] = o.Contract, no_recompute: bool = o.NoRecompute,
             forward_only: bool = typer.Option(False, "--forward-only", help="measure inference (no grad) peaks"),
             same_process: bool = typer.Option(False, "--same-process", help="all shapes in one process (shared compilation)"),
             triton_cache: Optional[str] = typer.Option(None, "--triton-cache", metavar="cold|warm|auto",
                                                        help="FLA: cold (a fresh Triton cache: every kernel autotunes in "
                                                             "the process), warm (the committed autotune configs of this "
                                                             "GPU, fla and triton installed first: "
                                                             "validate/data/autotune_configs) or auto (default: warm when such "
                                                             "a file is committed, else cold)"),
             alloc_conf: Optional[str] = typer.Option(None, "--alloc-conf", metavar="CONF", help="PYTORCH_CUDA_ALLOC_CONF for the runner"),
             plan_file: Optional[str] = typer.Option(None, "--plan", metavar="FILE", help="run a plan file (JSON list of runner groups)"),
             out_dir: Optional[str] = typer.Option(None, "--out-dir", metavar="DIR",
                                                   help="folder for the new records (one file per shape); default: livebytes-records"),
             from_records: Optional[str] = typer.Option(None, "--from-records", metavar="SOURCE",
                                                        help="re-check records instead of running: a file or folder, "
                                                             "a committed file's name, or all"),
             as_json: bool = o.Json) -> None:
    """Run the real kernels under the protocol and check every prediction (or re-check records).
    Exit code 3 when a row fails."""
    from livebytes.validate.check import compare as cmp  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.validate.check import model_records
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.validate.gpu import session

    tol = cmp.parse_tolerance(tolerance)
    runner = {"shapes": shapes is not None, "contract": contract is not None, "no_recompute": no_recompute,
              "forward_only": forward_only, "same_process": same_process, "triton_cache": triton_cache is not None,
              "alloc_conf": alloc_conf is not None}       # the options of a run on this machine's GPU, given or not
    if from_records is not None:
        o.named(from_records, "--from-records", "a file or folder of records, a committed file's name, or all")
        o.refuse_unused("with --from-records (it re-checks records, runs nothing)", shapes=runner.pop("shapes"),
                        plan=plan_file is not None, out_dir=out_dir is not None, **runner)
        if model_records.is_model_source(from_records):         # whole-model step records
            return _validate_models(from_records, impl, as_json)
        recs, notes = session.measured_records(from_records, impl)
        device_seconds = None
    else:
        done = _run_on_this_gpu(impl, shapes, contract, no_recompute, forward_only, same_process, triton_cache,
                                alloc_conf, plan_file, Path(out_dir or DEFAULT_RECORDS_DIR), runner)
        recs, device_seconds, notes = done.records, done.device_seconds, []
    for line in notes:
        warn(line)
    with progress("re-checking records" if from_records else "checking the new records", as_json) as step:
        comparisons = session.judge_all(recs, tol, step)
    _show_validation(comparisons, tol, session.summarize(comparisons, device_seconds), notes, as_json)


def _run_on_this_gpu(impl, shapes, contract, no_recompute, forward_only, same_process, triton_cache, alloc_conf,
                     plan_file, out: Path, runner: dict):
    """``validate --plan FILE`` or ``--impl KEY --shapes SHAPES``: the runner on this machine's GPU (``PlanRun``), the
    options that mean nothing with a plan refused (each of its groups sets its own)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.validate.gpu import session
    if plan_file:
        o.refuse_unused("with --plan (each of the plan file's groups sets its own)", impl=impl is not None, **runner)
        return session.run_plan_file(Path(plan_file), _out_folder(out))
    if not impl or not shapes:
        raise UsageProblem("--impl and --shapes are required unless --plan or --from-records is given")
    check_options_taken(impl, what_if(contract, no_recompute))
    return session.run(impl, shapes, contract=contract, recompute=not no_recompute, forward_only=forward_only,
                       same_process=same_process, out=_out_folder(out), triton_cache=o.validate_triton_cache(triton_cache),
                       alloc_conf=alloc_conf)


def _out_folder(out: Path) -> Path:
    """--out-dir, refused here unless it is a folder or its parent is one (the run makes only it, never its parents:
    ``folders.leaf_problem``; nothing is made here, so a refusal later leaves no folder behind)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.folders import leaf_problem
    problem = leaf_problem(out)
    if problem is not None:
        raise LivebytesError(f"--out-dir {out}: not a folder we can write ({problem})")
    return out


def _show_validation(comparisons, tol: float, s, notes: list[str], as_json: bool) -> None:
    """validate's answer: JSON, or the table, a FAILED line per failing figure and the summary; exit 3 on a failure."""
    data = report.validation_data(comparisons, tol, s, notes)
    if as_json:
        render.print_json(data)
    else:
        render.show(validation_table(data))
        for line in (f for c in comparisons for f in c.failures):     # one line per failing figure, naming its field
            typer.echo(f"FAILED {line}")
        secs = "" if s.device_seconds is None else f", {s.device_seconds:.0f} device-seconds"
        typer.echo(f"{s.passed} passed, {s.failed} failed, {s.out_of_memory} out of memory{secs}")
    if s.failed:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


def _validate_models(source: str, impl: Optional[str], as_json: bool) -> None:
    """``validate --from-records`` of whole-model step records: every figure, named misses as such; exit 3 on a miss."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.validate.check import model_records

    if impl or as_json:
        raise UsageProblem(f"{'--impl' if impl else '--json'} has no effect on model-step records (each names its own "
                           "config); leave it out")
    with progress(f"re-checking model-step records in {source} (a config's first use traces it: ~1 min)") as step:
        checks, skipped, notes = model_records.check_all(source, step)
    render.show(model_checks_table(checks))
    for c in checks:
        if not c.passed:
            typer.echo(f"FAILED {c.failure()}")
    failed = sum(not c.passed for c in checks)
    typer.echo(f"{len(checks) - failed} figures passed, {failed} failed "
               f"({sum(bool(c.expected_error) for c in checks)} named misses among the passed)")
    for name, why in skipped:
        typer.echo(f"not checked here: {name}: {why}")
    for line in notes:          # the traces a checked record rests on: made here in its torch's stead, or by another tracer
        warn(line)
    if failed:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


def _record_cell(r: dict) -> str:
    """impl / shape / mode / contract, stacked."""
    contract = r["options"].get("contract")
    seconds = "" if r["seconds"] is None else f", {r['seconds']:.0f} s"
    lines = [r["impl"], *render.shape_lines(r["shape"]), r["mode"] + seconds] + ([f"contract {contract}"] if contract else [])
    return "\n".join(lines)


def _error_cell(r: dict) -> str:
    """The error in bytes, in percent, and the requested-bytes check, stacked."""
    err = "-" if r["error_bytes"] is None else f"{r['error_bytes']:+,}"
    frac = "-" if r["error_fraction"] is None else f"{r['error_fraction'] * 100:+.4f}%"
    req = r["requested_error_bytes"]
    return f"{err}\n{frac}\n" + ("req. -" if req is None else ("req. exact" if req == 0 else f"req. {req:+,}"))


def _result_cell(r: dict):
    result = T("pass" if r["passed"] else "FAIL", "green" if r["passed"] else "bold red")
    result.append(f" ({r['criterion']})", style="dim")
    return result


# a row per record (report.validation_data), stacked so that 80 columns hold it whole
COLUMNS = [
    Column("impl, shape, mode", _record_cell, "key"),
    Column("GiB", lambda r: f"{g(r['predicted_bytes'], 4)}\n" + ("OOM" if r["measured_bytes"] is None else g(r["measured_bytes"], 4)),
           "number"),
    Column("error", _error_cell, "number"),
    Column("result", _result_cell),
]


def validation_table(data: dict):
    """One record per row: impl / shape / mode / contract; predicted / measured GiB; error in bytes / percent / the
    requested-bytes check; the verdict."""
    tol = data["tolerance_fraction"]
    return render.table(f"predicted (allocator replay) vs measured: a row passes within the tolerance, "
                        f"{tol * 100:g} % of the measured peak, or, where the allocator's history decides the layout "
                        "(history-dependent records), inside the allocator bounds. GiB: predicted over measured; "
                        "error: bytes, percent, and the requested-bytes check", COLUMNS, data["results"], show_lines=True)


def _count(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,}"


def _check_verdict(c):
    verdict = ("passed" if c.expected_error == 0 else f"named miss: {c.why}") if c.passed else (
        "FAILED" + (f" (the named miss is {c.expected_error:+,} B)" if c.expected_error else ""))
    return T(verdict, "" if c.passed else "bold red")


# a row per figure of a whole-model step record (``validate.check.model_records``' checks)
CHECK_COLUMNS = [
    Column("record", lambda c: c.record), Column("figure", lambda c: c.field),
    Column("measured B", lambda c: _count(c.measured), "number"),
    Column("predicted B", lambda c: _count(c.predicted), "number"),
    Column("error B", lambda c: "" if c.error is None else f"{c.error:+,}", "number"),
    Column("", _check_verdict),
]


def model_checks_table(checks):
    """validate's figures of whole-model step records."""
    return render.table("model-step records: every figure", CHECK_COLUMNS, checks)

def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import DEVICE_NAME, RECORD_OOM, SHAPE, boolean, envelope, integer, listof, mapof, number, obj, string
    return envelope(NAME, obj("one record (or run)", {
        "impl": string("model key"), "device": string("device preset (H200, B300, ...) of the GPU the record was taken on"),
        "device_name": DEVICE_NAME, "shape": SHAPE,
        "options": mapof({}, "the record's options"), "mode": string("fresh-process, shared-process, or the origin"),
        "predicted_bytes": integer("replay of the protocol plus earlier shapes' caches"),
        "measured_bytes": integer("null for an out-of-memory", nullable=True), "oom": RECORD_OOM,
        "error_bytes": integer("predicted - measured", nullable=True),
        "error_fraction": number("error_bytes / measured_bytes", nullable=True),
        "requested_error_bytes": integer("predicted - measured requested bytes", nullable=True),
        "seconds": number("wall time of the run", nullable=True), "passed": boolean("the row passed"),
        "criterion": string("tolerance, allocator bounds, or the out-of-memory verdict"),
        "note": string("the comparison's note"), "record": string("record file name"),
        "failed_figures": listof(string("one failing figure: the record, its field, measured and predicted"),
                                 "every figure of the record that failed (validate.check.record_figures); empty when all pass")}),
        "records checked against their models",
        tolerance_fraction=number("largest error that passes, a fraction of the measured peak (--tolerance 0.1% = 0.001)"),
        passed=boolean("every row passed (else exit code 3)"),
        summary=obj("the summary line's counts", {
            "passed_count": integer("measured rows that passed (an out-of-memory row counts in out_of_memory_count)"),
            "failed_count": integer("rows that failed, an out-of-memory the model said would fit included"),
            "out_of_memory_count": integer("out-of-memory rows, whether they passed or failed"),
            "device_seconds": number("device time of the runs (null: re-checked records)", nullable=True)},
            nullable=True))

"""The ``livebytes`` command. Each command parses, calls the library (predict, compare, plan, sweep, explain and models:
``livebytes.calls``, the Python API's own calls), renders (``render``) or prints JSON (``livebytes.report``).
Errors are not caught here: ``errors.LivebytesGroup`` gives every command one error path (one line
on stderr; exit 1 domain, 2 usage, 3 failed validation). Shared options live in ``options``.

Hooks for more commands: define them in their own module with ``@app.command()`` on this ``app`` (import
the module at the bottom of this file), take options from ``options``, print JSON via
``livebytes.report.envelope``.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from . import options as o
from .errors import EXIT_VALIDATION_FAILED, LivebytesGroup, UsageProblem, warn
from .progress import counting, progress

app = typer.Typer(cls=LivebytesGroup, add_completion=True, invoke_without_command=True, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Peak memory of fused attention kernels, predicted from buffer lifetimes and checked on GPUs.")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version
        typer.echo(f"livebytes {version('livebytes')}")
        raise typer.Exit()


@app.callback()
def _root(ctx: typer.Context,
          version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Peak memory of fused attention kernels, predicted from buffer lifetimes and checked on GPUs."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit()


# a whole model's first use traces its config on the CPU (tens of seconds; cached after): the bar's label says so
TRACING = " (--model: a config's first use traces it on this CPU, cached after)"


def _print_json(data: dict) -> None:
    typer.echo(json.dumps(data, indent=1))


def _print(table) -> None:
    from .render import console, fit
    console.print(fit(table))


def _warn_all(data: dict) -> None:
    """Every warning a command's answer carries, one line each on stderr (JSON keeps them in ``warnings``)."""
    for line in data["warnings"]:
        warn(line)


def _given(flag: Optional[str], *defaults: Optional[str]) -> Optional[str]:
    """The flag's text as given (an empty string too: its parser says why), else the first default that is set."""
    return flag if flag is not None else next((d for d in defaults if d is not None), None)


@app.command()
def predict(impl: Optional[List[str]] = o.Impl, model_config: Optional[str] = o.Model, optimizer: Optional[str] = o.Optimizer,
            precision: Optional[str] = o.Precision, packed: bool = o.Packed, routing: Optional[str] = o.Routing,
            mbs: str = o.Mbs, seq: str = o.Seq, heads: str = o.Heads, dim: str = o.Dim,
            v_heads: Optional[str] = o.VHeads, expand_v: Optional[str] = o.ExpandV,
            hidden: Optional[str] = o.Hidden, layers: Optional[str] = o.Layers,
            checkpoint: bool = o.Checkpoint, conv_size: Optional[str] = o.ConvSize,
            gpu: Optional[str] = o.Gpu, contract: Optional[str] = o.Contract,
            no_recompute: bool = o.NoRecompute, cp: Optional[str] = o.Cp,
            cp_layout: Optional[str] = o.CpLayout, cp_rank: Optional[str] = o.CpRank, alloc_conf: Optional[str] = o.AllocConf,
            triton_cache: Optional[str] = o.TritonCache, triton: Optional[str] = o.Triton, as_json: bool = o.Json,
            fsdp: Optional[str] = o.Fsdp) -> None:
    """Peak allocated memory of one implementation at one shape by storage group, the reserved peak, and
    whether a fresh process runs it on the device (or where it goes out of memory)."""
    from livebytes import calls
    ch = o.chosen(impl, model_config, optimizer, precision, packed, heads, dim is not None, routing,
                  v_heads=v_heads is not None, expand_v=expand_v is not None, hidden=hidden is not None,
                  conv_size=conv_size is not None,
                  contract=contract is not None, no_recompute=no_recompute, cp=cp is not None, cp_layout=cp_layout is not None,
                  cp_rank=cp_rank is not None)
    key = o.single_impl(ch.keys, "predict")
    shape = o.shape_from(mbs, seq, _given(heads, ch.heads), _given(dim, ch.dim), v_heads, hidden, layers, checkpoint, conv_size, expand_v)
    setting = calls.Setting(gpu, o.what_if(contract, no_recompute, cp, cp_layout, cp_rank) | ch.options | o.fsdp_of(fsdp),
                            alloc_conf, triton_cache, triton)
    with progress("predict" + TRACING, as_json or not ch.options):
        answer = calls.predict_at(key, shape, setting, announce=warn)  # warned at once: an absurd shape's run takes a moment
    if as_json:
        _print_json(calls.prediction_document(answer))
    else:
        from . import render
        first = answer.to_dict()
        pred, measured, replayed = answer.engine
        _print(render.T(answer.summary))
        if first.get("fsdp"):
            _print(render.T(render.fsdp_line(first["fsdp"])))
        _print(render.prediction_table(pred, measured, replayed, first["peaks_unbounded"], bool(first.get("probed"))))
        by_module = render.module_table(first)
        if by_module is not None:
            _print(by_module)
        for line in render.verdict_lines(first):
            _print(line)


@app.command()
def compare(impl: Optional[List[str]] = o.Impls, model_config: Optional[str] = o.Model, optimizer: Optional[str] = o.Optimizer,
            precision: Optional[str] = o.Precision, packed: bool = o.Packed,
            mbs: str = o.Mbs, seq: str = o.Seq, heads: str = o.Heads, dim: str = o.Dim,
            v_heads: Optional[str] = o.VHeads, expand_v: Optional[str] = o.ExpandV,
            hidden: Optional[str] = o.Hidden, layers: Optional[str] = o.Layers,
            checkpoint: bool = o.Checkpoint, conv_size: Optional[str] = o.ConvSize,
            gpu: Optional[str] = o.Gpu, contract: Optional[str] = o.Contract,
            no_recompute: bool = o.NoRecompute, cp: Optional[str] = o.Cp,
            cp_layout: Optional[str] = o.CpLayout, cp_rank: Optional[str] = o.CpRank, alloc_conf: Optional[str] = o.AllocConf,
            triton_cache: Optional[str] = o.TritonCache, triton: Optional[str] = o.Triton, as_json: bool = o.Json) -> None:
    """Several implementations side by side at one shape, with the change against the first, and whether
    each runs on its device."""
    from livebytes import calls
    ch = o.chosen(impl, model_config, optimizer, precision, packed, heads, dim is not None,
                  v_heads=v_heads is not None, expand_v=expand_v is not None, hidden=hidden is not None,
                  conv_size=conv_size is not None,
                  contract=contract is not None, no_recompute=no_recompute, cp=cp is not None, cp_layout=cp_layout is not None,
                  cp_rank=cp_rank is not None)
    impl = o.distinct_impls(ch.keys, "compare")
    shape = o.shape_from(mbs, seq, _given(heads, ch.heads), _given(dim, ch.dim), v_heads, hidden, layers, checkpoint, conv_size, expand_v)
    setting = calls.Setting(gpu, o.what_if(contract, no_recompute, cp, cp_layout, cp_rank) | ch.options, alloc_conf, triton_cache, triton)
    with progress("compare" + TRACING, as_json or not ch.options):
        answer = calls.compare_at(impl, shape, setting)
    data = answer.to_dict()
    _warn_all(data)
    if as_json:
        _print_json(data)
    else:
        from . import render
        preds, measured = answer.engine
        _print(render.compare_table(data, preds, measured))
        for r in data["results"]:
            _print(render.T(f"assumed: {render.terms_line(r)}"))
        for line in render.autotune_lines(data["results"]):
            _print(render.T(line))
        for r in data["results"]:
            _print(render.compare_verdict_line(r))


@app.command()
def models(as_json: bool = o.Json) -> None:
    """The registry: every model, its default GPU, options and what it covers."""
    from livebytes import calls
    data = calls.models_document(calls.models_at())
    if as_json:
        _print_json(data)
    else:
        from . import render
        _print(render.models_table(data))


DEFAULT_RECORDS_DIR = "livebytes-records"


@app.command()
def validate(impl: Optional[str] = typer.Option(None, "--impl", metavar="KEY",
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
    from livebytes.validate.check import compare as cmp
    from livebytes.validate.check import model_records
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
    from livebytes.validate.gpu import session
    if plan_file:
        o.refuse_unused("with --plan (each of the plan file's groups sets its own)", impl=impl is not None, **runner)
        return session.run_plan_file(Path(plan_file), out)
    if not impl or not shapes:
        raise UsageProblem("--impl and --shapes are required unless --plan or --from-records is given")
    o.check_options_taken(impl, o.what_if(contract, no_recompute))
    return session.run(impl, shapes, contract=contract, recompute=not no_recompute, forward_only=forward_only,
                       same_process=same_process, out=out, triton_cache=o.validate_triton_cache(triton_cache),
                       alloc_conf=alloc_conf)


def _show_validation(comparisons, tol: float, s, notes: list[str], as_json: bool) -> None:
    """validate's answer: JSON, or the table, a FAILED line per failing figure and the summary; exit 3 on a failure."""
    from livebytes import report
    data = report.validation_data(comparisons, tol, s, notes)
    if as_json:
        _print_json(data)
    else:
        from . import render
        _print(render.validation_table(data))
        for line in (f for c in comparisons for f in c.failures):     # one line per failing figure, naming its field
            typer.echo(f"FAILED {line}")
        secs = "" if s.device_seconds is None else f", {s.device_seconds:.0f} device-seconds"
        typer.echo(f"{s.passed} passed, {s.failed} failed, {s.out_of_memory} out of memory{secs}")
    if s.failed:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


def _validate_models(source: str, impl: Optional[str], as_json: bool) -> None:
    """``validate --from-records`` of whole-model step records: every figure, named misses as such; exit 3 on a miss."""
    from livebytes.validate.check import model_records

    from . import render
    if impl or as_json:
        raise UsageProblem(f"{'--impl' if impl else '--json'} has no effect on model-step records (each names its own "
                           "config); leave it out")
    with progress(f"re-checking model-step records in {source} (a config's first use traces it: ~1 min)") as step:
        checks, skipped, notes = model_records.check_all(source, step)
    _print(render.model_checks_table(checks))
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


@app.command()
def plan(ctx: typer.Context, impl: Optional[List[str]] = o.Impls, model_config: Optional[str] = o.Model, optimizer: Optional[str] = o.Optimizer,
            precision: Optional[str] = o.Precision, packed: bool = o.Packed, routing: Optional[str] = o.Routing,
         solve: str = typer.Option("seq_len", "--solve", metavar="NAME",
                                   help="seq_len, batch_size, num_heads or num_hidden_layers (layer models, --model): "
                                        "which dimension to maximise (their short names seq, mbs, heads, layers too); "
                                        "gpus (--model): the fewest FSDP2 ranks, powers of two"),
         gpu: Optional[str] = o.Gpu,
         budget: Optional[str] = typer.Option(None, "--budget", metavar="SIZE",
                                              help="a budget on the allocated peak (what max_memory_allocated would show) "
                                                   "instead of the device simulation: 80GiB, 141GB, 2TiB (a unit is required)"),
         mbs: str = o.Mbs, seq: str = typer.Option("8K", "--seq-len", "--seq", metavar="SIZE",
                                  help="tokens per sequence, held unless solved: 8192, 8K"),
         heads: Optional[str] = typer.Option(None, "--num-heads", "--heads", metavar="SIZE",
                                             help="query/key heads, held unless solved (default 96; --model: the config's)"),
         dim: Optional[str] = o.Dim,
         v_heads: Optional[str] = o.VHeads, expand_v: Optional[str] = o.ExpandV,
            hidden: Optional[str] = o.Hidden, layers: Optional[str] = o.Layers,
         checkpoint: bool = o.Checkpoint, conv_size: Optional[str] = o.ConvSize,
         contract: Optional[str] = o.Contract, no_recompute: bool = o.NoRecompute, cp: Optional[str] = o.Cp,
         cp_layout: Optional[str] = o.CpLayout, cp_rank: Optional[str] = o.CpRank,
         alloc_conf: Optional[str] = o.AllocConf, triton_cache: Optional[str] = o.TritonCache,
         triton: Optional[str] = o.Triton, as_json: bool = o.Json, fsdp: Optional[str] = o.Fsdp) -> None:
    """The largest sequence, micro-batch or head count that runs on each model's GPU without going out of
    memory (the full allocator simulation), or whose allocated peak fits --budget; the other dimensions held;
    --solve gpus: the fewest FSDP2 ranks (--model)."""
    from livebytes import calls
    from livebytes.estimator.devices import parse_budget
    from livebytes.estimator.errors import LivebytesError
    from livebytes.estimator.planning import SOLVABLE, solved_field
    from livebytes.estimator.shapes import HF_NAMES
    gpus = solve.strip().lower() in GPUS
    try:
        solve = "seq" if gpus else solved_field(solve)      # --solve gpus holds every shape field
    except LivebytesError as err:
        raise UsageProblem(f"--solve: {err}") from None
    if not gpus:
        o.refuse_solved(solve, o.given(ctx, *SOLVABLE))
    # --alloc-conf and --triton-cache stay: they change the replayed max_memory_allocated, so the budget's answer
    o.refuse_unused("with --budget: the budget bounds the allocated peak (max_memory_allocated), and the Triton "
                    "version only sets the process memory (stack frames, modules), which is not part of it",
                    triton=budget is not None and triton is not None)
    ch = o.chosen(impl, model_config, optimizer, precision, packed, heads, dim is not None, routing,
                  v_heads=v_heads is not None, expand_v=expand_v is not None, hidden=hidden is not None,
                  conv_size=conv_size is not None,
                  contract=contract is not None, no_recompute=no_recompute, cp=cp is not None, cp_layout=cp_layout is not None,
                  cp_rank=cp_rank is not None)
    impl = o.distinct_impls(ch.keys, "plan")
    if gpus:
        return _plan_gpus(ch, model_config, mbs, seq, layers, checkpoint, gpu, budget, alloc_conf, triton_cache, triton,
                          as_json, fsdp)
    if ch.options and solve == "heads":
        raise UsageProblem("--solve num_heads with --model: the config fixes the heads; solve seq_len, batch_size or "
                           "num_hidden_layers")
    base = o.shape_from(mbs, seq, _given(heads, ch.heads, "96"), _given(dim, ch.dim), v_heads, hidden, layers, checkpoint, conv_size, expand_v)
    if solve == "layers" and base.layers is None:
        base = replace(base, layers=1)      # the solver varies it: a layer model's field (a kernel model refuses it)
    limit = parse_budget(budget) if budget is not None else None
    setting = calls.Setting(gpu, o.what_if(contract, no_recompute, cp, cp_layout, cp_rank) | ch.options | o.fsdp_of(fsdp),
                            alloc_conf, triton_cache, triton)
    with progress(f"plan: the largest {HF_NAMES[solve]}" + (TRACING if ch.options else ""), as_json) as step:
        data = calls.plan_at(impl, base, solve, setting, limit, announce=warn, progress=step).to_dict()
    _warn_all(data)
    if as_json:
        _print_json(data)
        return
    from . import render
    _print(render.plan_table(data, f"a budget of {limit:,} B") if limit is not None else render.capacity_plan_table(data))


GPUS = ("gpus", "gpu")       # plan --solve gpus: FSDP2's fewest ranks


def _plan_gpus(ch, model_config, mbs, seq, layers, checkpoint, gpu, budget, alloc_conf, triton_cache, triton, as_json,
               fsdp) -> None:
    """``plan --solve gpus``: a whole model (--model) at one shape, the fewest FSDP2 ranks that run it."""
    from livebytes import calls
    from livebytes.estimator.devices import parse_budget
    if model_config is None:
        raise UsageProblem("--solve gpus needs --model CONFIG.json (FSDP2 shards a whole model)")
    o.refuse_unused("with --solve gpus: plan solves for the FSDP2 world size", fsdp=fsdp is not None)
    shape = o.shape_from(mbs, seq, ch.heads, ch.dim, layers=layers, checkpoint=checkpoint)
    limit = parse_budget(budget) if budget is not None else None
    setting = calls.Setting(gpu, ch.options, alloc_conf, triton_cache, triton)
    with progress("plan: the fewest FSDP2 ranks" + TRACING, as_json) as step:
        data = calls.plan_gpus_at(ch.keys[0], shape, setting, limit, progress=step).to_dict()
    _warn_all(data)
    if as_json:
        _print_json(data)
        return
    from . import render
    _print(render.gpus_plan_table(data))


@app.command()
def formula(impl: List[str] = o.Impl, gpu: Optional[str] = o.Gpu, contract: Optional[str] = o.Contract,
            no_recompute: bool = o.NoRecompute, cp: Optional[str] = o.Cp,
            cp_layout: Optional[str] = o.CpLayout, cp_rank: Optional[str] = o.CpRank,
            hidden: Optional[str] = o.Hidden, layers: Optional[str] = o.Layers, checkpoint: bool = o.Checkpoint,
            conv_size: Optional[str] = o.ConvSize,
            latex: bool = typer.Option(False, "--latex", help="LaTeX instead of ASCII art"),
            groups: bool = typer.Option(True, "--groups/--no-groups", help="also the per-group formulas at each candidate step"),
            as_json: bool = o.Json) -> None:
    """The peak as a closed form in S, MBS, H, HV, DK, DV (seq_len, batch_size, num_heads, num_v_heads, head_dim,
    head_v_dim; a Max where the peak step changes with shape)."""
    import sympy as sp

    from livebytes.estimator.planning import closed_form, group_formulas
    from livebytes.estimator.shapes import SYMBOL_NAMES

    from livebytes import report
    key = o.single_impl(impl, "formula")
    o.refuse_unused("with --json (the JSON holds sympy's own text of each expression)", latex=latex and as_json)
    model = o.model_for(key, gpu, o.what_if(contract, no_recompute, cp, cp_layout, cp_rank),
                        stack=o.stack_from(hidden, layers, checkpoint, conv_size))
    expr, steps = closed_form(model)
    per_group = {model.steps[i].name: group_formulas(model, i) for i in steps} if groups else {}
    if as_json:
        _print_json(report.formula_data(model, expr, steps, per_group))
        return
    import textwrap

    from .render import console

    width = max(40, console.width)

    def show(e, indent: int = 0) -> str:
        """LaTeX as one line (it is pasted, not read); ASCII wrapped to the terminal: a one-line expression between
        terms (never inside a name or a number), 2-D art in sympy's own blocks of the width."""
        if latex:
            return sp.latex(e)
        flat = sp.pretty(e, use_unicode=False, wrap_line=False)
        if "\n" not in flat:
            return "\n".join(textwrap.wrap(flat, width - indent, subsequent_indent="  ", break_long_words=False,
                                            break_on_hyphens=False))
        return sp.pretty(e, use_unicode=False, wrap_line=True, num_columns=width - indent)
    typer.echo(textwrap.fill(f"peak bytes of {model.key} on {model.device} ({model.summary})", width,
                             break_long_words=False))
    typer.echo(textwrap.fill(f"candidate peak steps (every other step is dominated term by term): "
                             f"{', '.join(model.steps[i].name for i in steps)}", width, break_long_words=False))
    typer.echo(textwrap.fill("in " + ", ".join(f"{s}={name}" for s, name in SYMBOL_NAMES.items())
                             + " (HV=num_heads and DV=head_dim unless given)", width, break_long_words=False))
    typer.echo(show(expr))
    for step, grp in per_group.items():
        typer.echo(f"\nat {step}, by storage group:")
        for group, e in grp.items():
            typer.echo(f"  {group.label}:")
            typer.echo("\n".join("    " + line for line in show(e, 4).splitlines()))


@app.command()
def sweep(impl: Optional[List[str]] = o.Impls, model_config: Optional[str] = o.Model, optimizer: Optional[str] = o.Optimizer,
            precision: Optional[str] = o.Precision, packed: bool = o.Packed,
          seq: str = typer.Option("8K..256K", "--seq-len", "--seq", metavar="SIZES", help="8K..256K (doubling, both ends included) or a list 8K,10K"),
          heads: Optional[str] = typer.Option(None, "--num-heads", "--heads", metavar="SIZES", help="a list of head counts, or a doubling "
                                              "range 16..128 (default 16,32,64,96,128; --model: the config's)"),
          mbs: str = typer.Option("1", "--batch-size", "--mbs", metavar="SIZES", help="a list of micro-batch sizes, or a doubling range"),
          dim: Optional[str] = typer.Option(None, "--head-dim", "--dim", metavar="SIZES", help="a list of head dimensions, or a doubling "
                                            "range (default 128; --model: the config's)"),
          v_heads: Optional[str] = typer.Option(None, "--num-v-heads", "--v-heads", metavar="SIZES",
                                                help="value heads, a list or a doubling range, each a multiple of every "
                                                     "--num-heads (grouped value attention, e.g. --num-heads 16 "
                                                     "--num-v-heads 32); default: --num-heads at each point"),
          expand_v: Optional[str] = typer.Option(None, "--expand-v", metavar="RATIOS",
                                                 help="value head dimension over --head-dim, as FLA's expand_v: a list "
                                                      "0.5,1,2 or a doubling range 0.5..2 (head_dim * expand_v a whole "
                                                      "number at each point); default 1"),
          hidden: Optional[str] = o.Hidden, layers: Optional[str] = o.Layers, checkpoint: bool = o.Checkpoint,
          conv_size: Optional[str] = o.ConvSize,
          gpu: Optional[str] = o.Gpu, contract: Optional[str] = o.Contract, no_recompute: bool = o.NoRecompute, cp: Optional[str] = o.Cp,
            cp_layout: Optional[str] = o.CpLayout, cp_rank: Optional[str] = o.CpRank,
          alloc_conf: Optional[str] = o.AllocConf, triton_cache: Optional[str] = o.TritonCache,
          triton: Optional[str] = o.Triton,
          out: Optional[str] = typer.Option(None, "--out", "--csv", metavar="FILE", help="write the grid to this .csv file instead of a table"),
          as_json: bool = o.Json) -> None:
    """Predictions over a grid of shapes, from one vectorised evaluation of the symbolic model, and whether
    each runs on its device (the same verdict as predict and plan: the allocator simulation of a fresh process)."""
    from livebytes import calls
    from livebytes.estimator.planning import parse_range, parse_ratio_range

    ch = o.chosen(impl, model_config, optimizer, precision, packed, heads, dim is not None, v_heads=v_heads is not None,
                  expand_v=expand_v is not None, hidden=hidden is not None, conv_size=conv_size is not None, contract=contract is not None,
                  no_recompute=no_recompute, cp=cp is not None, cp_layout=cp_layout is not None,
                  cp_rank=cp_rank is not None)
    impl = o.distinct_impls(ch.keys, "sweep")
    seqs, head_list = parse_range(seq, "--seq-len"), parse_range(_given(heads, ch.heads, "16,32,64,96,128"), "--num-heads")
    mbs_list, dims = parse_range(mbs, "--batch-size"), parse_range(_given(dim, ch.dim, "128"), "--head-dim")
    path = o.out_file(out, (".csv",)) if out is not None else None
    hv_list = parse_range(v_heads, "--num-v-heads") if v_heads is not None else None
    ratios = parse_ratio_range(expand_v, "--expand-v") if expand_v is not None else None
    grid = calls.Grid(mbs_list, seqs, head_list, dims, o.stack_from(hidden, layers, checkpoint, conv_size), hv_list, ratios)
    setting = calls.Setting(gpu, o.what_if(contract, no_recompute, cp, cp_layout, cp_rank) | ch.options, alloc_conf, triton_cache, triton)
    with progress("sweep: each point's verdict" + (TRACING if ch.options else ""), as_json) as step:
        data = calls.sweep_at(impl, grid, setting, progress=step).to_dict()
    _warn_all(data)
    rows = data["results"]
    if path is not None:
        from .render import sweep_csv
        path.write_text(sweep_csv(data))
        typer.echo(f"wrote {len(rows)} row{'' if len(rows) == 1 else 's'} to {path}", err=as_json)
    if as_json:
        _print_json(data)
    elif path is None:
        from . import render
        _print(render.sweep_table(data))


PLOT_SUFFIXES = (".png", ".svg", ".pdf")
SNAPSHOT_SUFFIX = ".pickle"


@app.command()
def timeline(impl: Optional[List[str]] = o.Impls, model_config: Optional[str] = o.Model, optimizer: Optional[str] = o.Optimizer,
            precision: Optional[str] = o.Precision, packed: bool = o.Packed,
            mbs: str = o.Mbs, seq: str = o.Seq, heads: str = o.Heads, dim: str = o.Dim,
             v_heads: Optional[str] = o.VHeads, expand_v: Optional[str] = o.ExpandV,
            hidden: Optional[str] = o.Hidden, layers: Optional[str] = o.Layers,
             checkpoint: bool = o.Checkpoint, conv_size: Optional[str] = o.ConvSize,
             gpu: Optional[str] = o.Gpu, contract: Optional[str] = o.Contract,
             no_recompute: bool = o.NoRecompute, alloc_conf: Optional[str] = o.AllocConf,
             triton_cache: Optional[str] = o.TritonCache, triton: Optional[str] = o.Triton, cp: Optional[str] = o.Cp,
             cp_layout: Optional[str] = o.CpLayout, cp_rank: Optional[str] = o.CpRank,
             out: Optional[str] = typer.Option(None, "--out", metavar="FILE",
                                            help="write a plot to this file (.png, .svg or .pdf), or the predicted process as "
                                                 "PyTorch's memory snapshot (.pickle, one --impl: open it in "
                                                 "pytorch.org/memory_viz), instead of the terminal view"),
             as_json: bool = o.Json) -> None:
    """Live bytes per step, stacked by storage group, implementations side by side, the peak marked; or the predicted
    process as a torch.cuda.memory._snapshot() pickle. Warns when a fresh process would run out of memory on the device
    (predict's verdict: --alloc-conf and --triton-cache set what it simulates; the snapshot uses --alloc-conf too)."""
    from livebytes import report
    from livebytes.calls import implausible_warnings
    from livebytes.estimator.engine import predict as run_predict
    ch = o.chosen(impl, model_config, optimizer, precision, packed, heads, dim is not None,
                  v_heads=v_heads is not None, expand_v=expand_v is not None, hidden=hidden is not None,
                  conv_size=conv_size is not None,
                  contract=contract is not None, no_recompute=no_recompute, cp=cp is not None, cp_layout=cp_layout is not None,
                  cp_rank=cp_rank is not None)
    impl = o.distinct_impls(ch.keys, "timeline")
    shape = o.shape_from(mbs, seq, _given(heads, ch.heads), _given(dim, ch.dim), v_heads, hidden, layers, checkpoint, conv_size, expand_v)
    path = o.out_file(out, PLOT_SUFFIXES + (SNAPSHOT_SUFFIX,)) if out is not None else None
    snapshot = path is not None and path.suffix.lower() == SNAPSHOT_SUFFIX
    if snapshot and len(impl) != 1:
        raise UsageProblem(f"--out {out}: a snapshot holds one process: give one --impl (got {len(impl)})")
    what_if = o.what_if(contract, no_recompute, cp, cp_layout, cp_rank) | ch.options
    with progress("timeline" + TRACING, as_json or not ch.options):
        models = [o.model_for(key, gpu, what_if, shape) for key in impl]
        preds = [run_predict(m, shape) for m in models]
        devices = [o.device_of(key, gpu) for key in impl]
        verdicts = [o.verdict_for(m, shape, d, alloc_conf, triton_cache, triton, len(impl) > 1)
                    for m, d in zip(models, devices)]
    skipped = o.cache_skipped(list(zip(models, devices)), triton_cache, triton)
    data = report.timeline_data(preds, verdicts, implausible_warnings(shape) + ([skipped] if skipped else []))
    _warn_all(data)
    from . import render
    if snapshot:
        import pickle

        from livebytes.estimator.snapshot import process_snapshot
        with progress(f"timeline: tracing the predicted process into {path}", as_json):
            dumped = process_snapshot(models[0], shape, o.alloc_conf_of(alloc_conf), verdict=verdicts[0])
            path.write_bytes(pickle.dumps(dumped))
        typer.echo(f"wrote {path} (torch.cuda.memory._snapshot() of the predicted process at "
                   f"{dumped['livebytes']['taken_at']})", err=as_json)
    elif path is not None:
        with progress(f"timeline: drawing {path}", as_json):
            render.timeline_png(preds, path)
        typer.echo(f"wrote {path}", err=as_json)
    if as_json:
        _print_json(data)
    elif path is None:
        _print(render.timeline_text(preds, report.bar_lengths(preds, render.bar_width(preds)), data))


@app.command()
def payload(fn: str = typer.Option("tiled", "--fn", metavar="dense|tiled|checkpointed", help="dense, tiled or checkpointed attention"),
            seq: str = typer.Option("128,256,512,1024", "--seq-len", "--seq", "--T", metavar="SIZES",
                                  help="token counts: a list 128,256 or a doubling range 128..1024 (--T: the payload "
                                       "model's T, docs/payload.md)"),
            dim: str = typer.Option("32", "--head-dim", "--dim", "--d", metavar="SIZE",
                                    help="query/key head dimension (--d: the payload model's d)"),
            dim_v: Optional[str] = typer.Option(None, "--head-v-dim", "--dim-v", "--dv", metavar="SIZE",
                                                help="value head dimension (--dv: the payload model's dv); default: "
                                                     "--head-dim"),
            block_q: str = typer.Option("32", "--block-q", metavar="SIZE", help="query block of the tiled and checkpointed forms"),
            block_k: str = typer.Option("32", "--block-k", metavar="SIZE", help="key block of the tiled and checkpointed forms"),
            measure_on_cpu: bool = typer.Option(True, "--measure/--no-measure", help="also run it on the CPU (needs torch)"),
            as_json: bool = o.Json) -> None:
    """What autograd retains for backward: the payload model against the real autograd graph (CPU, float32).
    Exit code 3 when a measurement differs from the model."""
    from livebytes.estimator.errors import LivebytesError
    from livebytes.estimator.planning import parse_range
    from livebytes.estimator.shapes import parse_size
    from livebytes.lifetimes.attention_payload import PAYLOAD_MODELS

    from livebytes import report
    if fn not in PAYLOAD_MODELS:
        raise LivebytesError(f"--fn must be one of {', '.join(PAYLOAD_MODELS)}, got {fn!r}")
    d, dv = parse_size(dim, "--head-dim"), (parse_size(dim_v, "--head-v-dim") if dim_v is not None else None)
    bq, bk = parse_size(block_q, "--block-q"), parse_size(block_k, "--block-k")
    seqs = parse_range(seq, "--seq-len")
    measure = None
    if measure_on_cpu:
        try:
            from livebytes.validate.gpu.payload import measure
            import torch  # noqa: F401 - the measurement needs it; say so before running anything
        except ImportError:
            raise LivebytesError("--measure needs torch (pip install torch, or the [test] extra); "
                                 "pass --no-measure for the model alone") from None
        from livebytes.validate.gpu.payload import check_host_memory, check_measurable
        check_measurable(max(seqs))       # up front: refuse before measuring any row
        check_host_memory(fn, max(seqs), d, dv, bq, bk)
    with progress(f"measuring {fn} attention on the CPU", as_json or measure is None) as step:
        rows = report.payload_rows(fn, seqs, d, dv, bq, bk, measure and counting(measure, step, len(seqs)))
    data = report.envelope("payload", rows, fn=fn, passed=all(r["passed"] is not False for r in rows))
    if as_json:
        _print_json(data)
    else:
        from . import render
        _print(render.payload_table(data))
    if not data["passed"]:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


@app.command()
def explain(snapshot: str = typer.Argument(..., metavar="SNAPSHOT.pickle",
                                           help="a torch.cuda.memory._dump_snapshot file (at an out-of-memory or the peak)"),
            impl: List[str] = o.Impl, mbs: str = o.Mbs, seq: str = o.Seq, heads: str = o.Heads, dim: str = o.Dim,
            v_heads: Optional[str] = o.VHeads, expand_v: Optional[str] = o.ExpandV,
            hidden: Optional[str] = o.Hidden, layers: Optional[str] = o.Layers,
            checkpoint: bool = o.Checkpoint, conv_size: Optional[str] = o.ConvSize,
            gpu: Optional[str] = o.Gpu, contract: Optional[str] = o.Contract,
            no_recompute: bool = o.NoRecompute, cp: Optional[str] = o.Cp,
            cp_layout: Optional[str] = o.CpLayout, cp_rank: Optional[str] = o.CpRank,
            at: str = typer.Option("peak", "--at", metavar="peak|snapshot",
                                   help="the blocks live at the trace's peak (default) or the segments' as dumped"),
            as_json: bool = o.Json) -> None:
    """Each live block of your own memory snapshot named by the model's buffer, and the blocks the model does not
    explain."""
    from livebytes import calls
    key = o.single_impl(impl, "explain")
    shape = o.shape_from(mbs, seq, heads, dim, v_heads, hidden, layers, checkpoint, conv_size, expand_v)
    setting = calls.Setting(gpu, o.what_if(contract, no_recompute, cp, cp_layout, cp_rank))
    with progress(f"explain: reading {snapshot} and matching its blocks", as_json):
        answer = calls.explain_at(o.named(snapshot, "SNAPSHOT.pickle"), key, shape, setting, at)
    data = calls.explain_document(answer)
    _warn_all(data)
    if as_json:
        _print_json(data)
    else:
        from . import render
        _print(render.explain_table(data))


from .diff_cmd import register as _register_diff  # noqa: E402  (diff)
from .learn_cmd import register as _register_learn  # noqa: E402  (learn, drift)

_register_learn(app)
_register_diff(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

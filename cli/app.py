"""The ``livebytes`` command. Each command parses, calls the library, renders; domain errors are one line, exit 1."""
from __future__ import annotations

import json
import sys
from typing import List, Optional

import typer

from . import render
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import predict as run_predict
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.registry import check_shape, get_model, shape_options, spec, specs
from livebytes.estimator.replay import replay
from .report import capacity_plan_dict, prediction_dict, verdict_dict
from livebytes.estimator.shapes import Shape, parse_size

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Peak memory of fused attention kernels, predicted from buffer lifetimes and checked on GPUs.")

Impl = typer.Option(..., "--impl", help="model key, e.g. fla-kda@0.6.0 (see `livebytes models`)")
Mbs = typer.Option("1", "--mbs", help="sequences per micro-batch (packed)")
Seq = typer.Option(..., "--seq", help="tokens per sequence: 8192, 8K, 128K")
Heads = typer.Option(..., "--heads", help="query/key heads")
Dim = typer.Option("128", "--dim", help="head dimension")
VHeads = typer.Option(None, "--v-heads", help="value heads, a multiple of --heads (grouped value attention)")
Gpu = typer.Option(None, "--gpu", help="device preset (H200, H100, B200, B300); default: the model's")
Contract = typer.Option(None, "--contract", help="FLA: report (in-kernel transforms) or plain (cuDNN Hopper contract)")
NoRecompute = typer.Option(False, "--no-recompute", help="FLA: disable_recompute=True (save every intermediate)")
Json = typer.Option(False, "--json", help="machine-readable output")
AllocConf = typer.Option(None, "--alloc-conf", help="PYTORCH_CUDA_ALLOC_CONF, e.g. expandable_segments:True (default: PyTorch's)")
TritonCache = typer.Option("cold", "--triton-cache", help="cold (the process autotunes: first run on a machine) or warm")


def _shape(mbs: str, seq: str, heads: str, dim: str, v_heads: Optional[str] = None) -> Shape:
    return Shape(parse_size(mbs, "MBS"), parse_size(seq, "sequence"), parse_size(heads, "heads"), parse_size(dim, "dim"),
                 v_heads=parse_size(v_heads, "value heads") if v_heads else None)


def _options(contract: Optional[str], no_recompute: bool) -> dict:
    opts = {}
    if contract is not None:
        opts["contract"] = contract
    if no_recompute:
        opts["recompute"] = False
    return opts


def _model_of(key: str, gpu: Optional[str], contract: Optional[str], no_recompute: bool, shape: Optional[Shape] = None):
    """The model with the what-if options that apply to it (commands over several implementations pass
    --contract and --no-recompute to the models that take them) and the code path the shape selects."""
    opts = {k: v for k, v in _options(contract, no_recompute).items() if k in spec(key).options}
    if shape is not None:
        opts.update(shape_options(key, shape))
    return get_model(key, gpu, **opts)


def _measured(model, shape):
    from livebytes.validate.records import find
    opts = {k: v for k, v in model.options if k != "forward_only"}
    return find(model.key, shape, opts)


def _verdict(model, shape, gpu_name: str, alloc_conf: Optional[str], triton_cache: str):
    from livebytes.estimator.allocator import parse_alloc_conf
    from livebytes.estimator.capacity import verdict
    return verdict(model, shape, get_device(gpu_name), parse_alloc_conf(alloc_conf), triton_cache)


def _fail(err: Exception) -> None:
    typer.echo(f"error: {err}", err=True)
    raise typer.Exit(1)


@app.command()
def predict(impl: str = Impl, mbs: str = Mbs, seq: str = Seq, heads: str = Heads, dim: str = Dim,
            v_heads: Optional[str] = VHeads, gpu: Optional[str] = Gpu, contract: Optional[str] = Contract,
            no_recompute: bool = NoRecompute, alloc_conf: Optional[str] = AllocConf, triton_cache: str = TritonCache,
            as_json: bool = Json) -> None:
    """Peak allocated and reserved memory of one implementation at one shape, and whether a process runs it."""
    try:
        shape = _shape(mbs, seq, heads, dim, v_heads)
        check_shape(impl, shape, gpu)
        model = get_model(impl, gpu, **_options(contract, no_recompute), **shape_options(impl, shape))
        pred = run_predict(model, shape)
        replayed = replay(model, shape).peak_bytes
        measured = _measured(model, shape)
        v = _verdict(model, shape, gpu or model.device, alloc_conf, triton_cache)
    except LivebytesError as err:
        _fail(err)
    if as_json:
        typer.echo(json.dumps(prediction_dict(pred, measured, replayed=replayed) | verdict_dict(v), indent=1))
    else:
        render.console.print(render.prediction_table(pred, measured, None, replayed=replayed))
        for line in render.verdict_lines(v):
            render.console.print(line)


@app.command()
def compare(impl: List[str] = Impl, mbs: str = Mbs, seq: str = Seq, heads: str = Heads, dim: str = Dim,
            v_heads: Optional[str] = VHeads, gpu: Optional[str] = Gpu, contract: Optional[str] = Contract,
            no_recompute: bool = NoRecompute, alloc_conf: Optional[str] = AllocConf, triton_cache: str = TritonCache,
            as_json: bool = Json) -> None:
    """Several implementations side by side at one shape, with the reduction against the first."""
    try:
        shape = _shape(mbs, seq, heads, dim, v_heads)
        preds, measured, replayed, verdicts = [], [], [], []
        for key in impl:
            check_shape(key, shape, gpu)
            model = _model_of(key, gpu, contract, no_recompute, shape)
            preds.append(run_predict(model, shape))
            replayed.append(replay(model, shape).peak_bytes)
            measured.append(_measured(model, shape))
            verdicts.append(_verdict(model, shape, gpu or model.device, alloc_conf, triton_cache))
    except LivebytesError as err:
        _fail(err)
    if as_json:
        base = preds[0].peak_bytes
        out = [prediction_dict(p, m, replayed=r) | verdict_dict(v) | {"reduction_vs_first": 1 - p.peak_bytes / base}
               for p, m, r, v in zip(preds, measured, replayed, verdicts)]
        typer.echo(json.dumps(out, indent=1))
    else:
        render.console.print(render.compare_table(preds, measured, replayed))
        for v in verdicts:
            render.console.print(render.verdict_lines(v)[-1])


@app.command()
def models(as_json: bool = Json) -> None:
    """The registry: every model, its version and what it covers."""
    items = specs()
    if as_json:
        typer.echo(json.dumps([{"key": s.key, "implementation": s.implementation, "version": s.version,
                                "phase": s.phase, "options": {k: list(v) for k, v in s.options.items()},
                                "default_gpu": s.default_device, "covers": s.covers} for s in items], indent=1))
    else:
        render.console.print(render.models_table(items))


@app.command()
def validate(impl: Optional[str] = typer.Option(None, "--impl", help="model key to run on this machine's GPU"),
             shapes: Optional[str] = typer.Option(None, "--shapes", help='"MBS,SEQ,HEADS[,DIM][,hv=HV][,dv=DV];..." '
                                                  'e.g. "1,8K,96,128;1,8K,16,128,hv=32"'),
             tolerance: str = typer.Option("0.1%", "--tolerance"),
             contract: Optional[str] = Contract, no_recompute: bool = NoRecompute,
             forward_only: bool = typer.Option(False, "--forward-only", help="measure inference (no grad) peaks"),
             same_process: bool = typer.Option(False, "--same-process", help="all shapes in one process (shared compilation)"),
             triton_cache: Optional[str] = typer.Option(None, "--triton-cache",
                                                        help="FLA: cold (autotune in the process), warm (committed configs) or auto"),
             alloc_conf: Optional[str] = typer.Option(None, "--alloc-conf", help="PYTORCH_CUDA_ALLOC_CONF for the runner"),
             plan_file: Optional[str] = typer.Option(None, "--plan", help="run a plan file (JSON list of runner groups)"),
             out: str = typer.Option("livebytes-records", "--out", help="folder for the new records (one file per shape)"),
             from_records: Optional[str] = typer.Option(None, "--from-records",
                                                        help="re-check records instead of running: a file or folder, "
                                                             "a committed file's name, or 'all'")) -> None:
    """Run the real kernels under the protocol and check every prediction (or re-check records)."""
    from pathlib import Path

    from livebytes.validate import compare as cmp
    from livebytes.validate import session
    from livebytes.validate.records import records_from
    device_seconds = None
    try:
        tol = cmp.parse_tolerance(tolerance)
        if from_records:
            recs = [r for r in records_from(from_records) if r.origin == "measured" and (not impl or r.impl == impl)]
            if not recs:
                raise LivebytesError(f"no measured records in {from_records!r}" + (f" for {impl}" if impl else ""))
        elif plan_file:
            from livebytes.validate.batch import load_plan, run_plan
            groups = load_plan(Path(plan_file))
            session.check_runnable(groups)
            done = run_plan(groups, Path(out))
            recs, device_seconds = done.records, done.device_seconds
        else:
            if not impl or not shapes:
                raise LivebytesError("--impl and --shapes are required unless --plan or --from-records is given")
            done = session.run(impl, shapes, contract=contract, recompute=not no_recompute, forward_only=forward_only,
                               same_process=same_process, out=Path(out), triton_cache=triton_cache, alloc_conf=alloc_conf)
            recs, device_seconds = done.records, done.device_seconds
        comparisons = [cmp.compare(r, tol) for r in recs]
    except LivebytesError as err:
        _fail(err)
    render.console.print(render.validation_table(comparisons, f"predicted (replay) vs measured, tolerance {tolerance}"))
    s = session.summarize(comparisons, device_seconds)
    secs = "" if s.device_seconds is None else f", {s.device_seconds:.0f} device-seconds"
    typer.echo(f"{s.passed} passed, {s.failed} failed, {s.out_of_memory} out of memory{secs}")
    if s.failed:
        raise typer.Exit(2)


Solve = typer.Option("seq", "--solve", help="seq, mbs or heads: which dimension to maximise")


def _budget(budget: str) -> tuple[int, str]:
    from livebytes.estimator.devices import parse_budget
    n = parse_budget(budget)
    return n, f"a budget of {n / 2**30:.3f} GiB allocated"


@app.command()
def plan(impl: List[str] = Impl, solve: str = Solve, gpu: Optional[str] = Gpu,
         budget: Optional[str] = typer.Option(None, "--budget", help="e.g. 80GiB: a budget on the allocated peak instead of a GPU"),
         mbs: str = Mbs, seq: str = typer.Option("8K", "--seq"), heads: str = typer.Option("96", "--heads"), dim: str = Dim,
         contract: Optional[str] = Contract, no_recompute: bool = NoRecompute, alloc_conf: Optional[str] = AllocConf,
         triton_cache: str = TritonCache, as_json: bool = Json) -> None:
    """The largest sequence, micro-batch or head count that runs on a GPU without going out of memory."""
    from livebytes.estimator.allocator import parse_alloc_conf
    from livebytes.estimator.planning import largest_fitting, largest_running
    try:
        base = _shape(mbs, seq, heads, dim)
        conf = parse_alloc_conf(alloc_conf)
        limit, label = _budget(budget) if budget else (None, "")
        results = []
        for key in impl:
            model = _model_of(key, gpu, contract, no_recompute)
            check_shape(key, base, gpu)
            s = spec(key)
            dev = get_device(gpu or "H200")
            def refuse(sh, s=s, dev=dev):
                return s.refuse(sh, dev)
            results.append(largest_fitting(model, base, solve, limit, refuse=refuse) if budget else
                           largest_running(model, base, solve, dev, conf, triton_cache, refuse=refuse))
    except LivebytesError as err:
        _fail(err)
    if as_json:
        rows = ([{"impl": r.model.key, "solve": solve, "budget_bytes": r.budget_bytes, "value": r.value,
                  "peak_at_value": r.peak_at_value, "next_value": r.next_value, "peak_at_next": r.peak_at_next}
                 for r in results] if budget else [capacity_plan_dict(r) for r in results])
        typer.echo(json.dumps(rows, indent=1))
    elif budget:
        render.console.print(render.plan_table(results, solve, label))
    else:
        render.console.print(render.capacity_plan_table(results, solve))


@app.command()
def formula(impl: str = Impl, gpu: Optional[str] = Gpu, contract: Optional[str] = Contract,
            no_recompute: bool = NoRecompute, latex: bool = typer.Option(False, "--latex"),
            groups: bool = typer.Option(True, "--groups/--no-groups", help="also the per-group formulas")) -> None:
    """The peak as a closed form in S, MBS, H, HV, DK, DV (a Max where the peak step changes with shape)."""
    import sympy as sp

    from livebytes.estimator.planning import closed_form, group_formulas
    try:
        model = get_model(impl, gpu, **_options(contract, no_recompute))
    except LivebytesError as err:
        _fail(err)
    expr, steps = closed_form(model)
    show = sp.latex if latex else (lambda e: sp.pretty(e, use_unicode=False, wrap_line=False))
    typer.echo(f"peak bytes of {model.key} ({model.summary})")
    typer.echo(f"candidate peak steps (every other step is dominated term by term): "
               f"{', '.join(model.steps[i].name for i in steps)}")
    typer.echo(show(expr))
    if groups:
        for i in steps:
            typer.echo(f"\nat {model.steps[i].name}, by storage group:")
            for g, e in group_formulas(model, i).items():
                typer.echo(f"  {g.label}: {show(sp.simplify(e)) if not latex else sp.latex(e)}")


@app.command()
def sweep(impl: List[str] = Impl, seq: str = typer.Option("8K..256K", "--seq", help="8K..256K (doubling) or a list"),
          heads: str = typer.Option("16,32,64,96,128", "--heads"), mbs: str = typer.Option("1", "--mbs"),
          dim: str = typer.Option("128", "--dim"), gpu: Optional[str] = Gpu, contract: Optional[str] = Contract,
          no_recompute: bool = NoRecompute, csv: Optional[str] = typer.Option(None, "--csv", help="write the grid to FILE")) -> None:
    """Predictions over a grid of shapes, from one vectorised evaluation of the symbolic model."""
    from livebytes.estimator.planning import parse_range, sweep as run_sweep
    try:
        seqs, head_list, mbs_list, dims = parse_range(seq), parse_range(heads), parse_range(mbs), parse_range(dim)
        rows = []
        for key in impl:
            model = _model_of(key, gpu, contract, no_recompute)
            for shape, peak in run_sweep(model, mbs_list, seqs, head_list, dims):
                check_shape(key, shape, gpu)
                rows.append((key, shape, peak))
        limit = get_device(gpu).usable_bytes if gpu else None
    except LivebytesError as err:
        _fail(err)
    if csv:
        with open(csv, "w") as fh:
            fh.write("impl,mbs,seq,heads,dim,peak_bytes\n")
            for key, s, peak in rows:
                fh.write(f"{key},{s.mbs},{s.seq},{s.heads},{s.dim},{peak}\n")
        typer.echo(f"wrote {len(rows)} rows to {csv}")
    else:
        render.console.print(render.sweep_table(rows, limit))


@app.command()
def timeline(impl: List[str] = Impl, mbs: str = Mbs, seq: str = Seq, heads: str = Heads, dim: str = Dim,
             v_heads: Optional[str] = VHeads, gpu: Optional[str] = Gpu, contract: Optional[str] = Contract, no_recompute: bool = NoRecompute,
             out: Optional[str] = typer.Option(None, "--out", help="write a PNG here instead of the terminal view")) -> None:
    """Live bytes per step, stacked by storage group, implementations side by side, the peak marked."""
    try:
        shape = _shape(mbs, seq, heads, dim, v_heads)
        preds = []
        for key in impl:
            check_shape(key, shape, gpu)
            preds.append(run_predict(_model_of(key, gpu, contract, no_recompute, shape), shape))
    except LivebytesError as err:
        _fail(err)
    if out:
        render.timeline_png(preds, out)
        typer.echo(f"wrote {out}")
    else:
        render.console.print(render.timeline_text(preds))


@app.command()
def payload(fn: str = typer.Option("tiled", "--fn", help="dense, tiled or checkpointed"),
            t_values: str = typer.Option("128,256,512,1024", "--T", help="token counts, e.g. 128,256,512,1024"),
            d: int = typer.Option(32, "--d"), dv: Optional[int] = typer.Option(None, "--dv"),
            block_q: int = typer.Option(32, "--block-q"), block_k: int = typer.Option(32, "--block-k"),
            measure_on_cpu: bool = typer.Option(True, "--measure/--no-measure", help="also run it on the CPU (needs torch)"),
            as_json: bool = Json) -> None:
    """What autograd retains for backward: the payload model against the real autograd graph (CPU, float32)."""
    from livebytes.lifetimes.attention_payload import PAYLOAD_MODELS

    from livebytes.estimator.payload import predict_payload
    from livebytes.estimator.planning import parse_range
    try:
        if fn not in PAYLOAD_MODELS:
            raise LivebytesError(f"--fn must be one of {', '.join(PAYLOAD_MODELS)}")
        if min(d, dv or d, block_q, block_k) <= 0:
            raise LivebytesError("--d, --dv and the block sizes must be positive")
        ts = parse_range(t_values)
        measure = None
        if measure_on_cpu:
            try:
                from livebytes.validate.payload import measure
            except ImportError as err:   # pragma: no cover - torch missing
                raise LivebytesError(f"--measure needs torch ({err}); pass --no-measure") from None
    except LivebytesError as err:
        _fail(err)
    rows, previous = [], None
    for t in ts:
        kw = dict(T=t, d=d, dv=dv, bq=block_q, bk=block_k)
        p = predict_payload(PAYLOAD_MODELS[fn], **kw)
        dense = predict_payload(PAYLOAD_MODELS["dense"], **kw).bytes
        tiled = predict_payload(PAYLOAD_MODELS["tiled"], **kw).bytes
        m = measure(fn, t, d, dv, block_q, block_k) if measure else None
        rows.append({"T": t, "predicted": p.bytes, "measured": m.bytes if m else None, "events": p.events,
                     "measured_events": m.save_events if m else None, "largest": p.largest,
                     "measured_largest": m.largest if m else None,
                     "growth": None if previous is None else p.bytes / previous, "vs_dense": p.bytes / dense,
                     "vs_tiled": p.bytes / tiled, "inputs": t * (2 * d + (dv or d)) * 4})
        previous = p.bytes
    if as_json:
        typer.echo(json.dumps({"fn": fn, "d": d, "dv": dv or d, "block_q": block_q, "block_k": block_k, "rows": rows}, indent=1))
    else:
        render.console.print(render.payload_table(rows, fn))
    if any(r["measured"] is not None and (r["measured"], r["measured_events"], r["measured_largest"])
           != (r["predicted"], r["events"], r["largest"]) for r in rows):
        raise typer.Exit(2)


from .learn_cmd import register as _register_learn  # noqa: E402  (learn, drift)

_register_learn(app)


def main() -> None:
    try:
        app()
    except LivebytesError as err:  # pragma: no cover - commands catch their own
        typer.echo(f"error: {err}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()

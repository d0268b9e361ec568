"""``livebytes diff --impl A --impl B``: what B allocates differently from A (two models of one implementation).
Parses, calls ``estimator.diff``, renders."""
from __future__ import annotations

import json
from typing import List, Optional

import typer
from dataclasses import replace

from .. import options as o
from livebytes.choose import device_of, model_for, what_if
from ..errors import UsageProblem, warn
from livebytes.report import envelope, model_terms
from ..render import g, Column, T, fit, terms_line
from .. import render

NAME = "diff"
Impls = typer.Option(..., "--impl", help=o.IMPL_HELP + "; twice: the old model, then the new", metavar="KEY")
Gpu = typer.Option(None, "--gpu", help=f"device preset of both models: {o.preset_names()}; default: the first "
                                       "model's own (see: livebytes models)", metavar="GPU")
Seq = typer.Option(None, "--seq-len", "--seq", help="tokens per sequence for the peak's change: 8192, 8K or 128K",
                   metavar="SIZE")
Heads = typer.Option(None, "--num-heads", "--heads", help="query/key heads for the peak's change", metavar="SIZE")
# the shape's other sizes: None when not given, so that without --seq-len and --num-heads they are refused, not ignored
Mbs = typer.Option(None, "--batch-size", "--mbs", help="sequences per micro-batch, with --seq-len and --num-heads; "
                   "default: 1", metavar="SIZE")
Dim = typer.Option(None, "--head-dim", "--dim", help="query/key head dimension, with --seq-len and --num-heads; "
                   "default: 128", metavar="SIZE")
VHeads = typer.Option(None, "--num-v-heads", "--v-heads", help="value heads, a multiple of --num-heads, with --seq-len "
                      "and --num-heads; default: --num-heads", metavar="SIZE")
ExpandV = typer.Option(None, "--expand-v", metavar="RATIO", help="value head dimension over --head-dim (FLA's "
                       "expand_v), with --seq-len and --num-heads; default 1")


def _side_data(s, nbytes: int | None) -> dict | None:
    return None if s is None else {"shape": s.shape, "dtype": s.dtype, "lifetime": s.lifetime, "source": s.source,
                                   "note": s.note, "allocated_bytes": nbytes}


def _model_data(model, shape, peak: int | None, step: str | None, held: int | None, change: int | None) -> dict:
    return {**model_terms(model), "shape": shape.as_dict() if shape else None, "peak_bytes": peak, "peak_step": step,
            "held_after_call_bytes": held, "change_vs_first_bytes": change}


def diff_data(d, old, new, warnings: list | None = None) -> dict:
    """The JSON view (docs/json.md, ``diff``): ``results`` the two models ``d`` compares in --impl order (``old``,
    ``new``), each with its peak at the shape (null without one); the changes between them at the top level."""
    p = d.peak
    if p is None:
        results = [_model_data(m, None, None, None, None, None) for m in (old, new)]
    else:
        results = [_model_data(old, p.shape, p.old_peak, p.old_step, p.old_held, None),
                   _model_data(new, p.shape, p.new_peak, p.new_step, p.new_held, p.change_bytes)]
    changes = [{"kind": c.kind, "allocation": c.allocation, "regions": list(c.regions),
                "old": _side_data(c.old, c.old_bytes), "new": _side_data(c.new, c.new_bytes)} for c in d.changes]
    return envelope("diff", results, warnings, shape=p.shape.as_dict() if p else None,
                    renumbered_sources=d.renumbered, notes=list(d.notes), changes=changes)


def _side_text(s, nbytes: int | None) -> str:
    if s is None:
        return "-"
    at = f" = {g(nbytes)} GiB" if nbytes is not None else ""
    return f"{s.shape} {s.dtype}{at}\n{s.lifetime}\n{s.source}" + (f"\n({s.note})" if s.note else "")


def _change_cell(c) -> str:
    return c.kind + ("\n(same bytes at this shape)" if c.kind == "resized" and c.old_bytes == c.new_bytes is not None else "")


def columns(d) -> list:
    """A row per changed allocation (``estimator.diff``'s changes): what changed, the allocation (a carved workspace:
    how many regions), then each side's shape, lifetime and source under its model's key."""
    return [Column("change", _change_cell, "key"),
            Column("allocation", lambda c: c.allocation + (f"\n({len(c.regions)} regions)" if c.regions else ""), "key"),
            Column(d.old, lambda c: _side_text(c.old, c.old_bytes)),
            Column(d.new, lambda c: _side_text(c.new, c.new_bytes))]


def diff_table(d):
    return render.table(f"{d.old} -> {d.new}: {len(d.changes)} buffer changes"
                        + (f"; {d.renumbered} buffers cite other lines of the same code" if d.renumbered else ""),
                        columns(d), d.changes, show_lines=True)


def peak_lines(d) -> list[str]:
    lines = [f"{d.new}: {n}" for n in d.notes]
    if d.peak:
        p = d.peak
        lines += [f"peak at {p.shape.label()}: {g(p.old_peak)} GiB ({p.old_step}) -> {g(p.new_peak)} GiB ({p.new_step}), "
                  f"{p.change_bytes:+,} B",
                  f"held by the library after the call: {g(p.old_held)} GiB -> {g(p.new_held)} GiB"]
    return lines


def _shape(mbs: Optional[str], seq: Optional[str], heads: Optional[str], dim: Optional[str], v_heads: Optional[str],
           stack: dict, expand_v: Optional[str] = None):
    """The shape of the peak's change, or None: --seq-len and --num-heads both or neither; the other sizes only with
    them. The layer fields (``stack``) build the layer models with or without a shape."""
    if (seq is None) != (heads is None):
        raise UsageProblem("diff: the peak's change needs both --seq-len and --num-heads (or neither)")
    if seq is None:
        o.refuse_unused("without --seq-len and --num-heads (they give the shape of the peak's change)",
                        mbs=mbs is not None, dim=dim is not None, v_heads=v_heads is not None,
                        expand_v=expand_v is not None)
        return None
    shape = o.shape_from("1" if mbs is None else mbs, seq, heads, dim, v_heads, expand_v=expand_v)   # dim None: 128
    return replace(shape, **stack)


def command(impl: List[str] = Impls, mbs: Optional[str] = Mbs, seq: Optional[str] = Seq,
                 heads: Optional[str] = Heads, dim: Optional[str] = Dim, v_heads: Optional[str] = VHeads,
                 expand_v: Optional[str] = ExpandV,
                 hidden: Optional[str] = o.Hidden, layers: Optional[str] = o.Layers, checkpoint: bool = o.Checkpoint,
                 conv_size: Optional[str] = o.ConvSize,
                 gpu: Optional[str] = Gpu, contract: Optional[str] = o.Contract, no_recompute: bool = o.NoRecompute,
                 as_json: bool = o.Json) -> None:
    """Buffer-level difference between two models of one implementation (added, removed, resized, retyped,
    living longer), each side's source, and the peak's change at a shape (--seq-len and --num-heads)."""
    from livebytes.estimator.diff import diff_models  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import implausible

    if len(impl) != 2:
        raise UsageProblem(f"diff takes two --impl (got {len(impl)})")
    o.distinct_impls(impl, "diff")
    stack = o.stack_from(hidden, layers, checkpoint, conv_size)       # both models' layer fields (layer models)
    shape = _shape(mbs, seq, heads, dim, v_heads, stack, expand_v)
    reason = implausible(shape) if shape is not None else None
    warnings = [reason] if reason else []
    for line in warnings:           # printed at once, as predict does; the JSON carries them too
        warn(line)
    device = gpu if gpu is not None else device_of(impl[0], None).name        # both models on one device
    old, new = (model_for(key, device, what_if(contract, no_recompute), shape, stack=stack) for key in impl)
    d = diff_models(old, new, shape)
    data = diff_data(d, old, new, warnings)
    if as_json:
        typer.echo(json.dumps(data, indent=1))
        return
    render.console.print(fit(diff_table(d)))
    for r in data["results"]:
        render.console.print(T(f"assumed: {terms_line(r)}"))
    for line in peak_lines(d):
        render.console.print(T(line))


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import DIFF_KINDS, SHAPE_OR_NONE, _diff_side, envelope as schema_envelope, integer, listof, obj, string, terms
    return schema_envelope(NAME, obj("one --impl, in order: the first is old, the second new", {
        **terms(shape=SHAPE_OR_NONE),
        "peak_bytes": integer("peak allocated bytes at the shape (512-byte blocks), as predict's (null without a shape)",
                              nullable=True),
        "peak_step": string("the step where the peak is first reached (null without a shape)", nullable=True),
        "held_after_call_bytes": integer("bytes the library keeps when the call returns: its cached buffers (null "
                                         "without a shape)", nullable=True),
        "change_vs_first_bytes": integer("peak_bytes - the first's (null for the first, or without a shape)",
                                         nullable=True)}),
        "what the second model of one implementation allocates differently from the first", shape=SHAPE_OR_NONE,
        renumbered_sources=integer("allocations whose only difference is the line their source cites (not listed)"),
        notes=listof(string("one note"), "the second model's notes the first lacks (a version's evidence)"),
        changes=listof(obj("one change of one allocation (an allocation both resized and retyped: one change each)", {
            "kind": string("what changed", enum=DIFF_KINDS),
            "allocation": string("the allocation's name (a carved workspace: the workspace)"),
            "regions": listof(string("region name"), "a carved workspace's regions (empty: a plain buffer)"),
            "old": _diff_side("the first (results[0])"), "new": _diff_side("the second (results[1])")}),
            "every allocation that differs, the first's order, then those only the second has"))

"""``livebytes diff --impl A --impl B``: what B allocates differently from A (two models of one implementation),
registered onto the app by ``register(app)``. Parses, calls ``estimator.diff``, renders."""
from __future__ import annotations

import json
from typing import List, Optional

import typer

from . import options as o
from .errors import UsageProblem, warn

Seq = typer.Option(None, "--seq", help="tokens per sequence for the peak's change: 8192, 8K or 128K", metavar="SIZE")
Heads = typer.Option(None, "--heads", help="query/key heads for the peak's change", metavar="SIZE")


def _side_data(s) -> dict | None:
    return None if s is None else {"shape": s.shape, "dtype": s.dtype, "lifetime": s.lifetime, "source": s.source, "note": s.note}


def diff_data(d) -> dict:
    """The JSON view (docs/json.md, ``diff``)."""
    side = _side_data
    data = {"old": d.old, "new": d.new, "renumbered_sources": d.renumbered, "notes": list(d.notes),
            "changes": [{"kind": c.kind, "allocation": c.allocation, "regions": list(c.regions), "old": side(c.old),
                         "new": side(c.new), "old_bytes": c.old_bytes, "new_bytes": c.new_bytes} for c in d.changes]}
    if d.peak:
        p = d.peak
        data["peak"] = {"shape": p.shape.as_dict(), "old_bytes": p.old_peak, "new_bytes": p.new_peak, "change_bytes": p.change_bytes,
                        "old_step": p.old_step, "new_step": p.new_step, "old_held_after_call_bytes": p.old_held,
                        "new_held_after_call_bytes": p.new_held}
    return data


def _side_text(s, nbytes: int | None) -> str:
    from .render import g
    if s is None:
        return "-"
    at = f" = {g(nbytes)} GiB" if nbytes is not None else ""
    return f"{s.shape} {s.dtype}{at}\n{s.lifetime}\n{s.source}" + (f"\n({s.note})" if s.note else "")


def diff_table(d):
    from .render import T, _key_column, _table, _text_column
    t = _table(f"{d.old} -> {d.new}: {len(d.changes)} buffer changes"
               + (f"; {d.renumbered} buffers cite other lines of the same code" if d.renumbered else ""), show_lines=True)
    _key_column(t, "change")
    _key_column(t, "allocation")
    _text_column(t, d.old)
    _text_column(t, d.new)
    for c in d.changes:
        name = c.allocation + (f"\n({len(c.regions)} regions)" if c.regions else "")
        kind = c.kind + ("\n(same bytes at this shape)" if c.kind == "resized" and c.old_bytes == c.new_bytes is not None else "")
        t.add_row(T(kind), T(name), T(_side_text(c.old, c.old_bytes)), T(_side_text(c.new, c.new_bytes)))
    return t


def peak_lines(d) -> list[str]:
    from .render import g
    lines = [f"{d.new}: {n}" for n in d.notes]
    if d.peak:
        p = d.peak
        lines += [f"peak at {p.shape.label()}: {g(p.old_peak)} GiB ({p.old_step}) -> {g(p.new_peak)} GiB ({p.new_step}), "
                  f"{p.change_bytes:+,} B",
                  f"held by the library after the call: {g(p.old_held)} GiB -> {g(p.new_held)} GiB"]
    return lines


def diff_command(impl: List[str] = o.Impls, mbs: str = o.Mbs, seq: Optional[str] = Seq, heads: Optional[str] = Heads,
                 dim: str = o.Dim, v_heads: Optional[str] = o.VHeads, gpu: Optional[str] = o.Gpu,
                 contract: Optional[str] = o.Contract, no_recompute: bool = o.NoRecompute, as_json: bool = o.Json) -> None:
    """Buffer-level difference between two models of one implementation (added, removed, resized, retyped,
    living longer), each side's source, and the peak's change at a shape (--seq and --heads)."""
    from livebytes.estimator.diff import diff_models

    from .render import T, console, fit
    from .report import envelope
    if len(impl) != 2:
        raise UsageProblem(f"diff takes two --impl (got {len(impl)})")
    o.distinct_impls(impl, "diff")
    if (seq is None) != (heads is None):
        raise UsageProblem("diff: the peak's change needs both --seq and --heads (or neither)")
    shape = o.shape_from(mbs, seq, heads, dim, v_heads) if seq is not None else None
    if shape is not None:
        from livebytes.estimator.shapes import implausible
        reason = implausible(shape)
        if reason:
            warn(reason)
    device = gpu or o.device_of(impl[0], None).name        # both models on one device
    old, new = (o.model_for(key, device, o.what_if(contract, no_recompute), shape) for key in impl)
    d = diff_models(old, new, shape)
    if as_json:
        typer.echo(json.dumps(envelope("diff", **diff_data(d)), indent=1))
        return
    console.print(fit(diff_table(d)))
    for line in peak_lines(d):
        console.print(T(line))


def register(app: typer.Typer) -> None:
    app.command("diff")(diff_command)

"""``livebytes learn``: a lifetime model drafted from allocator traces (``drift``, its sibling, checks a hand model
against them). Parses, calls the library (livebytes.learn: learn, draft), renders. The library is imported inside the
command: it imports sympy, which the other commands' fast path avoids.
"""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import LivebytesError, UsageProblem
from ..render import console
from livebytes.report import device_terms, envelope
from rich.markup import escape
from rich.table import Table

NAME = "learn"

TracesDir = typer.Option(..., "--traces", metavar="DIR", help="directory of trace JSON files (written by validate/gpu/trace.py)")
OnlyImpl = typer.Option(None, "--impl", metavar="KEY", help="only the traces of this implementation")
Probe = typer.Option(None, "--probe", metavar="PROBE", help="GPU: trace first: PROBE.py (IMPL, cpu_inputs, step) or a built-in key")
TraceShapes = typer.Option(None, "--shapes", metavar="SHAPES", help="GPU, with --probe: the shapes to trace, separated "
                           "by \";\", each key=value with the JSON's shape keys (seq_len=1030, num_heads=2, "
                           "num_v_heads=4, head_dim=64, batch_size=2); the old N,S,H,HV,K,V reads too")
Draft = typer.Option(None, "--draft", metavar="FILE", help="write the draft model module here")
Json = typer.Option(False, "--json", help="machine-readable output")


def learned_rows(learned) -> list[dict]:
    from livebytes.learn.learn import device_dependent  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    rows = []
    for b in learned.buffers:
        rows.append({"name": b.name, "site": b.site, "bytes_formula": b.formula.text() if b.formula else None,
                     "alternatives": [a.text() for a in b.alternatives], "allocated": b.allocated,
                     "freed_after": b.freed_after, "device_dependent": device_dependent(b), "observed_bytes": list(b.sizes)})
    return rows


def _learned_table(learned) -> Table:
    table = Table(title=escape(f"{learned.impl}: {len(learned.buffers)} buffers learned from {len(learned.traces)} traces"))
    for col in ("#", "buffer", "allocating frame", "bytes", "freed after #"):
        table.add_column(col, overflow="fold")   # never cut a frame or a formula
    for r in learned_rows(learned):
        flag = " (device-dependent?)" if r["device_dependent"] else ""
        flag += " (ambiguous)" if r["alternatives"] else ""
        table.add_row(str(r["allocated"]), escape(r["name"]), escape(r["site"]), escape(str(r["bytes_formula"]) + flag),
                      "end" if r["freed_after"] is None else str(r["freed_after"]))
    return table


def command(
    traces: Path = TracesDir, impl: str | None = OnlyImpl, probe: str | None = Probe, shapes: str | None = TraceShapes,
    draft: Path | None = Draft, as_json: bool = Json,
) -> None:
    """Draft a lifetime model from allocator traces: exact byte formulas, lifetimes, and what it could not explain."""
    from livebytes.learn.draft import draft_source  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.learn.learn import learn  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.learn.traces import load_traces
    if shapes is not None and probe is None:
        raise UsageProblem("--shapes has no effect without --probe (it names the shapes to trace); leave it out")
    if probe is not None:
        if shapes is None:
            raise UsageProblem("--probe needs --shapes seq_len=...,num_heads=...;... (the shapes to trace)")
        # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
        from livebytes.estimator.folders import own_leaf
        # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
        from livebytes.validate.gpu.trace import request, write_traces
        chosen = request(probe, shapes)
        problem = own_leaf(traces)     # the traces' folder made here, only itself (never its parents), or refused
        if problem is not None:
            raise LivebytesError(f"{traces}: not a folder we can write ({problem})")
        write_traces(*chosen, traces)
    learned = learn(load_traces(traces, impl))
    if draft is not None:
        draft.write_text(draft_source(learned))
    if as_json:
        typer.echo(json.dumps(envelope("learn", [{
            **_traced_terms(learned), "ties": learned.ties, "buffers": learned_rows(learned),
            "unexplained": list(learned.unexplained)}]), indent=1))
        return
    console.print(_learned_table(learned))
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.learn.traces import TRACE_SYMBOL_NAMES
    console.print(escape("in " + ", ".join(f"{s} = {name}" for s, name in TRACE_SYMBOL_NAMES.items())))
    for line in learned.unexplained:
        console.print(escape(f"unexplained: {line}"))


def _traced_terms(learned) -> dict:
    """What a learned model rests on: the traced implementation, options, device (its preset; the product name as the
    trace holds it in ``device_name``) and shapes (a result's ``shape`` is null: the traces hold several, listed in
    ``traced_shapes`` with the HF names; ``symbols`` names what the formulas' symbols stand for)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.learn.traces import TRACE_SYMBOL_NAMES
    first = learned.traces[0]
    return {"impl": learned.impl, **device_terms(first.preset or None, first.device or None), "shape": None,
            "options": dict(first.options), "traced_shapes": [t.shape_dict() for t in learned.traces],
            "symbols": dict(TRACE_SYMBOL_NAMES)}


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import NO_SHAPE, TRACED_DEVICE, TRACED_SHAPES, envelope as schema_envelope, integer, listof, mapof, obj, string
    return schema_envelope(NAME, obj("the learned draft", {
        "impl": string("the traced implementation"), **TRACED_DEVICE,
        "shape": NO_SHAPE, "options": mapof({}, "the traces' options"), **TRACED_SHAPES,
        "ties": listof(listof(string("symbol"), "symbols the traces vary together"), "tied symbol groups"),
        "buffers": listof(obj("one learned buffer", {
            "name": string("learned name"), "site": string("allocating frame"),
            "bytes_formula": string("exact byte formula (null: none found)", nullable=True),
            "alternatives": listof(string("formula"), "other formulas that fit every trace"),
            "allocated": integer("allocation order"),
            "freed_after": integer("freed after that allocation (null: at the end)", nullable=True),
            "device_dependent": string("why its size may depend on the device (null: none)", nullable=True),
            "observed_bytes": listof(integer("bytes"), "the traced sizes")}), "one per learned buffer"),
        "unexplained": listof(string("line"), "what the traces show that no buffer explains")}),
        "a draft model from allocator traces")

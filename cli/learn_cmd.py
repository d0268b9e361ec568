"""``livebytes learn`` and ``livebytes drift``: registered onto the app by ``register(app)``.

Each command parses, calls the library (livebytes.learn: learn, drift, draft), renders. The
library is imported inside the commands: it imports sympy, which the other commands' fast path avoids.
"""
from __future__ import annotations

import json
from pathlib import Path

import typer

from .errors import EXIT_VALIDATION_FAILED, UsageProblem
from livebytes.report import device_terms, envelope
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()

TracesDir = typer.Option(..., "--traces", metavar="DIR", help="directory of trace JSON files (written by validate/gpu/trace.py)")
OnlyImpl = typer.Option(None, "--impl", metavar="KEY", help="only the traces of this implementation")
Probe = typer.Option(None, "--probe", metavar="PROBE", help="GPU: trace first: PROBE.py (IMPL, cpu_inputs, step) or a built-in key")
TraceShapes = typer.Option(None, "--shapes", metavar="SHAPES", help="GPU, with --probe: the shapes to trace, separated "
                           "by \";\", each key=value with the JSON's shape keys (seq_len=1030, num_heads=2, "
                           "num_v_heads=4, head_dim=64, batch_size=2); the old N,S,H,HV,K,V reads too")
Draft = typer.Option(None, "--draft", metavar="FILE", help="write the draft model module here")
Json = typer.Option(False, "--json", help="machine-readable output")
HandImpl = typer.Option(..., "--impl", metavar="KEY", help="hand model key to check, e.g. fla-kda@07b80f27")
TracedImpl = typer.Option(None, "--traced-impl", metavar="KEY", help="use only traces of this implementation")


def learned_rows(learned) -> list[dict]:
    from livebytes.learn.learn import device_dependent
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


def learn_command(
    traces: Path = TracesDir, impl: str | None = OnlyImpl, probe: str | None = Probe, shapes: str | None = TraceShapes,
    draft: Path | None = Draft, as_json: bool = Json,
) -> None:
    """Draft a lifetime model from allocator traces: exact byte formulas, lifetimes, and what it could not explain."""
    from livebytes.learn.draft import draft_source
    from livebytes.learn.learn import learn
    from livebytes.learn.traces import load_traces
    if shapes is not None and probe is None:
        raise UsageProblem("--shapes has no effect without --probe (it names the shapes to trace); leave it out")
    if probe is not None:
        if shapes is None:
            raise UsageProblem("--probe needs --shapes seq_len=...,num_heads=...;... (the shapes to trace)")
        from livebytes.validate.gpu.trace import request, write_traces
        write_traces(*request(probe, shapes), traces)
    learned = learn(load_traces(traces, impl))
    if draft is not None:
        draft.write_text(draft_source(learned))
    if as_json:
        typer.echo(json.dumps(envelope("learn", [{
            **_traced_terms(learned), "ties": learned.ties, "buffers": learned_rows(learned),
            "unexplained": list(learned.unexplained)}]), indent=1))
        return
    console.print(_learned_table(learned))
    from livebytes.learn.traces import TRACE_SYMBOL_NAMES
    console.print(escape("in " + ", ".join(f"{s} = {name}" for s, name in TRACE_SYMBOL_NAMES.items())))
    for line in learned.unexplained:
        console.print(escape(f"unexplained: {line}"))


def _traced_terms(learned) -> dict:
    """What a learned model rests on: the traced implementation, options, device (its preset; the product name as the
    trace holds it in ``device_name``) and shapes (a result's ``shape`` is null: the traces hold several, listed in
    ``traced_shapes`` with the HF names; ``symbols`` names what the formulas' symbols stand for)."""
    from livebytes.learn.traces import TRACE_SYMBOL_NAMES
    first = learned.traces[0]
    return {"impl": learned.impl, **device_terms(first.preset or None, first.device or None), "shape": None,
            "options": dict(first.options), "traced_shapes": [t.shape_dict() for t in learned.traces],
            "symbols": dict(TRACE_SYMBOL_NAMES)}


def _hand_model(key: str, learned):
    from livebytes.estimator.registry import get_model, spec
    """The hand model with the options the traces were taken with (contract; GVA when HV > H)."""
    s = spec(key)
    options = {k: v for k, v in learned.traces[0].options if k in s.options}
    if any(t.values["HV"] != t.values["H"] for t in learned.traces) and "gva" in s.options:
        options["gva"] = True
    return get_model(key, **options)


def drift_command(
    impl: str = HandImpl, traces: Path = TracesDir, traced_impl: str | None = TracedImpl, as_json: bool = Json,
) -> None:
    """Traced buffers vs a hand model: added, removed, resized, re-typed, lifetime changed. Exit code 3 on drift."""
    from livebytes.learn.drift import differences, drift
    from livebytes.learn.learn import learn
    from livebytes.learn.traces import load_traces
    learned = learn(load_traces(traces, traced_impl))
    findings = drift(_hand_model(impl, learned), learned)
    found = differences(findings)
    if as_json:
        hand = {k: v for k, v in _traced_terms(learned).items() if k not in ("impl", "options")}
        typer.echo(json.dumps(envelope("drift", [{
            "impl": impl, **hand, "options": dict(_hand_model(impl, learned).options), "traced_impl": learned.impl,
            "passed": not found, "findings": [dict(f.__dict__) for f in findings]}], passed=not found), indent=1))
    else:
        table = Table(title=escape(f"{impl} vs {len(learned.traces)} traces of {learned.impl}: {len(found)} differences"))
        for col in ("finding", "buffer", "detail"):
            table.add_column(col, overflow="fold")
        for f in found:
            table.add_row(escape(f.kind), escape(f.buffer), escape(f.detail))
        console.print(table)
        outside = [f.buffer for f in findings if f.kind == "outside-window"]
        if outside:
            console.print(escape(f"not compared (exist before the traced window): {', '.join(outside)}"))
        empty = [f.buffer for f in findings if f.kind == "empty"]
        if empty:
            console.print(escape(f"not compared (0 bytes at every traced shape): {', '.join(empty)}"))
    if found:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


def register(app: typer.Typer) -> None:
    app.command("learn")(learn_command)
    app.command("drift")(drift_command)

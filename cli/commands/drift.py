"""``livebytes drift``: a hand model against allocator traces: buffers added, removed, resized, re-typed, living
longer (exit 3 on drift). Parses, calls the library (livebytes.learn: learn, drift), renders."""
from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import EXIT_VALIDATION_FAILED
from livebytes.report import envelope
from .learn import Json, TracesDir, _traced_terms, console

NAME = "drift"
HandImpl = typer.Option(..., "--impl", metavar="KEY", help="hand model key to check, e.g. fla-kda@07b80f27")
TracedImpl = typer.Option(None, "--traced-impl", metavar="KEY", help="use only traces of this implementation")


def _hand_model(key: str, learned):
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.registry import get_model, spec
    """The hand model with the options the traces were taken with (contract; GVA when HV > H)."""
    s = spec(key)
    options = {k: v for k, v in learned.traces[0].options if k in s.options}
    if any(t.values["HV"] != t.values["H"] for t in learned.traces) and "gva" in s.options:
        options["gva"] = True
    return get_model(key, **options)


def command(
    impl: str = HandImpl, traces: Path = TracesDir, traced_impl: str | None = TracedImpl, as_json: bool = Json,
) -> None:
    """Traced buffers vs a hand model: added, removed, resized, re-typed, lifetime changed. Exit code 3 on drift."""
    from livebytes.learn.drift import differences, drift  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.learn.learn import learn  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
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


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import NO_SHAPE, TRACED_DEVICE, TRACED_SHAPES, boolean, envelope as schema_envelope, listof, mapof, obj, string
    return schema_envelope(NAME, obj("the hand model against the traces", {
        "impl": string("the hand model checked"), **TRACED_DEVICE,
        "shape": NO_SHAPE, "options": mapof({}, "the hand model's options"), **TRACED_SHAPES,
        "traced_impl": string("the implementation the traces are of"), "passed": boolean("no difference"),
        "findings": listof(obj("one finding", {
            "kind": string("added, removed, resized, re-typed, lifetime, outside-window or empty (0 bytes at every traced "
                           "shape: not compared)"),
            "buffer": string("hand name (learned name for added)"), "detail": string("what differs")}),
            "every finding, outside-window and empty ones included")}),
        "traced buffers vs a hand model", passed=boolean("no difference (else exit code 3)"))

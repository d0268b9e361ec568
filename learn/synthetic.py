"""Traces a lifetime model implies: what the tracer would record if the model were exactly right.

Used to test ``learn`` and ``drift`` on the CPU before (and beside) real GPU traces. Within a step,
the step's allocations come first (buffer order), then the frees of buffers whose ``freed_after``
is that step. Buffers that exist before the recorded window are left out (``in_window``): what the library caches
(cache hits in the steady state) and the harness tensors the tracer reuses (``cu_seqlens``).
"""
from __future__ import annotations

import sympy as sp

from livebytes.estimator.buffers import Buffer, LifetimeModel
from livebytes.estimator.symbols import SHAPE_SYMBOLS
from .traces import FORMAT
from livebytes.estimator.shapes import Shape


def in_window(b: Buffer, outside: tuple[str, ...] = ()) -> bool:
    """Whether the tracer's window (fresh inputs + one step) sees this buffer being allocated."""
    return not (b.cached or b.name in outside)


def model_shape(values: dict[str, int]):
    """The engine's Shape for a traced shape (T packed tokens in N equal sequences)."""
    return Shape(mbs=values["N"], seq=values["T"] // values["N"], heads=values["H"], dim=values["K"],
                 v_heads=values["HV"] if values["HV"] != values["H"] else None,
                 dim_v=values["V"] if values["V"] != values["K"] else None)


def buffer_bytes(model: LifetimeModel, values: dict[str, int]) -> dict[str, int]:
    """Requested bytes of every buffer at one traced shape."""
    subs = model_shape(values).subs()
    fn = sp.lambdify(SHAPE_SYMBOLS, [b.nbytes for b in model.buffers], modules="math")
    return {b.name: int(n) for b, n in zip(model.buffers, fn(*(subs[s] for s in SHAPE_SYMBOLS)))}


def _frame(b: Buffer, lines: dict) -> str:
    """The allocating frame as the tracer writes it; a source without a line number gets a stand-in."""
    function = b.source.function.rsplit(".", 1)[-1]
    line = b.source.line or lines.setdefault((b.source.file, function, b.source.quote), 100000 + len(lines))
    return f"{b.source.file}:{function}:{line}"


def synthetic_trace(model: LifetimeModel, values: dict[str, int], outside: tuple[str, ...] = ()) -> dict:
    """A ``livebytes-trace/1`` dict of ``model`` at one shape."""
    sizes = buffer_bytes(model, values)
    lines: dict = {}
    events: list = []
    ids = {b.name: i for i, b in enumerate(model.buffers)}
    traced = [b for b in model.buffers if in_window(b, outside) and sizes[b.name] > 0]   # allocate(0) takes no block
    for step in model.steps:
        for b in traced:
            if b.allocated_at == step.name:
                events.append(["a", ids[b.name], sizes[b.name], [_frame(b, lines)]])
        for b in traced:
            if b.freed_after == step.name:
                events.append(["f", ids[b.name]])
    return {"format": FORMAT, "impl": model.key, "options": {k: v for k, v in model.options},
            "shape": dict(values), "size_field": "requested", "device": {"name": model.device or "synthetic"},
            "outside_window": list(outside), "origin": "synthetic (from the hand model)", "events": events}

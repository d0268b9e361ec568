"""A unified call's events as the engine's timeline: steps and buffer lifetimes.

A step opens at an allocation that follows anything but an allocation (a free, a launch, a GEMM, a reduction) and
holds the allocations made until the next such event, then the launches and operators that come after them. An
allocation is made at its step; a free ends its buffer after the step in progress (the last one opened before it).
So a buffer is live at a step exactly when the trace had it alive right after that step's allocations: the step
totals are the trace's live bytes after each run of allocations, which is where every peak is.

Names: a step is ``phase.module.operator`` (the module path, or ``model``; ``optimizer`` in the optimizer's phases); a
buffer is the same with its place among its step's allocations, an optimizer's ``opt.parameter.operator``, and a number
where that is not unique.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .calls import ALLOC, FREE, Alloc, Call


@dataclass
class TracedStep:
    name: str
    phase: str
    module: str
    allocs: list = field(default_factory=list)       # Alloc, in order
    freed: list = field(default_factory=list)        # Alloc freed after this step
    events: list = field(default_factory=list)       # (kind, dict): launches, GEMMs, reductions at this step
    first_call: bool = False                         # every event of the step is the first call's only


def _short_op(op: str) -> str:
    """``aten.empty_like.default`` -> ``empty_like``."""
    parts = op.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "aten" else op.replace(".", "_")


def segment(call: Call) -> list[TracedStep]:
    """The steps of ``call`` (module doc)."""
    steps: list[TracedStep] = []
    opened_by_alloc = False
    for pos, (kind, ev) in enumerate(call.events):
        only_first = pos in call.first_call
        if kind == ALLOC:
            if not steps or not opened_by_alloc or steps[-1].phase != ev.phase:
                steps.append(TracedStep("", ev.phase, ev.module, first_call=only_first))
            steps[-1].allocs.append(ev)
            steps[-1].first_call = steps[-1].first_call and only_first
            opened_by_alloc = True
            continue
        opened_by_alloc = False
        if not steps:
            steps.append(TracedStep("", "forward", "", first_call=only_first))
        if kind == FREE:
            steps[-1].freed.append(ev)
        else:
            steps[-1].events.append((kind, ev))
    _name(steps)
    return steps


def _name(steps: list[TracedStep]) -> None:
    seen: dict[str, int] = {}
    for s in steps:
        what = _short_op(s.allocs[0].op) if s.allocs else (s.events[0][1].get("kernel") or "ops" if s.events else "frees")
        where = "optimizer" if s.phase == "optimizer" else (s.module or "model")   # its allocations name their parameter
        base = f"{s.phase[:3]}.{where}.{what}"
        n = seen.get(base, 0)
        seen[base] = n + 1
        s.name = base if n == 0 else f"{base}#{n}"


def buffer_names(steps: list[TracedStep], harness: list[Alloc]) -> dict[int, str]:
    """id(Alloc) -> a unique, readable buffer name."""
    names, seen = {}, set()
    for a in harness:
        base = a.module and f"{a.module}.{a.op.split('.')[-1]}" or a.op
        names[id(a)] = _unique(base if a.op != "model.to(device)" else _param_name(a), seen)
    for s in steps:
        for j, a in enumerate(s.allocs):
            if s.phase == "optimizer" and getattr(a, "param", None):      # a state or temporary of one parameter
                names[id(a)] = _unique(f"opt.{a.param}.{_short_op(a.op)}", seen)
            else:
                names[id(a)] = _unique(f"{s.name}.out{j}" if len(s.allocs) > 1 else f"{s.name}.out", seen)
    return names


def _param_name(a: Alloc) -> str:
    return getattr(a, "param", None) or a.module or "parameter"


def _unique(name: str, seen: set) -> str:
    out, n = name, 1
    while out in seen:
        n += 1
        out = f"{name}#{n}"
    seen.add(out)
    return out

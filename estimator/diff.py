"""The buffer-level difference between two models of one implementation (two versions, or two options of one):
each allocation added, removed, resized, retyped or living longer or shorter, with each side's source; and what
that does to the peak at a shape and to what the library holds between calls.

Allocations are compared by name (a carved workspace as one allocation, its regions listed); a change of the
cited line alone (the same code renumbered in another release) is counted, not listed. Model-agnostic: it reads
buffer records only, never an implementation's name.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .buffers import Buffer, LifetimeModel
from .engine import predict
from .errors import LivebytesError
from .prediction import allocations
from .shapes import Shape

KINDS = ("added", "removed", "resized", "retyped", "lives longer", "lives shorter")


@dataclass(frozen=True)
class Side:
    """One model's allocation: its shape (a workspace's total bytes), dtype, lifetime, source and note."""
    shape: str
    dtype: str
    lifetime: str
    source: str
    note: str = ""


@dataclass(frozen=True)
class Change:
    kind: str
    allocation: str
    regions: tuple[str, ...]      # the regions of a carved workspace (empty for a plain buffer)
    old: Side | None
    new: Side | None
    old_bytes: int | None = None  # charged bytes at the diff's shape (None: no shape, or absent on that side)
    new_bytes: int | None = None


@dataclass(frozen=True)
class PeakChange:
    """Both models at one shape: peak bytes and step, and the bytes their libraries keep after the call."""
    shape: Shape
    old_peak: int
    new_peak: int
    old_step: str
    new_step: str
    old_held: int
    new_held: int

    @property
    def change_bytes(self) -> int:
        return self.new_peak - self.old_peak


@dataclass(frozen=True)
class ModelDiff:
    old: str
    new: str
    changes: tuple[Change, ...]
    renumbered: int               # allocations whose only difference is the line their source cites
    notes: tuple[str, ...]        # the new model's notes the old one lacks (a version's evidence)
    peak: PeakChange | None = None


def lifetime_text(b: Buffer) -> str:
    if b.cached:
        key = "the call's tensors" if b.cache_key is None else "(" + ", ".join(map(str, b.cache_key)) + ")"
        return f"held across calls by the library (first allocated at {b.allocated_at}; cached per {key})"
    return f"{b.allocated_at} -> {'end of the call' if b.freed_after is None else b.freed_after}"


def _extent(model: LifetimeModel, b: Buffer) -> tuple[int, int]:
    """(how far it lives, minus where it starts): held across calls > to the end of the call > freed at a step."""
    start = model.step_index(b.allocated_at)
    if b.cached:
        return (len(model.steps) + 1, -start)
    end = len(model.steps) if b.freed_after is None else model.step_index(b.freed_after)
    return (end, -start)


def _side(regions: list[Buffer]) -> Side:
    first = regions[0]
    if len(regions) == 1 and first.carved_from is None:
        shape = first.shape_text()
    else:
        shape = f"{sum((r.nbytes for r in regions), sp.Integer(0))} B in {len(regions)} regions"
    note = "; ".join(r.note for r in regions if r.note)
    return Side(shape, first.dtype, lifetime_text(first), str(first.source), note)


def _changes(name: str, a: LifetimeModel, b: LifetimeModel, ra: list[Buffer], rb: list[Buffer]) -> list[str]:
    sa, sb = _side(ra), _side(rb)
    kinds = []
    if sa.shape != sb.shape or [r.name for r in ra] != [r.name for r in rb]:
        kinds.append("resized")
    if sa.dtype != sb.dtype:
        kinds.append("retyped")
    ea, eb = _extent(a, ra[0]), _extent(b, rb[0])
    if sa.lifetime != sb.lifetime or ea != eb:
        kinds.append("lives longer" if eb > ea else "lives shorter")
    return kinds


def diff_models(a: LifetimeModel, b: LifetimeModel, shape: Shape | None = None) -> ModelDiff:
    """What ``b`` allocates differently from ``a`` (two models of one implementation), and the peak at ``shape``."""
    if a.implementation != b.implementation:
        raise LivebytesError(f"diff compares two models of one implementation: {a.key} is {a.implementation}, "
                             f"{b.key} is {b.implementation}")
    ga, gb = allocations(a), allocations(b)
    sa, sb = (_bytes_at(m, shape) for m in (a, b)) if shape else ({}, {})
    changes, renumbered = [], 0
    for name in list(ga) + [n for n in gb if n not in ga]:
        regions = tuple(r.name for r in (ga.get(name) or gb[name])) if (ga.get(name) or gb[name])[0].carved_from else ()
        at = (sa.get(name), sb.get(name))
        if name not in gb:
            changes.append(Change("removed", name, regions, _side(ga[name]), None, *at))
        elif name not in ga:
            changes.append(Change("added", name, regions, None, _side(gb[name]), *at))
        else:
            kinds = _changes(name, a, b, ga[name], gb[name])
            changes += [Change(k, name, regions, _side(ga[name]), _side(gb[name]), *at) for k in kinds]
            renumbered += not kinds and _side(ga[name]).source != _side(gb[name]).source
    notes = tuple(n for n in b.notes if n not in a.notes)
    return ModelDiff(a.key, b.key, tuple(changes), renumbered, notes, peak_change(a, b, shape) if shape else None)


def _bytes_at(model: LifetimeModel, shape: Shape) -> dict[str, int]:
    """Charged bytes per allocation at ``shape`` (a workspace's regions summed)."""
    out: dict[str, int] = {}
    for b, n in zip(model.buffers, predict(model, shape).buffer_bytes):
        out[b.carved_from or b.name] = out.get(b.carved_from or b.name, 0) + n
    return out


def held_after_call(model: LifetimeModel, buffer_bytes: tuple[int, ...]) -> int:
    """Bytes the library keeps when the call returns: every cached buffer."""
    return sum(n for b, n in zip(model.buffers, buffer_bytes) if b.cached)


def peak_change(a: LifetimeModel, b: LifetimeModel, shape: Shape) -> PeakChange:
    pa, pb = predict(a, shape), predict(b, shape)
    return PeakChange(shape, pa.peak_bytes, pb.peak_bytes, pa.peak_step.name, pb.peak_step.name,
                      held_after_call(a, pa.buffer_bytes), held_after_call(b, pb.buffer_bytes))

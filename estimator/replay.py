"""Replay a model's timeline through the block-level allocator model, the way the validator runs it.

``predict`` charges each buffer its rounded size; ``replay`` also reproduces what the caching
allocator does with blocks that earlier steps freed (see ``allocator.CachingAllocator``), which is
what ``torch.cuda.max_memory_allocated`` reports in steady state. The protocol: harness steps
(warmup leftovers, inputs) once, then ``warm_steps`` unmeasured steps, then ``measured_steps``
measured ones; library caches (``Buffer.cached``) are allocated by the first step only; outputs and
gradients that the step leaves alive are released before the next step.

Protocol v3 (the validator's current one) empties the allocator cache after the target-shape warmup,
so the measured steps do not depend on what the first call did with temporaries this model does not
list (Triton autotuning at a new token bucket allocates a 256 MiB L2-flush buffer, but only when its
result is not already in the process or on-disk autotune cache). Records of protocols v1/v2 were
taken without that; ``replay(..., empty_cache_after_warmup=False)`` is their reference, and is exact
whenever the first call did not autotune.
"""
from __future__ import annotations

from dataclasses import dataclass
from statistics import median

import sympy as sp

from .allocator import CachingAllocator
from .buffers import LifetimeModel
from .engine import allocations
from .shapes import Shape
from .symbols import SHAPE_SYMBOLS


@dataclass(frozen=True)
class Replay:
    peaks: tuple[int, ...]
    reserved: int

    @property
    def peak_bytes(self) -> int:
        return int(median(self.peaks))


def _requested_bytes(model: LifetimeModel, shape: Shape) -> dict[str, int]:
    """Unrounded request per allocation (a carved workspace is one request)."""
    subs = shape.subs()
    args = [subs[s] for s in SHAPE_SYMBOLS]
    out = {}
    for name, regions in allocations(model).items():
        expr = sum((r.nbytes for r in regions), sp.Integer(0))
        out[name] = int(sp.lambdify(SHAPE_SYMBOLS, expr, modules="math")(*args))
    return out


def replay(model: LifetimeModel, shape: Shape, warm_steps: int = 1, measured_steps: int = 3,
           empty_cache_after_warmup: bool = True, history: tuple[int, ...] = ()) -> Replay:
    """``history``: request sizes of allocations the process made before this shape's inputs and still
    holds (the validator's warmup leftovers, ``livebytes.validate`` computes them); allocated first, in order."""
    sizes = _requested_bytes(model, shape)
    groups = allocations(model)
    first = {name: regions[0] for name, regions in groups.items()}
    by_step: dict[int, list[str]] = {}
    freed: dict[int, list[str]] = {}
    for name, b in first.items():
        by_step.setdefault(model.step_index(b.allocated_at), []).append(name)
        if b.freed_after is not None:
            freed.setdefault(model.step_index(b.freed_after), []).append(name)
    harness = [i for i, s in enumerate(model.steps) if s.phase == "harness"]
    work = [i for i, s in enumerate(model.steps) if s.phase != "harness"]

    alloc = CachingAllocator()
    for nbytes in history:
        alloc.malloc(nbytes)
    live = {}
    for i in harness:
        for name in by_step.get(i, []):
            live[name] = alloc.malloc(sizes[name])
    peaks = []
    for k in range(warm_steps + measured_steps):
        if k == warm_steps and empty_cache_after_warmup:
            alloc.empty_cache()      # protocol v3: first-call temporaries (autotune buffers) leave no layout behind
        if k >= warm_steps:
            alloc.reset_peak()
        for i in work:
            for name in by_step.get(i, []):
                if first[name].cached and name in live:
                    continue
                live[name] = alloc.malloc(sizes[name])
            for name in freed.get(i, []):
                alloc.free(live.pop(name))
        if k >= warm_steps:
            peaks.append(alloc.peak)
        for name in [n for n in live if first[n].freed_after is None and not first[n].cached
                     and model.steps[model.step_index(first[n].allocated_at)].phase != "harness"]:
            alloc.free(live.pop(name))    # the harness drops the output and the gradients
    return Replay(tuple(peaks), alloc.reserved)

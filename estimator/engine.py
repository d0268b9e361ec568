"""The one engine: live bytes along a model's timeline, symbolically and for concrete shapes.

No implementation has a code path here. A model is a list of buffer records with lifetimes;
the engine charges each allocation what the allocator counts (``allocated_block_bytes``), sums
what is live at every step, and reports the peak, the step it happens at and what it is made of.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from .buffers import Buffer, Group, LifetimeModel, Step
from .rounding import allocated_block_bytes
from .shapes import Shape
from .symbols import SHAPE_SYMBOLS


def allocations(model: LifetimeModel) -> OrderedDict[str, list[Buffer]]:
    """Buffers grouped by the allocation they live in (a standalone buffer is its own allocation)."""
    groups: OrderedDict[str, list[Buffer]] = OrderedDict()
    for b in model.buffers:
        groups.setdefault(b.carved_from or b.name, []).append(b)
    for name, regions in groups.items():
        lifetimes = {(r.allocated_at, r.freed_after) for r in regions}
        if len(lifetimes) != 1:
            raise ValueError(f"{model.key}: regions of allocation {name} have different lifetimes")
    return groups


def charged_bytes(model: LifetimeModel) -> dict[str, sp.Expr]:
    """Bytes the allocator counts, per buffer. A carved allocation's rounding is charged to its
    last region, so regions of one allocation sum to the rounded allocation."""
    charged: dict[str, sp.Expr] = {}
    for regions in allocations(model).values():
        if len(regions) == 1:
            charged[regions[0].name] = allocated_block_bytes(regions[0].nbytes)
            continue
        raw = [r.nbytes for r in regions]
        total = sum(raw, sp.Integer(0))
        for r, nbytes in zip(regions, raw):
            charged[r.name] = nbytes
        charged[regions[-1].name] = raw[-1] + allocated_block_bytes(total) - total
    return charged


def live_buffers(model: LifetimeModel, step: int) -> list[Buffer]:
    return [b for b in model.buffers if step in model.live_range(b)]


def step_expressions(model: LifetimeModel) -> list[sp.Expr]:
    """Live bytes at each step, as expressions in S, MBS, H, HV, DK, DV."""
    charged = charged_bytes(model)
    return [sum((charged[b.name] for b in live_buffers(model, i)), sp.Integer(0)) for i in range(len(model.steps))]


def peak_expression(model: LifetimeModel) -> sp.Expr:
    """The peak as one expression: the maximum over the step totals (a piecewise function of shape)."""
    # evaluate=False: sympy's Max/Min folding under positive-integer assumptions is not trustworthy
    # (sympy 1.14 folds Min(floor(160/(H*MBS)), 16) to 16); the tests compare this with predict().
    return sp.Max(*step_expressions(model), evaluate=False)


def evaluate(expr: sp.Expr, shape: Shape) -> int:
    """Bytes of one expression at a concrete shape (through lambdify, so implemented functions such as
    a device's plan choice evaluate too)."""
    subs = shape.subs()
    return int(sp.lambdify(SHAPE_SYMBOLS, expr, modules="math")(*(subs[s] for s in SHAPE_SYMBOLS)))


@lru_cache(maxsize=256)
def _compiled(model: LifetimeModel):
    """Per-buffer byte functions, compiled once per model (models are frozen and hashable)."""
    charged = charged_bytes(model)
    names = [b.name for b in model.buffers]
    fn = sp.lambdify(SHAPE_SYMBOLS, [charged[n] for n in names], modules="math")
    membership = [[i in model.live_range(b) for i in range(len(model.steps))] for b in model.buffers]
    return fn, membership


@dataclass(frozen=True)
class Prediction:
    model: LifetimeModel
    shape: Shape
    buffer_bytes: tuple[int, ...]          # per buffer, in model.buffers order
    step_bytes: tuple[int, ...]            # live bytes per step
    peak_index: int

    @property
    def peak_bytes(self) -> int:
        return self.step_bytes[self.peak_index]

    @property
    def peak_step(self) -> Step:
        return self.model.steps[self.peak_index]

    def live_at(self, step: int) -> list[tuple[Buffer, int]]:
        return [(b, n) for b, n in zip(self.model.buffers, self.buffer_bytes) if step in self.model.live_range(b)]

    @property
    def at_peak(self) -> list[tuple[Buffer, int]]:
        return self.live_at(self.peak_index)

    def groups_at(self, step: int) -> OrderedDict[Group, int]:
        out: OrderedDict[Group, int] = OrderedDict((g, 0) for g in Group)
        for b, n in self.live_at(step):
            out[b.group] += n
        return OrderedDict((g, n) for g, n in out.items() if n)

    @property
    def groups(self) -> OrderedDict[Group, int]:
        return self.groups_at(self.peak_index)

    def forward_peak(self) -> tuple[int, int]:
        """(bytes, step index) of the largest live set among forward (and harness) steps."""
        idx = [i for i, s in enumerate(self.model.steps) if s.phase != "backward"]
        best = max(idx, key=lambda i: self.step_bytes[i])
        return self.step_bytes[best], best


def predict(model: LifetimeModel, shape: Shape) -> Prediction:
    fn, membership = _compiled(model)
    subs = shape.subs()
    values = fn(*(subs[s] for s in SHAPE_SYMBOLS))
    per_buffer = tuple(int(v) for v in values)
    steps = len(model.steps)
    totals = [0] * steps
    for nbytes, live in zip(per_buffer, membership):
        for i in range(steps):
            if live[i]:
                totals[i] += nbytes
    # first step reaching the maximum: where the peak is first hit
    peak = max(range(steps), key=lambda i: (totals[i], -i))
    return Prediction(model, shape, per_buffer, tuple(totals), peak)


def unsplit_block_bound(p: Prediction) -> int:
    """Most that ``max_memory_allocated`` can exceed ``p.peak_bytes`` by: a large-pool request may be
    served by a cached block up to 1 MiB larger that the allocator does not split (should_split in
    CUDACachingAllocator.cpp), once per large allocation live at the peak."""
    from .allocator import K_SMALL_SIZE
    live = {}
    for b, n in p.at_peak:
        key = b.carved_from or b.name
        live[key] = live.get(key, 0) + n
    return K_SMALL_SIZE * sum(1 for n in live.values() if n > K_SMALL_SIZE)


def requested_peak(model: LifetimeModel, shape: Shape) -> int:
    """Peak of the tensors' own byte sizes (no 512-byte blocks): what
    ``torch.cuda.memory_stats()['requested_bytes.all.peak']`` reports."""
    subs = shape.subs()
    fn = sp.lambdify(SHAPE_SYMBOLS, [b.nbytes for b in model.buffers], modules="math")
    sizes = [int(v) for v in fn(*(subs[s] for s in SHAPE_SYMBOLS))]
    return max(sum(n for b, n in zip(model.buffers, sizes) if i in model.live_range(b)) for i in range(len(model.steps)))

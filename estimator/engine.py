"""The one engine: live bytes along a model's timeline, symbolically and for concrete shapes.

No implementation has a code path here. A model is a list of buffer records with lifetimes;
the engine charges each allocation what the allocator counts (``allocated_block_bytes``), sums
what is live at every step, and reports the peak, the step it happens at and what it is made of.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .allocator import K_SMALL_SIZE
from .buffers import Buffer, LifetimeModel
from .compiler import charged_bytes, compile_model
from .prediction import Prediction
from .prediction import evaluate as evaluate_compiled
from .shapes import Shape
from .symbols import SHAPE_SYMBOLS


def live_buffers(model: LifetimeModel, step: int) -> list[Buffer]:
    index = model.step_positions()
    return [b for b in model.buffers if step in model.live_range(b, index)]


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
def _live_ranges(model: LifetimeModel) -> list[range]:
    """Each buffer's live range, once per model (a search predicts one model at many shapes)."""
    return model.live_ranges()


def predict(model: LifetimeModel, shape: Shape) -> Prediction:
    """The prediction at ``shape``, its buffers the model's own records (the byte functions compiled once per model)."""
    return evaluate_compiled(model, shape, compile_model(model).charged_fn, _live_ranges(model))


def unsplit_block_bound(p: Prediction) -> int:
    """Most that ``max_memory_allocated`` can exceed ``p.peak_bytes`` by: a large-pool request may be
    served by a cached block up to 1 MiB larger that the allocator does not split (should_split in
    CUDACachingAllocator.cpp), once per large allocation live at the peak."""
    live = {}
    for b, n in p.at_peak:
        key = b.carved_from or b.name
        live[key] = live.get(key, 0) + n
    return K_SMALL_SIZE * sum(1 for n in live.values() if n > K_SMALL_SIZE)

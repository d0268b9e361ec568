"""Capacity planning on the symbolic models: the largest shape that fits, the closed-form peak, grids.

Everything here evaluates the same buffer records as ``predict`` (512-byte blocks, no allocator
replay): the steady-state live bytes of one training step.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import product

import sympy as sp

from .buffers import LifetimeModel
from .engine import predict, step_expressions
from .errors import LivebytesError
from .shapes import Shape
from .symbols import SHAPE_SYMBOLS

SOLVABLE = ("seq", "mbs", "heads")   # Shape fields the solver may vary
SEARCH_LIMIT = 1 << 40   # no token, batch or head count beyond this is meaningful


@dataclass(frozen=True)
class PlanResult:
    model: LifetimeModel
    solve: str
    budget_bytes: int
    value: int | None            # largest value that fits (None: not even 1 fits)
    peak_at_value: int | None
    next_value: int
    peak_at_next: int


def _with(shape: Shape, solve: str, value: int) -> Shape:
    return replace(shape, **{solve: value})


def largest_fitting(model: LifetimeModel, shape: Shape, solve: str, budget_bytes: int,
                    refuse=None) -> PlanResult:
    """Largest value of ``solve`` (seq, mbs or heads) whose peak fits ``budget_bytes``, the others held.

    Exact on the model: the peak is evaluated at integers, ceiling divisions and plan switches
    included. It searches for the first value that does not fit (doubling, then bisection), which
    assumes the peak does not fall as the value grows; the models are monotone in S, and in MBS and H
    except where FROST's chain plan switches off (a drop of a few fp32 piece states), so the answer
    is checked: the found value fits and the next one does not.
    """
    if solve not in SOLVABLE:
        raise LivebytesError(f"--solve must be one of {', '.join(SOLVABLE)}")

    def peak(v: int) -> int:
        s = _with(shape, solve, v)
        if refuse is not None:
            reason = refuse(s)
            if reason:
                raise LivebytesError(reason)
        return predict(model, s).peak_bytes

    if peak(1) > budget_bytes:
        return PlanResult(model, solve, budget_bytes, None, None, 1, peak(1))
    lo, hi = 1, 2
    while peak(hi) <= budget_bytes:
        lo, hi = hi, hi * 2
        if hi > SEARCH_LIMIT:
            raise LivebytesError(f"everything up to {SEARCH_LIMIT} fits: the budget is not a constraint")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if peak(mid) <= budget_bytes:
            lo = mid
        else:
            hi = mid
    return PlanResult(model, solve, budget_bytes, lo, peak(lo), lo + 1, peak(lo + 1))


# ------------------------------------------------------------------------------------- closed form

def _dominates(a: sp.Expr, b: sp.Expr) -> bool:
    """a >= b for every positive shape, shown term by term: a - b expands to terms with positive coefficients."""
    diff = sp.expand(a - b)
    if diff == 0:
        return True
    terms = sp.Add.make_args(diff)
    return all(t.as_coeff_Mul()[0] > 0 for t in terms)


def closed_form(model: LifetimeModel) -> tuple[sp.Expr, list[int]]:
    """The peak as Max over the steps that can hold it (steps another step dominates are dropped), and
    which steps those are. A single survivor means one formula for every shape."""
    exprs = step_expressions(model)
    candidates = list(range(len(exprs)))
    survivors = []
    for i in candidates:
        if any(j != i and _dominates(exprs[j], exprs[i]) and not (_dominates(exprs[i], exprs[j]) and j > i)
               for j in candidates):
            continue
        survivors.append(i)
    expr = exprs[survivors[0]] if len(survivors) == 1 else sp.Max(*[exprs[i] for i in survivors], evaluate=False)
    return expr, survivors


def group_formulas(model: LifetimeModel, step: int) -> dict:
    """Bytes per storage group at one step, as expressions."""
    from .engine import charged_bytes, live_buffers
    charged = charged_bytes(model)
    out: dict = {}
    for b in live_buffers(model, step):
        out[b.group] = out.get(b.group, sp.Integer(0)) + charged[b.name]
    return out


# ------------------------------------------------------------------------------------------- grids

@lru_cache(maxsize=64)
def _vectorised(model: LifetimeModel):
    import numpy as np
    exprs = step_expressions(model)
    fn = sp.lambdify(SHAPE_SYMBOLS, exprs, modules=["numpy"])

    def peaks(values: dict) -> "np.ndarray":
        cols = [np.asarray(values[s], dtype=np.float64) for s in SHAPE_SYMBOLS]
        steps = fn(*cols)
        n = len(cols[0])
        return np.max(np.stack([np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in steps]), axis=0)
    return peaks


def sweep(model: LifetimeModel, mbs: list[int], seqs: list[int], heads: list[int], dims: list[int]) -> list[tuple[Shape, int]]:
    """Peak bytes over a grid, through one vectorised evaluation of the step expressions."""
    import numpy as np
    grid = list(product(mbs, seqs, heads, dims))
    from .symbols import DK, DV, H, HV, MBS, S
    values = {MBS: [g[0] for g in grid], S: [g[1] for g in grid], H: [g[2] for g in grid], HV: [g[2] for g in grid],
              DK: [g[3] for g in grid], DV: [g[3] for g in grid]}
    peaks = _vectorised(model)(values)
    return [(Shape(m, s, h, d), int(p)) for (m, s, h, d), p in zip(grid, np.rint(peaks))]


def parse_range(text: str) -> list[int]:
    """``8K..256K`` (powers of two from 8K to 256K), ``8K,16K,100000`` or one value."""
    from .shapes import parse_size
    if ".." in text:
        a, b = (parse_size(x, "range") for x in text.split("..", 1))
        if a > b:
            raise LivebytesError(f"empty range {text!r}")
        out, v = [], a
        while v <= b:
            out.append(v)
            v *= 2
        return out
    return [parse_size(x, "value") for x in text.split(",") if x.strip()]

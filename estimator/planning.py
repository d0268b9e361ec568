"""Capacity planning: the largest shape that runs on a device, the closed-form peak, grids.

``largest_running`` answers the user's question (largest S, MBS or H that does not go out of memory)
through the full simulation (``capacity.verdict``: allocator replay against the device's capacity).
``largest_fitting``, ``closed_form`` and ``sweep`` evaluate the buffer records as ``predict`` does
(512-byte blocks, no allocator): the steady-state allocated bytes of one training step.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import product

import sympy as sp

from .allocator import DEFAULT_CONF, AllocatorConf
from .buffers import LifetimeModel
from .capacity import Verdict, fits, verdict
from .devices import Device
from .compiler import charged_bytes
from .engine import live_buffers, predict, step_expressions
from .errors import LivebytesError
from .parallel import worker_count
from .shapes import FIELD_OF, HF_NAMES, Shape
from .symbols import SHAPE_SYMBOLS
from .parallel import Evaluator
from .shapes import parse_ratio, parse_size

SOLVABLE = ("seq", "mbs", "heads", "layers")   # Shape fields the solver may vary (layers: a layer model's stack)
SOLVE_NAMES = tuple(HF_NAMES[f] for f in SOLVABLE)   # as users name them: seq_len, batch_size, num_heads, num_hidden_layers
SEARCH_LIMIT = 1 << 40   # no token, batch or head count beyond this is meaningful
LAYER_SEARCH_LIMIT = 128   # a stack's model grows with its layers (a 128-layer verdict replays ~10 s): searched up to this


@dataclass(frozen=True)
class PlanResult:
    model: LifetimeModel
    solve: str
    budget_bytes: int
    value: int | None            # largest value that fits (None: not even 1 fits)
    peak_at_value: int | None
    next_value: int
    peak_at_next: int


def solved_field(name: str) -> str:
    """The Shape field a user's name of the dimension to solve for means: its HF name (``seq_len``) or, as an alias,
    the field's own short name (``seq``); anything else refused, naming the HF names."""
    field = FIELD_OF.get(name, name) if isinstance(name, str) else name
    if field not in SOLVABLE:
        raise LivebytesError(f"the dimension to solve for must be one of {', '.join(SOLVE_NAMES)} (or their short names "
                             f"{', '.join(SOLVABLE)}), got {name!r}")
    return field


def _with(shape: Shape, solve: str, value: int) -> Shape:
    return replace(shape, **{solve: value})


def _largest_value(ok, solve: str = "seq", start: int = 1) -> int | None:
    """Largest v >= 1 with ok(v), searching for the first value that fails (doubling from ``start``, then bisection;
    below ``start`` only when it fails); None when even 1 fails. Assumes ok does not come back once it failed (checked
    by the callers' answer: the value passes and the next one does not). ``start``: where one build serves every
    larger value (a traced model's three layers, whose traces expand to any depth): the values below it are tried only
    when it fails, so their own traces are made only then."""
    limit = LAYER_SEARCH_LIMIT if solve == "layers" else SEARCH_LIMIT
    if start > 1 and not ok(start):
        return _bisect(ok, 1, start) if ok(1) else None
    if start == 1 and not ok(1):
        return None
    lo, hi = start, min(2 * start, limit)
    while ok(hi):
        if hi >= limit:
            if solve == "layers":
                raise LivebytesError(f"{limit} layers fit at this shape: --solve num_hidden_layers searches up to {limit}; "
                                     "ask predict for a deeper stack")
            raise LivebytesError(f"everything up to {limit} fits: the budget is not a constraint")
        lo, hi = hi, min(2 * hi, limit)
    return _bisect(ok, lo, hi)


def _checked(shape: Shape, solve: str, refuse, multiple: int = 1):
    """The shape at the search's v-th value: ``v * multiple`` of ``solve`` (``multiple``: the step a model takes the
    dimension in, e.g. a context-parallel model's sequence, a multiple of its ranks)."""
    if solve not in SOLVABLE:
        raise LivebytesError(f"the dimension to solve for must be one of {', '.join(SOLVABLE)}, got {solve!r}")

    def at(v: int) -> Shape:
        s = _with(shape, solve, v * multiple)
        reason = refuse(s) if refuse is not None else None
        if reason:
            raise LivebytesError(reason)
        return s
    return at


def _tried(at, solve: str, on_try):
    """``at`` that tells ``on_try`` of each shape's value of ``solve`` as the search tries it (None: ``at`` itself)."""
    if on_try is None:
        return at

    def told(v: int) -> Shape:
        s = at(v)
        on_try(getattr(s, solve))
        return s
    return told


def block_peak(model: LifetimeModel, shape: Shape) -> int:
    """The model's peak of 512-byte blocks, steady state (``engine.predict``)."""
    return predict(model, shape).peak_bytes


def largest_fitting(model: LifetimeModel, shape: Shape, solve: str, budget_bytes: int,
                    refuse=None, peak=block_peak, multiple: int = 1, model_at=None, on_try=None,
                    start: int = 1) -> PlanResult:
    """Largest value of ``solve`` (seq, mbs or heads) whose ``peak(model, shape)`` fits ``budget_bytes``, the others
    held. ``peak``: the 512-byte block sum by default; the command passes ``capacity.allocated_peak`` (what
    ``max_memory_allocated`` would show).

    Exact on the model: the peak is evaluated at integers, ceiling divisions and plan switches
    included. The models are monotone in S, and in MBS and H except where FROST's chain plan switches
    off (a drop of a few fp32 piece states), so the answer is checked: it fits and the next one does not.
    This is a budget on *allocated* bytes; whether a process runs is ``largest_running``'s question. ``multiple``: only
    multiples of it are tried (the answer and the next value are multiples). ``model_at(shape)``: the model for each
    tried shape, where the solved field is one a model is built from (a layer stack's ``layers``); None: ``model``
    at every shape. ``on_try(value)``: told of each value of ``solve`` tried (a caller's progress). ``start``: the
    value the search starts from (``_largest_value``).
    """
    at = _tried(_checked(shape, solve, refuse, multiple), solve, on_try)

    def peak_at(v: int) -> int:
        s = at(v)
        return peak(model_at(s) if model_at else model, s)
    value = _largest_value(lambda v: peak_at(v) <= budget_bytes, solve, start)
    if value is None:
        return PlanResult(model, solve, budget_bytes, None, None, multiple, peak_at(1))
    return PlanResult(model, solve, budget_bytes, value * multiple, peak_at(value), (value + 1) * multiple, peak_at(value + 1))


@dataclass(frozen=True)
class CapacityPlan:
    model: LifetimeModel
    solve: str
    value: int | None             # largest value that runs (None: not even 1)
    at_value: Verdict | None
    next_value: int
    at_next: Verdict              # its ``oom`` names the allocation that fails one step above


def largest_running(model: LifetimeModel, shape: Shape, solve: str, device: Device,
                    conf: AllocatorConf = DEFAULT_CONF, triton_cache: str = "cold", refuse=None,
                    tuned_at_tokens: int | None = None, multiple: int = 1, model_at=None,
                    triton: str | None = None, on_try=None, start: int = 1) -> CapacityPlan:
    """Largest value of ``solve`` that does not go out of memory on ``device`` under the full simulation
    (allocator replay of a fresh process: first call, then steady steps, against the device total minus
    the process's own memory; ``capacity.verdict``). Fragmentation can make the verdict non-monotone
    near the edge; the answer is checked: it runs and the next value does not. ``tuned_at_tokens``: the process
    autotuned at MBS 1 x that many tokens first (``capacity.cold_benchmarks``). ``multiple`` and ``model_at`` as
    ``largest_fitting``'s; ``triton``: ``capacity.verdict``'s; ``on_try`` and ``start``: ``largest_fitting``'s (told
    in this process, also of the values its workers try)."""
    at = _tried(_checked(shape, solve, refuse, multiple), solve, on_try)

    def run(v: int) -> Verdict:
        s = at(v)
        return verdict(model_at(s) if model_at else model, s, device, conf, triton_cache, tuned_at_tokens=tuned_at_tokens,
                       triton=triton)
    checked = _checked(shape, solve, refuse, multiple)      # untold: a worker's tries are told here, in this process

    def fits_at(v: int) -> bool:
        s = checked(v)
        return fits(model_at(s) if model_at else model, s, device, conf, triton_cache, tuned_at_tokens, triton)
    told = None if on_try is None else (lambda v: on_try(v * multiple))
    with Verdicts(fits_at, worker_count(), told) as ok:
        value = _clean_below(ok, _largest_value(ok, solve, start))
    nxt = 1 if value is None else value + 1
    return CapacityPlan(model, solve, None if value is None else value * multiple, None if value is None else run(value),
                        nxt * multiple, run(nxt))


def answer_shape(shape: Shape, plan: PlanResult | CapacityPlan) -> Shape:
    """The shape a plan answers: ``shape``'s held dimensions with the solved one set to the answer, or to
    ``next_value`` (1, the shape ``at_next`` judges) when not even 1 runs or fits."""
    return _with(shape, plan.solve, plan.next_value if plan.value is None else plan.value)


CLEAN_WINDOW = 50        # the band below an answer that must run too: 1/50 of it (2 %) ...
CLEAN_SAMPLES = 128      # ... sampled at this many evenly spaced values


class Verdicts:
    """``ok(v)`` once per value, remembered; ``many(values)`` evaluates a batch on ``parallel.Evaluator``'s workers (the
    band checks' samples are independent replays). Which values are evaluated never depends on the worker count: a batch
    is a prefix of what a sequential scan evaluates, extended past its first failure only by values above that failure
    (never inside a later, lower band). A context manager: the workers stop at its end."""

    def __init__(self, ok, workers: int = 1, told=None):
        self.ok, self.workers, self.known, self.told = ok, workers, {}, told
        self._evaluator = Evaluator(ok, workers)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._evaluator.close()

    def __call__(self, v: int) -> bool:
        if v not in self.known:
            self._tell([v])
            self.known[v] = self.ok(v)
        return self.known[v]

    def _tell(self, values: list[int]) -> None:
        for v in values if self.told is not None else ():
            self.told(v)

    def many(self, values: list[int]) -> list[bool]:
        todo = [v for v in values if v not in self.known]
        self._tell(todo)
        self.known.update(zip(todo, self._evaluator.map(todo)))
        return [self.known[v] for v in values]

    def first_failure(self, values: list[int]) -> int | None:
        """The first of ``values`` (in order) that fails, evaluating them ``workers`` at a time."""
        step = self._evaluator.workers          # 1 where it cannot fork: no value past a failure is tried
        for i in range(0, len(values), step):
            batch = values[i:i + step]
            failed = [v for v, fit in zip(batch, self.many(batch)) if not fit]
            if failed:
                return failed[0]
        return None

    def failures_in(self, lo: int, hi: int) -> list[int]:
        return sorted(v for v, fit in self.known.items() if not fit and lo <= v < hi)


def _clean_below(ok: Verdicts, value: int | None) -> int | None:
    """The largest value that runs with no failure in the 2 % below it: none among ``CLEAN_SAMPLES`` evenly spaced values
    there, nor among the values the search has already seen fail. Near the edge fragmentation makes the verdict flip with
    a few tokens (the 1.3B KDA model with checkpointing: runs up to 467,499, fails at 467,500-467,529, runs again, and so
    on, in islands up to ~485K; D64 H128: the replay fails at scattered sizes from 234,368 up, and the H200 ran out of
    memory at 240,000, as the replay does): an answer in an island of fits above failures is one layout away
    from failing. The band is scanned from its bottom: every value from its lowest failure up to ``value`` holds that
    failure in its own band (``v - v // 50`` grows with v), so the search restarts below it."""
    while value is not None and value > 1:
        band = max(1, value // CLEAN_WINDOW)
        stride = max(1, band // CLEAN_SAMPLES)
        bottom = max(0, value - band)
        seen = ok.failures_in(bottom, value)
        samples = list(range(max(1, -(-bottom // stride)) * stride, value, stride))   # the multiples of stride: one
        # grid for every band of this stride, so a band a restart moves down re-uses the samples the last one saw
        if seen:
            samples = [v for v in samples if v < seen[0]]
        failure = ok.first_failure(samples) if samples else None
        failure = failure if failure is not None else (seen[0] if seen else None)
        if failure is None:
            return value
        value = _largest_below(ok, failure)
    return value


def _largest_below(ok, failure: int) -> int | None:
    """Largest v < ``failure`` with ok(v) whose successor fails, searching down in doubling steps, then bisecting."""
    step, hi = 1, failure
    lo = failure - step
    while lo >= 1 and not ok(lo):
        hi, step = lo, step * 2
        lo = failure - step
    if lo < 1:
        return None if not ok(1) else _bisect(ok, 1, hi)
    return _bisect(ok, lo, hi)


def _bisect(ok, lo: int, hi: int) -> int:
    """ok(lo) and not ok(hi): a value v in [lo, hi) with ok(v) and not ok(v + 1)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


# ------------------------------------------------------------------------------------- closed form

def _dominates(a: sp.Expr, b: sp.Expr) -> bool:
    """a >= b for every positive shape, shown term by term: a - b expands to terms with positive coefficients.
    ``a`` and ``b`` come expanded (the difference of two expanded sums is expanded: like terms combine)."""
    diff = a - b
    if diff == 0:
        return True
    terms = sp.Add.make_args(diff)
    return all(t.as_coeff_Mul()[0] > 0 for t in terms)


def closed_form(model: LifetimeModel) -> tuple[sp.Expr, list[int]]:
    """The peak as Max over the steps that can hold it (steps another step dominates are dropped), and
    which steps those are. A single survivor means one formula for every shape."""
    exprs = step_expressions(model)
    expanded = [sp.expand(e) for e in exprs]    # once per step, not once per pair
    candidates = list(range(len(exprs)))
    survivors = []
    for i in candidates:
        if any(j != i and _dominates(expanded[j], expanded[i]) and not (_dominates(expanded[i], expanded[j]) and j > i)
               for j in candidates):
            continue
        survivors.append(i)
    expr = exprs[survivors[0]] if len(survivors) == 1 else sp.Max(*[exprs[i] for i in survivors], evaluate=False)
    return expr, survivors


def group_formulas(model: LifetimeModel, step: int) -> dict:
    """Bytes per storage group at one step, as expressions."""
    charged = charged_bytes(model)
    out: dict = {}
    for b in live_buffers(model, step):
        out[b.group] = out.get(b.group, sp.Integer(0)) + charged[b.name]
    return out


# ------------------------------------------------------------------------------------------- grids

def live_counts(ranges: list[range], formula: list[int], formulas: int, steps: int):
    """``counts[i, f]``: buffers of byte formula ``f`` live at step ``i`` (a difference array over each buffer's live
    range: linear in buffers and steps)."""
    import numpy as np  # deferred: numpy ~90 ms at import (importtime), only this path needs it
    delta = np.zeros((steps + 1, formulas))
    for live, f in zip(ranges, formula):
        if live.start < live.stop:
            delta[live.start, f] += 1
            delta[live.stop, f] -= 1
    return np.cumsum(delta, axis=0)[:-1]


@lru_cache(maxsize=64)
def _vectorised(model: LifetimeModel):
    """Peaks over a grid: each distinct byte formula of the buffers evaluated once over the grid, and each step's
    total as its live buffers' counts per formula times those values. (Summing each step's live set as one expression
    grew with steps x live buffers: 368 s for two shapes of a 32-layer stack.) Every value is a whole number of bytes
    below 2**53, so float64 sums them exactly, as ``predict`` does in integers."""
    import numpy as np  # deferred: numpy ~90 ms at import (importtime), only this path needs it

    charged = charged_bytes(model)
    unique: dict = {}
    formula = [unique.setdefault(charged[b.name], len(unique)) for b in model.buffers]
    fn = sp.lambdify(SHAPE_SYMBOLS, list(unique), modules=["numpy"])
    counts = live_counts(model.live_ranges(), formula, len(unique), len(model.steps))

    def peaks(values: dict) -> np.ndarray:
        cols = [np.asarray(values[s], dtype=np.float64) for s in SHAPE_SYMBOLS]
        n = len(cols[0])
        per_formula = np.stack([np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in fn(*cols)])
        return np.max(counts @ per_formula, axis=0)
    return peaks


def sweep(model: LifetimeModel, mbs: list[int], seqs: list[int], heads: list[int], dims: list[int]) -> list[tuple[Shape, int]]:
    """Peak bytes over a grid, through one vectorised evaluation of the step expressions."""
    grid = [Shape(m, s, h, d) for m, s, h, d in product(mbs, seqs, heads, dims)]
    return list(zip(grid, sweep_shapes(model, grid)))


def sweep_shapes(model: LifetimeModel, shapes: list[Shape]) -> list[int]:
    """Peak bytes of ``model`` at each of ``shapes`` (any sizes, value heads and dims included), through one vectorised
    evaluation of the step expressions."""
    import numpy as np  # deferred: numpy ~90 ms at import (importtime), only this path needs it
    columns = list(zip(*(s.values() for s in shapes)))          # SHAPE_SYMBOLS order: S, MBS, H, HV, DK, DV
    peaks = _vectorised(model)(dict(zip(SHAPE_SYMBOLS, columns)))
    return [int(p) for p in np.rint(peaks)]


def _doubling(a, b, text: str, what: str, example: str) -> list:
    """``a``, 2a, 4a ... up to ``b``, which the doubling must reach exactly (a range ``a..b`` of sizes or ratios)."""
    if a > b:
        raise LivebytesError(f"{what}: empty range {text!r}")
    out, v = [], a
    while v <= b:
        out.append(v)
        v *= 2
    if out[-1] != b:
        raise LivebytesError(f"{what}: range {text!r} doubles from its start and would stop at {out[-1]}, not {b}; "
                             f"list the values instead (e.g. {example})")
    return out


def parse_ratio_range(text: str, what: str = "expand_v") -> list[str]:
    """``parse_range``'s forms for ratios (FLA's ``expand_v``): ``0.5,1,2`` or a doubling range ``0.5..2``; each
    checked positive (``shapes.parse_ratio``) and returned as text, which ``shapes.head_v_dim`` reads exactly."""
    if ".." in text:
        a, b = (parse_ratio(x, what) for x in text.split("..", 1))
        out = _doubling(a, b, text, what, "0.5,1,1.5")
        return [str(v) if v.denominator == 1 or float(v) != v else str(float(v)) for v in out]   # 0.5, not 1/2
    items = [x.strip() for x in text.split(",")]
    if "" in items:
        raise LivebytesError(f"{what}: an empty item in {text!r} (a doubled or trailing comma?)")
    for x in items:
        parse_ratio(x, what)
    return items


def parse_range(text: str, what: str = "value") -> list[int]:
    """``8K..256K`` (powers of two from 8K to 256K), ``8K,16K,100000`` or one value. An empty item
    (``16,,32``, ``8K,``) is refused: it is a typo, not a value."""
    if ".." in text:
        a, b = (parse_size(x, what) for x in text.split("..", 1))
        return _doubling(a, b, text, what, "8K,10K")
    if not text.strip():
        raise LivebytesError(f"{what}: no values in {text!r}")
    items = [x.strip() for x in text.split(",")]
    if "" in items:
        raise LivebytesError(f"{what}: an empty item in {text!r} (a doubled or trailing comma?)")
    return [parse_size(x, what) for x in items]

"""The one builder of a compiled model: a ``LifetimeModel``'s byte formulas compiled to plain functions of
(S, MBS, H, HV, DK, DV) through sympy.lambdify, with the metadata tables, timings and JSON read (``evaluation.
CompiledModel``). Everything that needs sympy to build lives here; evaluating a compiled model needs none
(``compiled.compiled`` reaches this module only for a model not compiled yet).
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from .buffers import LifetimeModel, expr_text
from .evaluation import AutotuneInfo, BufferInfo, CompiledModel, StepInfo
from .prediction import allocations
from .rounding import allocated_block_bytes
from .shapes import SYMBOL_NAMES
from .symbols import DK, DV, shared_lambdify


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


def requested_expressions(model: LifetimeModel) -> list[sp.Expr]:
    """Bytes requested per allocation (a carved workspace is one request), in ``allocations`` order."""
    return [sum((r.nbytes for r in regions), sp.Integer(0)) for regions in allocations(model).values()]


def key_fn(model: LifetimeModel):
    """Every autotuned launch's key values, in order (one compiled formula per distinct key expression: a stack's
    layers repeat their kernels' keys); None without autotuned launches."""
    exprs = [k for a in model.autotuned for k in a.key]
    return shared_lambdify(exprs) if exprs else None


def held_fn(model: LifetimeModel):
    """Whether each ``held_until_gc`` declaration applies (``Autotune.held_when``), in order; None without one."""
    conditions = [sp.sympify(a.held_when) for a in model.autotuned if a.held_until_gc]
    return shared_lambdify(conditions) if conditions else None


def measured_fn(model: LifetimeModel):
    """(measured, held) per failing-config rule (``Autotune.held_measured`` not None), in order; None without one."""
    rules = [a for a in model.autotuned if a.held_measured is not None]
    exprs = [sp.sympify(e) for a in rules for e in (a.held_measured, a.held_when if a.held_until_gc else False)]
    return shared_lambdify(exprs) if exprs else None


def equal_head_dims(*dims: int):
    """The shapes head_dim = head_v_dim = one of ``dims``: where a kernel's failing configs were measured
    (``Autotune.held_measured``)."""
    return sp.Or(*(sp.And(sp.Eq(DK, d), sp.Eq(DV, d)) for d in dims))


def measured_text(condition) -> str:
    """A measured condition in words: "Eq(DK, 128) & Eq(DV, 128)" -> "head_dim = head_v_dim = 128", an Or of those
    joined by "or"; its text where not equalities; "" where never measured (false). A CompiledModel stores these words."""
    expr = sp.sympify(condition)
    if expr is sp.false:
        return ""
    if isinstance(expr, sp.Or):
        parts = sorted((measured_text(a) for a in expr.args), key=lambda t: (len(t), t))
        return ", ".join(parts[:-1]) + f" or {parts[-1]}" if len(parts) > 1 else parts[0]
    eqs = expr.args if isinstance(expr, sp.And) else (expr,)
    if not all(isinstance(e, sp.Eq) and e.lhs.is_Symbol and e.rhs.is_Number for e in eqs):
        return str(condition)
    values = {str(e.rhs) for e in eqs}
    names = [SYMBOL_NAMES.get(e.lhs.name, e.lhs.name) for e in eqs]
    if len(values) == 1:
        return " = ".join(names + [values.pop()])
    return " and ".join(f"{n} = {e.rhs}" for n, e in zip(names, eqs))


def _autotune_info(a) -> AutotuneInfo:
    measured = None if a.held_measured is None else measured_text(a.held_measured)
    return AutotuneInfo(a.kernel, a.step, tuple(expr_text(k) for k in a.key), a.signature, a.held_until_gc,
                        expr_text(a.held_when), measured)


@lru_cache(maxsize=256)
def compile_model(model: LifetimeModel) -> CompiledModel:
    """``model`` compiled: the charged bytes per buffer, the requested bytes per allocation and the autotune rules as
    functions of the shape symbols, beside the model's steps and buffer metadata (once per model: frozen, hashable)."""
    charged = charged_bytes(model)
    steps = tuple(StepInfo(s.name, s.phase, str(s.source) if s.source else "", s.note) for s in model.steps)
    buffers = tuple(BufferInfo(b.name, b.group, b.shape_text(), b.dtype, str(b.source), b.allocated_at, b.freed_after,
                               b.carved_from, b.cached, b.note, b.first_call, b.module, b.tensor) for b in model.buffers)
    return CompiledModel(model.key, model.implementation, model.version, model.summary, model.device, model.options,
                         steps, buffers, shared_lambdify([charged[b.name] for b in model.buffers]),
                         shared_lambdify(requested_expressions(model)), tuple(allocations(model)),
                         tuple(_autotune_info(a) for a in model.autotuned), key_fn(model), held_fn(model),
                         measured_fn(model))

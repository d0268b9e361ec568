"""Triton autotuning inside a process: which first calls benchmark, and the buffer that costs.

A ``triton.autotune``'d kernel (``buffers.Autotune``) benchmarks every config the first time the
process launches it with a new key (``Autotuner.run``: ``if key not in self.cache``; triton 3.6.0
runtime/autotuner.py:232). Each config runs through ``triton.testing.do_bench`` (testing.py:127), which
allocates ``get_empty_cache_for_benchmark()`` -- a 256 MiB int32 tensor it zeroes before every timed
launch to flush L2 (backends/nvidia/driver.py:754-761: sized at 760, allocated at 761) -- and drops it when it returns. The configs run
one after another, so each reuses the block the previous one freed: to the allocator this is one
256 MiB malloc and free, after the launching step's own outputs are allocated and before it frees
anything. Kernels with ``restore_value`` / ``reset_to_zero`` would also clone or zero arguments per
config; none of fla-core 0.6.0's kernels on the KDA and GDN paths declares either, nor ``prune_configs_by``.
A kernel with a single config never benchmarks (``Autotuner.run``: ``if len(self.configs) > 1``).

The key is the decorator's ``key=[...]`` values (``Autotune.key``) and the dtype of every tensor argument;
a model that launches one kernel with two argument sets tells them apart by ``Autotune.signature``.

Which keys a process has already tuned is the caller's history (``tuned``): a ``warm`` on-disk cache
holds every key; a process that autotuned at a small shape holds that shape's keys.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING

from .shapes import SYMBOL_NAMES, Shape

if TYPE_CHECKING:
    from .buffers import LifetimeModel

TRITON_L2_FLUSH_BYTES = 256 * 1024 * 1024   # triton 3.6.0 backends/nvidia/driver.py:760: cache_size = 256 * 1024 * 1024
FLUSH_BUFFER = "triton_l2_flush"            # the name an out-of-memory in a benchmark reports


@lru_cache(maxsize=256)
def _key_fn(model: LifetimeModel):
    """Every launch's key values, over the shape symbols (one compiled formula per distinct key expression: a stack's
    layers repeat their kernels' keys)."""
    from .evaluation import shared_lambdify
    exprs = [k for a in model.autotuned for k in a.key]
    return shared_lambdify(exprs) if exprs else None


def tuning_keys(model: LifetimeModel, shape: Shape) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(kernel, key values) of every declared autotuned launch at ``shape``, in launch order; a launch with a
    ``signature`` (its tensor arguments' dtypes differ from another launch's) has it as the key's last element."""
    autotuned = getattr(model, "autotuned", ())
    fn = getattr(model, "autotune_key_fn", None) or (_key_fn(model) if autotuned else None)
    if fn is None:
        return ()
    values = [int(v) for v in fn(*shape.values())]
    out, i = [], 0
    for a in autotuned:
        signature = (a.signature,) if getattr(a, "signature", "") else ()
        out.append((a.kernel, tuple(values[i:i + len(a.key)]) + signature))
        i += len(a.key)
    return tuple(out)


def benchmarking_steps(model: LifetimeModel, shape: Shape, tuned: frozenset) -> tuple[tuple[str, ...], frozenset]:
    """Steps whose launch benchmarks (its kernel's key is not in ``tuned``), in order, one per new key, and
    the keys tuned after this call."""
    steps, now_tuned = [], set(tuned)
    for a, key in zip(getattr(model, "autotuned", ()), tuning_keys(model, shape)):
        if key not in now_tuned:
            now_tuned.add(key)
            steps.append(a.step)
    return tuple(steps), frozenset(now_tuned)


@lru_cache(maxsize=256)
def _held_fn(model: LifetimeModel):
    import sympy as sp

    from .evaluation import shared_lambdify
    conditions = [sp.sympify(a.held_when) for a in model.autotuned if a.held_until_gc]
    return shared_lambdify(conditions) if conditions else None


def held_until_gc(model: LifetimeModel, shape: Shape, benchmarks: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Benchmarking step -> buffers whose free waits for the next garbage collection, because a config of the
    kernel failed to launch there (``buffers.Autotune.held_until_gc``)."""
    if not getattr(model, "autotuned", ()):
        return {}
    fn = model.held_fn if hasattr(model, "held_fn") else _held_fn(model)   # a CompiledModel carries it compiled
    if fn is None:
        return {}
    fails = iter(fn(*shape.values()))
    out: dict[str, tuple[str, ...]] = {}
    for a in model.autotuned:
        if a.held_until_gc and next(fails) and a.step in benchmarks:
            out[a.step] = out.get(a.step, ()) + tuple(a.held_until_gc)
    return out


_NAMES = SYMBOL_NAMES       # a symbol in words: the shape key it stands for (DK -> head_dim)


def _rules(model) -> tuple:
    """The autotuned launches that declare a failing-config question (``buffers.Autotune.held_measured``)."""
    return tuple(a for a in getattr(model, "autotuned", ()) if getattr(a, "held_measured", None) is not None)


@lru_cache(maxsize=256)
def _measured_fn(model: LifetimeModel):
    """(measured, held) per rule, over the shape symbols (a CompiledModel carries it compiled: ``measured_fn``)."""
    import sympy as sp

    from .evaluation import shared_lambdify
    exprs = [sp.sympify(e) for a in _rules(model) for e in (a.held_measured, a.held_when if a.held_until_gc else False)]
    return shared_lambdify(exprs) if exprs else None


def equal_head_dims(*dims: int):
    """The shapes head_dim = head_v_dim = one of ``dims``: where a kernel's failing configs were measured (``held_measured``)."""
    import sympy as sp

    from .symbols import DK, DV
    return sp.Or(*(sp.And(sp.Eq(DK, d), sp.Eq(DV, d)) for d in dims))


def measured_text(condition) -> str:
    """A measured condition in words: "Eq(DK, 128) & Eq(DV, 128)" -> "head_dim = head_v_dim = 128", an Or of those joined by "or"; its
    text where not equalities; "" where never measured (false). A CompiledModel stores these words."""
    import sympy as sp
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
    names = [_NAMES.get(e.lhs.name, e.lhs.name) for e in eqs]
    if len(values) == 1:
        return " = ".join(names + [values.pop()])
    return " and ".join(f"{n} = {e.rhs}" for n, e in zip(names, eqs))


def held_assumptions(model, shape: Shape) -> tuple[str, ...]:
    """For each failing-config rule not measured at ``shape`` (on the model's device, in its call) whose launch
    benchmarks in a fresh process's cold first call: what that call assumes there, one sentence each."""
    rules = _rules(model)
    if not rules:
        return ()
    fn = model.measured_fn if hasattr(model, "measured_fn") else _measured_fn(model)   # compiled: no sympy
    values = iter(fn(*shape.values()))
    benchmarks = benchmarking_steps(model, shape, frozenset())[0]   # a later launch at a tuned key does not benchmark
    out = []
    for a, measured, held in ((a, next(values), next(values)) for a in rules):
        if measured or a.step not in benchmarks:
            continue
        words = a.held_measured if isinstance(a.held_measured, str) else measured_text(a.held_measured)
        where = (f"measured only at {words} for this call on this GPU architecture" if words else
                 "never measured for this call on this GPU architecture")
        what = (f"a config assumed to fail to launch in a cold first call, keeping {', '.join(a.held_until_gc)} until "
                "the next compile's garbage collection" if held else "every config assumed to launch in a cold first call")
        out.append(f"{a.kernel} ({a.step}): {what} ({where})")
    return tuple(out)


def candidate_key(kernel: str, constexprs: dict, num_warps: int, num_stages: int) -> str:
    """An autotune candidate by its kernel, constexprs, warps and stages, as the CPU compile (validate/gpu/probes/
    cpu_frames.py) and the checks of its data (validate/check/module_rule.py) name it; l2norm's NB (cdiv(T * H, 65,536),
    which only its autotune key reads, not the kernel body) left out, so candidates at another T or H still meet."""
    if kernel.startswith("l2norm_"):
        constexprs = {k: v for k, v in constexprs.items() if k != "NB"}
    return json.dumps([kernel, sorted(constexprs.items()), num_warps, num_stages])


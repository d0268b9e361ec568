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
from typing import TYPE_CHECKING, Union

from .compiled import compiled
from .evaluation import CompiledModel
from .shapes import Shape

if TYPE_CHECKING:
    from .buffers import LifetimeModel

Model = Union[CompiledModel, "LifetimeModel"]     # a LifetimeModel is compiled on the way in (``compiled.compiled``)

TRITON_L2_FLUSH_BYTES = 256 * 1024 * 1024   # triton 3.6.0 backends/nvidia/driver.py:760: cache_size = 256 * 1024 * 1024
FLUSH_BUFFER = "triton_l2_flush"            # the name an out-of-memory in a benchmark reports


def tuning_keys(model: Model, shape: Shape) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(kernel, key values) of every declared autotuned launch at ``shape``, in launch order; a launch with a
    ``signature`` (its tensor arguments' dtypes differ from another launch's) has it as the key's last element."""
    model = compiled(model)
    if model.autotune_key_fn is None:
        return ()
    values = [int(v) for v in model.autotune_key_fn(*shape.values())]
    out, i = [], 0
    for a in model.autotuned:
        signature = (a.signature,) if a.signature else ()
        out.append((a.kernel, tuple(values[i:i + len(a.key)]) + signature))
        i += len(a.key)
    return tuple(out)


def benchmarking_steps(model: Model, shape: Shape, tuned: frozenset) -> tuple[tuple[str, ...], frozenset]:
    """Steps whose launch benchmarks (its kernel's key is not in ``tuned``), in order, one per new key, and
    the keys tuned after this call."""
    steps, now_tuned = [], set(tuned)
    model = compiled(model)
    for a, key in zip(model.autotuned, tuning_keys(model, shape)):
        if key not in now_tuned:
            now_tuned.add(key)
            steps.append(a.step)
    return tuple(steps), frozenset(now_tuned)


def held_until_gc(model: Model, shape: Shape, benchmarks: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Benchmarking step -> buffers whose free waits for the next garbage collection, because a config of the
    kernel failed to launch there (``buffers.Autotune.held_until_gc``)."""
    model = compiled(model)
    if model.held_fn is None:
        return {}
    fails = iter(model.held_fn(*shape.values()))
    out: dict[str, tuple[str, ...]] = {}
    for a in model.autotuned:
        if a.held_until_gc and next(fails) and a.step in benchmarks:
            out[a.step] = out.get(a.step, ()) + tuple(a.held_until_gc)
    return out


def _rules(model: CompiledModel) -> tuple:
    """The autotuned launches that declare a failing-config question (``buffers.Autotune.held_measured``)."""
    return tuple(a for a in model.autotuned if a.held_measured is not None)


def held_assumptions(model: Model, shape: Shape) -> tuple[str, ...]:
    """For each failing-config rule not measured at ``shape`` (on the model's device, in its call) whose launch
    benchmarks in a fresh process's cold first call: what that call assumes there, one sentence each."""
    model = compiled(model)
    rules = _rules(model)
    if not rules:
        return ()
    values = iter(model.measured_fn(*shape.values()))
    benchmarks = benchmarking_steps(model, shape, frozenset())[0]   # a later launch at a tuned key does not benchmark
    out = []
    for a, measured, held in ((a, next(values), next(values)) for a in rules):
        if measured or a.step not in benchmarks:
            continue
        words = a.held_measured
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


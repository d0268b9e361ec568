"""Triton launches that are recorded and never run.

``JITFunction.run`` (triton/runtime/jit.py) records the kernel's name and returns; ``Autotuner.run``
(runtime/autotuner.py:212-256) computes the key exactly as Triton does (the ``key=[...]`` argument values, then the dtype
of every argument that has one), records it with the number of configs (a kernel with one config never benchmarks) and
whether the kernel declares ``reset_to_zero`` / ``restore_value`` (their clones would be allocated per benchmarked
config), then runs the first config's launch (recorded, not run). ``Heuristics.run`` is Triton's own: it computes its
values from the arguments and calls the launch below it.

The host code around a launch (output allocations, grids, ``tensor_cache``) runs as it does on the GPU; the kernel
never writes its outputs, which hold no values on meta tensors anyway.
"""
from __future__ import annotations

from dataclasses import dataclass

from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction


@dataclass(frozen=True)
class Launch:
    kernel: str
    key: tuple | None          # the autotune key (None: not autotuned, or one config)
    configs: int               # configs Triton would benchmark at a new key (1: no benchmark)
    clones: tuple[str, ...]    # reset_to_zero + restore_value arguments (allocated per benchmarked config)
    tensors: tuple = ()        # the tensor arguments (the recorder names their allocations)


_sink = []                     # the active recorder's callback (one at a time: see install)


def _record(launch: Launch) -> None:
    if _sink:
        _sink[-1](launch)


def _autotune_key(tuner, args: tuple, kwargs: dict) -> tuple:
    """Triton 3.6.0's key (autotuner.py:216-222): the key arguments' values, then every argument's dtype."""
    named = {**dict(zip(tuner.arg_names, args)), **kwargs}
    named = {k: v for k, v in named.items() if k in tuner.arg_names}
    key = [named[k] for k in tuner.keys if k in named]
    key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
    return tuple(key)


def _tensors(args: tuple, kwargs: dict) -> tuple:
    return tuple(a for a in list(args) + list(kwargs.values()) if hasattr(a, "untyped_storage"))


def install(callback) -> None:
    """Patch Triton's launch paths (once per process) and send every launch to ``callback``."""
    _sink[:] = [callback]
    if getattr(JITFunction.run, "_livebytes", False):
        return

    def jit_run(self, *args, grid=None, warmup=False, **kwargs):
        if getattr(self, "_livebytes_under_tuner", False):
            return None
        _record(Launch(self.fn.__name__, None, 1, (), _tensors(args, kwargs)))
        return None

    def tuner_run(self, *args, **kwargs):
        kwargs.pop("warmup", None)
        grid = kwargs.pop("grid", None)
        configs = len(self.configs)
        key = _autotune_key(self, args, kwargs) if configs > 1 else None
        clones = tuple(self.reset_to_zero) + tuple(self.restore_value)
        _record(Launch(self.base_fn.__name__, key, configs, clones, _tensors(args, kwargs)))
        self.nargs = dict(zip(self.arg_names, args))
        inner = self.fn
        while not isinstance(inner, JITFunction):        # heuristics between the tuner and the kernel
            inner = inner.fn
        inner._livebytes_under_tuner = True
        try:
            self.fn.run(*args, grid=grid, warmup=False, **kwargs, **self.configs[0].all_kwargs())
        finally:
            inner._livebytes_under_tuner = False
            self.nargs = None
        return None

    jit_run._livebytes = True
    JITFunction.run = jit_run
    Autotuner.run = tuner_run

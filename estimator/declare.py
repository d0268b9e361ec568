"""What model authors write with: a model file declares steps and buffers in launch order, and this
module freezes them into a ``LifetimeModel``.

- ``Declaration``: ``step`` opens a point of the timeline; ``buffer`` declares one allocation made
  there; ``region`` one region of a workspace carved at that step; ``inputs`` the caller's tensors of a
  ``Contract``. Lifetimes are step names; nothing else is implicit.
- ``include``: a model that contains another (a layer around its kernel) takes the other's steps, buffers and
  autotuned launches of one phase, renamed ``prefix.name``, unchanged otherwise: reused, never copied.
- ``Contract`` / ``Input``: the tensors the caller passes (and keeps), declared once per contract.
- ``source_root``: one ``Source`` helper per library: file, function, line number and quoted line.
- ``ceil_to`` (``-(-n // m) * m`` in the sources), ``next_power_of_2`` (``triton.next_power_of_2``),
  ``pow2_tile`` (FLA's tile sizes) and ``vectorised`` (a numeric search from the source, as a sympy
  function that also evaluates over numpy arrays for sweeps).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import sympy as sp
from sympy.utilities.lambdify import implemented_function

from .buffers import Autotune, Buffer, Group, LifetimeModel, Source, Step

INPUTS_STEP = "harness.inputs"   # the caller's tensors exist before the first step (phase "harness")


def ceil_to(nbytes: sp.Expr | int, multiple: int) -> sp.Expr:
    """``nbytes`` rounded up to a multiple of ``multiple`` (alignment of a carved region)."""
    return sp.ceiling(sp.Integer(1) * nbytes / multiple) * multiple


def vectorised(name: str, fn: Callable[..., int]) -> sp.Function:
    """A sympy function evaluated by ``fn`` on integers, element-wise on numpy arrays (vectorised sweeps)."""
    def call(*args):
        try:
            return fn(*(int(a) for a in args))
        except TypeError:   # numpy arrays from a vectorised sweep
            import numpy as np  # deferred: numpy ~90 ms at import (importtime), only this path needs it
            return np.vectorize(lambda *xs: fn(*(int(x) for x in xs)))(*args)
    return implemented_function(sp.Function(name), call)


def _next_power_of_2(n: int) -> int:
    """``triton.next_power_of_2`` (triton 3.6.0 triton/__init__.py:72): the smallest power of 2 >= n."""
    return 1 << (n - 1).bit_length()


next_power_of_2 = vectorised("next_power_of_2", _next_power_of_2)


def pow2_tile(dim: sp.Expr, cap: int, floor: int = 16) -> sp.Expr:
    """A tile size as FLA computes it: ``min(max(triton.next_power_of_2(dim), floor), cap)``."""
    return sp.Min(sp.Max(next_power_of_2(dim), floor), cap)


def source_root(root: str) -> Callable[..., Source]:
    """``src(file, function, line, quote)`` with ``file`` relative to a library's package root."""
    def src(file: str, function: str, line: int = 0, quote: str = "") -> Source:
        return Source(f"{root}/{file}", function, line, quote)
    return src


@dataclass(frozen=True)
class Input:
    """One tensor the caller passes: shape, dtype, and whether only a backward needs it (dO)."""

    name: str
    shape: tuple
    dtype: str
    note: str = ""
    backward_only: bool = False
    retained: bool = False   # a library cache keeps this argument referenced after the call


@dataclass(frozen=True)
class Contract:
    """The caller's side of an implementation: its tensors, in the order the caller allocates them."""

    name: str
    source: Source
    inputs: tuple[Input, ...]


class Declaration:
    """Steps and buffers in launch order; ``buffer`` and ``region`` allocate at the step opened last."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.buffers: list[Buffer] = []
        self.autotuned: list[Autotune] = []
        self.aliases: list[tuple[str, str, str]] = []   # (sub-model key, its input, the buffer that is it here)

    @property
    def current(self) -> str:
        return self.steps[-1].name

    def step(self, name: str, phase: str, source: Source | None = None, note: str = "") -> str:
        self.steps.append(Step(name, phase, source, note))
        return name

    def buffer(self, name: str, group: Group, shape: tuple, dtype: str, source: Source, freed: str | None = None,
               *, note: str = "", cached: bool = False, cache_key: tuple | None = None, carved_from: str | None = None,
               retained: bool = False, cache_fn: str | None = None, scratch_of: str | None = None) -> None:
        """One allocation at the current step, live until ``freed`` (inclusive; None: past the step's end)."""
        self.buffers.append(Buffer(name, group, shape, dtype, source, self.current, freed, carved_from, note,
                                   cached, cache_key, retained, cache_fn, scratch_of))

    def region(self, workspace: str, name: str, group: Group, nbytes: sp.Expr, source: Source, note: str = "",
               *, cached: bool = False, cache_key: tuple | None = None) -> None:
        """A region of ``workspace``: one allocation at the current step, used and freed within it; ``cached``: the
        library keeps the workspace across calls (keyed by ``cache_key``), as ``buffer``'s."""
        self.buffer(name, group, (nbytes,), "uint8", source, None if cached else self.current, note=note,
                    carved_from=workspace, cached=cached, cache_key=cache_key)

    def inputs(self, contract: Contract, backward: bool, note: str = "inputs exist before the step") -> None:
        """The caller's tensors of ``contract`` (dO only with a backward), alive for the whole step."""
        self.step(INPUTS_STEP, "harness", note=note)
        for i in contract.inputs:
            if i.backward_only and not backward:
                continue
            self.buffer(i.name, Group.INPUTS, i.shape, i.dtype, contract.source, note=i.note, retained=i.retained)

    def autotune(self, kernel: str, key: tuple, source: Source, note: str = "", signature: str = "",
                 held_until_gc: tuple = (), held_when: object = True, held_measured: object = None) -> None:
        """The current step launches ``kernel``, ``triton.autotune``'d with ``key`` (shape expressions);
        ``signature``: which argument set, where the model launches the kernel with two; ``held_until_gc`` and
        ``held_when``: buffers a failing config keeps alive until the next garbage collection (``buffers.Autotune``);
        ``held_measured``: the shapes where that rule was measured (None: the kernel has no failing-config rule)."""
        self.autotuned.append(Autotune(kernel, self.current, tuple(key), source, note, signature,
                                       tuple(held_until_gc), held_when, held_measured))

    def include(self, sub: LifetimeModel, prefix: str, phase: str, inputs: dict[str, str],
                freed: dict[str, str] | None = None, cache_hit: bool = False,
                steps: frozenset[str] | None = None, hits: tuple[str, ...] = ()) -> None:
        """The steps of ``sub`` in ``phase`` ("forward" or "backward"; ``steps``: these of its steps instead), with the
        buffers and autotuned launches made at them, each renamed ``prefix.name``; shapes, dtypes, sources and groups
        as ``sub`` declares them.
        ``inputs``: which buffer of this declaration each of ``sub``'s caller tensors is (all of them, checked
        at ``freeze``); ``freed``: where this declaration frees what ``sub`` leaves alive past its end (its
        output and gradients, by ``sub``'s buffer names); ``cache_hit``: an earlier call already filled the library's
        caches (the same arguments): ``sub``'s cached buffers are not allocated again; ``hits``: these of ``sub``'s cached
        buffers only, whose lookup finds an entry this declaration made (``tensor_cache``: the same function called with
        the same argument objects in the same form)."""
        missing = {b.name for b in sub.buffers if b.allocated_at == INPUTS_STEP} - set(inputs)
        if missing:
            raise ValueError(f"including {sub.key}: its inputs {sorted(missing)} are not mapped to buffers")
        freed = freed or {}
        unknown = set(freed) - {b.name for b in sub.buffers}
        if unknown:
            raise ValueError(f"including {sub.key}: no buffers {sorted(unknown)} to free")
        not_cached = set(hits) - {b.name for b in sub.buffers if b.cached}
        if not_cached:
            raise ValueError(f"including {sub.key}: hits {sorted(not_cached)} are not cached buffers")
        self.aliases += [(sub.key, name, mine) for name, mine in inputs.items()]
        ours = set(steps) if steps is not None else {s.name for s in sub.steps if s.phase == phase}
        self.steps += [Step(f"{prefix}.{s.name}", s.phase, s.source, s.note) for s in sub.steps if s.name in ours]
        for b in sub.buffers:
            if b.allocated_at in ours and not (b.cached and (cache_hit or b.name in hits)):
                end = freed.get(b.name, b.freed_after and f"{prefix}.{b.freed_after}")
                self.buffers.append(replace(b, name=f"{prefix}.{b.name}", allocated_at=f"{prefix}.{b.allocated_at}",
                                            freed_after=end, carved_from=b.carved_from and f"{prefix}.{b.carved_from}",
                                            scratch_of=b.scratch_of and f"{prefix}.{b.scratch_of}"))
        self.autotuned += [replace(a, step=f"{prefix}.{a.step}", held_until_gc=tuple(f"{prefix}.{n}" for n in a.held_until_gc))
                           for a in sub.autotuned if a.step in ours]

    def freeze(self, **model: object) -> LifetimeModel:
        names = {b.name for b in self.buffers}
        unmapped = [f"{key}'s {name} -> {mine}" for key, name, mine in self.aliases if mine not in names]
        if unmapped:
            raise ValueError(f"included inputs mapped to no buffer: {', '.join(unmapped)}")
        return LifetimeModel(steps=tuple(self.steps), buffers=tuple(self.buffers), autotuned=tuple(self.autotuned),
                             **model)

"""The data a lifetime model is made of: steps, storage groups, sources and buffer records."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache, reduce
import operator

import sympy as sp

from .dtypes import itemsize
from .groups import Group  # noqa: F401 - re-exported: models import it from here
from .timeline import Timeline


@lru_cache(maxsize=65536)
def expr_text(expr) -> str:
    """sympy's text of an expression (cached: a stack of layers prints the same few hundred formulas thousands of
    times)."""
    return str(expr)


@lru_cache(maxsize=65536)
def _requested_bytes(shape: tuple, dtype: str) -> sp.Expr:
    """A tensor's bytes as a formula (cached: a stack of layers declares the same few hundred shapes thousands of
    times, and building the product is most of compiling one)."""
    return reduce(operator.mul, shape, sp.Integer(1)) * itemsize(dtype)


@dataclass(frozen=True)
class Source:
    """Where a buffer is allocated in the pinned library version: file, function, line number and the
    line itself as it reads there (``quote``)."""

    file: str
    function: str
    line: int = 0
    quote: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where} {self.function}" + (f": {self.quote}" if self.quote else "")


@dataclass(frozen=True)
class Step:
    """One point of the timeline: a kernel launch or a host-side allocation site."""

    name: str
    phase: str  # "forward" | "backward" | "harness"
    source: Source | None = None
    note: str = ""


@dataclass(frozen=True)
class Buffer:
    """One allocation: its shape as a formula, its dtype, its source and its lifetime.

    The buffer is live from step ``allocated_at`` through step ``freed_after`` inclusive;
    ``freed_after=None`` means it is still held when the measured step ends (inputs, outputs,
    gradients). ``carved_from`` names a single allocation that several regions share (a
    workspace): the allocator rounds the allocation once, not each region.

    What a library keeps across calls is declared, not simulated: ``cached=True`` marks a buffer the
    first call allocates and the library keeps (tensor caches, plan scratch, module-level dicts),
    ``cache_key`` the expressions that cache is keyed by (``None``: keyed by the identity of the
    call's tensors, so a call with new inputs never hits), and ``retained=True`` an input that a
    library cache holds a reference to after the call (FLA's ``tensor_cache`` keeps its arguments). ``cache_fn``
    names the function whose bounded queue an identity-keyed entry sits in: entries of one function share it.
    A validator that ran other shapes first derives their leftovers from these declarations.
    """

    name: str
    group: Group
    shape: tuple[sp.Expr, ...]
    dtype: str
    source: Source
    allocated_at: str
    freed_after: str | None = None
    carved_from: str | None = None
    note: str = ""
    cached: bool = False   # allocated by the first call and kept by the library across calls (tensor_cache, plan caches)
    cache_key: tuple[sp.Expr, ...] | None = None   # what the cache is keyed by; None = the call's tensors' identity
    retained: bool = False  # an input a library cache keeps referenced after the call
    cache_fn: str | None = None   # the memoised function whose bounded queue holds an identity-keyed entry (FLA's
                                  # tensor_cache: one queue per decorated function, shared by its argument signatures)
    scratch_of: str | None = None   # the buffer whose ATen operator allocates this one internally, after that output
                                    # (e.g. a reduction's accumulation buffer): if this request fails, the output, not
                                    # yet handed to Python, dies as the C++ exception unwinds
    first_call: bool = False   # allocated and freed by the process's first call only (a library cache's miss path):
                               # the replay makes it in the first run; the steady prediction does not count it
    module: str = ""           # the model's module it belongs to (traced models: ``model.layers.3.mlp``)
    tensor: str = ""           # the tensor as the trace saw it, its dims named where the trace knows them, and its dtype
                               # (traced models, whose ``shape`` is the bytes: ``[T, 5632] bf16``, ``[MBS, S, vocab]
                               # fp32``); empty where ``shape`` and ``dtype`` are the tensor's (a declared model)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(sp.sympify(d) for d in self.shape))
        if self.cache_key is not None:
            object.__setattr__(self, "cache_key", tuple(sp.sympify(k) for k in self.cache_key))
        itemsize(self.dtype)  # fail early on an unknown dtype

    @property
    def elements(self) -> sp.Expr:
        return reduce(operator.mul, self.shape, sp.Integer(1))

    @property
    def nbytes(self) -> sp.Expr:
        """Requested bytes, before allocator rounding."""
        return _requested_bytes(self.shape, self.dtype)

    def shape_text(self) -> str:
        return "[" + ", ".join(expr_text(d) for d in self.shape) + "]"

    def tensor_text(self) -> str:
        """The tensor as a reader names it: ``tensor`` where the trace gave one, else the shape and dtype."""
        return self.tensor or f"{self.shape_text()} {self.dtype}"


@dataclass(frozen=True)
class Autotune:
    """A ``triton.autotune``'d kernel launched at ``step``: the first launch with a ``key`` the process has not
    tuned yet benchmarks every config (Triton's ``do_bench``), which allocates and frees an L2-flush buffer
    after the step's own allocations (``estimator/autotune.py``). ``key``: the decorator's ``key=[...]``
    values as shape expressions. Triton also appends the dtype of every tensor argument (``Autotuner.run``);
    those are fixed per model, except where one model launches a kernel with two argument sets: ``signature``
    then names the set (e.g. with or without ``q``), and two launches with different signatures tune apart.
    ``held_until_gc``: when a config fails to launch (``OutOfResources``), Triton's ``raise_`` (compiler.py:440-448)
    leaves a reference cycle (the exception's traceback holds the frame that holds the exception), and the frames
    in it hold the kernel's tensor arguments until Python's cyclic garbage collector runs: the buffers named here
    (arguments whose last reference the step drops) are then freed at the next benchmarking step, whose JIT
    compile allocates enough Python objects to trigger a collection (``replay``)."""

    kernel: str
    step: str
    key: tuple[sp.Expr, ...]
    source: Source
    note: str = ""
    signature: str = ""
    held_until_gc: tuple[str, ...] = ()   # buffers the step drops that a failing config's traceback keeps alive
    held_when: sp.Expr = sp.true          # the shapes at which some config fails (shape symbols)
    held_measured: sp.Expr | None = None  # where held_when was measured on the model's device; None: no such question

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", tuple(sp.sympify(k) for k in self.key))
        object.__setattr__(self, "held_when", sp.sympify(self.held_when))
        if self.held_measured is not None:
            object.__setattr__(self, "held_measured", sp.sympify(self.held_measured))


@dataclass(frozen=True)
class LifetimeModel(Timeline):
    """A model is data: the ordered steps and the buffer records. The engine does the rest."""

    key: str
    implementation: str
    version: str
    summary: str
    steps: tuple[Step, ...]
    buffers: tuple[Buffer, ...]
    options: tuple[tuple[str, object], ...] = ()
    not_modelled: tuple[str, ...] = ()
    device: str = ""
    notes: tuple[str, ...] = field(default=())
    autotuned: tuple[Autotune, ...] = ()   # autotuned kernels whose first launch at a new key benchmarks

    def __post_init__(self) -> None:
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.key}: duplicate step names")
        index = {n: i for i, n in enumerate(names)}
        freed_at: dict[str, set] = {}
        for b in self.buffers:
            freed_at.setdefault(b.freed_after, set()).add(b.name)
        for a in self.autotuned:
            if a.step not in index:
                raise ValueError(f"{self.key}: autotuned kernel {a.kernel} at unknown step {a.step}")
            freed_here = freed_at.get(a.step, set())
            if set(a.held_until_gc) - freed_here:
                raise ValueError(f"{self.key}: {a.kernel} holds {sorted(set(a.held_until_gc) - freed_here)}: "
                                 f"not buffers freed at {a.step}")
        seen: set[str] = set()
        for b in self.buffers:
            if b.name in seen:
                raise ValueError(f"{self.key}: duplicate buffer {b.name}")
            seen.add(b.name)
            if b.allocated_at not in index:
                raise ValueError(f"{self.key}: {b.name} allocated at unknown step {b.allocated_at}")
            if (b.cached or b.retained) and b.freed_after is not None:
                raise ValueError(f"{self.key}: cached or retained buffer {b.name} cannot be freed inside the step")
            if b.first_call and (b.cached or b.freed_after is None):
                raise ValueError(f"{self.key}: first-call buffer {b.name} must be freed within the call")
            if b.cache_key is not None and not b.cached:
                raise ValueError(f"{self.key}: {b.name} has a cache key but is not cached")
            if b.freed_after is not None:
                if b.freed_after not in index:
                    raise ValueError(f"{self.key}: {b.name} freed after unknown step {b.freed_after}")
                if index[b.freed_after] < index[b.allocated_at]:
                    raise ValueError(f"{self.key}: {b.name} is freed before it is allocated")
        made = {b.name: (i, b.allocated_at) for i, b in enumerate(self.buffers)}
        for i, b in enumerate(self.buffers):
            if b.scratch_of is None:
                continue
            at, step = made.get(b.scratch_of, (None, None))
            if step != b.allocated_at or at > i:
                raise ValueError(f"{self.key}: {b.name} is scratch of {b.scratch_of}, which is not declared before it "
                                 f"at {b.allocated_at}")

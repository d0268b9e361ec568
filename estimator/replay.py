"""Replay a model's timeline through the block-level allocator model (``allocator.CachingAllocator``).

``predict`` charges each buffer its rounded size; ``replay`` also reproduces what the caching
allocator does with blocks that earlier steps freed, which is what ``torch.cuda.max_memory_allocated``
reports, and the segments it holds (``max_memory_reserved``). The sequence: the process's earlier calls
(``prelude``: replayed whole, as allocator operations; or ``history``: only what they left allocated, put into
an empty allocator, which misplaces leftovers that pin segments), the harness steps (inputs) once, then ``warm_steps`` unmeasured
steps (the first one is the first call at this shape: library caches, ``Buffer.cached``, are allocated
by it only), then ``measured_steps`` measured ones; outputs and gradients the step leaves alive are
released before the next step.

``empty_cache_after_warmup``: protocol v3 of the validator empties the allocator cache after the
target-shape warmup, so the measured steps do not depend on the first call's layout. A user's process does not.

``benchmarks``: the first call's autotuning (``estimator/autotune.py``): each benchmarking step allocates and frees
Triton's 256 MiB L2-flush buffer, and a kernel with configs that fail to launch keeps the arguments its step
drops until the next compile (``held_until_gc``).

With ``capacity_bytes`` the allocator runs out of memory the way PyTorch does; the replay stops at the
failing request and says where (``OomEvent``).

The byte formulas are compiled once per model (``_schedule``); a replay costs a few hundred
allocator operations (well under 5 ms), which the out-of-memory planner bisects over.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from statistics import median
from typing import TYPE_CHECKING

from .allocator import (
    DEFAULT_CONF,
    AllocatorConf,
    AllocatorOutOfMemory,
    CachingAllocator,
    MappedRange,
    OutOfMemory,
)
from .autotune import FLUSH_BUFFER, TRITON_L2_FLUSH_BYTES, held_until_gc
from .prediction import allocations
from .shapes import Shape

if TYPE_CHECKING:
    from .buffers import LifetimeModel


@dataclass(frozen=True)
class OomEvent:
    """Where the simulated process failed: the step of the run (0 = the first call at this shape), the
    model step and allocation, and PyTorch's figures."""
    run_step: int
    first_call: bool
    step: str
    buffer: str
    figures: OutOfMemory


@dataclass(frozen=True)
class Replay:
    peaks: tuple[int, ...]                # max_memory_allocated of each measured step
    reserved: int                         # reserved at the end
    reserved_peaks: tuple[int, ...] = ()  # max_memory_reserved of each measured step (peak reset before it)
    reserved_peak_bytes: int = 0          # max reserved over the whole run, history included
    allocated_peak_bytes: int = 0         # max allocated over the whole run, history included
    oom: OomEvent | None = field(default=None)
    segments: tuple[MappedRange, ...] = ()   # memory_snapshot's segments at the end (or at the failing request)

    @property
    def peak_bytes(self) -> int:
        return int(median(self.peaks))


@dataclass(frozen=True)
class Prelude:
    """What the process did before this shape's inputs, as allocator operations in order: ``("malloc", tag,
    bytes)``, ``("free", tag)``, ``("empty_cache",)``. Replaying the earlier calls whole, rather than
    allocating what they left behind into an empty allocator, puts their leftovers in the segments they
    really pin (a 2 MiB cache entry made between two inputs keeps that 20 MiB segment). ``reused``: this
    shape's cached buffers whose block the prelude holds (a cache hit on its first call), name -> tag;
    ``evicted``: tags the first step of this call frees (entries a bounded library cache drops)."""
    ops: tuple[tuple, ...]
    reused: tuple[tuple[str, object], ...] = ()
    evicted: tuple[object, ...] = ()


@dataclass(frozen=True)
class _Schedule:
    sizes_fn: object                      # shape values -> request bytes per allocation
    names: tuple[str, ...]
    harness: tuple[tuple[int, tuple[int, ...]], ...]       # (step, allocations made there)
    work: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]   # (step, allocated, freed)
    cached: frozenset[int]
    released: tuple[int, ...]             # allocations the harness drops after each step


@lru_cache(maxsize=256)
def _schedule(model: LifetimeModel) -> _Schedule:
    """Request-size formulas (a carved workspace is one request) and who is allocated and freed where,
    compiled once per model (models are frozen and hashable)."""
    groups = allocations(model)
    names = tuple(groups)
    if hasattr(model, "requested_fn"):      # a CompiledModel (compiled.py) carries the compiled request sizes
        fn = model.requested_fn
    else:
        import sympy as sp

        from .symbols import SHAPE_SYMBOLS
        exprs = [sum((r.nbytes for r in regions), sp.Integer(0)) for regions in groups.values()]
        fn = sp.lambdify(SHAPE_SYMBOLS, exprs, modules="math")
    first = [groups[n][0] for n in names]
    alloc_at = [model.step_index(b.allocated_at) for b in first]
    free_at = [None if b.freed_after is None else model.step_index(b.freed_after) for b in first]

    def made(i):
        return tuple(k for k in range(len(names)) if alloc_at[k] == i)
    harness, work = [], []
    for i, s in enumerate(model.steps):
        if s.phase == "harness":
            harness.append((i, made(i)))
        else:
            work.append((i, made(i), tuple(k for k in range(len(names)) if free_at[k] == i)))
    released = tuple(k for k in range(len(names)) if free_at[k] is None and not first[k].cached
                     and model.steps[alloc_at[k]].phase != "harness")
    return _Schedule(fn, names, tuple(harness), tuple(work),
                     frozenset(k for k in range(len(names)) if first[k].cached), released)


def call_plan(model: LifetimeModel) -> _Schedule:
    """Who is allocated and freed at each step, by allocation index (``names``): for callers that replay
    earlier calls of a process (``validate.protocol``)."""
    return _schedule(model)


def _run_prelude(alloc: CachingAllocator, prelude: Prelude) -> dict:
    """Carry out the earlier calls' operations; the blocks still held, by tag."""
    blocks: dict = {}
    for op in prelude.ops:
        if op[0] == "malloc":
            blocks[op[1]] = alloc.malloc(op[2])
        elif op[0] == "free":
            alloc.free(blocks.pop(op[1]))
        elif op[0] == "empty_cache":
            alloc.empty_cache()
        else:
            raise ValueError(f"unknown prelude operation {op[0]!r}")
    return blocks


def request_sizes(model: LifetimeModel, shape: Shape) -> dict[str, int]:
    """Unrounded request per allocation (a carved workspace is one request)."""
    sch = _schedule(model)
    return dict(zip(sch.names, (int(v) for v in sch.sizes_fn(*shape.values()))))


class _Process:
    """One replayed process: the allocator, the live blocks by allocation index, and where it is (for an OOM)."""

    def __init__(self, model: LifetimeModel, shape: Shape, conf: AllocatorConf, capacity_bytes: int | None,
                 benchmarks: tuple[str, ...], device_total_bytes: int | None = None):
        self.model, self.sch, self.benchmarks = model, _schedule(model), benchmarks
        self.sizes = [int(v) for v in self.sch.sizes_fn(*shape.values())]
        self.held_at = {step: {self.sch.names.index(n) for n in names}
                        for step, names in held_until_gc(model, shape, benchmarks).items()}
        self.alloc = CachingAllocator(conf, capacity_bytes, device_total_bytes)
        self.live: dict[int, object] = {}
        self.evicted: list = []
        self.awaiting_gc: list = []
        self.where = ("history", "history", -1)

    def before(self, history: tuple[int, ...], prelude: Prelude | None) -> None:
        """What the process did before this shape: leftovers (``history``) or earlier calls whole (``prelude``)."""
        for nbytes in history:
            self.alloc.malloc(nbytes)
        if prelude:
            kept = _run_prelude(self.alloc, prelude)
            for name, tag in prelude.reused:
                self.live[self.sch.names.index(name)] = kept.pop(tag)
            self.evicted = [kept.pop(tag) for tag in prelude.evicted]

    def malloc(self, i: int, k: int, run: int) -> None:
        self.where = (self.model.steps[i].name, self.sch.names[k], run)
        self.live[k] = self.alloc.malloc(self.sizes[k])

    def _collect(self, blocks: list) -> None:
        while blocks:
            self.alloc.free(blocks.pop(0))

    def step(self, i: int, made: tuple[int, ...], freed: tuple[int, ...], run: int) -> None:
        """One model step; in the first call (run 0) also evictions, benchmarks and arguments held until a GC."""
        name, first = self.model.steps[i].name, run == 0
        if first:
            self._collect(self.evicted)
        for k in made:
            if not (k in self.sch.cached and k in self.live):
                self.malloc(i, k, run)
        if first and name in self.benchmarks:
            self._collect(self.awaiting_gc)              # this step's compile runs Python's collector
            for _ in range(self.benchmarks.count(name)):
                self.where = (name, FLUSH_BUFFER, run)
                self.alloc.free(self.alloc.malloc(TRITON_L2_FLUSH_BYTES))
        for k in freed:
            if first and k in self.held_at.get(name, ()):
                self.awaiting_gc.append(self.live.pop(k))
            else:
                self.alloc.free(self.live.pop(k))

    def end_of_call(self) -> None:
        self._collect(self.awaiting_gc)     # no later compile in the first call: collected by its end at the latest
        for k in self.sch.released:
            if k in self.live:
                self.alloc.free(self.live.pop(k))    # the harness drops the output and the gradients


def replay(model: LifetimeModel, shape: Shape, warm_steps: int = 1, measured_steps: int = 3,
           empty_cache_after_warmup: bool = True, history: tuple[int, ...] = (),
           conf: AllocatorConf = DEFAULT_CONF, capacity_bytes: int | None = None,
           benchmarks: tuple[str, ...] = (), prelude: Prelude | None = None,
           device_total_bytes: int | None = None) -> Replay:
    """``history``: request sizes of allocations the process made before this shape's inputs and still
    holds (the validator's warmup leftovers, ``livebytes.validate`` computes them); allocated first, in order.
    ``capacity_bytes``: what the allocator may reserve (device total minus the process's other memory).
    ``benchmarks``: steps at which the first call autotunes a kernel at a key new to the process
    (``autotune.benchmarking_steps``): Triton's L2-flush buffer is allocated and freed there, after the
    step's allocations and before its frees.
    ``prelude``: the earlier calls replayed whole (instead of ``history``).
    ``device_total_bytes``: the device's memory, which sizes an expandable segment's address range
    (``allocator.expandable_address_space``); None: unbounded, which changes nothing unless pages get unmapped
    (an out-of-memory retry against ``capacity_bytes``, or ``empty_cache``).
    A benchmark whose kernel has a failing config keeps the step's dropped arguments (``held_until_gc``)
    until the next benchmarking step's compile collects them: freed there after its allocations, before its
    L2-flush buffer (the order run 11's trace of a cold report process shows)."""
    proc = _Process(model, shape, conf, capacity_bytes, benchmarks, device_total_bytes)
    alloc, peaks, reserved_peaks = proc.alloc, [], []
    top_alloc = top_reserved = 0
    try:
        proc.before(history, prelude)
        for i, made in proc.sch.harness:
            for k in made:
                proc.malloc(i, k, -1)
        for run in range(warm_steps + measured_steps):
            if run == warm_steps and empty_cache_after_warmup:
                alloc.empty_cache()
            top_alloc, top_reserved = max(top_alloc, alloc.peak), max(top_reserved, alloc.peak_reserved)
            alloc.reset_peak()
            for i, made, freed in proc.sch.work:
                proc.step(i, made, freed, run)
            proc.end_of_call()
            if run >= warm_steps:
                peaks.append(alloc.peak)
                reserved_peaks.append(alloc.peak_reserved)
    except AllocatorOutOfMemory as err:
        step, buffer, run = proc.where
        oom = OomEvent(run, run == 0, step, buffer, err.oom)
        return Replay(tuple(peaks), alloc.reserved, tuple(reserved_peaks), max(top_reserved, alloc.peak_reserved),
                      max(top_alloc, alloc.peak), oom, alloc.mapped_ranges())
    return Replay(tuple(peaks), alloc.reserved, tuple(reserved_peaks), max(top_reserved, alloc.peak_reserved),
                  max(top_alloc, alloc.peak), segments=alloc.mapped_ranges())

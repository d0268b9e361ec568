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

One walk of a call serves every caller: ``Process`` runs a sequence of calls (``Call``: shape, runs, when the cache
is emptied, benchmarks, capacity, library-cache keys, the model it runs when not the process's) in one allocator, and
keeps what library caches hold by key across them; ``replay`` is its one-call form. Callers that know a process's
earlier calls (``validate.check.protocol``: the validator's; ``validate.check.probe_replay``: a boundary probe's trials) choose the
keys, evictions and models.

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
from .compiled import compiled
from .prediction import allocations, step_totals
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
    reserved_peak_bytes: int = 0          # max reserved over the process so far: history, prelude, earlier calls
    allocated_peak_bytes: int = 0         # max allocated over the process so far
    oom: OomEvent | None = field(default=None)
    segments: tuple[MappedRange, ...] = ()   # memory_snapshot's segments at the end (or at the failing request)
    allocated_before: tuple[int, ...] = ()   # memory_allocated as each measured step starts (the validator's baseline)
    reserved_before: tuple[int, ...] = ()    # memory_reserved there
    allocated_after: tuple[int, ...] = ()    # memory_allocated after each measured step, its dropped tensors freed
    reserved_after: tuple[int, ...] = ()     # memory_reserved there
    segments_made: int = 0                   # cudaMalloc segments the process made (``placement``: only their order counts)

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
    first_call: frozenset[int] = frozenset()   # allocations only the first run makes (``Buffer.first_call``)


@lru_cache(maxsize=256)
def _schedule(model: LifetimeModel) -> _Schedule:
    """Request-size formulas (a carved workspace is one request) and who is allocated and freed where,
    compiled once per model (models are frozen and hashable)."""
    groups = allocations(model)
    names = tuple(groups)
    fn = compiled(model).requested_fn       # per allocation, in ``allocations`` order
    first = [groups[n][0] for n in names]
    index = model.step_positions()
    alloc_at = [index[b.allocated_at] for b in first]
    free_at = [None if b.freed_after is None else index[b.freed_after] for b in first]
    made_at: list[list[int]] = [[] for _ in model.steps]      # by step: linear in allocations and steps
    freed_at: list[list[int]] = [[] for _ in model.steps]
    for k in range(len(names)):
        made_at[alloc_at[k]].append(k)
        if free_at[k] is not None:
            freed_at[free_at[k]].append(k)
    harness, work = [], []
    for i, s in enumerate(model.steps):
        if s.phase == "harness":
            harness.append((i, tuple(made_at[i])))
        else:
            work.append((i, tuple(made_at[i]), tuple(freed_at[i])))
    released = tuple(k for k in range(len(names)) if free_at[k] is None and not first[k].cached
                     and model.steps[alloc_at[k]].phase != "harness")
    return _Schedule(fn, names, tuple(harness), tuple(work),
                     frozenset(k for k in range(len(names)) if first[k].cached), released,
                     frozenset(k for k in range(len(names)) if getattr(first[k], "first_call", False)))


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


def requested_peak(model, shape: Shape) -> int:
    """Peak of the tensors' own byte sizes (no 512-byte blocks): what
    ``torch.cuda.memory_stats()['requested_bytes.all.peak']`` reports."""
    sizes = request_sizes(model, shape)           # per allocation (a carved workspace is one request)
    first: dict[str, int] = {}
    for i, b in enumerate(model.buffers):
        first.setdefault(b.carved_from or b.name, i)
    ranges = model.live_ranges()
    return max(step_totals([sizes[n] for n in first], [ranges[i] for i in first.values()], len(model.steps)))


@dataclass(frozen=True)
class Call:
    """One call of a process at ``shape``: the harness allocates its inputs, then ``runs`` forward+backward runs
    (outputs and gradients dropped after each). ``empty_cache_before_run``: the run before which the harness calls
    ``torch.cuda.empty_cache`` (the validator's protocol v3+: 1, after the first call), None: never.
    ``benchmarks``: steps whose first launch autotunes (``autotune.benchmarking_steps``). ``capacity_bytes``: what the
    allocator may reserve during this call (None: no limit). ``cache_keys``: buffer name -> library-cache key of each
    cached buffer and retained input (the caller decides keys: the estimator does not know the validator's process);
    a cached buffer with no key here is this call's own. ``evicts``: keys of held entries this call's first step
    drops (a bounded library cache). ``growth``: (step, bytes) where the process's memory outside PyTorch grows during
    the first run (the driver raising the stack limit when a kernel with a larger frame launches,
    ``estimator.process.memory``): the capacity shrinks by that much at the step's launch, after its allocations and before
    its benchmarks. ``model``: what this call runs (None: the process's model); a process whose calls run different
    models (a layer harness's warmup is one default layer, its shapes their own stacks) shares library-cache entries
    between them through ``cache_keys`` alone."""
    shape: Shape
    runs: int
    empty_cache_before_run: int | None = None
    benchmarks: tuple[str, ...] = ()
    capacity_bytes: int | None = None
    cache_keys: tuple[tuple[str, object], ...] = ()
    evicts: tuple[object, ...] = ()
    growth: tuple[tuple[str, int], ...] = ()
    model: LifetimeModel | None = None


@dataclass(frozen=True)
class CallReplay:
    """What one call did: max_memory_allocated / max_memory_reserved of each run that completed (peaks reset before
    each run), and where it ran out of memory."""
    peaks: tuple[int, ...]
    reserved_peaks: tuple[int, ...]
    oom: OomEvent | None = None
    allocated_before: tuple[int, ...] = ()     # memory_allocated and memory_reserved as each run starts, peaks reset
    reserved_before: tuple[int, ...] = ()
    allocated_after: tuple[int, ...] = ()      # memory_allocated and memory_reserved after each completed run
    reserved_after: tuple[int, ...] = ()


def _own_key(call_number: int, name: str) -> tuple:
    """The cache key of a cached buffer the caller gave no key: an entry no other call of the process hits."""
    return (Process, call_number, name)


class _EmptyTensor:
    """The handle of a zero-byte request: an empty tensor takes no block (``CachingAllocator.malloc``)."""


class _CallState:
    """What a call in progress runs (its model and compiled schedule), holds, by allocation index, and where it is
    (for an OOM)."""

    def __init__(self, process: Process, call: Call, number: int):
        model = call.model if call.model is not None else process.model
        sch = _schedule(model)
        self.model, self.sch = model, sch
        self.call, self.number = call, number
        self.sizes = [int(v) for v in sch.sizes_fn(*call.shape.values())]
        self.keys = dict(call.cache_keys)
        for k in sch.cached:
            self.keys.setdefault(sch.names[k], _own_key(number, sch.names[k]))
        self.held_at = {step: {sch.names.index(n) for n in names}
                        for step, names in held_until_gc(model, call.shape, call.benchmarks).items()}
        self.inputs: dict[int, object] = {}
        self.live: dict[int, object] = {}
        self.awaiting_gc: list = []
        self.made_at: dict[object, tuple[int, int]] = {}   # library-cache key -> (run, step) where this call made it
        self.at = (-1, -1)                      # (run, step index) in progress; (-1, -1): the harness's inputs
        self.where = ("history", "history", -1)


class Process:
    """One process's caching allocator across calls (``Call``): what a library cache holds survives its call, by
    key (``held``); everything else a call allocated is dropped at its end (``end_call``), as the harness does.
    ``record``: log the calls' allocator operations, so that they can be handed to ``replay`` as a ``Prelude``
    (a recording process takes no ``before``). ``placement``: where cudaMalloc puts each segment (``placement.Placement``'s
    ``address``; None: the allocator model's own rule). ``capacity_bytes``: what the allocator may reserve, until a
    ``Call`` says otherwise. ``model``: what a ``Call`` without its own model runs."""

    def __init__(self, model: LifetimeModel, conf: AllocatorConf = DEFAULT_CONF, capacity_bytes: int | None = None,
                 device_total_bytes: int | None = None, record: bool = False, placement=None):
        self.model = model
        self.alloc = CachingAllocator(conf, capacity_bytes, device_total_bytes, placement)
        self.held: dict[object, object] = {}        # library-cache key -> block
        self.calls = 0
        self.state: _CallState | None = None        # the call in progress (or the last one, until end_call)
        self.pending_evictions: list = []           # blocks the next call's first step frees (a prelude's)
        self.ops: list[tuple] | None = [] if record else None
        self.tags: dict[int, int] = {}              # id(handle) -> tag of its malloc in ``ops``
        self._made: dict[int, tuple[int, int]] = {}   # id(handle) -> (malloc number, bytes it asked for)
        self._mallocs = 0
        self.top_alloc = self.top_reserved = 0

    # ------------------------------------------------------------------ allocator operations (recorded)
    def _malloc(self, nbytes: int) -> object:
        handle = self.alloc.malloc(nbytes) or _EmptyTensor()
        self._made[id(handle)] = (self._mallocs, nbytes)
        self._mallocs += 1
        if self.ops is not None:
            self.tags[id(handle)] = len(self.ops)
            self.ops.append(("malloc", len(self.ops), nbytes))
        return handle

    def made(self, handle: object) -> tuple[int, int]:
        """(malloc number, bytes asked for before rounding) of a block this process still holds."""
        return self._made[id(handle)]

    def _free(self, handle: object) -> None:
        self._made.pop(id(handle), None)
        if self.ops is not None:
            self.ops.append(("free", self.tags.pop(id(handle))))
        self.alloc.free(None if isinstance(handle, _EmptyTensor) else handle)

    def _empty_cache(self) -> None:
        """``torch.cuda.empty_cache``: ``release_cached_blocks`` (CUDACachingAllocator.cpp, ``CachingAllocator``)."""
        if self.ops is not None:
            self.ops.append(("empty_cache",))
        self.alloc.empty_cache()

    def _collect(self, handles: list) -> None:
        while handles:
            self._free(handles.pop(0))

    def reset_peak(self) -> None:
        """``torch.cuda.reset_peak_memory_stats`` (CUDACachingAllocator.cpp ``resetPeakStats``: every peak restarts from
        the current value); the process's own maxima keep what came before."""
        self.top_alloc, self.top_reserved = self.allocated_peak_bytes, self.reserved_peak_bytes
        self.alloc.reset_peak()

    @property
    def allocated_peak_bytes(self) -> int:
        return max(self.top_alloc, self.alloc.peak)

    @property
    def reserved_peak_bytes(self) -> int:
        return max(self.top_reserved, self.alloc.peak_reserved)

    # ------------------------------------------------------------------ what came before
    def before(self, history: tuple[int, ...], prelude: Prelude | None) -> None:
        """What the process did before its next call: leftovers (``history``, never freed) or earlier calls whole
        (``prelude``): the blocks it reuses are held under the next call's own keys (so that call must give no
        ``cache_keys`` for them), its evictions are pending."""
        if self.ops is not None:
            raise ValueError("a recording Process takes no before(): its log would miss those operations")
        for nbytes in history:
            self.alloc.malloc(nbytes)
        if prelude:
            kept = _run_prelude(self.alloc, prelude)
            for name, tag in prelude.reused:
                self.held[_own_key(self.calls, name)] = kept.pop(tag)
            self.pending_evictions = [kept.pop(tag) for tag in prelude.evicted]

    def prelude(self, cache_keys: tuple[tuple[str, object], ...], evicts: tuple[object, ...]) -> Prelude:
        """The recorded operations as a ``Prelude`` for a next call with these keys and evictions."""
        if self.ops is None:
            raise ValueError("prelude() needs a Process made with record=True")
        reused = tuple((name, self.tags[id(self.held[key])]) for name, key in cache_keys if key in self.held)
        return Prelude(tuple(self.ops), reused, tuple(self.tags[id(self.held[key])] for key in evicts))

    # ------------------------------------------------------------------ one call
    def _malloc_at(self, st: _CallState, i: int, k: int, run: int) -> object:
        st.where = (st.model.steps[i].name, st.sch.names[k], run)
        return self._malloc(st.sizes[k])

    def _evict(self, st: _CallState) -> None:
        """What a bounded library cache pushes out, dropped as the first run starts: after the call's inputs, before
        any allocation of its steps (FLA's tensor_cache appends the call's entry in its first steps)."""
        self._collect(self.pending_evictions)
        self._collect([self.held.pop(key) for key in st.call.evicts if key in self.held])

    def _step(self, st: _CallState, i: int, made: tuple[int, ...], freed: tuple[int, ...], run: int) -> None:
        """One model step; in the first run also benchmarks and arguments held until a GC. A cached buffer is
        allocated only when no entry with its key is held (a cache hit reuses the block)."""
        name, first = st.model.steps[i].name, run == 0
        st.at = (run, i)
        for k in made:
            if not first and k in st.sch.first_call:
                continue                               # a later call hits the cache this temporary fills
            if k not in st.sch.cached:
                st.live[k] = self._malloc_at(st, i, k, run)
            elif st.keys[st.sch.names[k]] not in self.held:
                key = st.keys[st.sch.names[k]]
                self.held[key] = self._malloc_at(st, i, k, run)
                st.made_at[key] = (run, i)
        if first:
            self._grow(st, name)
        if first and name in st.call.benchmarks:
            self._collect(st.awaiting_gc)              # this step's compile runs Python's collector
            for _ in range(st.call.benchmarks.count(name)):
                st.where = (name, FLUSH_BUFFER, run)
                self._free(self._malloc(TRITON_L2_FLUSH_BYTES))
        for k in freed:
            if not first and k in st.sch.first_call:
                continue
            if first and k in st.held_at.get(name, ()):
                st.awaiting_gc.append(st.live.pop(k))
            else:
                self._free(st.live.pop(k))

    def _grow(self, st: _CallState, step: str) -> None:
        """The process's own memory grows at this step's launch (``Call.growth``): cudaMalloc sees that much less.
        Not modelled: a launch the driver cannot grant its local memory (it fails in the driver, not in PyTorch)."""
        for at, nbytes in st.call.growth:
            if at == step and self.alloc.capacity is not None:
                self.alloc.capacity -= nbytes

    def _end_of_run(self, st: _CallState) -> None:
        self._collect(st.awaiting_gc)     # no later compile in the first run: collected by its end at the latest
        for k in st.sch.released:
            if k in st.live:
                self._free(st.live.pop(k))    # the harness drops the output and the gradients

    def _runs(self, st: _CallState, figures: dict[str, list]) -> None:
        """Each run of the call; ``figures``: name -> one figure per run (``CallReplay``'s fields)."""
        for i, made in st.sch.harness:
            for k in made:
                st.inputs[k] = self._malloc_at(st, i, k, -1)
        for run in range(st.call.runs):
            if run == st.call.empty_cache_before_run:
                self._empty_cache()
            self.reset_peak()
            figures["allocated_before"].append(self.alloc.allocated)
            figures["reserved_before"].append(self.alloc.reserved)
            if run == 0:
                self._evict(st)
            for i, made, freed in st.sch.work:
                self._step(st, i, made, freed, run)
            self._end_of_run(st)
            figures["peaks"].append(self.alloc.peak)
            figures["reserved_peaks"].append(self.alloc.peak_reserved)
            figures["allocated_after"].append(self.alloc.allocated)
            figures["reserved_after"].append(self.alloc.reserved)

    def call(self, call: Call) -> CallReplay:
        """Run one call; with a capacity it may stop at the failing request (its tensors stay until ``end_call``).
        ``CallReplay``'s peaks are each run's (``reset_peak`` before each)."""
        if self.state is not None:
            raise ValueError("end_call() the previous call first")
        self.state = st = _CallState(self, call, self.calls)
        self.calls += 1
        if call.capacity_bytes is not None:
            self.alloc.capacity = call.capacity_bytes
        self.reset_peak()
        figures: dict[str, list] = {k: [] for k in ("peaks", "reserved_peaks", "allocated_before", "reserved_before",
                                                   "allocated_after", "reserved_after")}
        oom = None
        try:
            self._runs(st, figures)
        except AllocatorOutOfMemory as err:
            step, buffer, run = st.where
            oom = OomEvent(run, run == 0, step, buffer, err.oom)
        return CallReplay(oom=oom, **{k: tuple(v) for k, v in figures.items()})

    def end_call(self, failed: bool = False) -> None:
        """The harness drops the call's tensors (also when it failed: the exception unwinds them) and its inputs,
        of which a library cache may keep one by key, then empties the cache (``torch.cuda.empty_cache``).
        ``failed``: the call ran out of memory; what its library caches made at the failing step is dropped with
        it, and an input is kept only if the call got past its inputs (a library saw it)."""
        st, self.state = self.state, None
        if st is None:
            raise ValueError("no call in progress")
        self._collect(st.awaiting_gc)
        self._collect(list(st.live.values()))
        if failed:
            self._collect([self.held.pop(key) for key, at in st.made_at.items() if at >= st.at])
        for k, handle in st.inputs.items():
            key = st.keys.get(st.sch.names[k])
            if key is not None and key not in self.held and not (failed and st.at[0] < 0):
                self.held[key] = handle
            else:
                self._free(handle)
        self._empty_cache()

    def result(self, run: CallReplay, skip_runs: int = 0) -> Replay:
        """The call as a ``Replay``: its runs' peaks after the first ``skip_runs``, the process's maxima so far (history
        and earlier calls included), and the allocator's segments where the call stopped."""
        return Replay(run.peaks[skip_runs:], self.alloc.reserved, run.reserved_peaks[skip_runs:],
                      self.reserved_peak_bytes, self.allocated_peak_bytes, run.oom, self.alloc.mapped_ranges(),
                      run.allocated_before[skip_runs:], run.reserved_before[skip_runs:], run.allocated_after[skip_runs:],
                      run.reserved_after[skip_runs:], self.alloc._segments)


def replay(model: LifetimeModel, shape: Shape, warm_steps: int = 1, measured_steps: int = 3,
           empty_cache_after_warmup: bool = True, history: tuple[int, ...] = (),
           conf: AllocatorConf = DEFAULT_CONF, capacity_bytes: int | None = None,
           benchmarks: tuple[str, ...] = (), prelude: Prelude | None = None,
           device_total_bytes: int | None = None, growth: tuple[tuple[str, int], ...] = (), placement=None) -> Replay:
    """``history``: request sizes of allocations the process made before this shape's inputs and still
    holds (the validator's warmup leftovers, ``livebytes.validate`` computes them); allocated first, in order.
    ``capacity_bytes``: what the allocator may reserve (device total minus the process's other memory).
    ``benchmarks``: steps at which the first call autotunes a kernel at a key new to the process
    (``autotune.benchmarking_steps``): Triton's L2-flush buffer is allocated and freed there, after the
    step's allocations and before its frees.
    ``prelude``: the earlier calls replayed whole (instead of ``history``).
    ``device_total_bytes``: the device's memory, which sizes an expandable segment's address range
    (``allocator.expandable_address_space``); None: no limit, which changes nothing unless pages get unmapped
    (an out-of-memory retry against ``capacity_bytes``, or ``empty_cache``).
    A benchmark whose kernel has a failing config keeps the step's dropped arguments (``held_until_gc``)
    until the next benchmarking step's compile collects them: freed there after its allocations, before its
    L2-flush buffer (the order a cold report process's trace shows, validate/data/records/).
    ``growth``: where the first run's launches grow the process's own memory (``Call.growth``); ``capacity_bytes`` is
    the capacity at the call's start. ``placement``: where cudaMalloc puts each segment (``placement.Placement.address``;
    None: the allocator model's own rule, each new segment below every earlier one)."""
    proc = Process(model, conf, capacity_bytes, device_total_bytes, placement=placement)
    try:
        proc.before(history, prelude)
    except AllocatorOutOfMemory as err:
        return proc.result(CallReplay((), (), OomEvent(-1, False, "history", "history", err.oom)))
    run = proc.call(Call(shape, warm_steps + measured_steps, warm_steps if empty_cache_after_warmup else None,
                         benchmarks, capacity_bytes, growth=growth))
    return proc.result(run, warm_steps)

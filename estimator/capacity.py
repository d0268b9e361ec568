"""The verdict: does a shape run on a device, or where does it go out of memory?

Three levels (docs/capacity.md): *allocated* (the model's peak of live blocks), *reserved* (the
segments the caching allocator holds: ``replay``), *device* (reserved plus the process's own memory
outside PyTorch: CUDA context, loaded kernel modules, what Triton's autotuning leaves behind).
cudaMalloc sees the device total minus that process memory; the replay runs against it with the
allocator's release-and-retry (``allocator.CachingAllocator.malloc``) and either fits or stops at
the failing request with PyTorch's figures.

The sequence simulated is what a process runs: a fresh start, the inputs, the first call at this
shape (library caches allocated), then steady steps. ``protocol=True`` runs the validator's
sequence instead (one target warmup step, ``empty_cache``, three measured steps) for the boundary
records; its small-shape warmup comes in as a ``prelude`` (``validate.check.protocol.prelude``: replayed whole) or,
coarser, as ``history`` (its leftovers put into an empty allocator).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .allocator import DEFAULT_CONF, AllocatorConf
from .autotune import benchmarking_steps
from .cache import cached
from .devices import Device
from .errors import LivebytesError
from .parallel import Evaluator, worker_count
from .placement import Placement, order_of, placements
from .process.memory import Figure, ProcessMemory, process_memory  # noqa: F401  (re-exported: the verdict's process)
from .replay import Call, OomEvent, Prelude, Replay, replay
from .shapes import Shape

if TYPE_CHECKING:
    from .buffers import LifetimeModel

TRITON_CACHE_STATES = ("cold", "warm")      # --triton-cache
STEADY_STEPS = 2     # steady steps after the first call: the second one shows any layout the first left


def check_state(triton_cache: str) -> str:
    if triton_cache not in TRITON_CACHE_STATES:
        auto = ("; auto is validate's (a GPU run's cache: warm when a committed autotune file matches it), a prediction "
                "states which" if triton_cache == "auto" else "")
        raise LivebytesError(f"--triton-cache must be one of {', '.join(TRITON_CACHE_STATES)}, got {triton_cache!r}{auto}")
    return triton_cache


def cold_benchmarks(model: LifetimeModel, shape: Shape, triton_cache: str,
                    tuned_at_tokens: int | None = None) -> tuple[str, ...]:
    """Steps whose first call at ``shape`` benchmarks (``autotune.benchmarking_steps``). ``cold``: every declared
    autotuned launch benchmarks at a key the process has not tuned; with ``tuned_at_tokens`` the process's first
    call came earlier, at MBS 1 x that many tokens of the same heads and dims (the validator's warmup), so only
    kernels whose key differs here benchmark (l2norm's token bucket). ``warm``: the on-disk cache holds every key."""
    if check_state(triton_cache) == "warm":
        return ()
    tuned: frozenset = frozenset()
    if tuned_at_tokens is not None:
        earlier = Shape(1, tuned_at_tokens, shape.heads, shape.dim, shape.v_heads, shape.dim_v)
        _, tuned = benchmarking_steps(model, earlier, frozenset())
    return benchmarking_steps(model, shape, tuned)[0]


def triton_cache_matters(model: LifetimeModel, device: Device) -> bool:
    """Whether the Triton cache state changes anything this simulation counts for ``model``: it declares
    autotuned launches (``cold_benchmarks``) or its library's process memory differs cold vs warm. False for
    the cuDNN models (no Triton kernels): a --triton-cache given for them would be silently ignored."""
    cold, warm = (process_memory(device, model.key, state).bytes for state in TRITON_CACHE_STATES)
    return bool(model.autotuned) or cold != warm


@dataclass(frozen=True)
class ReservedBand:
    """The reserved peak of one process's run under every placement of its segments the driver was seen to give
    (``placement.placements``: the model's own rule and each committed allocator trace's order): its low and high ends
    and the placement that gives each (the first in ``placements`` order where several tie)."""
    low_bytes: int
    high_bytes: int
    low_placement: str
    high_placement: str
    placements: int               # placements the band spans
    replays: int                  # distinct runs among them (``placement_runs``: a run ordered alike is replayed once)

    @property
    def width_bytes(self) -> int:
        return self.high_bytes - self.low_bytes


HIGH_END = "high end"           # what decides a case no record measured
MEASURED = "measured"           # a measured case: the placement that replays its record


def band_of(runs: list[tuple[Placement, Replay]]) -> ReservedBand:
    """The band of ``runs`` (each placement's run without a limit): its reserved peaks' least and greatest."""
    low = min(runs, key=lambda pr: pr[1].reserved_peak_bytes)
    high = max(runs, key=lambda pr: pr[1].reserved_peak_bytes)
    return ReservedBand(low[1].reserved_peak_bytes, high[1].reserved_peak_bytes, low[0].name, high[0].name, len(runs),
                        len({id(r) for _, r in runs}))


@dataclass(frozen=True)
class Verdict:
    device: Device
    conf: AllocatorConf
    process: ProcessMemory
    allocated_peak_bytes: int     # whole run, first call included
    reserved_peak_bytes: int      # max_memory_reserved over the whole run (without a limit when it goes out of memory)
    oom: OomEvent | None          # the run against the capacity: None = it fits
    model_key: str = ""           # what was judged: the model and its options (contract), at ``shape``
    options: tuple = ()
    shape: Shape | None = None
    band: ReservedBand | None = None   # the reserved peak under every placement (``reserved_band``)
    decided_by: tuple[str, str] = (HIGH_END, "model")   # (HIGH_END or MEASURED, the placement whose run the figures are)

    @property
    def total_bytes(self) -> int:
        return self.device.capacity_bytes

    @property
    def capacity_bytes(self) -> int:
        """What cudaMalloc can hand this process's allocator (its process memory at the high end where estimated)."""
        return self.total_bytes - self.process.high_bytes

    @property
    def device_need_bytes(self) -> int:
        return self.reserved_peak_bytes + self.process.high_bytes

    @property
    def fits(self) -> bool:
        return self.oom is None

    @property
    def headroom_bytes(self) -> int:
        """Device memory left at the reserved peak (negative: short by that much, before the retry's release)."""
        return self.total_bytes - self.device_need_bytes


def _run_kwargs(model: LifetimeModel, shape: Shape, conf: AllocatorConf, triton_cache: str,
                history: tuple[int, ...] = (), protocol: bool = False, prelude: Prelude | None = None,
                tuned_at_tokens: int | None = None) -> dict:
    """The replay of a process's sequence (``protocol``: the validator's: ``empty_cache`` after the first call, three
    measured steps): first call, then steady steps."""
    return {"warm_steps": 1, "measured_steps": 3 if protocol else STEADY_STEPS, "empty_cache_after_warmup": protocol,
            "history": history, "prelude": prelude, "conf": conf,
            "benchmarks": cold_benchmarks(model, shape, triton_cache, tuned_at_tokens)}


def allocated_peak(model: LifetimeModel, shape: Shape, conf: AllocatorConf = DEFAULT_CONF,
                   triton_cache: str = "cold") -> int:
    """What ``torch.cuda.max_memory_allocated`` shows after a fresh process's run at ``shape`` (no device limit):
    the allocator replay, first call included, blocks as the allocator hands them out (a block it does not split
    counts whole), so at least the model's 512-byte block sum (``engine.predict``)."""
    check_state(triton_cache)
    return replay(model, shape, **_run_kwargs(model, shape, conf, triton_cache)).allocated_peak_bytes


def placement_runs(model: LifetimeModel, shape: Shape, kw: dict,
                   among: tuple[Placement, ...] | None = None) -> list[tuple[Placement, Replay]]:
    """The run (``replay`` with ``kw``, no limit) under each placement (``among``; None: every one,
    ``placement.placements``). Expandable segments map pages into one reserved range per pool: where cudaMalloc puts a
    segment decides nothing, so one run stands for every placement. A placement that gives the segments an earlier run
    made the order that run gave them makes the same run (``placement.order_of``): replayed once."""
    among = placements() if among is None else among
    if kw["conf"].expandable_segments:
        among = among[:1]
    parts = _runs_key(model, shape, kw, among)
    if parts is None:
        return _replayed(model, shape, kw, among)
    distinct, which = cached(parts, lambda: _kept(_replayed(model, shape, kw, among)))
    return [(p, distinct[i]) for p, i in zip(among, which)]


def _runs_key(model: LifetimeModel, shape: Shape, kw: dict, among: tuple[Placement, ...]) -> tuple | None:
    """What the runs without a limit depend on, to keep them on disk (``cache.cached``, beside the model's entry):
    the model's cache entry (``CompiledModel.identity``: its key, options and device build facts; not the device's
    name or memory), the shape, the sequence and the placements. The device's total counts only for expandable
    segments (their address range). None: not kept (a model with no entry, or a ``prelude``: the validator's)."""
    identity = getattr(model, "identity", "")
    if not identity or kw["prelude"] is not None or kw.get("capacity_bytes") is not None:
        return None             # (a run against a capacity may stop out of memory: never kept)
    expandable = kw["conf"].expandable_segments      # what the replay reads of the configuration (not its source)
    sequence = tuple(sorted((k, repr(expandable if k == "conf" else v)) for k, v in kw.items()
                            if k != "device_total_bytes" or expandable))
    return ("runs", identity, tuple(shape.values()), sequence, repr(among))


def _kept(runs: list[tuple[Placement, Replay]]) -> tuple[tuple[Replay, ...], tuple[int, ...]]:
    """``runs`` as its distinct replays and each placement's index among them (one run shared by several placements
    stays one: ``band_of`` counts them)."""
    distinct: list[Replay] = []
    for _, r in runs:
        if not any(r is d for d in distinct):
            distinct.append(r)
    return tuple(distinct), tuple(next(i for i, d in enumerate(distinct) if d is r) for _, r in runs)


def _replayed(model: LifetimeModel, shape: Shape, kw: dict, among: tuple[Placement, ...]) -> list[tuple[Placement, Replay]]:
    """Each placement's run, as many at once as there are workers (``parallel.Evaluator``, forked: the runs are
    independent); a placement that orders the segments an earlier run made as that run's did takes that run."""
    runs: list[tuple[Placement, Replay]] = []
    with Evaluator(lambda p: replay(model, shape, placement=p.address, **kw), worker_count()) as evaluator:
        for start in range(0, len(among), evaluator.workers):
            window = among[start:start + evaluator.workers]
            known = [_same_run(p, runs) for p in window]
            fresh = iter(evaluator.map([p for p, r in zip(window, known) if r is None]))
            for p, r in zip(window, known):
                if r is None:       # replayed beside an earlier placement of the window with its order: that run
                    mine = next(fresh)
                    r = _same_run(p, runs) or mine
                runs.append((p, r))
    return runs


def _same_run(p: Placement, runs: list[tuple[Placement, Replay]]) -> Replay | None:
    """The earlier run whose segments ``p`` orders as that run's placement did (``placement.order_of``), if any."""
    return next((r for q, r in runs if order_of(p, r.segments_made) == order_of(q, r.segments_made)), None)


def reserved_band(model: LifetimeModel, shape: Shape, conf: AllocatorConf = DEFAULT_CONF,
                  triton_cache: str = "cold", device_total_bytes: int | None = None) -> ReservedBand:
    """A fresh process's reserved peak at ``shape`` under every placement, without a device limit."""
    kw = _run_kwargs(model, shape, conf, check_state(triton_cache))
    kw["device_total_bytes"] = device_total_bytes
    return band_of(placement_runs(model, shape, kw))


def verdict(model: LifetimeModel, shape: Shape, device: Device, conf: AllocatorConf = DEFAULT_CONF,
            triton_cache: str = "cold", history: tuple[int, ...] = (), protocol: bool = False,
            prelude: Prelude | None = None, tuned_at_tokens: int | None = None, triton: str | None = None,
            measured: Placement | None = None) -> Verdict:
    """Run the process's sequence (or the validator's, ``protocol=True``) without a limit under every placement of its
    segments (``placement_runs``: the band), then, for each whose reserved peak exceeds the capacity, once more
    against it: the allocator may still fit by releasing cached segments, or stop at the failing request.
    ``measured``: the case was measured, and this placement's run replays its record: that run alone decides. Else the
    band's high end decides: the case runs when it runs under every placement, and its figures are those of the
    placement with the highest reserved peak (or of the first, highest first, that runs out of memory).
    ``tuned_at_tokens``: the process's first call, which autotuned, came earlier at MBS 1 x that many tokens
    (``cold_benchmarks``); its memory is the cold one. ``triton``: the Triton version whose kernels' process memory counts
    (``process.memory.process_memory``; None: the model's default)."""
    earlier_call = bool(history) or prelude is not None or protocol or tuned_at_tokens is not None
    proc = process_memory(device, model, triton_cache, shape, raised_before=earlier_call, triton=triton)
    kw = _run_kwargs(model, shape, conf, triton_cache, history, protocol, prelude, tuned_at_tokens)
    kw["device_total_bytes"] = device.capacity_bytes
    runs = placement_runs(model, shape, kw)
    band = band_of(runs)
    if measured is not None:
        decided = [(measured, next((r for p, r in runs if p.name == measured.name), None)
                    or replay(model, shape, placement=measured.address, **kw))]
    else:       # highest reserved peak first (the first placement of equal ones): the high end's run, then the rest
        decided = sorted(runs, key=lambda pr: -pr[1].reserved_peak_bytes)
    placement, run = decided[0]
    for p, unlimited in decided:
        if unlimited.reserved_peak_bytes <= device.capacity_bytes - proc.high_bytes:
            break           # this one and every lower one never reach the capacity
        limited = _against_capacity(model, shape, device, proc, kw, p)
        if limited.oom is not None:
            placement, run = p, replace(unlimited, oom=limited.oom)
            break
        if p is decided[0][0]:
            run = limited
    return Verdict(device, conf, proc, run.allocated_peak_bytes, run.reserved_peak_bytes, run.oom, model.key,
                   tuple(getattr(model, "options", ())), shape, band,
                   (MEASURED if measured is not None else HIGH_END, placement.name))


def fits(model: LifetimeModel, shape: Shape, device: Device, conf: AllocatorConf = DEFAULT_CONF,
         triton_cache: str = "cold", tuned_at_tokens: int | None = None, triton: str | None = None) -> bool:
    """``verdict(...).oom is None`` with the fewest replays: under each placement, the run against the capacity (where
    the run without a limit never reaches the capacity, that run is this one: the allocator acts on the capacity only
    when a segment would pass it), as many placements at once as there are workers, until a window holds one that runs
    out of memory. The search's test (``planning``: the largest shape
    whose band's high end runs); its answer gets the whole ``verdict``."""
    proc = process_memory(device, model, triton_cache, shape, raised_before=tuned_at_tokens is not None, triton=triton)
    kw = _run_kwargs(model, shape, conf, triton_cache, tuned_at_tokens=tuned_at_tokens)
    kw["device_total_bytes"] = device.capacity_bytes
    among = placements()[:1] if conf.expandable_segments else placements()
    with Evaluator(lambda p: _against_capacity(model, shape, device, proc, kw, p).oom is None, worker_count()) as runs:
        step = runs.workers              # as many placements at once as there are workers, until one fails
        return all(all(runs.map(list(among[i:i + step]))) for i in range(0, len(among), step))


def limited_call(model: LifetimeModel, shape: Shape, v: Verdict) -> Call:
    """The one call ``verdict`` replays against the device for a fresh process (``_against_capacity`` of
    ``_run_kwargs``: first call and steady steps, no protocol, history or earlier tuning), for a caller that walks it
    itself (``snapshot``'s trace of an out-of-memory run)."""
    kw = _run_kwargs(model, shape, v.conf, v.process.triton_cache)
    return Call(shape, kw["warm_steps"] + kw["measured_steps"], None, kw["benchmarks"],
                v.device.capacity_bytes - v.process.start_bytes, growth=v.process.growth)


def _against_capacity(model, shape: Shape, device: Device, proc: ProcessMemory, kw: dict, placement: Placement | None = None):
    """The run against the capacity the process has at the call's start, shrinking where its launches raise the stack
    limit (``ProcessMemory.growth``), under ``placement`` (None: the model's own)."""
    return replay(model, shape, capacity_bytes=device.capacity_bytes - proc.start_bytes, growth=proc.growth,
                  placement=None if placement is None else placement.address, **kw)


def oom_dict(v: Verdict) -> dict | None:
    """The ``oom`` JSON value: null, or where and PyTorch's figures."""
    if v.oom is None:
        return None
    f = v.oom.figures
    return {"run_step": v.oom.run_step, "first_call": v.oom.first_call, "step": v.oom.step, "buffer": v.oom.buffer,
            "request_bytes": f.request_bytes, "tried_bytes": f.tried_bytes, "allocated_bytes": f.allocated_bytes,
            "reserved_bytes": f.reserved_bytes, "reserved_unallocated_bytes": f.reserved_bytes - f.allocated_bytes,
            "free_bytes": f.free_bytes, "total_bytes": v.total_bytes}

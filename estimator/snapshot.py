"""The predicted process in PyTorch's own format: the dictionary ``torch.cuda.memory._snapshot()`` returns (and
``torch.cuda.memory._dump_snapshot`` pickles), which ``torch.cuda._memory_viz`` and https://pytorch.org/memory_viz open.

The process is ``replay``'s (the shape run repeatedly: its inputs, the first call, then steady calls, the cache
emptied after the first; predict's "steady-state allocator replay"), walked through the allocator model with every
operation logged as ``CUDACachingAllocator.cpp`` records a ``TraceEntry`` under ``_record_memory_history``:
``segment_alloc`` (cudaMalloc), ``alloc`` (``malloc``: the request's ``orig_size``), ``free_requested`` and
``free_completed`` (``free``: the block's requested size), ``segment_free`` (``release_cached_blocks``). The
snapshot is taken at the peak of the last call (as a user's ``_dump_snapshot`` at the peak would be): the trace
ends there and ``segments`` are the allocator's state at that moment, each block with its size, requested size,
state and frames. Frames point at the source the model cites for the buffer (file, line, function in the pinned
library), then at the model's step.

A shape that runs out of memory on the device (``capacity.verdict``'s ``oom``) is traced instead through the verdict's
own run against the device's capacity (``capacity.limited_call``), up to the failing request: the allocator's retry
releases its cached segments (``segment_free``), then ``DeviceCachingAllocator::malloc`` records
``record_trace(TraceEntry::OOM, device_free, params.size(), ...)`` (c10/cuda/CUDACachingAllocator.cpp), which
``_memory_snapshot_pickled`` writes as ``{"action": "oom", "device_free": ..., "size": ...}``, with no ``addr``
(torch/csrc/cuda/memory_snapshot.cpp; ``torch/cuda/_memory_viz.py`` and MemoryViz.js read ``size`` and
``device_free``): the trace ends there and ``segments`` are the allocator's state at that moment.

Not modelled: streams (one), CUDA graphs' private pools, ``time_us`` (events are numbered instead),
expandable segments (refused: their mapped ranges are not logged as trace events here). Addresses are compact
(segments back to back from ``BASE_ADDRESS`` in the allocator model's address order: a later cudaMalloc segment
lower, as the driver places them); the model's own addresses only order segments.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .allocator import DEFAULT_CONF, AllocatorConf, AllocatorOutOfMemory, Block, CachingAllocator
from .autotune import FLUSH_BUFFER
from .buffers import Source
from .errors import LivebytesError
from .prediction import allocations
from .replay import Call, Process
from .shapes import Shape
from .capacity import limited_call, oom_dict
from .placement import by_name

if TYPE_CHECKING:
    from .buffers import LifetimeModel
    from .capacity import Verdict

BASE_ADDRESS = 0x7F00_0000_0000
SEGMENT_STRIDE = 1 << 51          # one segment per 2 * ES_ADDRESS_SPACE (allocator.cuda_malloc_address, _new_address)
MODEL_FRAME_FILE = "<livebytes model {key}>"


class _StopAtPeak(Exception):
    pass


class _TracingAllocator(CachingAllocator):
    """The caching allocator model, logging each operation as a ``TraceEntry`` (``frames()``: the allocation in progress)."""

    def __init__(self, conf: AllocatorConf, frames, stop_after: int | None = None, placement=None):
        super().__init__(conf, placement=placement)
        self.events: list[dict] = []
        self.requested: dict[int, int] = {}         # id(block) -> bytes asked for
        self.frames_of: dict[int, list] = {}        # id(block) -> frames of its malloc
        self.live_requested = 0
        self._frames, self._stop_after = frames, stop_after

    def _log(self, action: str, addr: int, size: int, frames: list | None = None) -> None:
        self.events.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": len(self.events),
                            "frames": frames or []})

    def alloc_block(self, size: int, alloc_size: int, small: bool) -> Block | None:
        block = super().alloc_block(size, alloc_size, small)
        if block is not None:
            self._log("segment_alloc", block.addr, block.size)
        return block

    def release_cached_blocks(self) -> None:
        for pool in self._pools.values():
            for _, _, b in pool:
                if b.prev is None and b.next is None:       # a segment that is one free block: cudaFree'd
                    self._log("segment_free", b.addr, b.size)
        super().release_cached_blocks()

    empty_cache = release_cached_blocks

    def malloc(self, nbytes: int) -> Block | None:
        try:
            block = super().malloc(nbytes)
        except AllocatorOutOfMemory as err:     # after the retry's segment_free events, as PyTorch records it
            self.events.append({"action": "oom", "device_free": err.oom.free_bytes, "size": err.oom.request_bytes,
                                "stream": 0, "time_us": len(self.events), "frames": self._frames()})
            raise
        if block is not None:
            frames = self._frames()
            self.requested[id(block)], self.frames_of[id(block)] = nbytes, frames
            self.live_requested += nbytes
            self._log("alloc", block.addr, nbytes, frames)
            if self._stop_after is not None and len(self.events) >= self._stop_after:
                raise _StopAtPeak
        return block

    def free(self, block: Block | None) -> None:
        if block is not None:
            nbytes, frames = self.requested.pop(id(block)), self.frames_of.pop(id(block))
            self.live_requested -= nbytes
            self._log("free_requested", block.addr, nbytes, frames)
            self._log("free_completed", block.addr, nbytes, frames)
        super().free(block)

    def segment_chains(self) -> list[list[Block]]:
        """Every segment's blocks in address order (cached free blocks and allocated ones)."""
        heads = {}
        for b in [e[2] for pool in self._pools.values() for e in pool] + list(self._in_use):
            while b.prev is not None:
                b = b.prev
            heads[id(b)] = b
        chains = []
        for head in sorted(heads.values(), key=lambda b: b.addr):
            chain, b = [], head
            while b is not None:
                chain.append(b)
                b = b.next
            chains.append(chain)
        return chains


def _frame_table(model: LifetimeModel) -> dict[str, dict]:
    """Allocation name -> the frame of the source its (first) buffer cites."""
    return {name: source_frame(regions[0].source) for name, regions in allocations(model).items()}


SOURCE_TEXT = re.compile(r"(?P<file>\S+?)(?::(?P<line>\d+))? (?P<function>.*?)(?:: .*)?")


def source_frame(source) -> dict:
    """A buffer's source as a snapshot frame: a ``buffers.Source``, or the text a compiled model keeps of it
    (``str(Source)``: ``file:line function: quote``, the line and the quote where known)."""
    if isinstance(source, Source):
        return {"filename": source.file, "line": int(source.line or 0), "name": source.function}
    m = SOURCE_TEXT.fullmatch(str(source))
    if m is None:
        return {"filename": str(source), "line": 0, "name": ""}
    return {"filename": m["file"], "line": int(m["line"] or 0), "name": m["function"]}


def _tracer(model: LifetimeModel, conf: AllocatorConf, stop_after: int | None, placement=None):
    proc = Process(model, conf)
    table, steps = _frame_table(model), {s.name: i for i, s in enumerate(model.steps)}
    model_file = MODEL_FRAME_FILE.format(key=model.key)

    def frames() -> list:
        step, buffer, run = proc.state.where if proc.state is not None else ("?", "?", -1)
        inner = table.get(buffer, {"filename": "triton/testing.py" if buffer == FLUSH_BUFFER else model_file,
                                   "line": 0, "name": buffer})
        call = "inputs" if run < 0 else f"call {run + 1}"
        return [dict(inner), {"filename": model_file, "line": steps.get(step, 0) + 1, "name": f"{step} ({buffer}, {call})"}]
    proc.alloc = _TracingAllocator(conf, frames, stop_after, placement)
    return proc


def _walk(model: LifetimeModel, shape: Shape, conf: AllocatorConf, runs: int, stop_after: int | None):
    proc = _tracer(model, conf, stop_after)
    try:
        proc.call(Call(shape, runs, 1))          # replay's defaults: one warm call, the cache emptied after it
    except _StopAtPeak:
        pass
    return proc


def _peak_event(events: list[dict], last_run_start: int) -> int:
    """The number of events up to and including the allocation that reaches the last call's peak."""
    live, best, at = 0, -1, 0
    for n, e in enumerate(events):
        if e["action"] == "alloc":
            live += e["size"]
        elif e["action"] == "free_completed":
            live -= e["size"]
        if e["action"] == "alloc" and n >= last_run_start and live > best:
            best, at = live, n + 1
    return at


def _compact(events: list[dict]):
    """Allocator-model address -> the snapshot's compact address: segments back to back in the model's address
    order, which keeps best fit's address ties (a cudaMalloc segment lies below the earlier ones)."""
    sizes: dict[int, int] = {}
    for e in events:
        if e["action"] == "segment_alloc":
            sizes.setdefault(e["addr"] // SEGMENT_STRIDE, e["size"])
    base, next_base = {}, BASE_ADDRESS
    for stride in sorted(sizes):
        base[stride] = next_base
        next_base += sizes[stride]

    def where(addr: int) -> int:
        return base[addr // SEGMENT_STRIDE] + addr % SEGMENT_STRIDE
    return where


def _segments(alloc: _TracingAllocator, where) -> list[dict]:
    out = []
    for chain in alloc.segment_chains():
        blocks = [{"address": where(b.addr), "size": b.size,
                   "requested_size": 0 if b.free else alloc.requested[id(b)],
                   "state": "inactive" if b.free else "active_allocated",
                   "frames": [] if b.free else alloc.frames_of[id(b)]} for b in chain]
        active = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        out.append({"device": 0, "address": where(chain[0].addr), "total_size": sum(b.size for b in chain),
                    "allocated_size": active, "active_size": active,
                    "requested_size": sum(b["requested_size"] for b in blocks), "stream": 0,
                    "segment_type": "small" if chain[0].small else "large", "segment_pool_id": (0, 0),
                    "is_expandable": False, "frames": [], "blocks": blocks})
    return out


def _snapshot(alloc: _TracingAllocator, conf: AllocatorConf, simulated: dict) -> dict:
    """The dictionary of the allocator's trace and state, addresses compacted (an ``oom`` event has none)."""
    where = _compact(alloc.events)
    events = [dict(e, addr=where(e["addr"])) if "addr" in e else dict(e) for e in alloc.events]
    return {"segments": _segments(alloc, where), "device_traces": [events],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": conf.text, "expandable_segments": False},
            "livebytes": simulated}


def _simulated(model: LifetimeModel, shape: Shape, calls: int, taken_at: str) -> dict:
    return {"impl": model.key, "device": model.device if isinstance(model.device, str) else model.device.name,
            "shape": shape.as_dict(), "options": dict(model.options), "calls": calls, "taken_at": taken_at}


def oom_snapshot(model: LifetimeModel, shape: Shape, verdict: Verdict) -> dict:
    """The ``_snapshot()`` dictionary of ``verdict``'s out-of-memory run (a fresh process on its device,
    ``capacity.limited_call``, under the placement that ran out, ``Verdict.decided_by``) at the failing request, the
    trace ending with PyTorch's ``oom`` event."""
    if verdict.oom is None:
        raise ValueError("oom_snapshot: the verdict runs; take process_snapshot at its peak")
    call = limited_call(model, shape, verdict)
    proc = _tracer(model, verdict.conf, None, by_name(verdict.decided_by[1]).address)   # the placement that failed
    failed = proc.call(call).oom
    if failed is None or (failed.step, failed.buffer, failed.run_step) != (verdict.oom.step, verdict.oom.buffer,
                                                                         verdict.oom.run_step):
        raise RuntimeError(f"{model.key}: the traced run did not fail where the verdict's did ({verdict.oom.step}, "
                           f"{verdict.oom.buffer})")
    simulated = _simulated(model, shape, call.runs, f"the failing request: out of memory at {failed.step} allocating "
                                                    f"{failed.buffer}")
    return _snapshot(proc.alloc, verdict.conf, simulated | {"oom": oom_dict(verdict)})


def process_snapshot(model: LifetimeModel, shape: Shape, conf: AllocatorConf = DEFAULT_CONF, runs: int = 3,
                     verdict: Verdict | None = None) -> dict:
    """The ``_snapshot()`` dictionary of ``replay``'s process at ``shape`` (``runs`` calls, the cache emptied after the
    first), taken at the peak of the last call; where ``verdict`` (the device's, at this shape and ``conf``) runs out of
    memory, ``oom_snapshot``'s instead. Extra key ``livebytes``: what was simulated."""
    if conf.expandable_segments:
        raise LivebytesError("a snapshot of expandable segments is not modelled (their page mappings are not traced)")
    if verdict is not None and verdict.oom is not None:
        return oom_snapshot(model, shape, verdict)
    if runs < 2:
        raise LivebytesError("a snapshot needs two calls at least: the first call, then a steady one")
    events = _walk(model, shape, conf, runs, None).alloc.events
    last = f"call {runs})"
    start = next(n for n, e in enumerate(events) if e["action"] == "alloc" and e["frames"][-1]["name"].endswith(last))
    stop = _peak_event(events, start)
    at_peak = _walk(model, shape, conf, runs, stop)
    return _snapshot(at_peak.alloc, conf, _simulated(model, shape, runs, "the peak of the last call"))

"""The allocator model against the GPU's own allocator: a device trace (``torch.cuda.memory._record_memory_history``,
``validate/gpu/probes/model_step.py --history``) fed request by request into ``estimator.allocator.CachingAllocator``.

With each new segment placed where the GPU's ``cudaMalloc`` put it (the trace's ``segment_alloc`` addresses), every
block the model hands out must be the GPU's block at the GPU's address, and its reserved bytes the GPU's: that checks
every rule of the model (best fit by size then address, splitting, merging, segment sizes) on tens of thousands of real
requests. With the model's own placement (``allocator.model_placement``: each segment below the one before) what
differs is the driver's placement alone: ties between equal-sized cached blocks of different segments go to the lower
address (CUDACachingAllocator.cpp ``BlockComparatorSize``), so a placement the model does not know can pick another
block, split it elsewhere and, later, cut a segment the GPU did not (or not cut one it did).
"""
from __future__ import annotations

from dataclasses import dataclass

from livebytes.estimator.allocator import Block, CachingAllocator, model_placement


@dataclass(frozen=True)
class TraceReplay:
    requests: int                     # allocations replayed
    segments: tuple[int, ...]         # cudaMalloc sizes the model made, in order
    reserved_peak_bytes: int
    allocated_peak_bytes: int
    allocated_end_bytes: int          # the blocks still live when the trace ends (the record's last allocated-after)
    divergence: tuple | None          # (request number, bytes, model's address, GPU's address) of the first other block


def device_events(snapshot: dict) -> list[tuple[str, int, int]]:
    """(action, address, bytes) of the first device's trace: allocations, completed frees and new segments."""
    keep = ("alloc", "free_completed", "segment_alloc")
    return [(e["action"], int(e["addr"]), int(e["size"])) for e in snapshot["device_traces"][0] if e["action"] in keep]


def replay_trace(snapshot: dict, device_placement: bool = True) -> TraceReplay:
    """The trace's requests through the model; ``device_placement``: segments at the GPU's addresses, in the GPU's
    order (the model's placement otherwise)."""
    events = device_events(snapshot)
    gpu_segments = [addr for action, addr, _ in events if action == "segment_alloc"]
    made: list[int] = []

    def place(number: int, nbytes: int) -> int:
        made.append(nbytes)
        return gpu_segments[number - 1] if device_placement else model_placement(number, nbytes)
    alloc = CachingAllocator(placement=place)
    live: dict[int, Block] = {}
    divergence, requests = None, 0
    for action, addr, nbytes in events:
        if action == "alloc":
            block = alloc.malloc(nbytes)
            requests += 1
            if device_placement and divergence is None and block.addr != addr:
                divergence = (requests, nbytes, block.addr, addr)
            live[addr] = block
        elif action == "free_completed":
            alloc.free(live.pop(addr))
    return TraceReplay(requests, tuple(made), alloc.peak_reserved, alloc.peak, sum(b.size for b in live.values()),
                       divergence)

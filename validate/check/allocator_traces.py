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

import gzip
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from livebytes.estimator.allocator import Block, CachingAllocator, model_placement
from livebytes.estimator.placement import PLACEMENTS_FILE, Placement, ranks_of
from .explain import _PlainUnpickler

SNAPSHOTS = Path(__file__).parents[1] / "data" / "records" / "models" / "snapshots"
SUFFIX = ".snapshot.pickle.gz"


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


def replay_trace(snapshot: dict, device_placement: bool = True, placement: Placement | None = None) -> TraceReplay:
    """The trace's requests through the model; ``device_placement``: segments at the GPU's addresses, in the GPU's
    order (the model's placement otherwise); ``placement``: a placement of ``placement.py`` instead (its ranks)."""
    events = device_events(snapshot)
    gpu_segments = [addr for action, addr, _ in events if action == "segment_alloc"]
    made: list[int] = []

    def place(number: int, nbytes: int) -> int:
        made.append(nbytes)
        if placement is not None:
            return placement.address(number, nbytes)
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


def read_snapshot(path: Path) -> dict:
    """A committed trace (gzip of ``torch.cuda.memory._snapshot()``'s pickle), read as plain data only."""
    return _PlainUnpickler(io.BytesIO(gzip.open(path).read())).load()


def default_stream_segments(snapshot: dict) -> list[tuple[int, int]]:
    """(address, bytes) of each ``cudaMalloc`` of the default stream's pool, in the order made. A segment of another
    stream (FSDP2's reduce-scatter, run 32) is another pool the model does not replay; a trace that gives a segment
    back (``segment_free``: its range may be reused) is refused, as none of the committed ones does."""
    trace = snapshot["device_traces"][0]
    if any(e["action"] == "segment_free" for e in trace):
        raise ValueError("a trace that frees a segment: its placement is not an order of live segments")
    return [(int(e["addr"]), int(e["size"])) for e in trace
            if e["action"] == "segment_alloc" and e.get("stream", 0) == 0]


def trace_placement(path: Path) -> Placement:
    """The placement one committed trace shows: its segments' ranks by address, named after the trace."""
    segments = default_stream_segments(read_snapshot(path))
    name = path.name.removesuffix(SUFFIX).removeprefix("h200_")
    where = path.relative_to(SNAPSHOTS.parents[4]) if path.is_relative_to(SNAPSHOTS.parents[4]) else path
    return Placement(name, ranks_of([addr for addr, _ in segments]), str(where))


def placements_data(folder: Path = SNAPSHOTS) -> dict:
    """``estimator/data/placements.json``: every committed trace's placement, by trace name."""
    rows = [trace_placement(f) for f in sorted(folder.glob(f"*{SUFFIX}"))]
    return {"about": ("cudaMalloc's placement of a step's segments, one per committed H200 allocator trace: ranks[n - 1] "
                      "is where the trace's n-th default-stream segment lay among its segments by address (0: lowest); "
                      "written by python -m livebytes.validate.check.allocator_traces from the traces under "
                      "validate/data/records/models/snapshots (estimator/placement.py)"),
            "placements": [{"name": p.name, "trace": p.source, "segments": len(p.ranks), "ranks": list(p.ranks)}
                           for p in rows]}


def write_placements(path: Path = PLACEMENTS_FILE) -> Path:
    path.write_text(json.dumps(placements_data(), indent=1) + "\n")
    return path


if __name__ == "__main__":
    out = write_placements(Path(sys.argv[1]) if len(sys.argv) > 1 else PLACEMENTS_FILE)
    print(f"wrote {out}")

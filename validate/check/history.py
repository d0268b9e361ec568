"""Live blocks at the peak, from ``torch.cuda.memory._snapshot()`` taken with memory history on.

This is the tool for matching model buffers to real allocations: replay the allocator's trace,
find the moment the allocated total was highest, and list what was live then, largest first, with
the frames that allocated each block. Pure Python: it reads the snapshot dict, so it is testable
without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass
import json


@dataclass(frozen=True)
class LiveBlock:
    addr: int
    size: int
    frames: tuple[str, ...]


def _frames(entry: dict, keep: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for f in entry.get("frames", []):
        name = f"{f.get('filename', '?')}:{f.get('line', '?')}:{f.get('name', '?')}"
        if not keep or any(k in name for k in keep):
            out.append(name)
    return tuple(out)


TRACED = ("alloc", "free_requested", "free_completed")


def _live_before_trace(snapshot: dict, events: list, device: int) -> dict[int, dict]:
    """Address -> block of the segments' active blocks the trace never allocates or frees: allocated before
    recording started, live at its start."""
    in_trace = {e["addr"] for e in events if e.get("action") in TRACED}
    return {blk["address"]: blk for seg in snapshot.get("segments", []) if seg.get("device", device) == device
            for blk in seg.get("blocks", []) if blk.get("state") == "active_allocated" and blk["address"] not in in_trace}


def _peak_index(before: dict[int, dict], events: list) -> tuple[int, int]:
    """(peak bytes, the number of events up to and including the allocation that reaches it; 0: the start, when the
    blocks live ``before`` the trace are the peak)."""
    sizes = {addr: blk["size"] for addr, blk in before.items()}      # the live blocks' sizes
    total = peak = sum(sizes.values())
    at = 0
    for n, e in enumerate(events, 1):
        action = e.get("action")
        if action == "alloc":
            sizes[e["addr"]] = e["size"]
            total += e["size"]
            if total > peak:
                peak, at = total, n
        elif action == "free_requested" and e["addr"] in sizes:
            total -= sizes.pop(e["addr"])
    return peak, at


def live_at_peak(snapshot: dict, device: int = 0, keep: tuple[str, ...] = ("fla/", "cudnn/", "livebytes", "runner")):
    """(peak bytes, blocks live at the peak sorted by size) from a snapshot's device trace.

    Blocks already allocated when history recording started carry no trace event; the segments'
    active blocks are used as the starting set, so the baseline (inputs) is included. Two passes, linear in the
    events: the first finds the peak, the second replays the trace up to it (copying the live set at every new
    peak would be quadratic in a trace that only grows).
    """
    traces = snapshot.get("device_traces", [])
    events = traces[device] if device < len(traces) else []
    before = _live_before_trace(snapshot, events, device)
    peak, at = _peak_index(before, events)
    live: dict[int, dict] = dict(before)        # address -> the block or the alloc event that made it
    for e in events[:at]:
        if e.get("action") == "alloc":
            live[e["addr"]] = e
        elif e.get("action") == "free_requested":
            live.pop(e["addr"], None)
    blocks = [LiveBlock(addr, entry["size"], _frames(entry, keep)) for addr, entry in live.items()]
    return peak, sorted(blocks, key=lambda b: -b.size)


def as_rows(blocks: list[LiveBlock], limit: int = 60) -> list[dict]:
    return [{"bytes": b.size, "frames": list(b.frames[:4])} for b in blocks[:limit]]


def dump_live_at_peak(directory, impl: str, shape) -> None:
    """Stop recording and write the live blocks at the peak of the recorded window (the runner's ``--history``)."""

    import torch  # deferred: torch is not in the core install (model/validate extras)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak, blocks = live_at_peak(snap)
    name = f"live_{impl.replace('@', '_')}_{shape.mbs}x{shape.seq}x{shape.heads}x{shape.dim}.json"
    (directory / name).write_text(json.dumps({"impl": impl, "shape": shape.record_dict(), "replayed_peak_bytes": peak,
                                              "blocks": as_rows(blocks)}, indent=1))

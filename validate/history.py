"""Live blocks at the peak, from ``torch.cuda.memory._snapshot()`` taken with memory history on.

This is the tool for matching model buffers to real allocations: replay the allocator's trace,
find the moment the allocated total was highest, and list what was live then, largest first, with
the frames that allocated each block. Pure Python: it reads the snapshot dict, so it is testable
without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass


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


def live_at_peak(snapshot: dict, device: int = 0, keep: tuple[str, ...] = ("fla/", "cudnn/", "livebytes", "runner")):
    """(peak bytes, blocks live at the peak sorted by size) from a snapshot's device trace.

    Blocks already allocated when history recording started carry no trace event; the segments'
    active blocks are used as the starting set, so the baseline (inputs) is included.
    """
    traces = snapshot.get("device_traces", [])
    events = traces[device] if device < len(traces) else []
    live: dict[int, LiveBlock] = {}
    # blocks allocated before the trace started are live at its start unless freed in it
    freed_or_alloc_in_trace = {e["addr"] for e in events if e.get("action") in ("alloc", "free_requested", "free_completed")}
    for seg in snapshot.get("segments", []):
        if seg.get("device", device) != device:
            continue
        for blk in seg.get("blocks", []):
            if blk.get("state") == "active_allocated" and blk["address"] not in freed_or_alloc_in_trace:
                live[blk["address"]] = LiveBlock(blk["address"], blk["size"], _frames(blk, keep))
    total = sum(b.size for b in live.values())
    peak, at_peak = total, dict(live)
    for e in events:
        action = e.get("action")
        if action == "alloc":
            live[e["addr"]] = LiveBlock(e["addr"], e["size"], _frames(e, keep))
            total += e["size"]
            if total > peak:
                peak, at_peak = total, dict(live)
        elif action == "free_requested" and e["addr"] in live:
            total -= live.pop(e["addr"]).size
    return peak, sorted(at_peak.values(), key=lambda b: -b.size)


def as_rows(blocks: list[LiveBlock], limit: int = 60) -> list[dict]:
    return [{"bytes": b.size, "frames": list(b.frames[:4])} for b in blocks[:limit]]


def dump_live_at_peak(directory, impl: str, shape) -> None:
    """Stop recording and write the live blocks at the peak of the recorded window (the runner's ``--history``)."""
    import json

    import torch
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak, blocks = live_at_peak(snap)
    name = f"live_{impl.replace('@', '_')}_{shape.mbs}x{shape.seq}x{shape.heads}x{shape.dim}.json"
    (directory / name).write_text(json.dumps({"impl": impl, "shape": shape.as_dict(), "replayed_peak_bytes": peak,
                                              "blocks": as_rows(blocks)}, indent=1))

"""Allocator traces as data: what ``validate/trace.py`` writes and ``learn`` / ``drift`` read.

One trace is one steady-state step at one shape: the device allocations the step made, in order,
each with its exact byte count and the Python frames that allocated it, and the frees of those
allocations. Sizes are what ``CUDACachingAllocator.cpp`` records for a ``TraceEntry::ALLOC``: the
requested ``orig_size`` of ``malloc``, before the 512-byte rounding (``size_field`` says so in every
file, and ``load_trace`` refuses any other).

File format (JSON, ``format: livebytes-trace/1``)::

    {"format": "livebytes-trace/1", "impl": "fla-kda@0.6.0", "options": {"contract": "report"},
     "shape": {"T": 2000, "N": 2, "H": 2, "HV": 2, "K": 64, "V": 64}, "varied": ["T", "N", "H", "K"],
     "size_field": "requested", "device": {...}, "outside_window": ["cu_seqlens"],
     "events": [["a", 0, 512000, ["fla/ops/x.py:fn:12", ...]], ["f", 0], ...]}

``["a", id, bytes, frames]`` allocates (frames innermost first, library frames only, paths relative
to site-packages); ``["f", id]`` frees allocation ``id``. ``outside_window`` names harness tensors that
exist before the recorded window (reused so the library's caches hit, as in the measured protocol).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from livebytes.estimator.errors import LivebytesError

FORMAT = "livebytes-trace/1"
TRACE_SYMBOLS = ("T", "N", "H", "HV", "K", "V")   # packed tokens, sequences, heads, value heads, key/value dims


class SiteParts:
    """``file``, ``function`` and ``line`` of a ``site`` "file:function:line" (a file path may hold colons)."""

    site: str

    @property
    def file(self) -> str:
        return self.site.rsplit(":", 2)[0]

    @property
    def function(self) -> str:
        return self.site.rsplit(":", 2)[1]

    @property
    def line(self) -> str:
        return self.site.rsplit(":", 2)[2]


@dataclass(frozen=True)
class Allocation(SiteParts):
    """One allocation of a traced step. Positions count every event (alloc and free) from 0."""

    position: int
    site: str                       # innermost library frame "file:function:line"
    frames: tuple[str, ...]
    size: int                       # requested bytes
    freed_at: int | None            # position of its free; None: still held when the step ends


@dataclass(frozen=True)
class Trace:
    impl: str
    options: tuple[tuple[str, object], ...]
    shape: tuple[tuple[str, int], ...]        # (symbol, value) over TRACE_SYMBOLS
    allocations: tuple[Allocation, ...]
    outside_window: tuple[str, ...] = ()
    device: str = ""
    source: str = ""                           # file it was read from

    @property
    def values(self) -> dict[str, int]:
        return dict(self.shape)

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.shape)


def _site(frames: list[str]) -> str:
    return frames[0] if frames else "<no python frame>:<none>:0"


def _allocations(events: list, where: str) -> tuple[Allocation, ...]:
    """Pair each free with its allocation; a free of an unknown id is an error in the file."""
    open_at: dict[int, int] = {}
    rows: list[list] = []
    for position, event in enumerate(events):
        kind = event[0]
        if kind == "a":
            _, ident, size, frames = event
            open_at[ident] = len(rows)
            rows.append([position, _site(list(frames)), tuple(frames), int(size), None])
        elif kind == "f":
            index = open_at.pop(event[1], None)
            if index is None:
                raise LivebytesError(f"{where}: free of allocation {event[1]} that the trace never allocated")
            rows[index][4] = position
        else:
            raise LivebytesError(f"{where}: unknown event kind {kind!r}")
    return tuple(Allocation(*row) for row in rows)


def trace_from_dict(data: dict, where: str = "trace") -> Trace:
    if data.get("format") != FORMAT:
        raise LivebytesError(f"{where}: not a {FORMAT} file")
    if data.get("size_field") != "requested":
        raise LivebytesError(f"{where}: sizes must be requested bytes (size_field 'requested'), got {data.get('size_field')!r}")
    shape = data.get("shape", {})
    missing = [s for s in TRACE_SYMBOLS if not isinstance(shape.get(s), int) or shape[s] <= 0]
    if missing:
        raise LivebytesError(f"{where}: shape lacks positive integer {', '.join(missing)}")
    if shape["T"] % shape["N"]:
        raise LivebytesError(f"{where}: T={shape['T']} is not N={shape['N']} equal-length sequences")
    return Trace(impl=str(data.get("impl", "")), options=tuple(sorted(data.get("options", {}).items())),
                 shape=tuple((s, shape[s]) for s in TRACE_SYMBOLS),
                 allocations=_allocations(data.get("events", []), where),
                 outside_window=tuple(data.get("outside_window", ())),
                 device=str(data.get("device", {}).get("name", "")) if isinstance(data.get("device"), dict) else "",
                 source=where)


def load_trace(path: Path) -> Trace:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise LivebytesError(f"{path}: cannot read trace ({err})") from None
    return trace_from_dict(data, str(path))


def load_traces(directory: Path, impl: str | None = None) -> list[Trace]:
    """Every trace file in ``directory`` (of ``impl`` when given), in file-name order."""
    root = Path(directory)
    if not root.is_dir():
        raise LivebytesError(f"{directory}: not a directory of traces")
    traces = [load_trace(p) for p in sorted(root.glob("*.json"))]
    if impl is not None:
        traces = [t for t in traces if t.impl == impl]
    if len(traces) < 2:
        raise LivebytesError(f"{directory}: need traces at two shapes at least, found {len(traces)}"
                             + (f" for {impl}" if impl else ""))
    return traces

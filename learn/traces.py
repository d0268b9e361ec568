"""Allocator traces as data: what ``validate/gpu/trace.py`` writes and ``learn`` / ``drift`` read.

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

from dataclasses import dataclass
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import ListOf, Obj, OneOf, check, read_json, show
from livebytes.estimator.shapes import TRACE_FORMAT, TRACE_SYMBOLS
from livebytes.estimator.shapes import Shape

FORMAT = TRACE_FORMAT   # the name learn and its tests use
# what each symbol of a trace (and of the formulas learned from it) stands for, in the shape's HF names
TRACE_SYMBOL_NAMES = {"T": "batch_size * seq_len (the packed tokens)", "N": "batch_size", "H": "num_heads",
                      "HV": "num_v_heads", "K": "head_dim", "V": "head_v_dim"}


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
    device: str = ""                           # the GPU's product name as torch reported it (NVIDIA H200)
    source: str = ""                           # file it was read from
    preset: str = ""                           # its device preset (H200), where the trace names one

    @property
    def values(self) -> dict[str, int]:
        return dict(self.shape)

    def shape_dict(self) -> dict[str, int]:
        """The traced shape in the JSON's HF names (``Shape.as_dict``): N sequences of T / N tokens, value heads and
        value head dim always given (a trace states them)."""
        v = self.values
        return Shape(v["N"], v["T"] // v["N"], v["H"], v["K"], v_heads=v["HV"], dim_v=v["V"]).as_dict()

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.shape)


def _site(frames: list[str]) -> str:
    return frames[0] if frames else "<no python frame>:<none>:0"


TRACE_LAYOUT = Obj({
    "format": "string", "size_field": OneOf(("requested",)), "impl": "string", "options": "object",
    "shape": Obj({s: "positive" for s in TRACE_SYMBOLS}, required=TRACE_SYMBOLS), "varied": ListOf("string"),
    "device": "object", "outside_window": ListOf("string"), "events": ListOf("list"),
}, required=("format", "size_field", "shape", "events"))


def _event(event: list, where: str, field: str) -> None:
    """``["a", id, bytes, frames]`` or ``["f", id]``, each part of its type."""
    kind = event[0] if event else None
    if kind == "a" and len(event) == 4:
        for part, layout in zip(event[1:], ("count", "count", ListOf("string"))):
            check(part, layout, where, field)
    elif kind == "f" and len(event) == 2:
        check(event[1], "count", where, field)
    else:
        raise LivebytesError(f'{where}: {field}: expected ["a", id, bytes, frames] or ["f", id], got {show(event)}')


def _allocations(events: list, where: str) -> tuple[Allocation, ...]:
    """Pair each free with its allocation; a free of an unknown id is an error in the file."""
    open_at: dict[int, int] = {}
    rows: list[list] = []
    for position, event in enumerate(events):
        _event(event, where, f"events[{position}]")
        if event[0] == "a":
            _, ident, size, frames = event
            open_at[ident] = len(rows)
            rows.append([position, _site(list(frames)), tuple(frames), int(size), None])
        else:
            index = open_at.pop(event[1], None)
            if index is None:
                raise LivebytesError(f"{where}: events[{position}]: free of allocation {event[1]} that the trace never allocated")
            rows[index][4] = position
    return tuple(Allocation(*row) for row in rows)


def trace_from_dict(data, where: str = "trace") -> Trace:
    """One trace, every field held to ``TRACE_LAYOUT`` (an error names ``where`` and the field)."""
    check(data, Obj({"format": "string"}, required=("format",)), where)
    if data["format"] != FORMAT:
        raise LivebytesError(f"{where}: format: {show(data['format'])} is not a version this livebytes reads ({FORMAT})")
    if data.get("size_field") != "requested":
        raise LivebytesError(f"{where}: size_field: sizes must be requested bytes ('requested'), got {show(data.get('size_field'))}")
    check(data, TRACE_LAYOUT, where)
    shape = data["shape"]
    if shape["T"] % shape["N"]:
        raise LivebytesError(f"{where}: shape: T={shape['T']} is not N={shape['N']} equal-length sequences")
    return Trace(impl=data.get("impl", ""), options=tuple(sorted(data.get("options", {}).items())),
                 shape=tuple((s, shape[s]) for s in TRACE_SYMBOLS),
                 allocations=_allocations(data["events"], where),
                 outside_window=tuple(data.get("outside_window", ())),
                 device=str(data.get("device", {}).get("name", "")),
                 source=where, preset=str(data.get("device", {}).get("preset", "")))


def load_trace(path: Path) -> Trace:
    return trace_from_dict(read_json(path), str(path))


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
    refuse_mixed(traces, directory)
    return traces


def _kernel(trace: Trace) -> str:
    """What a trace traced: its implementation and options (``fla-kda@0.6.0 contract=report``)."""
    return " ".join([trace.impl or "(no impl)", *(f"{k}={v}" for k, v in trace.options)])


def refuse_mixed(traces: list[Trace], directory) -> None:
    """Traces of several kernels (or one kernel's options) learned together would be matched as one model's: refused,
    naming each kernel with its file count and its first file."""
    files: dict[str, list[str]] = {}
    for t in traces:
        files.setdefault(_kernel(t), []).append(Path(t.source).name)
    if len(files) > 1:
        found = ", ".join(f"{kernel} ({len(names)} file{'' if len(names) == 1 else 's'}: {names[0]}"
                          f"{', ...' if len(names) > 1 else ''})" for kernel, names in files.items())
        raise LivebytesError(f"{directory}: traces of {len(files)} kernels: {found}; give one kernel's traces (a "
                             "folder each; learn --impl and drift --traced-impl keep one implementation's)")

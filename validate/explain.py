"""A user's own memory snapshot (``torch.cuda.memory._dump_snapshot``) read against a model: which buffer each live
block is, and which blocks the model does not explain.

The live blocks are those at the trace's peak (``history.live_at_peak``, the validator's own reading: blocks made
before recording started count from the segments), or, with ``at="snapshot"``, the segments' active blocks as
dumped (a snapshot taken at an out-of-memory or at the peak). A block is a model allocation (``allocations``: a
carved workspace is one) when its size is the allocation's request, or the request rounded to blocks
(``rounding.round_size``), and, in order of trust, a frame names the cited source line, or the cited function, or
it has no frame that names the library (by size alone). Each allocation explains one block at most.

Pickles are read with an unpickler that builds only plain containers and numbers (a snapshot holds nothing else),
so a hostile file cannot run code.
"""
from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import ListOf, Obj, check
from livebytes.estimator.prediction import allocations
from livebytes.estimator.replay import request_sizes
from livebytes.estimator.rounding import round_size

from .history import live_at_peak

SNAPSHOT_LAYOUT = Obj({
    "segments": ListOf(Obj({"address": "count", "blocks": ListOf(Obj({"address": "count", "size": "count", "state": "string"},
                                                                     required=("size", "state")))},
                           required=("blocks",))),
    "device_traces": ListOf(ListOf(Obj({"action": "string"}, required=("action",)))),
}, required=("segments",))
MATCHES = ("source line", "function", "size")      # how a block was matched, most trusted first


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"the file holds a {module}.{name} object; a memory snapshot holds only plain data")


def load_snapshot(path: Path) -> dict:
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise LivebytesError(f"{path}: cannot read it ({err.strerror or err})") from None
    try:
        snapshot = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as err:       # a truncated, foreign or hostile pickle: pickle raises many kinds
        raise LivebytesError(f"{path}: not a memory snapshot pickle ({type(err).__name__}: {str(err)[:80]})") from None
    check(snapshot, SNAPSHOT_LAYOUT, str(path))
    return snapshot


@dataclass(frozen=True)
class LiveBlock:
    address: int | None
    size: int                     # bytes the snapshot gives (the trace's request, or the block's size)
    requested: int | None         # the request, where the snapshot gives it beside the block size
    frames: tuple[str, ...]       # "file:line:function", innermost first


def _frame_text(f: dict) -> str:
    return f"{f.get('filename', '?')}:{f.get('line', '?')}:{f.get('name', '?')}"


def live_blocks(snapshot: dict, at: str = "peak") -> list[LiveBlock]:
    """The blocks live at the trace's peak (``at="peak"``; the segments' when there is no trace) or as dumped."""
    if at not in ("peak", "snapshot"):
        raise LivebytesError(f"--at must be peak or snapshot, got {at!r}")
    if at == "peak" and any(snapshot.get("device_traces") or []):
        _, blocks = live_at_peak(snapshot, keep=())
        return [LiveBlock(b.addr, b.size, None, b.frames) for b in blocks]
    return sorted((LiveBlock(b.get("address"), b["size"], b.get("requested_size"), tuple(map(_frame_text, b.get("frames", []))))
                   for seg in snapshot["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"),
                  key=lambda b: -b.size)


def snapshot_blocks(path: Path, at: str = "peak") -> list[LiveBlock]:
    """``live_blocks`` of the snapshot file at ``path``; a snapshot with no live block (no segments, or none with an
    active block, and no trace that allocates) has nothing to explain: refused, naming the file."""
    snapshot = load_snapshot(path)
    blocks = live_blocks(snapshot, at)
    if not blocks:
        where = "at the trace's peak" if at == "peak" and any(snapshot.get("device_traces") or []) else "in its segments"
        segments = len(snapshot["segments"])
        raise LivebytesError(f"{path}: no live block {where} ({segments} segment{'' if segments == 1 else 's'}): nothing "
                             "to explain; dump the snapshot at the peak or at an out-of-memory")
    return blocks


@dataclass(frozen=True)
class Explained:
    block: LiveBlock
    buffer: str | None            # the model's allocation (None: unexplained)
    match: str | None             # one of MATCHES


def _how(block: LiveBlock, source) -> str:
    """How well ``block``'s frames name ``source``: its line, its function, or not at all (then by size alone)."""
    for frame in block.frames:
        file, line, function = (frame.rsplit(":", 2) + ["", ""])[:3]
        if file.endswith(source.file) and source.line and line == str(source.line):
            return "source line"
    if any(f.rsplit(":", 2)[0].endswith(source.file) and f.rsplit(":", 1)[-1] == source.function for f in block.frames):
        return "function"
    return "size"


def explain(model, shape, blocks: list[LiveBlock]) -> list[Explained]:
    """Each block (in the given order) with the model allocation it is, or None. Matches are made most trusted first
    (``MATCHES``: every block a source line names, then a function, then the rest by size), so a block found by size
    alone never takes an allocation another block's frames name."""
    requests = request_sizes(model, shape)
    unused = {name: regions for name, regions in allocations(model).items() if requests[name]}   # 0 B: no block
    found: dict[int, tuple[str, str]] = {}
    for level in MATCHES:
        for i, block in enumerate(blocks):
            if i in found:
                continue
            sizes = {block.size} | ({block.requested} if block.requested else set())
            for name, regions in unused.items():
                if sizes & {requests[name], round_size(requests[name])} and _how(block, regions[0].source) == level:
                    found[i] = (name, level)
                    del unused[name]
                    break
    return [Explained(b, *found.get(i, (None, None))) for i, b in enumerate(blocks)]

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
from typing import Iterator
from collections import Counter
from dataclasses import replace

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import ListOf, Obj, check, read_bytes
from livebytes.estimator.prediction import allocations
from livebytes.estimator.replay import request_sizes
from livebytes.estimator.rounding import round_size

from .history import TRACED, live_at_peak
from livebytes.estimator.replay import requested_peak
from livebytes.estimator.registry import get_model, keyed_specs, spec
from livebytes.estimator.shapes import flag_of, format_tokens

FRAME = Obj({"filename": "string", "line": "int", "name": "string"})
SNAPSHOT_LAYOUT = Obj({
    "segments": ListOf(Obj({"address": "count", "blocks": ListOf(Obj({"address": "count", "size": "count", "state": "string",
                                                                      "requested_size": "count", "frames": "list"},
                                                                     required=("size", "state")))},
                           required=("blocks",))),
    "device_traces": ListOf(ListOf(Obj({"action": "string", "addr": "count", "size": "count", "frames": "list"},
                                       required=("action",)))),
}, required=("segments",))      # each frame is held to FRAME by _check_frames (a million of them: a quick test first)
# A snapshot of one step is megabytes; a long recording of a large model, hundreds.
MAX_SNAPSHOT_BYTES = 1 << 30
# Entries as the readers walk them (a list referenced twice is walked twice; a 4 KB pickle can reference one list of
# 1,000 blocks 1,000 times): a step of a large model records ~10^5 trace events of ~10^2 frames and holds ~10^4 blocks.
MAX_SNAPSHOT_ENTRIES = 1_000_000        # segments, blocks and trace events
MAX_SNAPSHOT_FRAMES = 20_000_000
MATCHES = ("source line", "function", "size")      # how a block was matched, most trusted first


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"the file holds a {module}.{name} object; a memory snapshot holds only plain data")


def _lists(value, key: str) -> list:
    """``value[key]`` where it is a list, else nothing (the layout check, after the count, names what is wrong)."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, list) else []


def _entries(snapshot) -> Iterator[tuple[str, object]]:
    """(where, entry) of each segment, block and trace event; an entry of the wrong kind as it is (the layout check
    names it)."""
    for s, segment in enumerate(_lists(snapshot, "segments")):
        yield f"segments[{s}]", segment
        for b, block in enumerate(_lists(segment, "blocks")):
            yield f"segments[{s}].blocks[{b}]", block
    traces = snapshot.get("device_traces") if isinstance(snapshot, dict) else None
    for d, events in enumerate(traces if isinstance(traces, list) else []):
        for i, event in enumerate(events if isinstance(events, list) else []):
            yield f"device_traces[{d}][{i}]", event


def refuse_absurd(snapshot, where: str) -> None:
    """Refuse a snapshot of more entries or frames than ``MAX_SNAPSHOT_ENTRIES`` and ``MAX_SNAPSHOT_FRAMES``, counting
    no further than the limits, so that every later walk is bounded."""
    entries = frames = 0
    for _, entry in _entries(snapshot):
        entries, frames = entries + 1, frames + len(_lists(entry, "frames"))
        if entries > MAX_SNAPSHOT_ENTRIES or frames > MAX_SNAPSHOT_FRAMES:
            raise LivebytesError(f"{where}: more than {MAX_SNAPSHOT_ENTRIES:,} segments, blocks and trace events or "
                                 f"{MAX_SNAPSHOT_FRAMES:,} frames (a list referenced many times counts each time): "
                                 "beyond any snapshot of a step; record fewer (_record_memory_history's max_entries)")


def _plain_frame(frame) -> bool:
    return (type(frame) is dict and isinstance(frame.get("filename", ""), str) and type(frame.get("line", 0)) is int
            and isinstance(frame.get("name", ""), str))


def _check_frames(snapshot: dict, where: str) -> None:
    """Every frame held to ``FRAME``: the quick test on each, the layout check (which names the field) on a failure."""
    for label, entry in _entries(snapshot):
        for i, frame in enumerate(_lists(entry, "frames")):
            if not _plain_frame(frame):
                check(frame, FRAME, where, f"{label}.frames[{i}]")


def load_snapshot(path: Path) -> dict:
    data = read_bytes(path, MAX_SNAPSHOT_BYTES)
    try:
        snapshot = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as err:       # a truncated, foreign or hostile pickle: pickle raises many kinds
        raise LivebytesError(f"{path}: not a memory snapshot pickle ({type(err).__name__}: {str(err)[:80]})") from None
    refuse_absurd(snapshot, str(path))
    check(snapshot, SNAPSHOT_LAYOUT, str(path))
    _check_frames(snapshot, str(path))
    return snapshot


@dataclass(frozen=True)
class LiveBlock:
    address: int | None
    size: int                     # bytes the snapshot gives (the trace's request, or the block's size)
    requested: int | None         # the request, where the snapshot gives it beside the block size
    frames: tuple[str, ...]       # "file:line:function", innermost first


def _frame_text(f: dict) -> str:
    return f"{f.get('filename', '?')}:{f.get('line', '?')}:{f.get('name', '?')}"


def _check_traced(snapshot: dict, where: str) -> None:
    """Following blocks through the trace needs each allocation and free's address and size, and the address of each
    active block (``history.live_at_peak``); the layout declares them, this requires them."""
    for d, events in enumerate(snapshot.get("device_traces") or []):
        for i, event in enumerate(events):
            missing = [key for key in ("addr", "size") if event["action"] in TRACED and key not in event]
            if missing:
                raise LivebytesError(f"{where}: device_traces[{d}][{i}].{missing[0]}: missing (the {event['action']} event "
                                     "must name its block's address and size)")
    for s, segment in enumerate(snapshot["segments"]):
        for b, block in enumerate(segment["blocks"]):
            if block["state"] == "active_allocated" and "address" not in block:
                raise LivebytesError(f"{where}: segments[{s}].blocks[{b}].address: missing (the trace is followed by "
                                     "address; --at snapshot reads the segments alone)")


def live_blocks(snapshot: dict, at: str = "peak", where: str = "the snapshot") -> list[LiveBlock]:
    """The blocks live at the trace's peak (``at="peak"``; the segments' when there is no trace) or as dumped."""
    if at not in ("peak", "snapshot"):
        raise LivebytesError(f"--at must be peak or snapshot, got {at!r}")
    if at == "peak" and any(snapshot.get("device_traces") or []):
        _check_traced(snapshot, where)
        _, blocks = live_at_peak(snapshot, keep=())
        return [LiveBlock(b.addr, b.size, None, b.frames) for b in blocks]
    return sorted((LiveBlock(b.get("address"), b["size"], b.get("requested_size"), tuple(map(_frame_text, b.get("frames", []))))
                   for seg in snapshot["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"),
                  key=lambda b: -b.size)


def snapshot_blocks(path: Path, at: str = "peak") -> list[LiveBlock]:
    """``live_blocks`` of the snapshot file at ``path``; a snapshot with no live block (no segments, or none with an
    active block, and no trace that allocates) has nothing to explain: refused, naming the file."""
    return read_blocks(path, at)[0]


def ran_out(snapshot: dict) -> bool:
    """Whether the snapshot's trace records an out-of-memory (PyTorch's ``oom`` event): its process failed before its
    peak, so its live bytes fall short of a whole run's."""
    return any(e.get("action") == "oom" for events in snapshot.get("device_traces") or [] for e in events)


def read_blocks(path: Path, at: str = "peak") -> tuple[list[LiveBlock], bool]:
    """(``snapshot_blocks``, ``ran_out``) of the snapshot file at ``path``."""
    snapshot = load_snapshot(path)
    blocks = live_blocks(snapshot, at, str(path))
    if not blocks:
        where = "at the trace's peak" if at == "peak" and any(snapshot.get("device_traces") or []) else "in its segments"
        segments = len(snapshot["segments"])
        raise LivebytesError(f"{path}: no live block {where} ({segments} segment{'' if segments == 1 else 's'}): nothing "
                             "to explain; dump the snapshot at the peak or at an out-of-memory")
    return blocks, ran_out(snapshot)


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


def _by_size(requests: dict[str, int]) -> dict[int, list[str]]:
    """Block size -> the allocations (in model order) whose request, or request rounded to blocks, it is."""
    out: dict[int, list[str]] = {}
    for name, request in requests.items():
        for size in dict.fromkeys((request, round_size(request))):
            out.setdefault(size, []).append(name)
    return out


def explain(model, shape, blocks: list[LiveBlock]) -> list[Explained]:
    """Each block (in the given order) with the model allocation it is, or None. Matches are made most trusted first
    (``MATCHES``: every block a source line names, then a function, then the rest by size), so a block found by size
    alone never takes an allocation another block's frames name. Each block looks up the allocations of its size
    (``_by_size``), so the work is linear in the blocks (a snapshot may hold a million)."""
    requests = request_sizes(model, shape)
    regions = allocations(model)
    order = {name: n for n, name in enumerate(regions)}
    by_size = _by_size({name: requests[name] for name in regions if requests[name]})   # 0 B: no block
    unused = {name for names in by_size.values() for name in names}
    found: dict[int, tuple[str, str]] = {}
    for level in MATCHES:
        for i, block in enumerate(blocks):
            if i in found:
                continue
            sizes = {block.size} | ({block.requested} if block.requested else set())
            candidates = sorted({name for size in sizes for name in by_size.get(size, ()) if name in unused}, key=order.get)
            name = next((c for c in candidates if _how(block, regions[c][0].source) == level), None)
            if name is not None:
                found[i] = (name, level)
                unused.discard(name)
    return [Explained(b, *found.get(i, (None, None))) for i, b in enumerate(blocks)]


# ---------------------------------------------------------------------------------------------- does it fit?
# Whether the snapshot is this model at this shape, read from the data alone: the bytes live at the snapshot's peak
# against the model's requested peak (a lower bound of any process that ran it there), how the blocks were matched, and
# the shapes whose model explains more of the same blocks.

@dataclass(frozen=True)
class Foreign:
    """Live blocks allocated (innermost frame in the model's package) in a file the model cites nowhere."""
    file: str                     # package-relative, as the models cite it: fla/ops/kda/gate.py
    blocks: int
    bytes: int


@dataclass(frozen=True)
class Fit:
    """How a snapshot's live blocks meet a model at a shape."""
    live_bytes: int               # the blocks' bytes
    explained_bytes: int          # the bytes of the blocks named by a buffer
    peak_request_bytes: int       # the model's peak of requested bytes, steady call (``replay.requested_peak``)
    frame_matches: int            # blocks matched by a source line or a function the model cites
    size_matched_bytes: int       # explained bytes matched by size alone
    framed: bool                  # whether any live block carries frames
    foreign: tuple[Foreign, ...] = ()   # ``foreign_sites``: the package's code the model does not run, largest first


def fit_of(model, shape, explained: list[Explained]) -> Fit:
    named = [e for e in explained if e.buffer is not None]
    return Fit(sum(e.block.size for e in explained), sum(e.block.size for e in named), requested_peak(model, shape),
               sum(e.match != "size" for e in named), sum(e.block.size for e in named if e.match == "size"),
               any(e.block.frames for e in explained), foreign_sites(model, [e.block for e in explained]))


# ---------------------------------------------------------------------------------------------- whose code?
# A sibling model shares its package's common code (FLA's KDA and GDN both call ops/common/chunk_delta_h.py and
# modules/norm/l2norm.py), so some of its blocks match the asked model by source line: that alone does not say the
# snapshot is the asked model's. Each block's allocation site does: the innermost frame inside the model's package is
# the code that allocated it, and a file there the model cites nowhere (no buffer's source, no step's) is code the
# asked model does not run. Frames outside the package (torch's, Triton's, the harness's) say nothing either way.

def cited_files(model) -> frozenset[str]:
    """Every source file the model cites, its buffers' and its steps' (package-relative: ``fla/ops/kda/chunk.py``)."""
    return frozenset(x.source.file for x in (*model.buffers, *model.steps) if x.source is not None)


def package_of(model) -> str | None:
    """The implementation's package: the top directory most of the model's cited files lie in (``fla``, ``cudnn``;
    ``torch`` is the framework every model runs under, cited for a few buffers only)."""
    tops = Counter(f.split("/", 1)[0] for f in cited_files(model) if "/" in f)
    return tops.most_common(1)[0][0] if tops else None


def package_path(frame: str, package: str) -> str | None:
    """``/site/fla/ops/kda/gate.py:502:fn`` -> ``fla/ops/kda/gate.py`` (from the path's last ``package`` folder); None
    outside the package."""
    parts = frame.rsplit(":", 2)[0].replace("\\", "/").split("/")
    if package not in parts[:-1]:
        return None
    return "/".join(parts[len(parts) - 1 - parts[::-1].index(package):])


def foreign_sites(model, blocks: list[LiveBlock]) -> tuple[Foreign, ...]:
    """The files of the model's package that allocated live blocks (each block's innermost frame there) and that the
    model cites nowhere, with their blocks and bytes, largest first."""
    package = package_of(model)
    if package is None:
        return ()
    cited, found = cited_files(model), {}
    for block in blocks:
        site = next(filter(None, (package_path(f, package) for f in block.frames)), None)
        if site is not None and site not in cited:
            n, nbytes = found.get(site, (0, 0))
            found[site] = (n + 1, nbytes + block.size)
    return tuple(Foreign(f, n, b) for f, (n, b) in sorted(found.items(), key=lambda kv: (-kv[1][1], kv[0])))


def citing_models(files, exclude: str) -> list[str]:
    """The registered models (a key alone builds them, each on its own device) that cite every one of ``files``."""
    return [s.key for s in keyed_specs() if s.key != exclude and set(files) <= cited_files(get_model(s.key))]


# one varied at a time, the others as asked ("heads" keeps the value-head ratio; "heads+v_heads": both set, no GVA)
SEARCH_FIELDS = ("seq", "mbs", "heads", "dim", "v_heads", "heads+v_heads")
# The search solves each of the model's SEARCH_ALLOCATIONS largest allocations at its peak for the SEARCH_SIZES
# largest distinct unexplained block sizes: a tensor of the true shape that scales with it is among the largest blocks.
# The two bound the work (2 x 16 sizes x 5 fields x 41 bisection steps: ~6,600 evaluations of the request sizes),
# they fit nothing: a shape they miss is a suggestion missed, never a wrong one (every candidate is judged whole).
SEARCH_ALLOCATIONS = 2
SEARCH_SIZES = 16
SEARCH_LIMIT = 1 << 40           # planning's: no size of a tensor dimension goes beyond


def with_field(shape, field: str, value: int):
    """``shape`` with one size changed; heads keep their value-head ratio (grouped value attention's code path)."""
    if field == "heads" and shape.v_heads is not None:
        return replace(shape, heads=value, v_heads=value * (shape.v_heads // shape.heads))
    if field == "heads+v_heads":
        return replace(shape, heads=value, v_heads=None)
    return replace(shape, **{field: value})


def _request_at(model, shape, field: str, name: str):
    """value -> the request of allocation ``name`` at ``shape`` with ``field`` set to it (None: no such shape)."""
    def at(value: int) -> int | None:
        try:
            return request_sizes(model, with_field(shape, field, value))[name]
        except LivebytesError:          # value heads not a multiple of heads
            return None
    return at


def solve(request_at, size: int) -> int | None:
    """The smallest value whose request is ``size`` (or rounds to it), by bisection on a request that grows with the
    value (every byte formula does); None when no value gives it."""
    lo, hi = 1, SEARCH_LIMIT
    first, last = request_at(lo), request_at(hi)
    if first is None or last is None or first == last or not first <= size <= round_size(last):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        r = request_at(mid)
        if r is None:
            return None
        if round_size(r) < size:
            lo = mid + 1
        else:
            hi = mid
    for value in (lo, lo + 1):           # the rounded size can reach ``size`` one value before the request does
        r = request_at(value)
        if r is not None and size in (r, round_size(r)):
            return value
    return None


def candidate_shapes(model, shape, explained: list[Explained]) -> list:
    """Shapes one size away from ``shape`` at which one of the model's largest allocations at its peak is one of the
    largest blocks (``SEARCH_ALLOCATIONS``, ``SEARCH_SIZES``; explained ones too: at a wrong shape another allocation
    may have taken the block by its size), in the order found, each once."""
    from livebytes.estimator.engine import predict  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    requests = request_sizes(model, shape)
    peak = predict(model, shape).at_peak
    names = _largest(sorted({b.carved_from or b.name for b, n in peak if n}, key=lambda name: (-requests[name], name)),
                     requests)
    sizes = sorted({s for e in explained for s in (e.block.size, e.block.requested) if s}, reverse=True)[:SEARCH_SIZES]
    fields = [f for f in SEARCH_FIELDS if (f != "v_heads" or _takes_gva(model)) and (f != "heads+v_heads" or shape.v_heads)]
    found = {}
    for field in fields:
        for name in names:
            at = _request_at(model, shape, field, name)
            for size in sizes:
                value = solve(at, size)
                if value is not None and with_field(shape, field, value) != shape:
                    found.setdefault(with_field(shape, field, value), None)
    return list(found)


def _largest(names: list[str], requests: dict) -> list[str]:
    """The first ``SEARCH_ALLOCATIONS`` of ``names`` (largest request first) and every one tied with the last of them:
    a cut inside a tie kept whichever the set's order put first, so the search found the shape under some hash seeds
    only (``PYTHONHASHSEED=8``: fla-kda at D64 never named D128)."""
    if len(names) <= SEARCH_ALLOCATIONS:
        return names
    last = requests[names[SEARCH_ALLOCATIONS - 1]]
    return [n for n in names if requests[n] >= last]


def _takes_gva(model) -> bool:
    return "gva" in spec(model.key).options


def _bound(model, shape, sizes: set[int]) -> int:
    """The most bytes ``model`` at ``shape`` can explain of blocks of these ``sizes``: each allocation whose request, or
    request rounded to blocks, is one of them, at its rounded size (a block is one or the other)."""
    return sum(round_size(r) for r in request_sizes(model, shape).values() if r and (r in sizes or round_size(r) in sizes))


def best_shape(model_at, shape, blocks: list[LiveBlock], explained: list[Explained], fit: Fit):
    """(shape, its explanation, its fit) of the candidate (``candidate_shapes``) whose model (``model_at(shape)``; a shape
    it refuses is skipped) explains the most bytes, more than ``fit``'s and with a requested peak the live bytes hold;
    None when no candidate does. Candidates are judged largest ``_bound`` first and no further than a bound that cannot
    beat the best so far, so each whole explanation (linear in the blocks) runs for few."""
    sizes = {s for b in blocks for s in (b.size, b.requested) if s}
    scored = []
    for candidate in candidate_shapes(model_at(shape), shape, explained):
        try:
            m = model_at(candidate)
        except LivebytesError:
            continue
        scored.append((_bound(m, candidate, sizes), candidate, m))
    best, best_bytes = None, fit.explained_bytes
    for bound, candidate, m in sorted(scored, key=lambda t: -t[0]):
        if bound <= best_bytes:
            break
        done = explain(m, candidate, blocks)
        f = fit_of(m, candidate, done)
        if f.explained_bytes > best_bytes and f.peak_request_bytes <= f.live_bytes:
            best, best_bytes = (candidate, done, f), f.explained_bytes
    return best


def _flags(asked, shape) -> str:
    """The flags that turn ``asked`` into ``shape``."""
    changed = [(f, getattr(shape, f)) for f in ("seq", "mbs", "heads", "dim", "v_heads") if getattr(shape, f) != getattr(asked, f)]
    return " ".join(f"without {flag_of(f)}" if v is None else f"{flag_of(f)} {format_tokens(v) if f == 'seq' else v}"
                    for f, v in changed)


def short_of_peak(fit: Fit, at: str, failed: bool) -> bool:
    """The blocks at the snapshot's peak hold fewer bytes than the model requests at its own: no run of it at this shape
    peaked there. Not asked of the segments as dumped (``at`` snapshot) nor of a run that ran out of memory (``failed``:
    it stopped before its peak)."""
    return at == "peak" and not failed and fit.live_bytes < fit.peak_request_bytes


FOREIGN_NAMED = 3       # the files a warning names, largest first; the rest counted


def foreign_warning(key: str, foreign: tuple[Foreign, ...]) -> str:
    """The snapshot's blocks allocated in code the asked model does not run, and the models that run all of it."""
    files = [f.file for f in foreign]
    named = ", ".join(files[:FOREIGN_NAMED]) + (f" and {len(files) - FOREIGN_NAMED} more" if len(files) > FOREIGN_NAMED else "")
    blocks, nbytes = sum(f.blocks for f in foreign), sum(f.bytes for f in foreign)
    others = citing_models(files, key)
    whose = f"; {', '.join(others)} {'cites' if len(others) == 1 else 'cite'} all of it" if others else ""
    return (f"{blocks:,} live block{'' if blocks == 1 else 's'} ({nbytes:,} B) {'was' if blocks == 1 else 'were'} "
            f"allocated in {named}, which {key} cites nowhere: the snapshot is another model's (a sibling shares some of "
            f"its package's code, so some frames match){whose}")


def fit_warnings(key: str, shape, fit: Fit, short: bool, better=None, whole_model: bool = False) -> list[str]:
    """The warnings of an explanation that does not fit (each one line): the live bytes below what the model requests at
    its peak (``short``: ``short_of_peak``), nothing explained, every match by size alone, blocks allocated in code of
    the model's package it does not run (``fit.foreign``: another model's snapshot), and the shape that explains
    more (``best_shape``'s), or, after one of the others, that none one size away does (``whole_model``: a config's
    traced step, whose heads and head dims are the config's, so only its length and batch were searched). Some blocks matched by size
    alone beside others a frame names is no warning: the validator's own H200 dump of cudnn-kda-hopper-cuda@1.32.0
    matches its 2.52 GB workspace so, the frames naming the workspace helper, not the carved regions' sources."""
    out = []
    here = f"{key} at {shape.label()}"
    if short:
        out.append(f"the snapshot holds {fit.live_bytes:,} B live at its peak, fewer than {here} requests at its own "
                   f"peak ({fit.peak_request_bytes:,} B): it is not this shape's peak")
    if fit.explained_bytes == 0:
        out.append(f"no live block is one of {here}'s allocations")
    elif fit.frame_matches == 0:
        why = ("no frame of the blocks names a source it cites" if fit.framed else "the snapshot records no frames")
        out.append(f"{here} explains {fit.explained_bytes:,} B by size alone ({why}): another implementation or shape "
                   "with tensors of these sizes would match as well")
    if fit.foreign:
        out.append(foreign_warning(key, fit.foreign))
    if better is not None:
        candidate, _, f = better
        whole = "all" if f.explained_bytes == fit.live_bytes else f"{f.explained_bytes:,} of the"
        out.append(f"{key} at {candidate.label()} explains {whole} {fit.live_bytes:,} live B ({fit.explained_bytes:,} B "
                   f"at the shape asked): the snapshot fits {_flags(shape, candidate)}")
    elif out:
        flags = "--seq-len, --batch-size" if whole_model else "--seq-len, --batch-size, --num-heads, --head-dim, --num-v-heads"
        out.append(f"no shape one of {flags} away explains more of it: another model?")
    return out

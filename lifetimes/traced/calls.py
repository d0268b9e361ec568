"""One traced shape as the engine's call: the harness's allocations, then one training iteration's events in which the
first iteration's own allocations are marked (``livebytes.tracer``'s trace format).

A trace runs ``steps`` iterations. Iteration 1 is the steady state (iteration 2 must repeat it exactly, else the trace
is refused); iteration 0 is the process's first call. Aligning iteration 0 with iteration 1 (``difflib``, on event
signatures) leaves iteration 0's own events: an allocation it makes that is still alive when iteration 1 starts is
*kept* (AdamW's states, a library cache's entries: ``Buffer.cached``); one it frees within itself is *first-call only*
(a cache miss's temporaries: ``Buffer.first_call``). Both are placed where iteration 0 made them, between the steady
iteration's events; the steady iteration's events keep their order. Frees are events too, so a first-call
temporary dies where it died.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

ALLOC, FREE = "alloc", "free"
NOT_ALLOCATING = ("launch", "gemm", "reduce", "scratch_op")


@dataclass
class Alloc:
    """One allocation of a trace: what the recorder saw, where it is in the unified call, and how it ends."""
    id: int
    bytes: int
    dtype: str
    shape: tuple
    op: str
    frames: tuple                 # ((file, line, function), ...) innermost first
    module: str
    phase: str
    thread: str
    kind: str = "steady"          # "harness", "steady", "kept" (cached) or "first_call"
    out_index: int = 0            # its place among its operator's outputs
    param: str | None = None      # the parameter it belongs to (parameters and the optimizer's allocations)
    freed_phase: str | None = None   # the phase its free came in (zero_grad: a parameter's gradient)


@dataclass
class Call:
    """``harness``: allocations before the first iteration, in order. ``events``: the unified iteration, each
    ("alloc", Alloc) | ("free", Alloc) | (kind, dict) for launches, GEMMs, reductions; ``first_call`` marks events of
    iteration 0 only."""
    mbs: int
    seq: int
    harness: list = field(default_factory=list)
    events: list = field(default_factory=list)
    first_call: set = field(default_factory=set)     # positions in ``events`` that only the first iteration has


class TraceRefused(ValueError):
    """A trace the composer cannot turn into a model (not steady, an allocation that outlives its iteration)."""


def _windows(events: list) -> dict:
    """Iteration -> (start, end) positions in ``events``; "harness" -> its span."""
    starts = [(i, e) for i, e in enumerate(events) if e["e"] == "mark"]
    out, iteration_start = {}, {}
    for i, e in starts:
        if e["phase"] == "forward":
            iteration_start[e["step"]] = i
        if e["phase"] == "end":
            iteration_start["end"] = i
    harness = next(i for i, e in starts if e["phase"] == "harness")
    out["harness"] = (harness, iteration_start[0])
    out["end"] = (iteration_start["end"], len(events))
    steps = sorted(k for k in iteration_start if k != "end")
    for k in steps:
        out[k] = (iteration_start[k], iteration_start.get(k + 1, iteration_start["end"]))
    return out


def _allocs(trace: dict) -> tuple[dict, dict]:
    """id -> Alloc, and id -> position of its free (None: never freed)."""
    frames = trace["frames"]
    allocs, freed, out_index, last_key = {}, {}, 0, None
    for pos, e in enumerate(trace["events"]):
        if e["e"] == "alloc":
            key = (e["op"], e["frames"], e["module"])
            out_index = out_index + 1 if key == last_key else 0
            last_key = key
            allocs[e["id"]] = Alloc(e["id"], e["bytes"], e["dtype"], tuple(e["shape"]), e["op"],
                                    tuple(tuple(f) for f in frames[e["frames"]]), e["module"], e["phase"], e["thread"],
                                    out_index=out_index, param=e.get("param"))
            allocs[e["id"]].position = pos
        elif e["e"] == "free":
            freed[e["id"]] = pos
            if e["id"] in allocs:
                allocs[e["id"]].freed_phase = e.get("phase")
        else:
            last_key = None
    return allocs, freed


def _signature(e: dict, allocs: dict) -> tuple:
    """What makes two events of two iterations the same event."""
    if e["e"] == ALLOC:
        a = allocs[e["id"]]
        return (ALLOC, a.op, a.frames, a.bytes, a.module, a.phase)
    if e["e"] == FREE:
        a = allocs[e["id"]]
        return (FREE, a.op, a.frames, a.bytes, a.module)
    return (e["e"], e.get("kernel") or e.get("op"), e.get("module"), e.get("phase"), str(e.get("key")))


def _window_events(trace: dict, span: tuple, allocs: dict) -> list:
    lo, hi = span
    return [e for e in trace["events"][lo:hi] if e["e"] != "mark" and (e["e"] != FREE or e["id"] in allocs)]


def _check_steady(trace: dict, windows: dict, allocs: dict) -> None:
    """Iterations 1 and 2 are the same events, and nothing iteration 1 allocates outlives it."""
    one, two = (_window_events(trace, windows[k], allocs) for k in (1, 2))
    if [_signature(e, allocs) for e in one] != [_signature(e, allocs) for e in two]:
        raise TraceRefused(f"{trace['mbs']} x {trace['seq']}: iterations 1 and 2 differ; no steady state to model")
    ids = {e["id"] for e in one if e["e"] == ALLOC}
    freed = {e["id"] for e in one if e["e"] == FREE}
    if ids - freed:
        a = allocs[min(ids - freed)]
        raise TraceRefused(f"{trace['mbs']} x {trace['seq']}: {a.op} of {a.module or 'the model'} ({a.bytes:,} B) allocated "
                           "in a steady iteration outlives it")


def unify(trace: dict) -> Call:
    """The call at one traced shape (module doc)."""
    allocs, freed_at = _allocs(trace)
    windows = _windows(trace["events"])
    if 2 not in windows:
        raise TraceRefused("a trace needs three iterations (the first call, then two steady ones)")
    _check_steady(trace, windows, allocs)
    call = Call(trace["mbs"], trace["seq"])
    lo, hi = windows["harness"]
    call.harness = [allocs[e["id"]] for e in trace["events"][lo:hi] if e["e"] == ALLOC]
    for a in call.harness:
        a.kind = "harness"
        if a.id in freed_at and freed_at[a.id] < windows["end"][0]:
            raise TraceRefused(f"{a.op} ({a.bytes:,} B), made before the first iteration, is freed during training")
    first, steady = (_window_events(trace, windows[k], allocs) for k in (0, 1))
    end_of_zero = windows[0][1]
    matcher = difflib.SequenceMatcher(None, [_signature(e, allocs) for e in first],
                                      [_signature(e, allocs) for e in steady], autojunk=False)
    merged: list = []                     # (event, iteration-0-only?)
    j_done = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            merged += [(e, False) for e in steady[j1:j2]]
        else:
            merged += [(e, True) for e in first[i1:i2]]
            merged += [(e, False) for e in steady[j1:j2]]
        j_done = j2
    assert j_done == len(steady)
    for e, only_first in merged:
        kind = e["e"]
        if only_first and kind == ALLOC:
            a = allocs[e["id"]]
            a.kind = "kept" if freed_at.get(e["id"], 10**18) >= end_of_zero else "first_call"
            if a.kind == "kept" and freed_at.get(e["id"], 10**18) < windows["end"][0]:
                raise TraceRefused(f"{a.op} of {a.module or 'the model'} ({a.bytes:,} B), made by the first iteration, is "
                                   "freed by a later one: a cache that evicts is not modelled")
        if only_first and kind == FREE and allocs[e["id"]].kind == "steady":
            continue                      # iteration 0 freeing something iteration 1 does not make: not possible
        if only_first:
            call.first_call.add(len(call.events))
        if kind in (ALLOC, FREE):
            call.events.append((kind, allocs[e["id"]]))
        else:
            if "frames" in e:
                frames = trace["frames"][e["frames"]]
                e = {**e, "frame": tuple(frames[0]) if frames else ("", 0, "", ""),
                     "frames_full": tuple(tuple(f) for f in frames)}      # ``loops.in_body`` reads a launch's
            call.events.append((kind, e))
    return call

"""A stack of L layers from a call traced with three: cost linear in L, and shown exact against a trace of four.

The events of a layer module (``...layers.{i}...``) come in *sweeps*: the forward runs layer 0, 1, 2 in turn, the
backward 2, 1, 0, the optimizer's passes and ``zero_grad`` go over the parameters layer by layer. A sweep of a call
with three layers has the first layer's run, a middle one and the last one's; the call with L layers runs the same
sweep with the middle run repeated for layers 1 .. L-2, each event renamed to its layer. A free, and any reference to
an allocation (a GEMM's output, a launch's arguments), keeps its relation: to the same layer's run of another sweep
(an activation saved for the backward), to the layer before (the residual handed on), or to an allocation outside the
layers (freed once, by the middle layer the sweep runs last, when the middle run frees it). Frees that come in a
stretch over the layers (``zero_grad``; the optimizer dropping a list) are a sweep too.

``expand(call3, L)``: that call. ``check(call3, call4)``: ``expand(call3, 4)`` is ``call4``, event by event (operators,
frames, modules, byte formulas, what each free frees): the proof that layers 1 .. L-2 repeat, required before any
other L is answered from three.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
import difflib

from .calls import ALLOC, FREE
from .symbolic import SymCall

LAYER = re.compile(r"(^|\.)layers\.(\d+)(\.|$)")


def layer_of(module: str | None) -> int | None:
    m = LAYER.search(module or "")
    return int(m.group(2)) if m else None


def relabel(module: str, layer: int) -> str:
    return LAYER.sub(lambda m: f"{m.group(1)}layers.{layer}{m.group(3)}", module or "", count=1)


class NotRepeating(ValueError):
    """The three-layer call does not have the sweep structure, or four layers are not three with one more."""


# ------------------------------------------------------------------------------------------ units

@dataclass
class Sweep:
    """Runs of consecutive events, one per layer, in ``order`` (ascending or descending): each a list of positions."""
    runs: list                  # [positions of layer order[0]], [..], [..]
    order: tuple                # (0, 1, 2) or (2, 1, 0)


def _owner(kind: str, ev) -> int | None:
    return layer_of(ev.module if kind in (ALLOC, FREE) else ev.get("module"))


def _phase(kind: str, ev) -> str:
    return ev.phase if kind in (ALLOC, FREE) else ev.get("phase")


def units(events: list, layers: int = 3) -> list:
    """The call as units: ``int`` (one event's position) or ``Sweep``. Non-free events make runs by (layer, phase); a
    free belongs to the run it follows, unless it is part of a stretch of frees going over the layers."""
    out, i, n = [], 0, len(events)
    while i < n:
        kind, ev = events[i]
        if kind == FREE:
            sweep, i2 = _free_sweep(events, i, layers)
            if sweep:
                out.append(sweep)
                i = i2
                continue
            out.append(i)
            i += 1
            continue
        owner = _owner(kind, ev)
        if owner is None:
            out.append(i)
            i += 1
            continue
        sweep, i2 = _run_sweep(events, i, layers)
        if sweep is None:
            raise NotRepeating(f"events of layer {owner} at {ev.get('module') if isinstance(ev, dict) else ev.module} "
                               "are not part of a pass over every layer")
        out.append(sweep)
        i = i2
    return out


def _run_end(events: list, i: int) -> int:
    """One past the run starting at i: its non-free events of one layer and phase, and the frees after each of them
    (stopping before a stretch of frees that goes over the layers)."""
    kind, ev = events[i]
    owner, phase = _owner(kind, ev), _phase(kind, ev)
    j = i + 1
    while j < len(events):
        k, e = events[j]
        if k == FREE:
            j += 1
            continue
        if _owner(k, e) != owner or _phase(k, e) != phase:
            break
        j += 1
    while j > i + 1 and events[j - 1][0] == FREE and _free_sweep(events, _first_free(events, j), 3)[0]:
        j = _first_free(events, j)        # a trailing stretch over the layers is its own sweep
    return j


def _first_free(events: list, j: int) -> int:
    while j > 0 and events[j - 1][0] == FREE:
        j -= 1
    return j


def _run_sweep(events: list, i: int, layers: int):
    """The sweep of ``layers`` runs starting at i (None: the runs there do not go over every layer in order)."""
    runs, at = [], i
    for _ in range(layers):
        if at >= len(events) or events[at][0] == FREE:
            return None, i
        end = _run_end(events, at)
        runs.append(list(range(at, end)))
        at = end
    owners = tuple(_owner(*events[r[0]]) for r in runs)
    if owners not in (tuple(range(layers)), tuple(reversed(range(layers)))):
        return None, i
    return Sweep(runs, owners), at


def _free_sweep(events: list, i: int, layers: int):
    """A stretch of frees at i whose targets go over every layer in order (blocks of one layer each). It ends where a
    pass is complete: lists dropped back to back (AdamW's foreach temporaries when every parameter with a state sits in
    a layer, as LoRA's adapters do, no embedding or head between them) are one sweep each."""
    j, blocks = i, []
    while j < len(events) and events[j][0] == FREE:
        owner = _owner(*events[j])
        if owner is None:
            break
        if not blocks or blocks[-1][0] != owner:
            if len(blocks) == layers:
                break
            blocks.append((owner, []))
        blocks[-1][1].append(j)
        j += 1
    if len(blocks) == layers and j < len(events) and events[j][0] == FREE and _owner(*events[j]) is not None:
        j = _split_turn(events, blocks, j)
    owners = tuple(o for o, _ in blocks)
    if owners in (tuple(range(layers)), tuple(reversed(range(layers)))):
        return Sweep([b for _, b in blocks], owners), j
    return None, i


def _split_turn(events: list, blocks: list, j: int) -> int:
    """Where a pass turns back (a list dropped 2, 1, 0 and the next 0, 1, 2, as AdamW's sqrt temporaries and then
    zero_grad's gradients), the layer both passes share is one block: its trailing frees of the next pass's operator
    are the next pass's. One past the first pass (``blocks`` cut there)."""
    op = events[j][1].op
    last = blocks[-1][1]
    k = len(last)
    while k > 0 and events[last[k - 1]][1].op == op:
        k -= 1
    if 0 < k < len(last):
        blocks[-1] = (blocks[-1][0], last[:k])
        return last[k]
    return j


# ------------------------------------------------------------------------------------------ expansion

def _template_for(layer: int, layers: int, order: tuple) -> int:
    """Which of the three traced runs layer ``layer`` of an L-layer sweep repeats: the first, a middle or the last."""
    template_layer = 0 if layer == 0 else (2 if layer == layers - 1 else 1)
    return order.index(template_layer)


@dataclass
class _Home:
    sweep: int | None           # index of the sweep unit it is made in (None: outside the layers)
    layer: int | None           # its layer in the traced call
    index: int | None           # its place among its run's allocations, in the middle run's numbering (None: made in
                                # this run only); outside the layers: its position


def _aligned(runs: dict) -> dict:
    """layer -> [index in the middle run's numbering, or None] for each allocation of that layer's run. Runs of equal
    length align one to one; otherwise by operator and module (``difflib``): the first layer of packed sequences makes
    the chunk indices that fla's ``tensor_cache`` hands every later layer (``prepare_chunk_indices``), so its run holds
    allocations no other run has, and only the others align; a hybrid stack's head and tail (``hybrid``) are other
    layers than its period's, of which only those of the period's kinds align. An allocation that does not align is
    its run's own (None); ``check`` proves what the expansion makes of it."""
    middle = runs[1] if 1 in runs else next(iter(runs.values()))
    key = [(a.op, relabel(a.module, 0)) for a in middle]
    out = {}
    for layer, allocs in runs.items():
        if len(allocs) == len(middle):
            out[layer] = list(range(len(allocs)))
            continue
        index = [None] * len(allocs)
        sm = difflib.SequenceMatcher(None, key, [(a.op, relabel(a.module, 0)) for a in allocs], autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                index[j1:j2] = range(i1, i2)
        out[layer] = index
    return out


def _homes(events: list, us: list) -> tuple[dict, dict]:
    """uid -> where each allocation is made; (sweep, layer) -> {index in the middle run's numbering: uid} of its run."""
    homes, by_run = {}, {}
    for u, unit in enumerate(us):
        if isinstance(unit, int):
            kind, ev = events[unit]
            if kind == ALLOC:
                homes[ev.uid] = _Home(None, None, unit)
            continue
        runs = {layer: [events[p][1] for p in run if events[p][0] == ALLOC] for layer, run in zip(unit.order, unit.runs)}
        for layer, index in _aligned(runs).items():
            by_run[(u, layer)] = {k: a.uid for k, a in zip(index, runs[layer]) if k is not None}
            for k, a in zip(index, runs[layer]):
                homes[a.uid] = _Home(u, layer, k)
    return homes, by_run


def expand(call: SymCall, layers: int) -> SymCall:
    """The call of ``layers`` layers from ``call`` traced with three (module doc)."""
    if layers < 3:
        raise ValueError("a stack of fewer than three layers is traced as it is")
    events = [(ALLOC, a) for a in call.harness] + list(call.events)      # the harness's parameters sweep too
    first_call = {p + len(call.harness) for p in call.first_call}
    us = units(events)
    homes, by_run = _homes(events, us)
    made: dict = {}                                   # (traced uid, instance layer) -> the new SymAlloc
    counter = [0]

    def clone(a, layer):
        counter[0] += 1
        new = replace(a, uid=counter[0], id=counter[0],
                      module=relabel(a.module, layer) if layer is not None else a.module,
                      param=relabel(a.param, layer) if (a.param and layer is not None) else a.param)
        made[(a.uid, layer)] = new
        return new

    def target(uid: int, layer_here: int | None, template_layer: int | None):
        """The new allocation that a reference to ``uid`` from the instance of ``layer_here`` means."""
        home = homes[uid]
        if home.sweep is None:
            return made.get((uid, None))
        if home.index is None:                        # made by its layer's run alone: that layer's, whoever asks
            return made.get((uid, _shift(home.layer, None, None, layers)))
        layer = _shift(home.layer, template_layer, layer_here, layers)
        twin = by_run[(home.sweep, _template_layer(layer, layers))].get(home.index)
        return None if twin is None else made.get((twin, layer))

    out, n_harness = SymCall(notes=list(call.notes)), 0
    for unit in us:
        for layer, pos, here in _instances(unit, layers):
            kind, ev = events[pos]
            if kind == ALLOC and ev.phase == "harness":
                out.harness.append(clone(ev, layer))
                n_harness += 1
                continue
            if pos in first_call:
                out.first_call.add(len(out.events))
            if kind == ALLOC:
                out.events.append((ALLOC, clone(ev, layer)))
            elif kind == FREE:
                if here == 1 and homes[ev.uid].sweep is None and layer != _last_middle(unit, layers):
                    continue        # an allocation made outside the layers is freed once, by its last user
                new = target(ev.uid, layer, here)
                if new is None:
                    raise NotRepeating(f"a free of {ev.op} at {ev.module} refers to nothing in the {layers}-layer call")
                out.events.append((FREE, new))
            else:
                ev = dict(ev, module=relabel(ev.get("module"), layer) if layer is not None else ev.get("module"))
                if ev.get("out") is not None:
                    new = target(ev["out"], layer, here)
                    ev["out"] = new.uid if new is not None else None
                ev["args"] = [n.uid for n in (target(a, layer, here) for a in ev.get("args", ())) if n]
                out.events.append((kind, ev))
    return out


def _last_middle(unit, layers: int) -> int:
    """The middle layer a sweep runs last: a free the middle run makes of an allocation from outside the layers (the
    rotary embeddings' cos and sin, which a hybrid stack's first full-attention layer may be the last to use) is made
    by that layer alone."""
    return layers - 2 if unit.order[0] == 0 else 1


def _template_layer(layer: int, layers: int) -> int:
    """The traced layer (0, 1 or 2) whose runs layer ``layer`` of an L-layer call repeats."""
    return 0 if layer == 0 else (2 if layer == layers - 1 else 1)


def _shift(home_layer: int, template_layer: int | None, layer_here: int | None, layers: int) -> int:
    """The instance layer of a referenced allocation: the same offset from the referring instance as in the trace; from
    outside the layers, the first layer is the first and the last the last (a middle one is no single layer)."""
    if template_layer is None or layer_here is None:
        if home_layer == 1:
            raise NotRepeating("an event outside the layers refers to the middle layer of three")
        return 0 if home_layer == 0 else layers - 1
    return layer_here + (home_layer - template_layer)


def _instances(unit, layers: int) -> list:
    """(layer, position, traced layer of its run) of every event of the unit in an L-layer call: a sweep's runs for
    every layer in its order."""
    if isinstance(unit, int):
        return [(None, unit, None)]
    order = range(layers) if unit.order[0] == 0 else range(layers - 1, -1, -1)
    out = []
    for layer in order:
        k = _template_for(layer, layers, unit.order)
        out += [(layer, p, unit.order[k]) for p in unit.runs[k]]
    return out


# ------------------------------------------------------------------------------------------ the proof

def canonical(call: SymCall) -> list:
    """The call as comparable rows: each event's operator, frames, module, bytes, and what it refers to by the
    position of that allocation."""
    index = {a.uid: ("h", i) for i, a in enumerate(call.harness)}
    rows = [("harness", a.op, a.frames, a.module, str(a.bytes), a.kind) for a in call.harness]
    n = 0
    for p, (kind, ev) in enumerate(call.events):
        first = p in call.first_call
        if kind == ALLOC:
            index[ev.uid] = ("e", n)
            n += 1
            rows.append((ALLOC, ev.op, ev.frames, ev.module, str(ev.bytes), ev.kind, first))
        elif kind == FREE:
            rows.append((FREE, index.get(ev.uid), first))
        else:
            rows.append((kind, ev.get("kernel") or ev.get("op"), ev.get("module"), index.get(ev.get("out")),
                         tuple(index.get(a) for a in ev.get("args", ())), str(ev.get("key")), str(ev.get("leading")),
                         first))
    return rows


def check(three: SymCall, four: SymCall) -> None:
    """``expand(three, 4)`` is ``four``: raises NotRepeating at the first difference."""
    got, want = canonical(expand(three, 4)), canonical(four)
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            raise NotRepeating(f"four layers are not three with one more, at event {i}: {str(g)[:160]} vs {str(w)[:160]}")
    if len(got) != len(want):
        raise NotRepeating(f"four layers are not three with one more: {len(got)} events expanded, {len(want)} traced")

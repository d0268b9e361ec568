"""Traced calls at several shapes as one call whose sizes are formulas in S and MBS (exact, never fitted).

Every trace runs the same host code, so after folding shape-dependent loops (``loops``) the calls are the same events
in the same order at every shape; only sizes differ. Each allocation's bytes, and each reduction's rows and outputs,
are one exact integer per shape, solved with ``learn.solve_sizes`` (``c*m`` or ``c*m + c0``, m a product of T, N and at
most one chunk count; the model's own dims are constants of its config, folded into c). A loop's allocations are
``a*C + b`` in the iteration's chunk C, solved the same way over every traced iteration. A size no formula explains at
every shape is refused (one line naming the operator and its sizes), never approximated.

The result is one ``SymCall``: the harness and a unified iteration (``calls``) whose allocations carry sympy byte
formulas over the engine's symbols (``S``, ``MBS``), with a loop unrolled to its largest trip count; an iteration a
shape does not run has chunk 0, so its allocations take no block. What an iteration leaves for the next one to free
(a loop variable rebound) is split in two: the part freed by the next iteration (when there is one) and the part freed
after the loop (when it is the last), each sized by whether it applies.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import sympy as sp

from livebytes.estimator.declare import next_power_of_2
from livebytes.estimator.symbols import MBS, S, cdiv

from .calls import ALLOC, FREE, Alloc, Call
from .gpu_rules import leading_sum
from .loops import LOOPS, Folded, fold, loop_allocs, template_signature

T = MBS * S


class Unexplained(ValueError):
    """A traced size (or structure) that no exact formula explains at every traced shape."""


@dataclass
class SymAlloc:
    """An allocation of the symbolic call: its bytes as a formula, and what every trace agreed on."""
    uid: int
    bytes: object                 # sympy expression in S, MBS
    dtype: str
    shape_text: str
    op: str
    frames: tuple
    module: str
    phase: str
    thread: str
    kind: str
    param: str | None = None
    id: int = -1                  # GPU rules place their buffers after the allocation of this id (= uid)
    freed_phase: str | None = None


@dataclass
class SymCall:
    harness: list = field(default_factory=list)
    events: list = field(default_factory=list)      # ("alloc"|"free", SymAlloc) | (kind, dict)
    first_call: set = field(default_factory=set)
    notes: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- solving

CHUNKS = (16, 32, 64, 128)


def shape_values(call: Call, loop_chunks: tuple[int, ...] = ()) -> dict:
    """Every candidate factor's value at one traced shape: tokens T, sequences N, tokens per sequence S, chunk counts
    per sequence (``NTc`` = N * cdiv(S, c): FLA's chunked kernels) and over the packed tokens (``cdiv(T,c)``); and for
    each NC of ``loop_chunks`` the chunk of a loop whose buffer of one chunk is allocated before it
    (``C(T,NC)`` = min(next_power_of_2(cdiv(T, NC)), T): ``LoopRule.buffer_outside``)."""
    t, n = call.mbs * call.seq, call.mbs
    out = {"T": t, "N": n, "S": call.seq}
    for c in CHUNKS:
        out[f"NT{c}"] = n * -(-call.seq // c)
        out[f"cdiv(T,{c})"] = -(-t // c)
    for nc in loop_chunks:
        out[f"C(T,{nc})"] = min(1 << (-(-t // nc) - 1).bit_length(), t)
    return out


def factor_expr(name: str) -> sp.Expr:
    """A factor in the engine's symbols."""
    if name in ("T", "N", "S"):
        return {"T": T, "N": MBS, "S": S}[name]
    if name.startswith("NT"):
        return MBS * cdiv(S, int(name[2:]))
    if name.startswith("C(T,"):
        return sp.Min(next_power_of_2(cdiv(T, int(name[4:-1]))), T)
    return cdiv(T, int(name[5:-1].split(",")[1]))


def solve(values: list[int], shapes: list[dict], what: str) -> sp.Expr:
    """The one exact formula ``c*f`` or ``c*f + c0`` (f one factor of ``shape_values``; c, c0 integers) that gives
    every traced value, simplest first; a constant where the value never changes. Ambiguous or none: refused."""
    if len(set(values)) == 1:
        return sp.Integer(values[0])
    for constant in (False, True):
        found = []
        for f in shapes[0]:
            fit = _fit([s[f] for s in shapes], values, constant)
            if fit is not None:
                found.append((f, fit))
        distinct = {(tuple(s[f] for s in shapes), fit) for f, fit in found}
        if len(distinct) > 1:
            raise Unexplained(f"{what}: {' or '.join(_formula_text(f, fit) for f, fit in found)} fit every traced shape "
                              f"({_shapes_text(shapes)}): trace another shape")
        if found:
            f, (c, c0) = found[0]
            return sp.expand(c * factor_expr(f) + c0)
    per_row = _per_row(values, shapes, what)
    if per_row is not None:
        return per_row
    raise Unexplained(f"{what}: sizes {values} at {_shapes_text(shapes)} are no exact formula in T, N and S")


def _per_row(values: list[int], shapes: list[dict], what: str):
    """``c*f + d*N``: a factor plus a size per sequence, tried when no one-factor formula fits. A batch of several rows
    makes it: transformers' torch fallback of ``causal_conv1d`` pads each row (``F.conv1d(..., padding=K-1)``, output
    [N, C, S + K - 1]: ``2C*T + 2C(K-1)*N`` bytes). Ambiguous: refused as ``solve`` refuses."""
    ns = [s["N"] for s in shapes]
    found = [(f, fit) for f in shapes[0] if f != "N"
             for fit in [_fit_rows([s[f] for s in shapes], ns, values)] if fit is not None]
    distinct = {(tuple(s[f] for s in shapes), fit) for f, fit in found}
    if len(distinct) > 1:
        raise Unexplained(f"{what}: {' or '.join(f'{c}*{f} + {d}*N' for f, (c, d) in found)} fit every traced shape "
                          f"({_shapes_text(shapes)}): trace another shape")
    if not found:
        return None
    f, (c, d) = found[0]
    return sp.expand(c * factor_expr(f) + d * MBS)


def _fit_rows(xs: list[int], ns: list[int], ys: list[int]):
    """(c, d) with y = c*x + d*n at every point, integers, c > 0, d != 0; None when no two points determine them."""
    pair = next(((i, j) for i in range(len(xs)) for j in range(i + 1, len(xs)) if xs[i] * ns[j] != xs[j] * ns[i]), None)
    if pair is None:
        return None
    i, j = pair
    det = xs[i] * ns[j] - xs[j] * ns[i]
    c_num, d_num = ys[i] * ns[j] - ys[j] * ns[i], xs[i] * ys[j] - xs[j] * ys[i]
    if c_num % det or d_num % det:
        return None
    c, d = c_num // det, d_num // det
    return (c, d) if c > 0 and d and all(c * x + d * n == y for x, n, y in zip(xs, ns, ys)) else None


def _fit(xs: list[int], ys: list[int], constant: bool):
    """(c, c0) with y = c*x + c0 at every point (c0 = 0 unless ``constant``), integers, c > 0."""
    if not constant:
        if xs[0] == 0 or ys[0] % xs[0]:
            return None
        c = ys[0] // xs[0]
        return (c, 0) if c > 0 and all(c * x == y for x, y in zip(xs, ys)) else None
    other = next((i for i, x in enumerate(xs) if x != xs[0]), None)
    if other is None or (ys[other] - ys[0]) % (xs[other] - xs[0]):
        return None
    c = (ys[other] - ys[0]) // (xs[other] - xs[0])
    c0 = ys[0] - c * xs[0]
    return (c, c0) if c > 0 and c0 and all(c * x + c0 == y for x, y in zip(xs, ys)) else None


def _formula_text(f: str, fit: tuple) -> str:
    c, c0 = fit
    return f"{c}*{f}" + (f" + {c0}" if c0 > 0 else f" - {-c0}" if c0 else "")


def _shapes_text(shapes: list[dict]) -> str:
    return ", ".join(f"{s['N']} x {s['S']}" for s in shapes)


def solve_affine(points: list[tuple[int, int]], what: str) -> tuple[int, int]:
    """(a, b) with value = a*chunk + b at every (chunk, value) point, exactly."""
    distinct = sorted(set(points))
    if len({c for c, _ in distinct}) < 2:
        if len({v for _, v in distinct}) == 1:
            return 0, distinct[0][1]
        raise Unexplained(f"{what}: one chunk size traced, two sizes: no formula")
    (c0, v0), (c1, v1) = distinct[0], next(p for p in distinct if p[0] != distinct[0][0])
    if (v1 - v0) % (c1 - c0):
        raise Unexplained(f"{what}: sizes {distinct} are not a whole multiple of the chunk plus a constant")
    a = (v1 - v0) // (c1 - c0)
    b = v0 - a * c0
    if any(a * c + b != v for c, v in distinct):
        raise Unexplained(f"{what}: sizes {distinct} are not a*chunk + b")
    return a, b


# ---------------------------------------------------------------------------------------------- structure

def _signature(kind: str, ev) -> tuple:
    if kind == ALLOC:
        return (ALLOC, ev.op, ev.frames, ev.dtype, ev.module, ev.phase, ev.kind)
    if kind == FREE:
        return (FREE,)
    return (kind, ev.get("kernel") or ev.get("op"), ev.get("module"))


@dataclass
class Shaped:
    """One traced call with its loops folded: the events outside loops, and each loop in its place."""
    call: Call
    outside: list            # (kind, ev) with a loop standing as ("loop", Folded)
    loops: list


def fold_loops(call: Call, config: dict) -> Shaped:
    events, loops = list(call.events), []
    for rule in LOOPS:
        f = fold(call, rule, config, call.mbs * call.seq)
        if f is not None:
            loops.append(f)
    loops.sort(key=lambda f: f.start)
    out, at = [], 0
    for f in loops:
        out += events[at:f.start] + [("loop", f)]
        at = f.stop
    out += events[at:]
    return Shaped(call, out, loops)


def structure(shaped: Shaped, frees: dict) -> list:
    """The signature of the folded call: outside events, frees by the position of what they free."""
    sig = []
    for kind, ev in shaped.outside:
        if kind == "loop":
            hoisted = tuple((slot, a.op, a.frames, a.dtype, a.module) for slot, a in ev.hoisted)
            sig.append(("loop", ev.rule.function, tuple(map(str, template_signature(_middle(ev)))), hoisted))
        elif kind == FREE:
            sig.append((FREE, frees.get(ev.id)))
        else:
            sig.append(_signature(kind, ev))
    return sig


def _middle(f: Folded):
    return f.iterations[1] if len(f.iterations) > 2 else f.iterations[0]


def positions(shaped: Shaped) -> dict:
    """Alloc id -> its key in the folded call: ("out", index among outside allocations) or ("loop", loop, iteration,
    template index)."""
    out, n = {}, 0
    for kind, ev in shaped.outside:
        if kind == ALLOC:
            out[ev.id] = ("out", n)
            n += 1
        elif kind == "loop":
            li = shaped.loops.index(ev)
            for aid, (i, j) in loop_allocs(ev).items():
                out[aid] = ("loop", li, i, j)
            for k, (_, a) in enumerate(ev.hoisted):
                out[a.id] = ("hoist", li, k)
    return out


def _free_key(pos: tuple, last: dict) -> tuple:
    """A free's identity across shapes: an outside allocation by its index, a loop's hoisted one by its place; a loop's
    by (loop, template index, whether its iteration is the last)."""
    if pos[0] in ("out", "hoist"):
        return pos
    _, li, i, j = pos
    return ("loop", li, j, i == last[li])


def align(shapeds: list[Shaped]) -> list[dict]:
    """The frees' keys per trace; raises where two traces' folded structures differ."""
    keys = []
    for sh in shapeds:
        pos = positions(sh)
        last = {li: len(f.iterations) - 1 for li, f in enumerate(sh.loops)}
        keys.append({aid: _free_key(p, last) for aid, p in pos.items()})
    ref = structure(shapeds[0], keys[0])
    for sh, k in zip(shapeds[1:], keys[1:]):
        other = structure(sh, k)
        if other != ref:
            at = next((i for i, (a, b) in enumerate(zip(ref, other)) if a != b), min(len(ref), len(other)))
            raise Unexplained(f"the traced calls differ in structure at event {at} ({_text(ref, at)} vs {_text(other, at)}) "
                              f"between {shapeds[0].call.mbs} x {shapeds[0].call.seq} and {sh.call.mbs} x {sh.call.seq}")
    return keys


def _text(sig: list, at: int) -> str:
    return str(sig[at])[:120] if at < len(sig) else "the end"


__all__ = ["SymAlloc", "SymCall", "Unexplained", "solve", "solve_affine", "fold_loops", "align", "positions",
           "shape_values", "replace", "next_power_of_2", "cdiv", "T"]


# ---------------------------------------------------------------------------------------------- the symbolic call

def _shape_text(dims_per_trace: list[tuple], shapes: list[dict]) -> str:
    """A tensor's dims as formulas where each is one (``[T, 512]``), else its first trace's dims."""
    if len({len(d) for d in dims_per_trace}) != 1:
        return str(list(dims_per_trace[0]))
    out = []
    for k in range(len(dims_per_trace[0])):
        try:
            out.append(str(solve([d[k] for d in dims_per_trace], shapes, "dim")).replace("MBS*S", "T"))
        except Unexplained:
            return str(list(dims_per_trace[0]))
    return "[" + ", ".join(out) + "]"


def _sym(a: Alloc, uid: int, nbytes, shape_text: str, kind: str | None = None) -> SymAlloc:
    return SymAlloc(uid, nbytes, a.dtype, shape_text, a.op, a.frames, a.module, a.phase, a.thread, kind or a.kind,
                    a.param, uid, a.freed_phase)


class _Uids:
    def __init__(self):
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


def _outside_allocs(shaped: Shaped) -> list[Alloc]:
    return [ev for k, ev in shaped.outside if k == ALLOC]


def _harness(shapeds: list[Shaped], shapes: list[dict], uids: _Uids) -> list[SymAlloc]:
    out = []
    for j, a in enumerate(shapeds[0].call.harness):
        per = [sh.call.harness[j] for sh in shapeds]
        nbytes = solve([x.bytes for x in per], shapes, f"{a.op} of {a.param or a.module or 'the batch'}")
        out.append(_sym(a, uids(), nbytes, _shape_text([x.shape for x in per], shapes)))
    return out


def _solve_event(kind: str, evs: list[dict], shapes: list[dict], uid_of) -> dict:
    """A launch, GEMM or reduction across traces: its formulas (rows, outputs) and what it refers to (uids)."""
    ev = dict(evs[0])
    ev["out"] = uid_of(evs[0].get("out"))
    if kind == "reduce":
        leading = [leading_sum(e["shape"], e["stride"], e["dims"]) for e in evs]
        ev["leading"] = None
        if all(x is not None for x in leading):
            ev["leading"] = tuple(solve([x[k] for x in leading], shapes, f"{ev['op']} {('rows', 'outputs')[k]}")
                                  for k in (0, 1))
    if kind == "launch":
        ev["args"] = [u for u in (uid_of(a) for a in ev.get("args", ())) if u is not None]
    return ev


def _chunk(rule, config: dict, i: int) -> sp.Expr:
    """Iteration i's chunk as a formula: min(C, max(0, T - i*C)) with the rule's C = next_power_of_2(cdiv(T, NC))."""
    nc = rule.most(config)
    c = next_power_of_2(cdiv(T, nc))
    return sp.Min(c, sp.Max(0, T - i * c))


def symbolic_call(calls: list[Call], config: dict) -> SymCall:
    """The calls of one model at several shapes as one symbolic call (module doc)."""
    shapeds = [fold_loops(c, config) for c in calls]
    outside = tuple(sorted({f.rule.most(config) for f in shapeds[0].loops if f.rule.buffer_outside}))
    shapes = [shape_values(c, outside) for c in calls]
    keys = align(shapeds)
    uids = _Uids()
    out = SymCall()
    out.harness = _harness(shapeds, shapes, uids)
    by_key: dict = {}                                         # free key -> SymAlloc(s) it frees
    uid_by_trace0 = {a.id: sa.uid for a, sa in zip(shapeds[0].call.harness, out.harness)}   # trace 0's id -> uid
    outside = [sh.outside for sh in shapeds]
    n_out = 0
    for pos, (kind, ev) in enumerate(outside[0]):
        first_only = _first_only(shapeds[0], ev)
        if kind == ALLOC:
            per = [o[pos][1] for o in outside]
            nbytes = solve([a.bytes for a in per], shapes, f"{ev.op} at {ev.module or 'the model'} "
                                                           f"({ev.frames[0][0]}:{ev.frames[0][1]})" if ev.frames else ev.op)
            sa = _sym(ev, uids(), nbytes, _shape_text([a.shape for a in per], shapes))
            by_key[("out", n_out)] = [sa]
            uid_by_trace0[ev.id] = sa.uid
            n_out += 1
            _emit(out, (ALLOC, sa), first_only)
        elif kind == FREE:
            key = keys[0].get(ev.id)
            if key is None:
                continue                    # a harness tensor (not freed while training)
            if key not in by_key:
                raise Unexplained(f"a free of {ev.op} at {ev.module or 'the model'} comes before its allocation")
            for sa in by_key[key]:
                _emit(out, (FREE, sa), first_only)
        elif kind == "loop":
            _emit_loop(out, [o[pos][1] for o in outside], shapes, config, uids, by_key, uid_by_trace0)
        else:
            per = [o[pos][1] for o in outside]
            _emit(out, (kind, _solve_event(kind, per, shapes, uid_by_trace0.get)), first_only)
    return out


def _first_only(shaped: Shaped, ev) -> bool:
    if not hasattr(shaped, "_first"):
        shaped._first = {id(e) for p, (k, e) in enumerate(shaped.call.events) if p in shaped.call.first_call}
    return id(ev) in shaped._first


def _emit(out: SymCall, event: tuple, first_only: bool) -> None:
    if first_only:
        out.first_call.add(len(out.events))
    out.events.append(event)


def _non_free(it) -> list:
    return [x for x in template_signature(it) if x[0] != FREE]


def _slots(it) -> tuple[list, list]:
    """An iteration as its non-free events and, before each of them and at the end, the frees that come there."""
    events, frees, pending = [], [], []
    for k, ev in it.events:
        if k == FREE:
            pending.append(ev)
        else:
            frees.append(pending)
            pending = []
            events.append((k, ev))
    frees.append(pending)
    return events, frees


def _loop_sizes(folds: list[Folded], template_events: list) -> list[tuple[int, int]]:
    """(a, b) per template allocation: bytes = a*chunk + b at every traced iteration."""
    allocs = [ev for k, ev in template_events if k == ALLOC]
    out = []
    for j, a in enumerate(allocs):
        points = []
        for f in folds:
            for chunk, it in zip(f.chunks, f.iterations):
                its = [ev for k, ev in it.events if k == ALLOC]
                points.append((chunk, its[j].bytes))
        out.append(solve_affine(points, f"{a.op} in {f.rule.function} ({a.frames[0][0]}:{a.frames[0][1]})"))
    return out


def _hoisted(folds: list[Folded], shapes: list[dict], uids: _Uids, by_key: dict, li: int, uid_by_trace0: dict) -> dict:
    """Slot -> the loop's hoisted allocations there (``loops``: autocast's weight cache), sized across the traces."""
    out: dict = {}
    for k, (slot, a) in enumerate(folds[0].hoisted):
        per = [f.hoisted[k][1] for f in folds]
        nbytes = solve([x.bytes for x in per], shapes, f"{a.op} at {a.module or 'the model'} (hoisted from a loop)")
        sa = _sym(a, uids(), nbytes, _shape_text([x.shape for x in per], shapes))
        by_key[("hoist", li, k)] = [sa]
        uid_by_trace0[a.id] = sa.uid
        out.setdefault(slot, []).append(sa)
    return out


def _emit_loop(out: SymCall, folds: list[Folded], shapes: list[dict], config: dict, uids: _Uids, by_key: dict,
               uid_by_trace0: dict) -> None:
    """The loop unrolled to its largest trip count (module doc)."""
    rule = folds[0].rule
    ref = max(folds, key=lambda f: len(f.iterations))
    if len(ref.iterations) < min(3, rule.most(config)):
        raise Unexplained(f"{rule.function}: no traced shape runs three iterations or more; trace a longer sequence")
    for f in folds:
        sigs = {str(_non_free(it)) for it in f.iterations}
        if len(sigs) != 1:
            raise Unexplained(f"{rule.function}: iterations at one shape run different operators")
    middle_events, middle_frees = _slots(ref.iterations[1] if len(ref.iterations) > 2 else ref.iterations[0])
    _, last_frees = _slots(ref.iterations[-1])
    if len(ref.iterations) == 2:        # no middle iteration: the first's own frees, the last's of the one before
        middle_frees = [a + [x for x in b if x[0] == -1] for a, b in zip(middle_frees, last_frees)]
    if any(k == "launch" and ev.get("key") is not None for k, ev in middle_events):
        raise Unexplained(f"{rule.function}: an autotuned launch inside the loop is not modelled")
    sizes = _loop_sizes(folds, middle_events)
    li = len([k for k in by_key if k[0] == "loopid"])
    by_key[("loopid", li)] = []
    hoisted = _hoisted(folds, shapes, uids, by_key, li, uid_by_trace0)
    most = rule.most(config)
    nxt: dict = {}                                          # (iteration, j) -> the part the next iteration frees
    for i in range(most):
        chunk, present = _chunk(rule, config, i), sp.Min(1, _chunk(rule, config, i))
        following = sp.Min(1, _chunk(rule, config, i + 1)) if i + 1 < most else sp.Integer(0)
        last = present - following
        j = 0
        for slot, (k, ev) in enumerate(middle_events + [(None, None)]):
            for o, jj in middle_frees[slot]:
                if (i + o, jj) in nxt:
                    _emit(out, (FREE, nxt[(i + o, jj)]), False)
            for o, jj in last_frees[slot]:
                if o == 0:
                    _emit(out, (FREE, by_key[("lastpart", li, i, jj)]), False)
            for sa in (hoisted.get(slot, ()) if i == 0 else ()):
                _emit(out, (ALLOC, sa), False)
            if k is None:
                break
            if k == ALLOC:
                a, b = sizes[j]
                nbytes = a * chunk + b * present
                shape_text = f"chunk {i} of {rule.function}: {a}*C + {b} bytes" if a else f"{b} bytes"
                part_next = _sym(ev, uids(), sp.expand(nbytes * following), shape_text, "steady")
                part_last = _sym(ev, uids(), sp.expand(nbytes * last), shape_text + " (the last chunk)", "steady")
                nxt[(i, j)] = part_next
                by_key[("lastpart", li, i, j)] = part_last
                by_key.setdefault(("loop", li, j, True), []).append(part_last)
                _emit(out, (ALLOC, part_next), False)
                _emit(out, (ALLOC, part_last), False)
                j += 1
            else:
                ev = dict(ev, args=[])             # a chunk's launches hold nothing (no autotuned kernel: refused above)
                ev["out"] = part_next.uid if ev.get("out") is not None and j else None
                _emit(out, (k, ev), False)

"""Drift: what traces of a library version show that a hand model does not say.

Buffers are paired by allocating source (file and function, then file, then anywhere), in allocation
order within each group when both sides have the same count there, else by equal bytes at every
traced shape. Each pair is compared on the traced shapes with exact integers:

- resized:  bytes differ and the ratio is not one constant element-size ratio;
- re-typed: bytes differ by one constant ratio of element sizes (2 vs 4 bytes and so on);
- lifetime changed: freed after a different matched allocation, or allocated out of order;
- added / removed: a traced buffer without a hand record, or a hand record without a traced buffer.

Hand buffers the tracer's window cannot see (library caches, warmup leftovers, harness tensors reused
from before the window) are listed as such, never as removed.
"""
from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from fractions import Fraction

from livebytes.estimator.buffers import Buffer, LifetimeModel
from livebytes.estimator.dtypes import ITEMSIZE
from livebytes.estimator.errors import LivebytesError
from .learn import Learned, LearnedBuffer
from .synthetic import buffer_bytes, in_window

ELEMENT_RATIOS = {Fraction(a, b) for a in set(ITEMSIZE.values()) for b in set(ITEMSIZE.values()) if a != b}


@dataclass(frozen=True)
class Finding:
    kind: str          # added | removed | resized | re-typed | lifetime | outside-window | empty
    buffer: str        # hand name, or the learned name for added
    detail: str


def _hand_order(model: LifetimeModel, hand: list[Buffer]) -> list[Buffer]:
    pos = {b.name: i for i, b in enumerate(model.buffers)}
    return sorted(hand, key=lambda b: (model.step_index(b.allocated_at), pos[b.name]))


def _group_keys(b: Buffer) -> list[tuple]:
    return [(b.source.file, b.source.function.rsplit(".", 1)[-1]), (b.source.file,), ()]


def _learned_keys(lb: LearnedBuffer) -> list[tuple]:
    return [(lb.file, lb.function), (lb.file,), ()]


def _pair_group(hand: list[Buffer], learned: list[LearnedBuffer], hand_sizes: dict, exact_only: bool) -> list[tuple]:
    """Pairs inside one source group: in order when counts agree, else equal sizes first."""
    if len(hand) == len(learned) and not exact_only:
        return list(zip(hand, learned))
    pairs, free = [], list(learned)
    for b in hand:
        same = next((lb for lb in free if lb.sizes == hand_sizes[b.name]), None)
        if same is not None:
            pairs.append((b, same))
            free.remove(same)
    return pairs


def pair(hand: list[Buffer], learned: list[LearnedBuffer], hand_sizes: dict) -> list[tuple[Buffer, LearnedBuffer]]:
    pairs: list[tuple[Buffer, LearnedBuffer]] = []
    for level in range(3):
        groups: dict[tuple, tuple[list, list]] = {}
        taken_h = {id(b) for b, _ in pairs}
        taken_l = {id(lb) for _, lb in pairs}
        for b in hand:
            if id(b) not in taken_h:
                groups.setdefault(_group_keys(b)[level], ([], []))[0].append(b)
        for lb in learned:
            if id(lb) not in taken_l:
                groups.setdefault(_learned_keys(lb)[level], ([], []))[1].append(lb)
        for hs, ls in groups.values():
            if hs and ls:
                pairs += _pair_group(hs, ls, hand_sizes, exact_only=level == 2)
    return pairs


def _size_finding(b: Buffer, lb: LearnedBuffer, hand_sizes: tuple[int, ...]) -> Finding | None:
    if hand_sizes == lb.sizes:
        return None
    ratios = {Fraction(t, h) for t, h in zip(lb.sizes, hand_sizes) if h}
    formula = lb.formula.text() if lb.formula else "unsolved"
    if len(ratios) == 1 and next(iter(ratios)) in ELEMENT_RATIOS:
        per = Fraction(ITEMSIZE[b.dtype]) * next(iter(ratios))
        return Finding("re-typed", b.name, f"{b.dtype} ({ITEMSIZE[b.dtype]} B) in the model, {per} B per element in the "
                                           f"traces ({lb.site}; bytes {formula})")
    return Finding("resized", b.name, f"model {b.shape_text()} {b.dtype} = {list(hand_sizes)} B, traces {list(lb.sizes)} B "
                                      f"= {formula} ({lb.site})")


def _hand_anchors(model: LifetimeModel, order: list[Buffer]) -> dict[str, str | None]:
    """For each paired hand buffer: the last paired allocation at or before its last step."""
    out = {}
    for b in order:
        if b.freed_after is None:
            out[b.name] = None
            continue
        end = model.step_index(b.freed_after)
        before = [o for o in order if model.step_index(o.allocated_at) <= end]
        out[b.name] = before[-1].name if before else None
    return out


def _traced_anchor(lb: LearnedBuffer, learned_order: list[LearnedBuffer], to_hand: dict) -> str | None:
    """The last paired allocation before ``lb``'s free in the traces (None: held to the end)."""
    if lb.freed_after is None:
        return None
    before = [o for o in learned_order if o.allocated <= lb.freed_after]
    return to_hand[id(before[-1])] if before else None


def _lifetime_findings(model, pairs) -> list[Finding]:
    hand_order = _hand_order(model, [b for b, _ in pairs])
    to_hand = {id(lb): b.name for b, lb in pairs}
    learned_order = sorted((lb for _, lb in pairs), key=lambda lb: lb.allocated)
    learned_names = [to_hand[id(lb)] for lb in learned_order]
    hand_names = [b.name for b in hand_order]
    matcher = SequenceMatcher(a=hand_names, b=learned_names, autojunk=False)
    in_order = {hand_names[blk.a + i] for blk in matcher.get_matching_blocks() for i in range(blk.size)}
    findings = [Finding("lifetime", n, "allocated at a different point of the step than the model says")
                for n in hand_names if n not in in_order]
    hand_anchor = _hand_anchors(model, hand_order)
    for lb in learned_order:
        name = to_hand[id(lb)]
        traced = _traced_anchor(lb, learned_order, to_hand)
        if traced != hand_anchor[name]:
            findings.append(Finding("lifetime", name, f"freed after allocating {traced or 'nothing: held to the end'} "
                                                      f"in the traces; the model frees it after {hand_anchor[name] or 'the end'}"))
    return findings


def implementation_of(key: str) -> str:
    """The implementation a model key names, its version dropped: fla-kda@07b80f27 -> fla-kda."""
    return key.split("@", 1)[0]


def check_same_implementation(hand_key: str, traced_key: str) -> None:
    """Drift compares versions of one implementation (fla-kda@07b80f27 against fla-kda@0.6.0 traces); two
    implementations differ in every buffer, which is no drift: refused."""
    if implementation_of(hand_key) != implementation_of(traced_key):
        raise LivebytesError(f"the traces are of {traced_key}, a different implementation than {hand_key}: drift compares "
                             f"versions of one implementation (pass a {implementation_of(hand_key)}@... model or other traces)")


def drift(model: LifetimeModel, learned: Learned) -> list[Finding]:
    """Every difference between ``model`` and the traced buffers (empty: the model matches the traces)."""
    check_same_implementation(model.key, learned.impl)
    outside = tuple(sorted(set().union(*[set(t.outside_window) for t in learned.traces])))
    per_shape = [buffer_bytes(model, s) for s in learned.shapes]
    empty = {b.name for b in model.buffers if all(sizes[b.name] == 0 for sizes in per_shape)}
    hand = [b for b in model.buffers if in_window(b, outside) and b.name not in empty]
    hand_sizes = {b.name: tuple(sizes[b.name] for sizes in per_shape) for b in hand}
    pairs = pair(_hand_order(model, hand), list(learned.buffers), hand_sizes)
    findings = [Finding("outside-window", b.name, "exists before the traced window (library cache, warmup or reused "
                                                  "harness tensor): not compared")
                for b in model.buffers if not in_window(b, outside)]
    findings += [Finding("empty", b.name, "0 bytes at every traced shape (allocate(0) takes no block: no event to "
                                          "compare)") for b in model.buffers if b.name in empty and in_window(b, outside)]
    paired_h = {b.name for b, _ in pairs}
    paired_l = {id(lb) for _, lb in pairs}
    findings += [Finding("removed", b.name, f"{b.shape_text()} {b.dtype} from {b.source}: no traced allocation")
                 for b in hand if b.name not in paired_h]
    findings += [Finding("added", lb.name, f"{lb.formula.text() if lb.formula else lb.sizes} B at {lb.site}")
                 for lb in learned.buffers if id(lb) not in paired_l]
    findings += [f for b, lb in pairs if (f := _size_finding(b, lb, hand_sizes[b.name]))]
    return findings + _lifetime_findings(model, pairs)


def differences(findings: list[Finding]) -> list[Finding]:
    """The findings that are drift (everything but the outside-window and empty-buffer notes)."""
    return [f for f in findings if f.kind not in ("outside-window", "empty")]

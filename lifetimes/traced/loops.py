"""Loops whose trip count depends on the shape, folded into one iteration's template.

A traced call is one shape's events. Most of a model's host code makes the same allocations at every shape, sized by
the shape; a loop over chunks of the tokens does not: FLA's fused linear cross entropy (``LOOPS``) runs
``cdiv(N, C)`` iterations with ``C = next_power_of_2(cdiv(N, NC))``, the last one shorter. Each such loop is declared
by its chunking rule, cited from the source (which chunks a call of N rows runs); everything else is traced.

``fold``: the events of one trace whose frames pass through the loop's body lines are split into iterations (each
starts at the loop's first body allocation: its operator at its site); they must all be the same events (the chunk sets the sizes) and the
iteration count must be the rule's. A free inside the loop refers to an allocation of this iteration (offset 0) or of
the previous one (offset -1, a loop variable rebound); what the last iteration leaves is freed after the loop.

Liger-Kernel's fused linear cross-entropy (``--loss liger``) chunks the same way with its own rule (NC = cdiv(V, H),
C = min(next_power_of_2(cdiv(N, NC)), N)); in bf16 on a GPU its body allocates nothing (its [C, V] logits buffer is
allocated once before the loop, sized by ``symbolic``'s factor ``C(T,NC)``) and launches one kernel per chunk: its
iterations are found and split by that launch (``LoopRule.by_launches``).

Under autocast (fp32-amp) the first iteration alone casts a weight the body uses (``autocast.<op>.cached``: autocast's
weight cache, ATen/autocast_mode.cpp ``cached_cast``; later iterations hit it): such an allocation is *hoisted*, kept
apart from the iterations with its place in the first one, and freed where the trace frees it (the autocast region's
end, after the loop).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .calls import ALLOC, FREE, Alloc, Call
from .config_fields import config_value
from .families import family


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class LoopRule:
    """A loop over chunks of the ``rows`` (the config's tokens): its function's file and name, its body's first and
    last line, and the chunking (``chunks(rows, config) -> chunk sizes``; ``most(config)``: the largest trip count,
    NC in C = next_power_of_2(cdiv(T, NC)))."""
    file: str
    function: str
    body: tuple[int, int]
    chunks: Callable[[int, dict], list[int]]
    most: Callable[[dict], int]
    source: str
    buffer_outside: bool = False    # a buffer of one chunk is allocated before the loop (``symbolic``'s chunk factor)
    by_launches: bool = False       # the body allocates nothing: found, and split into iterations, by its launches


def _lce_chunks(rows: int, config: dict, num_chunks: int = 8) -> list[int]:
    """fla/modules/fused_linear_cross_entropy/ops.py:130-133 (fla-core 0.6.0): NC = min(num_chunks, cdiv(V, H));
    C = next_power_of_2(cdiv(N, NC)); NC = cdiv(N, C); chunk ic is rows [ic * C, min((ic + 1) * C, N))."""
    nc = _lce_most(config, num_chunks)
    c = _next_pow2(_cdiv(rows, nc))
    return [min(c, rows - i * c) for i in range(_cdiv(rows, c))]


def _lce_most(config: dict, num_chunks: int = 8) -> int:
    """A config may leave the sizes out: its class's defaults then hold (``config_value``; it was a KeyError)."""
    defaults = family(config["model_type"]).defaults
    return min(num_chunks, _cdiv(config_value(config, "vocab_size", defaults), config_value(config, "hidden_size", defaults)))


def _liger_most(config: dict) -> int:
    """liger-kernel 0.8.5 ops/fused_linear_cross_entropy.py:103: inc_factor = cdiv(V, chunk_mem_const * H), whose
    ``chunk_mem_const`` is 1 (:27, the public callers' default): the most chunks a call runs."""
    defaults = family(config["model_type"]).defaults
    return _cdiv(config_value(config, "vocab_size", defaults), config_value(config, "hidden_size", defaults))


def _liger_chunks(rows: int, config: dict) -> list[int]:
    """liger-kernel 0.8.5 ops/fused_linear_cross_entropy.py:103-106 and :156-158: C = min(next_power_of_2(cdiv(BT,
    inc_factor)), BT); cdiv(BT, C) chunks, chunk i rows [i * C, min((i + 1) * C, BT))."""
    c = min(_next_pow2(_cdiv(rows, _liger_most(config))), rows)
    return [min(c, rows - i * c) for i in range(_cdiv(rows, c))]


LOOPS = (
    LoopRule("fla/modules/fused_linear_cross_entropy/ops.py", "fused_linear_cross_entropy_fwd", (152, 219),
             _lce_chunks, _lce_most,
             "fla/modules/fused_linear_cross_entropy/ops.py:130-133 fused_linear_cross_entropy_fwd: "
             "NC = min(num_chunks, triton.cdiv(V, H)); C = triton.next_power_of_2(triton.cdiv(N, NC)); "
             "NC = triton.cdiv(N, C)"),
    # bf16 on a GPU: the chunk's logits live in one [C, V] buffer allocated before the loop (:150-154, use_mm_out) and
    # the body allocates nothing (mm and addmm write in place, :164 :320 :364): one Triton launch per chunk (:219)
    LoopRule("liger_kernel/ops/fused_linear_cross_entropy.py", "fused_linear_cross_entropy_forward", (157, 388),
             _liger_chunks, _liger_most,
             "liger_kernel/ops/fused_linear_cross_entropy.py:103-106 fused_linear_cross_entropy_forward (0.8.5): "
             "inc_factor = triton.cdiv(V, chunk_mem_const * H); chunk_size = min(triton.next_power_of_2("
             "triton.cdiv(BT, inc_factor)), BT); num_chunks = triton.cdiv(BT, chunk_size)", buffer_outside=True,
             by_launches=True),
)


def in_body(frames: tuple, rule: LoopRule) -> bool:
    return any(f[0] == rule.file and f[2] == rule.function and rule.body[0] <= f[1] <= rule.body[1] for f in frames)


def _frames(kind: str, ev, rule: LoopRule) -> tuple:
    """An event's frames: an allocation's; a launch's only for a rule whose body allocates nothing (``by_launches``:
    FLA's body is found by its allocations alone, as it always was)."""
    if kind in (ALLOC, FREE):
        return ev.frames
    return tuple(tuple(f) for f in ev.get("frames_full", ())) if rule.by_launches else ()


@dataclass
class Iteration:
    events: list = field(default_factory=list)     # (kind, ev) with frees as ("free", (offset, template index))


@dataclass
class Folded:
    """A loop found in a call: where it sits, its iterations, its rule, and each iteration's chunk."""
    rule: LoopRule
    start: int                 # position in the call's events of the first body event
    stop: int                  # one past the last
    iterations: list           # Iteration
    chunks: list[int]
    hoisted: list = field(default_factory=list)   # (slot: non-free events of the first iteration before it, Alloc)


def _body_span(call: Call, rule: LoopRule) -> tuple[int, int] | None:
    marks = [i for i, (k, ev) in enumerate(call.events) if k != FREE and in_body(_frames(k, ev, rule), rule)]
    return (marks[0], marks[-1] + 1) if marks else None


def is_cached_cast(kind: str, ev) -> bool:
    """An allocation of autocast's weight cache (the tracer's ``autocast``: ``autocast.<operator>.cached``)."""
    return kind == ALLOC and ev.op.startswith("autocast.") and ev.op.endswith(".cached")


def _split(body: list, first_site: tuple) -> tuple[list, list]:
    """The body's iterations, and the weight-cache casts hoisted out of the first (module doc)."""
    iterations: list[list] = [[]]
    hoisted = []
    for pos, (k, ev) in enumerate(body):
        if is_cached_cast(k, ev):
            after = body[pos + 1] if pos + 1 < len(body) else None
            if len(iterations) > 1 or (after is not None and after[0] == FREE):
                raise ValueError(f"{ev.op} of {ev.module}: a weight cast after the loop's first iteration began, or "
                                 "followed by a free, is not modelled")
            hoisted.append((sum(1 for kk, _ in iterations[0] if kk != FREE), ev))
            continue
        if k == ALLOC and (ev.op, ev.frames) == first_site and any(kk == ALLOC for kk, _ in iterations[-1]):
            iterations.append([])
        iterations[-1].append((k, ev))
    return iterations, hoisted


def _split_at_launches(body: list) -> list:
    """A body that allocates nothing (Liger's in bf16): an iteration starts at each launch of its first kernel."""
    first = next(ev.get("kernel") for k, ev in body if k == "launch")
    iterations: list[list] = []
    for k, ev in body:
        if k == "launch" and ev.get("kernel") == first or not iterations:
            iterations.append([])
        iterations[-1].append((k, ev))
    return iterations


def fold(call: Call, rule: LoopRule, config: dict, rows: int) -> Folded | None:
    """The loop ``rule`` in ``call`` (None: the call does not run it); raises when its iterations differ."""
    span = _body_span(call, rule)
    if span is None:
        return None
    start, stop = span
    body = call.events[start:stop]
    if rule.by_launches:
        if any(k == ALLOC for k, _ in body):
            raise ValueError(f"{rule.function}: its body allocates (not the bf16 GPU path its rule reads)")
        iterations, hoisted = _split_at_launches(body), []
    else:
        first_site = next((ev.op, ev.frames) for k, ev in body if k == ALLOC and not is_cached_cast(k, ev))
        iterations, hoisted = _split(body, first_site)
    chunks = rule.chunks(rows, config)
    if len(iterations) != len(chunks):
        raise ValueError(f"{rule.function}: {len(iterations)} iterations traced, the chunking rule says {len(chunks)}")
    index = {}
    for i, events in enumerate(iterations):
        j = 0
        for k, ev in events:
            if k == ALLOC:
                index[ev.id] = (i, j)
                j += 1
    out = []
    for i, events in enumerate(iterations):
        it = Iteration()
        for k, ev in events:
            if k == FREE and ev.id in index:
                at, j = index[ev.id]
                it.events.append((FREE, (at - i, j)))
            else:
                it.events.append((k, ev))
        out.append(it)
    return Folded(rule, start, stop, out, chunks, hoisted)


def loop_allocs(folded: Folded) -> dict[int, tuple[int, int]]:
    """Alloc id -> (iteration, template index) of every allocation in the loop."""
    out = {}
    for i, it in enumerate(folded.iterations):
        j = 0
        for k, ev in it.events:
            if k == ALLOC:
                out[ev.id] = (i, j)
                j += 1
    return out


def template_signature(it: Iteration) -> list:
    """An iteration's events as the same iteration at another chunk would show them (sizes left out)."""
    out = []
    for k, ev in it.events:
        if k == ALLOC:
            out.append((ALLOC, ev.op, ev.frames, ev.dtype, ev.module))
        elif k == FREE:
            out.append((FREE, ev))
        else:
            out.append((k, ev.get("kernel") or ev.get("op")))
    return out


__all__ = ["LOOPS", "LoopRule", "Folded", "Iteration", "fold", "loop_allocs", "template_signature", "in_body", "Alloc",
           "is_cached_cast"]

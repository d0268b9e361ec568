"""The validator's protocol, out of the models: what a measured process ran before the measured steps.

A model says what its library keeps across calls (``Buffer.cached`` with its ``cache_key``, inputs a
cache ``retained``); ``predict`` is the steady state of a process that runs one shape repeatedly. The
validator's process ran more: a warmup at MBS 1 x 1024 tokens of the same heads and head dims, and,
in a shared process, the shapes measured before this one (each after its own warmup). What those
calls did is derived here from the declarations and handed to ``replay`` as a ``prelude`` (every call replayed
whole, so leftovers sit in the segments they really pin); ``history`` (the request sizes they leave allocated,
in order) is what the allocator bounds of ``compare`` use:

- every cached buffer of an earlier call, unless a cache entry with the same key is already held,
  or the measured shape's own entry has that key (the measured call then reuses it: the CuTe
  ``_WS`` cache at MBS 1 x S 1024-1039 is the warmup's);
- every input of an earlier call that a library cache retains (FLA's ``tensor_cache`` keeps the
  warmup's ``cu_seqlens``); caches keyed by tensor identity never match a later call.

FLA's ``tensor_cache`` is bounded (4 entries per function): entries keyed by tensor identity older than
the last three calls are evicted (``held_before``).

Versions are integers. v1 (runs 1-3): inputs drawn on the GPU. v2 (run 4): inputs seeded on the
CPU and copied once. v3 (run 5): also ``torch.cuda.empty_cache()`` after the target-shape warmup.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import sympy as sp

from livebytes.estimator.buffers import Buffer, LifetimeModel
from livebytes.estimator.replay import Prelude, Replay, call_plan, replay, request_sizes
from livebytes.estimator.shapes import Shape
from livebytes.estimator.symbols import SHAPE_SYMBOLS

WARMUP_MBS, WARMUP_TOKENS = 1, 1024


@dataclass(frozen=True)
class Protocol:
    version: int
    name: str
    one_block_per_input: bool        # no input recipe temporary shapes the layout (v2-v3: CPU copies; v4: in place on the GPU)
    empty_cache_after_warmup: bool   # torch.cuda.empty_cache() after the target-shape warmup step


PROTOCOLS: dict[int, Protocol] = {p.version: p for p in (
    Protocol(1, "kda-report-v1", one_block_per_input=False, empty_cache_after_warmup=False),
    Protocol(2, "kda-report-v2", one_block_per_input=True, empty_cache_after_warmup=False),
    Protocol(3, "kda-report-v3", one_block_per_input=True, empty_cache_after_warmup=True),
    # v4: seeded on the GPU in place, one block per input, temporaries freed and the cache emptied before
    # the next input (validate/inputs.py): the same allocator state as v3, without the CPU round trip
    Protocol(4, "kda-report-v4", one_block_per_input=True, empty_cache_after_warmup=True),
)}
CURRENT = max(PROTOCOLS)


def version_of(name: str) -> int:
    """``"kda-report-v3"`` -> 3, compared as integers (``"v10" >= "v3"`` is False as strings)."""
    match = re.fullmatch(r"kda-report-v(\d+)", name or "")
    if not match or int(match.group(1)) not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(p.name for p in PROTOCOLS.values())}")
    return int(match.group(1))


def warmup_shape(shape: Shape) -> Shape:
    """The protocol's warmup: MBS 1 x 1024 tokens with the target's heads, value heads and head dims."""
    return Shape(WARMUP_MBS, WARMUP_TOKENS, shape.heads, shape.dim, shape.v_heads, shape.dim_v)


def _values(exprs, shape: Shape) -> tuple[int, ...]:
    subs = shape.subs()
    fn = sp.lambdify(SHAPE_SYMBOLS, list(exprs), modules="math")
    return tuple(int(v) for v in fn(*(subs[s] for s in SHAPE_SYMBOLS)))


def _kept(model: LifetimeModel) -> list[Buffer]:
    return [b for b in model.buffers if b.cached or b.retained]


def cache_entries(model: LifetimeModel, shape: Shape, call: object) -> list[tuple[tuple, int]]:
    """(identity, request bytes) of what one call at ``shape`` leaves allocated, in allocation order.
    A keyed cache's identity is (buffer, key values); anything else is unique to the call."""
    kept = _kept(model)
    sizes = _values([b.nbytes for b in kept], shape)
    out = []
    for b, nbytes in zip(kept, sizes):
        key = (b.name, _values(b.cache_key, shape)) if b.cache_key is not None else (b.name, "call", call)
        out.append((key, nbytes))
    return out


IDENTITY_CACHE_CALLS = 4    # fla-core 0.6.0 utils/env.py:30 FLA_TENSOR_CACHE_SIZE = 4: tensor_cache's deque maxlen


def held_before(model: LifetimeModel, calls: list[tuple[Shape, object, int | None]], shape: Shape) -> tuple[int, ...]:
    """Request sizes a process holds before a call at ``shape``, from its earlier ``(shape, call, failed_at)``:
    keyed cache entries of every earlier call (once per key, unless this call's own entry has the key: it
    reuses it); identity-keyed entries of the last ``IDENTITY_CACHE_CALLS - 1`` calls (this call's entry,
    appended in its first steps, evicts the oldest of the deque before any large allocation); a call that
    ran out of memory in its first run at step ``failed_at`` keeps only entries of the steps before it."""
    own = {key for key, _ in cache_entries(model, shape, "this")}
    kept_at = [model.step_index(b.allocated_at) for b in _kept(model)]
    seen, sizes = set(), []
    for n, (s, call, failed_at) in enumerate(calls):
        recent = n >= len(calls) - (IDENTITY_CACHE_CALLS - 1)
        for at, (key, nbytes) in zip(kept_at, cache_entries(model, s, call)):
            identity = key[1] == "call"
            if key in own or key in seen or (identity and not recent) or (failed_at is not None and at >= failed_at):
                continue
            seen.add(key)
            sizes.append(nbytes)
    return tuple(sizes)


def history(model: LifetimeModel, shape: Shape, earlier: tuple[Shape, ...] = ()) -> tuple[int, ...]:
    """Request sizes of what the validator's process holds before this shape's inputs: each earlier shape's
    warmup call and its own call (one set of inputs each), then this shape's warmup call."""
    calls: list[tuple[Shape, object, int | None]] = []
    for i, s in enumerate(earlier):
        calls += [(warmup_shape(s), ("warmup", i), None), (s, ("earlier", i), None)]
    calls.append((warmup_shape(shape), ("warmup", len(earlier)), None))
    return held_before(model, calls, shape)


WARMUP_STEPS, MEASURED_STEPS = 2, 3    # runner.measure_shape: 2 steps at the warmup shape; PROTOCOL["measured_steps"]


class _ProcessOps:
    """The validator process's earlier calls as allocator operations (``replay.Prelude``), walked from the
    model's schedule: each call allocates its inputs (one block each), runs its steps (outputs and gradients
    dropped after each), drops its inputs, and the runner empties the cache. What a library keeps is held
    by cache identity (``cache_entries``): a keyed entry is made once and hit by every later call with the
    same key; identity-keyed entries live for ``IDENTITY_CACHE_CALLS - 1`` later calls."""

    def __init__(self, model: LifetimeModel):
        self.model, self.plan = model, call_plan(model)
        self.ops: list[tuple] = []
        self.held: dict[tuple, int] = {}          # cache identity -> tag of the block
        self.calls = 0

    def _malloc(self, nbytes: int) -> int:
        self.ops.append(("malloc", len(self.ops), nbytes))
        return len(self.ops) - 1

    def _free(self, tag: int) -> None:
        self.ops.append(("free", tag))

    def stale(self, call: int) -> list[tuple]:
        """Identity-keyed entries a call at index ``call`` pushes out of the bounded tensor_cache deque."""
        return [key for key in self.held if key[1] == "call" and key[2] < call - (IDENTITY_CACHE_CALLS - 1)]

    def _keys(self, shape: Shape, call: int) -> dict[str, tuple]:
        return {key[0]: key for key, _ in cache_entries(self.model, shape, call)}

    def call(self, shape: Shape, runs: int, empty_cache_after_first: bool) -> None:
        n, plan = self.calls, self.plan
        self.calls += 1
        sizes, keys = request_sizes(self.model, shape), self._keys(shape, n)
        inputs = {k: self._malloc(sizes[plan.names[k]]) for _, made in plan.harness for k in made}
        for key in self.stale(n):
            self._free(self.held.pop(key))
        live: dict[int, int] = {}
        for run in range(runs):
            if run == 1 and empty_cache_after_first:
                self.ops.append(("empty_cache",))
            for _, made, freed in plan.work:
                for k in made:
                    if k not in plan.cached:
                        live[k] = self._malloc(sizes[plan.names[k]])
                    elif keys[plan.names[k]] not in self.held:
                        self.held[keys[plan.names[k]]] = self._malloc(sizes[plan.names[k]])
                for k in freed:
                    self._free(live.pop(k))
            for k in plan.released:
                if k in live:
                    self._free(live.pop(k))
        for k, tag in inputs.items():       # the harness drops its inputs; a library cache may keep one
            name = plan.names[k]
            if name in keys:
                self.held[keys[name]] = tag
            else:
                self._free(tag)
        self.ops.append(("empty_cache",))

    def prelude_for(self, shape: Shape) -> Prelude:
        own = self._keys(shape, self.calls)
        reused = tuple((name, self.held[key]) for name, key in own.items() if key in self.held)
        return Prelude(tuple(self.ops), reused, tuple(self.held[key] for key in self.stale(self.calls)))


def prelude(model: LifetimeModel, shape: Shape, version: int = CURRENT, earlier: tuple[Shape, ...] = ()) -> Prelude:
    """The validator process before this shape's inputs, call by call: each earlier shape's warmup and its own
    measured call, then this shape's warmup (``runner.measure_shape``)."""
    process = _ProcessOps(model)
    for s in earlier:
        process.call(warmup_shape(s), WARMUP_STEPS, False)
        process.call(s, 1 + MEASURED_STEPS, PROTOCOLS[version].empty_cache_after_warmup)
    process.call(warmup_shape(shape), WARMUP_STEPS, False)
    return process.prelude_for(shape)


def protocol_replay(model: LifetimeModel, shape: Shape, version: int = CURRENT, earlier: tuple[Shape, ...] = (),
                    device_total_bytes: int | None = None) -> tuple[Replay, tuple[int, ...]]:
    """The replay of a validator process under protocol ``version``: its earlier calls replayed whole
    (``prelude``); and the request sizes they leave allocated (``history``, for the allocator bounds).
    ``device_total_bytes`` (the record's GPU) bounds an expandable segment's address range: the protocol's
    ``empty_cache`` unmaps pages, and later mappings land in the holes or above them."""
    return (replay(model, shape, empty_cache_after_warmup=PROTOCOLS[version].empty_cache_after_warmup,
                   prelude=prelude(model, shape, version, earlier), device_total_bytes=device_total_bytes),
            history(model, shape, earlier))

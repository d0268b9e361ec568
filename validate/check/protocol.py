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

FLA's ``tensor_cache`` is bounded (4 entries per decorated function, one queue shared by every argument signature
of that function): a call that appends k entries to a function's queue keeps the newest 4 - k of the earlier ones
(``evicted``, the one rule both descriptions use): the last three calls where a call appends one entry, the last
one where it appends two (the layer's ``prepare_chunk_indices``: the convolution's keyword call and chunk_kda's). The calls are walked by the
estimator's ``replay.Process`` (the one walk of a call through the allocator model); this module says which calls,
with which cache keys.

Each call runs the model the harness runs at its shape (``model_at``: a Shape -> model function; by default the
measured model at every shape, which is exact for a model that does not read the layer fields). A layer harness builds
its warmup from ``warmup_shape``, which has no layer fields: one layer of the default hidden size, no checkpointing; an
earlier shape runs its own stack. Entries are shared across such models by their library identity
(``library_name``).

Versions are integers. v1 (runs 1-3): inputs drawn on the GPU. v2 (run 4): inputs seeded on the
CPU and copied once. v3 (run 5): also ``torch.cuda.empty_cache()`` after the target-shape warmup.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from livebytes.estimator.autotune import benchmarking_steps
from livebytes.estimator.buffers import Buffer, LifetimeModel
from livebytes.estimator.replay import Call, Prelude, Process, Replay, replay
from livebytes.estimator.shapes import Shape
from livebytes.estimator.symbols import SHAPE_SYMBOLS

WARMUP_MBS, WARMUP_TOKENS = 1, 1024

ModelAt = Callable[[Shape], LifetimeModel]      # the model the validator's harness runs at a shape


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
    # the next input (validate/gpu/inputs.py): the same allocator state as v3, without the CPU round trip
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


@lru_cache(maxsize=1024)
def _compiled(exprs: tuple):
    return sp.lambdify(SHAPE_SYMBOLS, list(exprs), modules="math")


def _values(exprs, shape: Shape) -> tuple[int, ...]:
    subs = shape.subs()
    return tuple(int(v) for v in _compiled(tuple(exprs))(*(subs[s] for s in SHAPE_SYMBOLS)))


def _kept(model: LifetimeModel) -> list[Buffer]:
    return [b for b in model.buffers if b.cached or b.retained]


_STACK_PREFIX = re.compile(r"(?:^|(?<=\.))(?:below\d+|ckpt)\.")


def library_name(name: str) -> str:
    """The library's name for a kept buffer: its name without the layer stack's prefixes (``lifetimes/layer_stack.py``:
    ``below{i}.`` for a layer under the top, ``ckpt.`` for checkpoint's first forward). Those prefixes say where in one
    call the stack made the entry, not which entry: the backward thread's cuBLAS workspace is one per (handle, stream)
    for the process (``CublasHandlePool.cpp``), whichever layer's GEMM made it, and FLA's ``tensor_cache`` has one
    queue per decorated function (``fla/utils/decorators.py``), whichever layer called it. So a warmup that runs one
    layer and a measured call that runs four name the same entry alike: ``below1.cublas.workspace.forward`` ->
    ``cublas.workspace.forward``, ``below1.ckpt.kda.seq_lens`` -> ``kda.seq_lens``."""
    return _STACK_PREFIX.sub("", name)


def cache_entries(model: LifetimeModel, shape: Shape, call: object) -> list[tuple[tuple, int]]:
    """(identity, request bytes) of what one call at ``shape`` leaves allocated, in allocation order.
    A keyed cache's identity is (its library name, key values): a later call whose entry has it hits, whatever model
    it runs. Anything else is unique to the call: FLA's ``tensor_cache`` hits only on the same argument objects, and
    each call has new inputs; its identity names the queue it sits in (``cache_fn``, else its library name)."""
    kept = _kept(model)
    sizes = _values([b.nbytes for b in kept], shape)
    out = []
    for i, (b, nbytes) in enumerate(zip(kept, sizes)):
        name = library_name(b.name)
        # an identity entry: (name, "call", the call, the queue it sits in, its place in the call's appends)
        key = (name, _values(b.cache_key, shape)) if b.cache_key is not None else \
            (name, "call", call, b.cache_fn or name, i)
        out.append((key, nbytes))
    return out


IDENTITY_CACHE_CALLS = 4    # fla-core 0.6.0 utils/env.py:30 FLA_TENSOR_CACHE_SIZE = 4: tensor_cache's deque maxlen


def _one_model(model: LifetimeModel) -> ModelAt:
    return lambda shape: model


def held_before(model: LifetimeModel, earlier: list[Shape], shape: Shape, model_at: ModelAt | None = None) -> tuple[int, ...]:
    """Request sizes a process holds before a call at ``shape`` (running ``model``), after its ``earlier`` calls
    (shapes, in order, each running ``model_at``'s model), walked by ``replay.Process``: keyed cache entries once per
    key, unless this call's own entry has the key (it reuses it); identity-keyed entries no call has ``evicted``, this
    one included. In the order the process allocated them."""
    at = model_at or _one_model(model)
    process = Process(model)
    for n, s in enumerate(earlier):
        process.call(Call(s, 1, cache_keys=cache_keys(at(s), s, n), evicts=evicted(process.held, n), model=at(s)))
        process.end_call()
    gone = set(evicted(process.held, len(earlier))) | {key for _, key in cache_keys(model, shape, len(earlier))}
    kept = sorted(process.made(block) for key, block in process.held.items() if key not in gone)
    return tuple(nbytes for _, nbytes in kept)      # in malloc order: a retained input came before the entries


def history(model: LifetimeModel, shape: Shape, earlier: tuple[Shape, ...] = (),
            model_at: ModelAt | None = None) -> tuple[int, ...]:
    """Request sizes of what the validator's process holds before this shape's inputs: each earlier shape's
    warmup call and its own call (one set of inputs each), then this shape's warmup call (each running ``model_at``'s
    model; None: ``model``)."""
    return held_before(model, [s for s, _, _ in _earlier_calls(shape, CURRENT, earlier)], shape, model_at)


def evicted(keys: Iterable[tuple], call: int) -> tuple[tuple, ...]:
    """Of the held cache ``keys``, the identity-keyed entries (``cache_entries``: FLA's ``tensor_cache``) that call
    number ``call`` of the process pushes out of their function's bounded deque (``fla/utils/decorators.py``
    ``tensor_cache``: ``deque(maxlen=FLA_TENSOR_CACHE_SIZE)``): the call appends as many entries to each queue as an
    earlier call did (k), so the newest ``IDENTITY_CACHE_CALLS - k`` earlier entries stay. Its own entries are
    appended in its first steps, so the oldest go after the call's inputs and before its steps allocate anything
    (``replay.Process._evict``)."""
    identity = [k for k in keys if k[1] == "call" and k[2] < call]
    gone: set = set()
    for queue in {k[3] for k in identity}:
        mine = sorted((k for k in identity if k[3] == queue), key=lambda k: (k[2], k[4]), reverse=True)
        per_call = max(sum(1 for k in mine if k[2] == c) for c in {k[2] for k in mine})
        gone |= set(mine[max(0, IDENTITY_CACHE_CALLS - per_call):])
    return tuple(key for key in keys if key in gone)


WARMUP_STEPS, MEASURED_STEPS = 2, 3    # runner.measure_shape: 2 steps at the warmup shape; PROTOCOL["measured_steps"]


def cache_keys(model: LifetimeModel, shape: Shape, call: int) -> tuple[tuple[str, tuple], ...]:
    """Buffer name -> cache identity of what call number ``call`` keeps (``cache_entries``: the model's own names, the
    identities the library's)."""
    return tuple((b.name, key) for b, (key, _) in zip(_kept(model), cache_entries(model, shape, call)))


def _validator_call(process: Process, model: LifetimeModel, shape: Shape, runs: int, empty_cache_after_first: bool,
                    benchmarks: tuple[str, ...] = ()) -> Call:
    """The validator's next call at ``shape``, running ``model``: its benchmarking steps, its cache identities, and the
    entries it evicts from ``process``."""
    return Call(shape, runs, 1 if empty_cache_after_first else None, benchmarks,
                cache_keys=cache_keys(model, shape, process.calls), evicts=evicted(process.held, process.calls),
                model=model)


def process_benchmarks(model: LifetimeModel, shapes: list[Shape], triton_cache: str | None,
                       model_at: ModelAt | None = None) -> list[tuple[str, ...]]:
    """The benchmarking steps of each of a validator process's calls at ``shapes``, in order (``runner.measure_shape``
    records the cache state it asked for as ``triton_cache``). A ``cold`` process starts with an empty Triton cache:
    its first call (the 1 x 1024 warmup) benchmarks every autotuned kernel and each later call the keys new to the
    process (``autotune.benchmarking_steps``), each with Triton's 256 MiB L2-flush buffer, whose freed segment the
    call's later blocks split (the backward thread's cuBLAS workspace, kept for the process, pins it: ``empty_cache``
    cannot give it back). Any other state (warm on disk, n/a, not recorded): no call benchmarks.
    Each call runs ``model_at``'s model (None: ``model``): the tuned keys are (Triton kernel, key values), the same
    whichever model launches the kernel, so they accumulate across the calls' models; the steps are each model's own."""
    if triton_cache != "cold":
        return [()] * len(shapes)
    at = model_at or _one_model(model)
    tuned: frozenset = frozenset()
    out = []
    for s in shapes:
        steps, tuned = benchmarking_steps(at(s), s, tuned)
        out.append(steps)
    return out


def _earlier_calls(shape: Shape, version: int, earlier: tuple[Shape, ...]) -> list[tuple[Shape, int, bool]]:
    """(shape, runs, empty_cache after the first run) of the validator's calls before this shape's inputs
    (``runner.measure_shape``): each earlier shape's warmup and its own measured call, then this shape's warmup."""
    calls = []
    for s in earlier:
        calls += [(warmup_shape(s), WARMUP_STEPS, False),
                  (s, 1 + MEASURED_STEPS, PROTOCOLS[version].empty_cache_after_warmup)]
    return calls + [(warmup_shape(shape), WARMUP_STEPS, False)]


def prelude(model: LifetimeModel, shape: Shape, version: int = CURRENT, earlier: tuple[Shape, ...] = (),
            triton_cache: str | None = None, model_at: ModelAt | None = None) -> Prelude:
    """The validator process before this shape's inputs, call by call: each earlier shape's warmup and its own
    measured call, then this shape's warmup (``runner.measure_shape``), each benchmarking as ``process_benchmarks``
    says for a process whose Triton cache was ``triton_cache``, and each running ``model_at``'s model at its shape
    (None: ``model`` at every shape). The next call at ``shape`` runs ``model``."""
    at = model_at or _one_model(model)
    calls = _earlier_calls(shape, version, earlier)
    benchmarks = process_benchmarks(model, [s for s, _, _ in calls], triton_cache, at)
    process = Process(model, record=True)
    for (s, runs, empty), steps in zip(calls, benchmarks):
        process.call(_validator_call(process, at(s), s, runs, empty, steps))
        process.end_call()    # the runner drops the call's tensors and empties the cache
    return process.prelude(cache_keys(model, shape, process.calls), evicted(process.held, process.calls))


def protocol_replay(model: LifetimeModel, shape: Shape, version: int = CURRENT, earlier: tuple[Shape, ...] = (),
                    device_total_bytes: int | None = None, triton_cache: str | None = None,
                    model_at: ModelAt | None = None) -> tuple[Replay, tuple[int, ...]]:
    """The replay of a validator process under protocol ``version``: its earlier calls replayed whole
    (``prelude``); and the request sizes they leave allocated (``history``, for the allocator bounds).
    ``device_total_bytes`` (the record's GPU) bounds an expandable segment's address range: the protocol's
    ``empty_cache`` unmaps pages, and later mappings land in the holes or above them. ``triton_cache``: the record's
    (``cold``: every call autotunes the keys new to the process, this shape's first run too). ``model_at``: the model
    the harness runs at each call's shape (at ``shape`` it is ``model``); None: ``model`` throughout."""
    at = model_at or _one_model(model)
    calls = [s for s, _, _ in _earlier_calls(shape, version, earlier)] + [shape]
    measured = process_benchmarks(model, calls, triton_cache, at)[-1]
    return (replay(model, shape, empty_cache_after_warmup=PROTOCOLS[version].empty_cache_after_warmup,
                   prelude=prelude(model, shape, version, earlier, triton_cache, at),
                   device_total_bytes=device_total_bytes, benchmarks=measured),
            history(model, shape, earlier, at))

"""Replay a boundary probe's whole process (``validate/data/records/boundary/*.jsonl``) through the allocator model.

A probe file is one process (``validate/gpu/probes/boundary_probe.py``): the context; unless ``--no-warmup``
a 1 x 1024 trial; then trials in order. A trial: fresh inputs, one block each (the recipe's
temporaries are freed and the cache emptied before the first call), ``reset_peak_memory_stats``, a
first call, ``steady_1``, ``steady_2`` (no ``empty_cache`` in between); at its end, OOM or not,
everything is freed and ``empty_cache`` runs. What crosses trials is declared by the model:

- library caches (``Buffer.cached`` / ``retained``, ``protocol.cache_entries``): keyed caches (cuDNN
  plans and their state scratch) stay for the life of the process, one entry per key; caches keyed by
  tensor identity (FLA's ``tensor_cache``) keep the last ``protocol.IDENTITY_CACHE_CALLS`` calls' entries;
- Triton autotuning (``Autotune``): with a cold cache a kernel benchmarks at the first launch with a
  key the process has not tuned (``autotune.benchmarking_steps``); a warm on-disk cache holds every key.

The trials run in order through one allocator (``replay.Process``): cache entries stay in the segments where the
trial that made them put them. A trial that runs out of memory unwinds (``Process.end_call``: its tensors freed,
what its library caches made before the failing step kept). Each trial runs against the capacity its process
had: the device total minus ``nonpytorch_after_bytes`` measured at that trial's end (it includes kernel modules
that trial loaded).
"""
from __future__ import annotations

from dataclasses import dataclass

from livebytes.estimator.allocator import MappedRange, expandable_address_space, parse_alloc_conf
from livebytes.estimator.autotune import benchmarking_steps, tuning_keys
from livebytes.estimator.replay import Call, Process, Replay

from .probe_records import BOUNDARY_DIR, MODELS, PHASES, Probe, Trial, load_probe, probe_files  # noqa: F401
from .protocol import cache_keys, evicted
from livebytes.estimator.buffers import Group
from livebytes.estimator.replay import request_sizes
from livebytes.estimator.rounding import round_size


@dataclass(frozen=True)
class SimulatedTrial:
    trial: Trial
    run: Replay
    benchmarks: tuple[str, ...]     # steps whose first launch benchmarked (cold autotuning)

    @property
    def fits(self) -> bool:
        return self.run.oom is None

    @property
    def oom_phase(self) -> str | None:
        oom = self.run.oom
        return None if oom is None else ("inputs" if oom.run_step < 0 else PHASES[oom.run_step])

    def phase(self, name: str) -> tuple[int, int] | None:
        """(max_allocated, max_reserved) of a phase that completed."""
        i = PHASES.index(name)
        return (self.run.peaks[i], self.run.reserved_peaks[i]) if i < len(self.run.peaks) else None


def simulate(probe: Probe, missing_on_disk: frozenset[str] = frozenset()) -> list[SimulatedTrial]:
    """Every trial of the process, in order, in one allocator: what the earlier ones left behind sits where they put
    it. ``missing_on_disk``: kernels a warm cache lacks (they benchmark at each key new to the process, as in a cold
    one)."""
    model = probe.model()
    process = Process(model, parse_alloc_conf(probe.allocator_conf), device_total_bytes=probe.total_bytes)
    tuned = None if probe.triton_cache == "warm" and not missing_on_disk else frozenset()   # None: every key on disk
    out = []
    for t in probe.trials:
        steps = ()
        if tuned is not None:
            if probe.triton_cache == "warm":     # the on-disk keys count as tuned before the launch
                tuned |= {(k, key) for k, key in tuning_keys(model, t.shape) if k not in missing_on_disk}
            steps, tuned = benchmarking_steps(model, t.shape, tuned)
        capacity = probe.total_bytes - t.measured["nonpytorch_after_bytes"]
        call = Call(t.shape, len(PHASES), None, steps, capacity, cache_keys=cache_keys(model, t.shape, process.calls),
                    evicts=evicted(process.held, process.calls))
        run = process.call(call)
        out.append(SimulatedTrial(t, process.result(run), steps))
        process.end_call(failed=run.oom is not None)   # the probe frees everything of the trial and empties the cache
    return out


def _normalised(ranges: list[tuple], total_bytes: int) -> list[tuple]:
    """(pool, bytes, allocated bytes, offset) per segment, comparable between the probe and the replay. Expandable:
    in address order, the offset from the pool's lowest mapped range while within one reservation's span
    (1.125x the device memory), None past it (a later reservation, whose address the driver chooses).
    cudaMalloc segments: sorted by size, no offset (the driver's order is modelled, its gaps and reuse of freed ranges
    are not: ``allocator.cuda_malloc_address``)."""
    out = []
    for pool in ("large", "small"):
        mine = sorted((r for r in ranges if r[0] == pool), key=lambda r: r[1])
        span = expandable_address_space(total_bytes, pool == "small")
        expandable = [r for r in mine if r[4]]
        out += [(pool, size, allocated, addr - expandable[0][1] if addr - expandable[0][1] < span else None)
                for _, addr, size, allocated, _ in expandable]
        out += sorted((pool, size, allocated, None) for _, _, size, allocated, exp in mine if not exp)
    return out


def measured_segments(trial: Trial, total_bytes: int) -> list[tuple] | None:
    """The probe's ``memory_snapshot`` segments (at the failing request, or after the last call), ``_normalised``."""
    segs = trial.measured.get("segments_at_oom") or trial.measured.get("segments_at_end")
    if segs is None:
        return None
    return _normalised([(s["segment_type"], s["address"], s["total_size"], s["allocated_size"], bool(s.get("is_expandable")))
                        for s in segs], total_bytes)


def simulated_segments(ranges: tuple[MappedRange, ...], total_bytes: int) -> list[tuple]:
    """The replay's segments (``Replay.segments``), ``_normalised``."""
    return _normalised([("small" if r.small else "large", r.addr, r.size, r.allocated, r.expandable) for r in ranges],
                       total_bytes)


def _node_steps(model, step: str) -> set[str]:
    """The autograd node a backward step belongs to: a kernel's whole backward (``bwd.*`` in a kernel model,
    ``kda.bwd.*`` once a layer includes it: one autograd Function)."""
    node = step[: step.index("bwd.") + len("bwd.")]
    return {s.name for s in model.steps if s.phase == "backward" and s.name.startswith(node)}


def _op_made_before(model, buffer: str | None) -> list[str]:
    """What the failing request's ATen operator allocated before it: its output (``scratch_of``) and that output's
    scratch declared ahead of ``buffer`` (the accumulation buffer before the staging, both before the semaphores);
    none where ``buffer`` is no operator's scratch."""
    at = next((i for i, b in enumerate(model.buffers) if b.name == buffer), None)
    output = None if at is None else model.buffers[at].scratch_of
    if output is None:
        return []
    return [output, *(b.name for b in model.buffers[:at] if b.scratch_of == output)]


def unwound_bytes(model, shape, step: str, buffer: str | None = None) -> int:
    """Bytes the autograd engine frees as an out-of-memory error at backward ``step`` unwinds, before the probe reads
    ``memory_stats`` (its ``after_unwind``): the gradients it holds for nodes that have not run (torch/csrc/autograd/
    engine.cpp: a GraphTask's not-ready InputBuffers die with the task). The failing Function's own tensors stay (the
    exception's traceback keeps its frame), so do the gradients it was handed. Here: activation gradients made before
    the failing node and consumed after it. And where the failing request (``buffer``) is an ATen operator's internal
    scratch (its ``scratch_of``: a reduction's accumulation buffer), that operator's output, allocated first and not
    yet handed to Python, and the operator's earlier scratch die as the C++ exception unwinds (run 21c: the WY dk's
    group sum). Not modelled: a failure in a layer's own module steps (each its own node, which this counts with the
    layer's other module steps; a Linear's bias sum failing also drops its node's weight and input gradients), and
    one in checkpoint's recompute (forward steps run inside the backward: counted 0)."""
    sizes = request_sizes(model, shape)
    own = sum(round_size(sizes[name]) for name in _op_made_before(model, buffer))
    if "bwd." not in step:
        return own
    order = model.step_positions()
    node = _node_steps(model, step)
    first, last = min(order[s] for s in node), max(order[s] for s in node)
    held = [b.name for b in model.buffers if b.group == Group.ACTIVATION_GRADS and order[b.allocated_at] < first
            and b.freed_after is not None and order[b.freed_after] > last]
    return own + sum(round_size(sizes[name]) for name in held)

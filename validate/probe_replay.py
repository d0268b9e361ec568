"""Replay a boundary probe's whole process (``validate/records/boundary/*.jsonl``) through the allocator model.

A probe file is one process (``validate/probes/boundary_probe.py``): the context; unless ``--no-warmup``
a 1 x 1024 trial; then trials in order. A trial: fresh inputs, one block each (the recipe's
temporaries are freed and the cache emptied before the first call), ``reset_peak_memory_stats``, a
first call, ``steady_1``, ``steady_2`` (no ``empty_cache`` in between); at its end, OOM or not,
everything is freed and ``empty_cache`` runs. What crosses trials is declared by the model:

- library caches (``Buffer.cached`` / ``retained``, ``protocol.cache_entries``): keyed caches (cuDNN
  plans and their state scratch) stay for the life of the process, one entry per key; caches keyed by
  tensor identity (FLA's ``tensor_cache``) keep the last ``protocol.IDENTITY_CACHE_CALLS`` calls' entries;
- Triton autotuning (``Autotune``): with a cold cache a kernel benchmarks at the first launch with a
  key the process has not tuned (``autotune.benchmarking_steps``); a warm on-disk cache holds every key.

Each trial runs against the capacity its process had: the device total minus ``nonpytorch_after_bytes``
measured at that trial's end (it includes kernel modules that trial loaded).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from livebytes.estimator.allocator import parse_alloc_conf
from livebytes.estimator.autotune import benchmarking_steps
from livebytes.estimator.registry import get_model
from livebytes.estimator.replay import Replay, replay
from livebytes.estimator.shapes import Shape

from .protocol import held_before

BOUNDARY_DIR = Path(__file__).parent / "records" / "boundary"
PHASES = ("first_call", "steady_1", "steady_2")
MODELS = {                  # the probe's --impl -> (model key, options)
    "fla-plain": ("fla-kda@0.6.0", {"contract": "plain"}),
    "fla-report": ("fla-kda@0.6.0", {"contract": "report"}),
    "kda_hopper_cuda": ("cudnn-kda-hopper-cuda@1.32.0", {}),
}


@dataclass(frozen=True)
class Trial:
    index: int                 # order in the process (0 = the warmup when there is one)
    stage: str                 # warmup_1x1024 | bisect | value
    shape: Shape
    measured: dict             # the probe's line

    @property
    def label(self) -> str:
        return f"{self.index}:{self.stage}:{self.shape.mbs}x{self.shape.seq}"


@dataclass(frozen=True)
class Probe:
    path: Path
    impl: str
    allocator_conf: str
    triton_cache: str          # cold | warm | n/a
    total_bytes: int
    trials: tuple[Trial, ...]

    def model(self):
        key, options = MODELS[self.impl]
        return get_model(key, "H200", **options)


def load_probe(path: Path) -> Probe:
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    head = lines[0]
    trials = tuple(Trial(i, d["stage"], Shape(d["mbs"], d["seq"], d["heads"], d["dim"]), d)
                   for i, d in enumerate(x for x in lines if "first_call" in x or "fits" in x))
    return Probe(Path(path), head["impl"], head["allocator_conf"], head["state"], head["total_memory"], trials)


def probe_files() -> list[Path]:
    return sorted(BOUNDARY_DIR.glob("*.jsonl"))


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


def simulate(probe: Probe) -> list[SimulatedTrial]:
    """Every trial of the process, in order, with what the earlier ones left behind."""
    model = probe.model()
    conf = parse_alloc_conf(probe.allocator_conf)
    tuned = None if probe.triton_cache == "warm" else frozenset()    # None: the on-disk cache has every key
    calls: list[tuple[Shape, int, int | None]] = []
    out = []
    for t in probe.trials:
        steps = ()
        if tuned is not None:
            steps, tuned = benchmarking_steps(model, t.shape, tuned)
        capacity = probe.total_bytes - t.measured["nonpytorch_after_bytes"]
        run = replay(model, t.shape, warm_steps=0, measured_steps=len(PHASES), empty_cache_after_warmup=False,
                     history=held_before(model, calls, t.shape), conf=conf, capacity_bytes=capacity, benchmarks=steps)
        out.append(SimulatedTrial(t, run, steps))
        oom = run.oom
        failed_at = model.step_index(oom.step) if oom is not None and oom.run_step == 0 and oom.step != "history" else None
        calls.append((t.shape, t.index, failed_at))
    return out

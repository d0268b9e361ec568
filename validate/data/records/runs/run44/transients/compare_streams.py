"""The requests a GPU's allocator stream holds that the traced step lacks, per step: the exact multiset difference.

    python validate/data/records/runs/run44/transients/compare_streams.py RECORD SNAPSHOT

RECORD: a whole-model record (validate/data/records/models/*.json) whose stored traces replay it
(``validate.check.model_records.model_for``); SNAPSHOT: the run's ``torch.cuda.memory._snapshot()`` pickle (gzipped),
taken with its allocation history. The traced step is replayed as the record's process ran it (first call cold, the
record's steps, no ``empty_cache``) through the snapshot module's tracing allocator; the GPU's steps are split at the
end of each ``Optimizer.zero_grad`` (the snapshot's annotations). Prints, per step, the request sizes (bytes) only the
GPU made and only the trace made, with their counts."""
from __future__ import annotations

import gzip
import pickle
import sys
from collections import Counter
from pathlib import Path

from livebytes.estimator.allocator import DEFAULT_CONF
from livebytes.estimator.capacity import cold_benchmarks
from livebytes.estimator.replay import Call, Process
from livebytes.estimator.snapshot import _TracingAllocator
from livebytes.validate.check import model_records


def traced_requests(record: Path) -> list[Counter]:
    """Request sizes of the traced process, one Counter per step (the inputs counted with the first)."""
    data = model_records.read(record)
    model, shape, _ = model_records.model_for(data)
    proc = Process(model, DEFAULT_CONF)
    proc.alloc = _TracingAllocator(DEFAULT_CONF, lambda: [{"run": proc.state.where[2] if proc.state else -1}], None)
    proc.call(Call(shape, len(data["steps"]), None, cold_benchmarks(model, shape, data["triton_cache"])))
    steps = [Counter() for _ in data["steps"]]
    for e in proc.alloc.events:
        if e["action"] == "alloc":
            steps[max(0, e["frames"][0]["run"])][e["size"]] += 1
    return steps


def gpu_requests(snapshot: Path, steps: int) -> list[Counter]:
    """Request sizes of the GPU's stream, one Counter per step (split at each zero_grad's end)."""
    s = pickle.load(gzip.open(snapshot))
    ends = [a["time_us"] for a in s["external_annotations"] if a["stage"] == "END" and "zero_grad" in a["name"]]
    out = [Counter() for _ in range(steps + 1)]            # the last: what came after the step (the probe's own)
    for e in s["device_traces"][0]:
        if e["action"] == "alloc":
            out[next((i for i, t in enumerate(ends) if e["time_us"] <= t), len(ends))][e["size"]] += 1
    return out


if __name__ == "__main__":
    record, snapshot = Path(sys.argv[1]), Path(sys.argv[2])
    traced = traced_requests(record)
    for step, gpu in enumerate(gpu_requests(snapshot, len(traced))):
        mine = traced[step] if step < len(traced) else Counter()
        print(f"step {step}: GPU {sum(gpu.values()):,} requests, trace {sum(mine.values()):,}")
        print("  only the GPU:", sorted((gpu - mine).items()))
        print("  only the trace:", sorted((mine - gpu).items()))

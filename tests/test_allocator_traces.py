"""The allocator model on the GPU's own request streams (``validate/allocator_traces.py``): three device traces of
whole-model steps on the H200 (run 24's 1.3B edge at 468,518 tokens, run 25h's k2 and 1.3B at 8-16K, cold, three steps
each). With each segment where the GPU's cudaMalloc put it, every block the model hands out is the GPU's, at the GPU's
address, and the reserved peak is the GPU's to the byte; with the model's own placement the reserved peak is off by
exactly what the traced model's prediction of those records is off by (``validate/model_records.NAMED_MISSES``)."""
import gzip
import io

import pytest

from livebytes.validate.allocator_traces import replay_trace
from livebytes.validate.explain import _PlainUnpickler
from livebytes.validate.model_records import MODEL_RECORDS_DIR

SNAPSHOTS = MODEL_RECORDS_DIR / "snapshots"

# snapshot -> (requests, GPU's reserved peak, model placement's reserved peak), from the trace's own segment_alloc
# events: 141,748,600,832 = the record's steps[1..2].max_reserved_bytes; k2: 5,840,568,320 (run 23's too) and
# 5,773,459,456 = 5,840,568,320 - 64 MiB; 1.3B: 15,181,283,328 and 14,891,876,352 = 15,181,283,328 - 276 MiB.
CASES = {
    "h200_run24_edge-1.3b-468518": (16723, 141_748_600_832, 141_748_600_832),
    "h200_run26_edge-1.3b-467549": (16723, 141_473_873_920, 141_473_873_920),   # plan's answer: its record's steps[1..2].max_reserved_bytes
    "h200_run27_edge-1.3b-467490": (16723, 141_459_193_856, 141_459_193_856),   # plan's answer since ecc4a09: the same
    "h200_run25h_k2-ckpt": (3211, 5_840_568_320, 5_840_568_320 - 64 * 2**20),
    "h200_run25h_k4-1.3b": (15991, 15_181_283_328, 15_181_283_328 - 276 * 2**20),
}


def _snapshot(name: str) -> dict:
    data = gzip.open(SNAPSHOTS / f"{name}.snapshot.pickle.gz").read()
    return _PlainUnpickler(io.BytesIO(data)).load()


@pytest.mark.parametrize("name", sorted(CASES))
def test_device_placement_gives_every_gpu_block(name):
    requests, reserved, _ = CASES[name]
    snap = _snapshot(name)
    run = replay_trace(snap)
    assert run.requests == requests
    assert run.divergence is None                         # every block at the GPU's address
    assert run.reserved_peak_bytes == reserved
    gpu_segments = [e["size"] for e in snap["device_traces"][0] if e["action"] == "segment_alloc"]
    assert list(run.segments) == gpu_segments


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_placement_differs_by_the_named_miss(name):
    _, _, reserved = CASES[name]
    assert replay_trace(_snapshot(name), device_placement=False).reserved_peak_bytes == reserved


def test_a_moved_segment_is_seen():
    """The check can fail: one segment placed elsewhere moves a block."""
    snap = _snapshot("h200_run25h_k2-ckpt")
    trace = snap["device_traces"][0]
    first = next(i for i, e in enumerate(trace) if e["action"] == "segment_alloc" and e["size"] >= 64 * 2**20)
    trace[first] = dict(trace[first], addr=trace[first]["addr"] + (1 << 40))
    assert replay_trace(snap).divergence is not None

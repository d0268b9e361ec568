"""The allocator model on the GPU's own request streams (``validate/check/allocator_traces.py``): three device traces of
whole-model steps on the H200 (run 24's 1.3B edge at 468,518 tokens, run 25h's k2 and 1.3B at 8-16K, cold, three steps
each). With each segment where the GPU's cudaMalloc put it, every block the model hands out is the GPU's, at the GPU's
address, and the reserved peak is the GPU's to the byte; with the model's own placement the reserved peak is off by
exactly what the model placement's prediction of those records is off by (each trace's order is one placement of the
reserved band, ``estimator/placement.py``, which holds those records' reserved figures: tests/test_placement_band.py)."""
import gzip
import io

import pytest

from livebytes.validate.check.allocator_traces import replay_trace
from livebytes.validate.check.explain import _PlainUnpickler
from livebytes.validate.check.model_records import MODEL_RECORDS_DIR

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
    # run 30: run 28's fp32-amp a2 (KDA h2048 4 layers, checkpointing, 1 x 16K) and a3 (GDN h1024 2 layers, 1 x 8K)
    # again, their figures equal to run 28's; a2's model placement: 9,779,019,776 - 415,236,096 (396 MiB)
    "h200_run30_a2-kda-ckpt": (3820, 9_779_019_776, 9_363_783_680),
    "h200_run30_a3-gdn-8k": (1614, 2_751_463_424, 2_751_463_424),
    # run 31: transformers 5.17's Kimi-Linear and Qwen3-Next steps (their records' steps[1..2].max_reserved_bytes)
    "h200_run31_k1-l4-8k": (4166, 8_315_207_680, 8_315_207_680),
    "h200_run31_k2-l2-16k": (1944, 15_839_789_056, 15_839_789_056),
    "h200_run31_q1-l4-8k": (4308, 8_627_683_328, 8_627_683_328),
    "h200_run31_q2-d256-4k": (2316, 5_112_856_576, 5_112_856_576),
    # run 34: the same k1 and q1 with --checkpoint (their records' steps[1..2].max_reserved_bytes; the model's
    # placement gives the GPU's, as k1's did not without checkpointing)
    "h200_run34_k1c-l4-8k": (5381, 4_919_918_592, 4_919_918_592),
    "h200_run34_q1c-l4-8k": (5583, 5_158_993_920, 5_158_993_920),
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


@pytest.mark.parametrize("name,device_placement,allocated_end", [
    ("h200_run30_a3-gdn-8k", True, 1_173_954_560),    # run 28's a3 record: steps[*].allocated_after_bytes
    ("h200_run30_a3-gdn-8k", False, 1_172_905_984),   # 1 MiB less: the traced prediction's (model_records.NAMED_MISSES)
    ("h200_run31_k1-l4-8k", True, 1_108_045_824),     # the k1 record's steps[*].allocated_after_bytes
    ("h200_run31_k1-l4-8k", False, 1_105_948_672),    # 2 MiB less; the traced prediction 1,106,472,960 (order: 0.5 MiB)
])
def test_allocated_after_is_the_placement(name, device_placement, allocated_end):
    """Allocated bytes depend on placement too: a request served from a cached block whose remainder is too small to
    split (CUDACachingAllocator.cpp ``shouldSplit``: large-pool remainders of 1 MiB or less stay with the block) holds
    the whole block, and which block serves it is where the segments lie."""
    run = replay_trace(_snapshot(name), device_placement=device_placement)
    assert run.allocated_end_bytes == allocated_end


def test_fsdp_reduce_scatter_stream_has_its_own_pool():
    """Run 32's FSDP2 step at world size 1: the reduce-scatter inputs (26,788,112 B per block x 2, the root's
    131,074,048) are allocated on the reduce-scatter stream, whose 3 segments (27,262,976 x 2 + 132,120,576 =
    186,646,528 B) the default stream cannot reuse; the GPU's reserved 2,260,729,856 = the default stream's pool
    (2,074,083,328, the whole trace replayed in one pool) + those 186,646,528 (model_records.FSDP_RS_POOL)."""
    snap = _snapshot("h200_run32_f1-kda-8k-fsdp1")
    side = [e["size"] for e in snap["device_traces"][0] if e["action"] == "segment_alloc" and e["stream"] != 0]
    assert side == [27_262_976, 27_262_976, 132_120_576] and sum(side) == 186_646_528
    run = replay_trace(snap, device_placement=False)
    assert run.reserved_peak_bytes == 2_074_083_328
    assert run.reserved_peak_bytes + sum(side) == sum(s["total_size"] for s in snap["segments"]) == 2_260_729_856

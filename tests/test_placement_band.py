"""The reserved band (issue 48 point 2): a step replayed under every placement of its segments the driver was seen to give
(``estimator/placement.py``): the model's own rule and each committed allocator trace's order, read off the traces
into ``estimator/data/placements.json``. The verdict of a case no record measured is the band's high end."""
import json

import pytest

from livebytes.estimator.allocator import CUDA_MALLOC_TOP, ES_ADDRESS_SPACE, CachingAllocator
from livebytes.estimator.capacity import HIGH_END, ReservedBand, band_of
from livebytes.estimator.placement import MODEL, PLACEMENTS_FILE, Placement, placements, ranks_of
from livebytes.validate.check.allocator_traces import SNAPSHOTS, placements_data, read_snapshot, replay_trace

MiB = 1 << 20
STRIDE = ES_ADDRESS_SPACE * 2          # 2^51: one position of a placement


def test_committed_placements_are_what_the_traces_give():
    """estimator/data/placements.json equals what the committed traces give (python -m
    livebytes.validate.check.allocator_traces writes it): one placement per trace, each naming its trace."""
    committed = json.loads(PLACEMENTS_FILE.read_text())
    assert committed == placements_data()
    traces = sorted(SNAPSHOTS.glob("*.snapshot.pickle.gz"))
    assert len(committed["placements"]) == len(traces) == 14
    for row in committed["placements"]:
        assert row["trace"].startswith("validate/data/records/models/snapshots/h200_") and row["segments"] == len(row["ranks"])
        assert sorted(row["ranks"]) == list(range(row["segments"]))        # a permutation: every position once
    assert [p.name for p in placements()][0] == MODEL and len(placements()) == 15


def test_ranks_by_hand():
    """Addresses 30, 10, 20 lie in the order 10 < 20 < 30: the first segment is third (rank 2), the second lowest (0)."""
    assert ranks_of([30, 10, 20]) == (2, 0, 1)
    assert ranks_of([5]) == (0,)


def test_an_address_per_rank_and_below_past_the_trace():
    """ranks (1, 0): segment 1 at (2^20 + 1) x 2^51, segment 2 at 2^20 x 2^51 (below it); segment 3, past the trace, at
    (2^20 - 3) x 2^51, below both (the model's rule)."""
    p = Placement("t", (1, 0))
    assert CUDA_MALLOC_TOP == 2**20 and STRIDE == 2**51
    assert p.address(1, 0) == (2**20 + 1) * 2**51
    assert p.address(2, 0) == 2**20 * 2**51
    assert p.address(3, 0) == (2**20 - 3) * 2**51 < p.address(2, 0)
    assert Placement(MODEL).address(1, 0) > Placement(MODEL).address(2, 0)      # the model's: each below the last


@pytest.mark.parametrize("name", sorted(p.name.removesuffix(".snapshot.pickle.gz")
                                        for p in SNAPSHOTS.glob("*.snapshot.pickle.gz")))
def test_a_traces_ranks_replay_as_its_addresses(name):
    """Segments that do not overlap are told apart by their order alone: a trace's requests under its placement's ranks
    give the reserved peak and the blocks left allocated that the GPU's own addresses give."""
    snap = read_snapshot(SNAPSHOTS / f"{name}.snapshot.pickle.gz")
    placement = next(p for p in placements() if p.name == name.removeprefix("h200_"))
    by_ranks, by_addresses = replay_trace(snap, placement=placement), replay_trace(snap)
    assert (by_ranks.reserved_peak_bytes, by_ranks.allocated_end_bytes, by_ranks.segments) == (
        by_addresses.reserved_peak_bytes, by_addresses.allocated_end_bytes, by_addresses.segments)


def _tie_then_request(placement) -> int:
    """Segment 1: 22 MiB, of which 10 MiB (z) stay allocated and 12 MiB are free; segment 2: a free 12 MiB. A 2 MiB
    request ties between the two free 12 MiB blocks and takes the lower address; z is freed; then 22 MiB are asked."""
    alloc = CachingAllocator(placement=placement)
    w = alloc.malloc(22 * MiB)                   # segment 1: 22 MiB
    v = alloc.malloc(12 * MiB)                   # segment 2: 12 MiB
    alloc.free(w)
    z = alloc.malloc(10 * MiB)                   # splits segment 1: z 10 MiB, 12 MiB free
    alloc.free(v)                                # segment 2: 12 MiB free: two free blocks of 12 MiB
    alloc.malloc(2 * MiB)                        # the lower of the two is split: 2 + 10 MiB
    alloc.free(z)
    alloc.malloc(22 * MiB)
    return alloc.peak_reserved


def test_placement_decides_the_reserved_peak_by_hand():
    """The model's placement puts segment 2 below segment 1: the 2 MiB request splits segment 2, z's 10 MiB merge with
    segment 1's free 12 MiB into 22 MiB, which serve the last request: 22 + 12 = 34 MiB reserved. Segment 2 above
    segment 1 (ranks 0, 1): the 2 MiB split segment 1's free tail, z's 10 MiB are cut off from the 10 MiB behind it, and
    the 22 MiB request takes a new segment: 22 + 12 + 22 = 56 MiB."""
    assert _tie_then_request(Placement(MODEL).address) == 34 * MiB
    assert _tie_then_request(Placement("above", (0, 1)).address) == 56 * MiB


class _Run:
    def __init__(self, reserved: int):
        self.reserved_peak_bytes = reserved


def test_band_of_takes_least_and_greatest_first_of_ties():
    """Reserved peaks 34, 56, 56 MiB: low 34 (model), high 56 from the first of the two that give it."""
    runs = [(Placement(MODEL), _Run(34 * MiB)), (Placement("a", (0, 1)), _Run(56 * MiB)),
            (Placement("b", (0, 1)), _Run(56 * MiB))]
    band = band_of(runs)
    assert band == ReservedBand(34 * MiB, 56 * MiB, MODEL, "a", 3, 3)
    assert band.width_bytes == 22 * MiB == 56 * MiB - 34 * MiB


@pytest.fixture(scope="module")
def tiny_model():
    from livebytes.estimator.devices import get_device
    from livebytes.estimator.registry import get_model
    return get_model("fla-kda@0.6.0", get_device("H200"))


def test_verdict_says_its_band_and_what_decided(tiny_model):
    """A case no record measured: the band over every placement, the high end's run decides (its reserved peak is the
    band's high end)."""
    from livebytes.estimator.capacity import verdict
    from livebytes.estimator.devices import get_device
    from livebytes.estimator.shapes import Shape
    v = verdict(tiny_model, Shape(1, 8192, 16, 128), get_device("H200"))
    assert v.band is not None and v.band.placements == 15 and 1 <= v.band.replays <= 15
    assert v.band.low_bytes <= v.reserved_peak_bytes == v.band.high_bytes
    assert v.decided_by == (HIGH_END, v.band.high_placement)


def test_a_run_ordered_alike_is_the_same_run():
    """ranks (1, 0, 2) and (2, 0, 1) order a run's first two segments alike (the first above the second: (1, 0)), its
    first three not: a run that made two segments is replayed once for both, one that made three twice."""
    from livebytes.estimator.placement import order_of
    a, b = Placement("a", (1, 0, 2)), Placement("b", (2, 0, 1))
    assert order_of(a, 2) == order_of(b, 2) == (1, 0)
    assert (order_of(a, 3), order_of(b, 3)) == ((1, 0, 2), (2, 0, 1))


# run 28's a2 (KDA hidden 2048, 4 layers, checkpointing, fp32-amp, 1 x 16K, AdamW, three steps in a fresh process; its
# predictions committed before the run): the held-out checkpointed 4-layer KDA model of issue 48
A2 = "h200_run28_a2-kda-ckpt.json"


@pytest.fixture(scope="module")
def a2_band():
    from livebytes.validate.check import model_records
    data = model_records.read(model_records.MODEL_RECORDS_DIR / A2)
    model, shape, _ = model_records.model_for(data)
    return data, model_records.band_runs(model, shape, data)


def test_held_out_steady_reserved_is_under_the_high_end_within_ten_percent(a2_band):
    """a2's steady reserved, 9,779,019,776 B in steps 1 and 2, was 566,231,040 and 432,013,312 B above the model
    placement's; the band's high end (run 34's k1c order) is 117,440,512 B above it: 1.2 % (117,440,512 / 9,779,019,776),
    inside the 10 % the issue asks; its low end (run 25h's k2 order) 606,076,928 B below."""
    data, runs = a2_band
    for step in (1, 2):
        measured = data["steps"][step]["max_reserved_bytes"]
        peaks = [r.reserved_peaks[step] for _, r in runs]
        high = max(peaks)
        assert measured == 9_779_019_776
        assert high - measured == 117_440_512 and min(peaks) == measured - 606_076_928
        assert 0 <= (high - measured) / measured < 0.10
        assert dict((p.name, r.reserved_peaks[step]) for p, r in runs)["run34_k1c-l4-8k"] == high
    model_run = runs[0][1]
    assert [data["steps"][i]["max_reserved_bytes"] - model_run.reserved_peaks[i] for i in (1, 2)] == [566_231_040, 432_013_312]


K2 = "h200_run25h_k2-ckpt.json"      # KDA hidden 2048, 4 layers, checkpointing, bf16, 1 x 16K, cold, H200: measured


def test_a_measured_case_is_decided_by_the_placement_that_replays_its_record():
    """k2's steady reserved, 5,840,568,320 B, is what run 24's order gives (the first placement whose replay gives every
    reserved figure of the record; the model's own gives 64 MiB less): the verdict is that run, not the band's high end
    (6,025,117,696 = 5,840,568,320 + 176 MiB, run 25h's 1.3B order). The band: low 5,706,350,592 = 5,840,568,320 -
    128 MiB (run 31's k1 order). Another length is no measured case."""
    from dataclasses import replace

    from livebytes.estimator.capacity import MEASURED, verdict
    from livebytes.validate.check import model_records
    data = model_records.read(model_records.MODEL_RECORDS_DIR / K2)
    model, shape, device = model_records.model_for(data)
    found = model_records.measured_placement(model, shape, "H200", "cold")
    assert found is not None and found.name == "run24_edge-1.3b-468518"
    assert model_records.measured_placement(model, replace(shape, seq=8192), "H200", "cold") is None
    assert model_records.measured_placement(model, shape, "H200", "warm") is None
    v = verdict(model, shape, device, triton_cache="cold", measured=found)
    assert v.decided_by == (MEASURED, "run24_edge-1.3b-468518") and v.reserved_peak_bytes == 5_840_568_320
    assert (v.band.low_bytes, v.band.high_bytes) == (5_840_568_320 - 128 * MiB, 5_840_568_320 + 176 * MiB)
    unmeasured = verdict(model, shape, device, triton_cache="cold")
    assert unmeasured.reserved_peak_bytes == 6_025_117_696 and unmeasured.decided_by == (HIGH_END, "run25h_k4-1.3b")

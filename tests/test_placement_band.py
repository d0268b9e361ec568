"""The reserved band (issue 48 point 2): a step replayed under every placement of its segments the driver was seen to give
(``estimator/placement.py``): the model's own rule and each committed allocator trace's order, read off the traces
into ``estimator/data/placements.json``. The verdict of a case no record measured is the band's high end."""
import json

import pytest

from livebytes.estimator.allocator import CUDA_MALLOC_TOP, ES_ADDRESS_SPACE, CachingAllocator
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

"""Where cudaMalloc puts a step's segments: the orders the driver was seen to give, as data (``data/placements.json``).

The caching allocator's best fit breaks ties between equal-sized cached blocks by address (``allocator.get_free_block``),
so which segment lies below which changes which block serves a request, where it is split and, later, whether a new
segment is cut: the reserved peak. The allocator model's own rule (``allocator.model_placement``: each new segment below
every earlier one) is one order the driver gives; the committed allocator traces of whole-model steps on the H200
(``validate/data/records/models/snapshots``) show others: the driver fills free ranges between earlier segments.

Each trace gives one placement: the position its ``n``-th ``cudaMalloc`` segment took among all of its segments, by
address (``Placement.ranks``, written by ``python -m livebytes.validate.check.allocator_traces``, which reads them off
the traces; a test holds the data to them). Replayed under it, the step's segment ``n`` goes where the trace's
segment ``n`` went relative to the others; a step with more segments than the trace puts the rest below every earlier
one (the model's rule). Between segments that do not overlap only their order decides any tie, so the trace's own
requests under its ranks give the blocks and reserved peak its real addresses give (tests/test_allocator_traces.py).

No placement is fitted or drawn at random: each names the trace it came from. ``band`` replays a step under every one;
its low and high reserved peaks are the band the driver's placement spans, as far as these traces show it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .allocator import CUDA_MALLOC_TOP, ES_ADDRESS_SPACE, cuda_malloc_address

PLACEMENTS_FILE = Path(__file__).parent / "data" / "placements.json"
MODEL = "model"           # the allocator model's own placement (each new segment below every earlier one)


@dataclass(frozen=True)
class Placement:
    """One order of segments: ``ranks[n - 1]`` is where the ``n``-th segment lies among the trace's segments (0: the
    lowest address). ``source``: the trace it was read from (empty for the model's own rule)."""
    name: str
    ranks: tuple[int, ...] = ()
    source: str = ""

    def address(self, segment_number: int, _nbytes: int) -> int:
        """The allocator's ``placement`` callable (``CachingAllocator(placement=p.address)``): the trace's order for
        its segments, above every later one; past the trace, below every earlier one (``allocator.cuda_malloc_address``).
        One ``2 * ES_ADDRESS_SPACE`` stride per position, so segments never overlap."""
        if segment_number <= len(self.ranks):
            return (CUDA_MALLOC_TOP + self.ranks[segment_number - 1]) * ES_ADDRESS_SPACE * 2
        return cuda_malloc_address(segment_number)


MODEL_PLACEMENT = Placement(MODEL, (), "allocator.cuda_malloc_address: each new segment below every earlier one")


def ranks_of(addresses: list[int]) -> tuple[int, ...]:
    """Each segment's position by address among all of them (ties, a reused range, by segment number)."""
    order = sorted(range(len(addresses)), key=lambda i: (addresses[i], i))
    ranks = [0] * len(addresses)
    for position, i in enumerate(order):
        ranks[i] = position
    return tuple(ranks)


def order_of(placement: Placement, segments: int) -> tuple[int, ...]:
    """The order ``placement`` gives a process's first ``segments`` segments (their ranks among themselves): a run that
    makes that many is the same run under every placement that gives them the same order."""
    return ranks_of([placement.address(n, 0) for n in range(1, segments + 1)])


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[Placement, ...]:
    data = json.loads(Path(path).read_text())
    return tuple(Placement(p["name"], tuple(p["ranks"]), p["trace"]) for p in data["placements"])


def placements(path: Path = PLACEMENTS_FILE) -> tuple[Placement, ...]:
    """The model's own placement, then every committed trace's (``data/placements.json``)."""
    return (MODEL_PLACEMENT,) + _load(str(path))


def by_name(name: str) -> Placement:
    found = [p for p in placements() if p.name == name]
    if not found:
        raise KeyError(f"no placement {name!r} (estimator/data/placements.json)")
    return found[0]

"""Block-level model of PyTorch's CUDA caching allocator, for replaying a model's timeline exactly.

Every rule below is a named function that follows ``DeviceCachingAllocator`` in
c10/cuda/CUDACachingAllocator.cpp (torch 2.11): one device, one stream, no CUDA graphs, no
``max_split_size_mb``, no ``garbage_collection_threshold``, no ``roundup_power2_divisions``
(``parse_alloc_conf`` refuses those settings). The one-tensor rounding rule lives in ``rounding.py``.

``malloc`` takes the allocator's path:
1. ``get_free_block``: best fit over the cached free blocks of the pool, ordered by (size, address);
2. ``trigger_free_memory_callbacks``: the only callback registered by default collects CUDA IPC
   handles, which these processes do not share: it frees nothing (not modelled);
3. ``alloc_block``: a new segment (``cudaMalloc`` of ``get_allocation_size``), or with expandable
   segments new 2 MiB / 20 MiB pages mapped into the pool's segment, against the capacity the
   process has left (``capacity_bytes``: device total minus the process's memory outside PyTorch);
4. ``release_available_cached_blocks``: returns false when ``max_split_size`` is unlimited (default);
5. ``release_cached_blocks``: give back every cached segment with nothing allocated in it (expandable
   segments: unmap every free page), then ``alloc_block`` once more;
6. otherwise the out-of-memory error, with the figures PyTorch prints (``OutOfMemory``).

Addresses break ties between free blocks of equal size (best fit orders by (size, address)), so where the
driver puts a segment matters: a ``cudaMalloc`` segment lies below every earlier one (``cuda_malloc_address``,
driver behaviour read off the recorded addresses; the driver's gaps and its reuse of freed ranges are not
modelled). Expandable segments: one
per pool while its address range lasts (``expandable_address_space``: 1.125x the device memory, when the
device total is given); pages unmapped in an out-of-memory retry leave holes that push later mappings up
that range, and when no range has room a new segment is reserved above the others.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .errors import LivebytesError
from .rounding import BLOCK_BYTES, allocated_block_bytes, round_size  # noqa: F401  (allocated_block_bytes: old import path)

K_SMALL_SIZE = 1 << 20          # kSmallSize: requests up to 1 MiB use the small pool
K_SMALL_BUFFER = 2 << 20        # kSmallBuffer: small-pool segments (and expandable small pages) are 2 MiB
K_LARGE_BUFFER = 20 << 20       # kLargeBuffer: requests under 10 MiB get a 20 MiB segment; expandable large pages
K_MIN_LARGE_ALLOC = 10 << 20    # kMinLargeAlloc
K_ROUND_LARGE = 2 << 20         # kRoundLarge: larger segments round up to 2 MiB
ES_ADDRESS_SPACE = 1 << 50      # one expandable segment's address range when the device total is not given


@dataclass(frozen=True)
class AllocatorConf:
    """PYTORCH_CUDA_ALLOC_CONF as far as it is modelled, and where it was read (the flag, an environment variable, or
    PyTorch's default): said in the answer, never part of what the simulation compares or caches on."""
    expandable_segments: bool = False
    source: str = field(default="default", compare=False)

    @property
    def text(self) -> str:
        return f"expandable_segments:{self.expandable_segments}"


DEFAULT_CONF = AllocatorConf()


def parse_alloc_conf(text: str | None) -> AllocatorConf:
    """PyTorch's syntax (``expandable_segments:True``, comma-separated); settings not modelled are refused."""
    if not text or not text.strip():
        return DEFAULT_CONF
    expandable = False
    for item in text.split(","):
        key, sep, value = (p.strip() for p in item.partition(":"))
        if key != "expandable_segments":
            raise LivebytesError(f"allocator setting {key!r} is not modelled (only expandable_segments:True|False)")
        if not sep or value not in ("True", "False"):
            raise LivebytesError(f"expandable_segments takes True or False, got {value!r}")
        expandable = value == "True"
    return AllocatorConf(expandable)


def segment_size(size: int) -> int:
    """``get_allocation_size``: the cudaMalloc size for a rounded request of ``size`` (also the
    "Tried to allocate" figure of an out-of-memory error)."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * -(-size // K_ROUND_LARGE)


def page_size(small: bool) -> int:
    """``ExpandableSegment::segment_size_``: 2 MiB pages for the small pool, 20 MiB for the large pool."""
    return K_SMALL_BUFFER if small else K_LARGE_BUFFER


def expandable_address_space(device_total_bytes: int | None, small: bool) -> int:
    """The address range one expandable segment reserves (``ExpandableSegment`` constructor:
    ``max_handles_ = numSegments(totalGlobalMem + totalGlobalMem / 8)`` pages, ``cuMemAddressReserve`` of
    ``segment_size_ * max_handles_``): 1.125x the device memory, rounded up to whole pages."""
    if device_total_bytes is None:
        return ES_ADDRESS_SPACE
    page = page_size(small)
    return page * -(-(device_total_bytes + device_total_bytes // 8) // page)


CUDA_MALLOC_TOP = 1 << 20          # segment numbers below this get addresses counting down from it


def cuda_malloc_address(segment_number: int) -> int:
    """Where the ``segment_number``-th segment (1, 2, ...) starts: below every earlier one, one
    ``2 * ES_ADDRESS_SPACE`` stride each (``snapshot`` keys segments by that stride). Not
    CUDACachingAllocator.cpp, which takes whatever ``cudaMalloc`` returns: the driver's placement, as the
    probes' ``memory_snapshot`` addresses show it (validate/data/records/boundary, every ``expandable_segments:False``
    record): in a fresh process each new segment starts below the one before, by its size rounded up to 32 MiB
    (D64: 3.66 GiB segments every 3,776 MiB, 7.32 GiB ones every 7,520 MiB). Not modelled: segments of a few
    hundred MiB fill a free range near the top first (118 then 256 MiB above the inputs), and a later trial's
    segments pack upwards from the bottom of the range the earlier trial freed."""
    return (CUDA_MALLOC_TOP - segment_number) * ES_ADDRESS_SPACE * 2


def model_placement(segment_number: int, _nbytes: int) -> int:
    """The model's placement of a new segment (``cuda_malloc_address``; the size does not change it)."""
    return cuda_malloc_address(segment_number)


@dataclass(eq=False)
class Block:
    addr: int
    size: int
    small: bool
    free: bool = True
    mapped: bool = True                  # False: unmapped address space of an expandable segment
    base: int | None = None              # start of the expandable segment this block lies in
    prev: Block | None = None
    next: Block | None = None


@dataclass(frozen=True)
class OutOfMemory:
    """What PyTorch reports when ``malloc`` fails: ``tried_bytes`` is ``alloc_size`` (the message's
    "Tried to allocate" and the OOM observer's figure), the rest are the allocator's stats after
    ``release_cached_blocks``; ``free_bytes`` is what cudaMemGetInfo would report."""
    request_bytes: int
    tried_bytes: int
    allocated_bytes: int
    reserved_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class MappedRange:
    """One entry of ``torch.cuda.memory_snapshot()``'s segments: a cudaMalloc segment, or, with expandable
    segments, one contiguous mapped range of a segment. ``base``: the address its segment starts at."""
    small: bool
    base: int
    addr: int
    size: int
    allocated: int
    expandable: bool


class AllocatorOutOfMemory(Exception):
    def __init__(self, oom: OutOfMemory):
        super().__init__(f"out of memory: tried to allocate {oom.tried_bytes} B")
        self.oom = oom


def should_split(block: Block, size: int, expandable: bool) -> bool:
    """``should_split``: small pool or expandable segments keep any remainder of 512 B or more; the
    large pool keeps a remainder only above 1 MiB (``max_split_size`` unlimited)."""
    remaining = block.size - size
    if block.small or expandable:
        return remaining >= BLOCK_BYTES
    return remaining > K_SMALL_SIZE


def _mapped_runs(head: Block, chain: list[Block]) -> list[MappedRange]:
    """Split one segment's block chain at its unmapped blocks."""
    out, run = [], []
    for b in chain + [None]:
        if b is not None and b.mapped:
            run.append(b)
        elif run:
            base = head.base if head.base is not None else head.addr
            out.append(MappedRange(head.small, base, run[0].addr, sum(x.size for x in run),
                                   sum(x.size for x in run if not x.free), head.base is not None))
            run = []
    return out


class CachingAllocator:
    """Best fit over cached free blocks, split when the remainder is worth keeping, merge on free,
    segments (or pages) from a finite capacity with PyTorch's release-and-retry before an OOM."""

    def __init__(self, conf: AllocatorConf = DEFAULT_CONF, capacity_bytes: int | None = None,
                 device_total_bytes: int | None = None, placement=None) -> None:
        """``placement``: (segment number, bytes) -> where cudaMalloc puts that segment (None: ``model_placement``; a
        GPU trace's own addresses in ``validate.check.allocator_traces``)."""
        self.conf = conf
        self.placement = placement or model_placement
        self.capacity = capacity_bytes
        self.device_total = device_total_bytes     # sizes an expandable segment's address range
        self._pools: dict[bool, list[tuple[int, int, Block]]] = {True: [], False: []}
        self._unmapped: dict[bool, list[Block]] = {True: [], False: []}
        self._segments = 0
        self._in_use: set[Block] = set()         # allocated blocks (for mapped_ranges)
        self.allocated = self.peak = 0
        self.reserved = self.peak_reserved = 0

    # ------------------------------------------------------------------ bookkeeping
    def _insert(self, b: Block) -> None:
        bisect.insort(self._pools[b.small], (b.size, b.addr, b))

    def _remove(self, b: Block) -> None:
        pool = self._pools[b.small]
        pool.pop(bisect.bisect_left(pool, (b.size, b.addr)))

    def _reserve(self, nbytes: int) -> bool:
        if self.capacity is not None and self.reserved + nbytes > self.capacity:
            return False
        self.reserved += nbytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return True

    def _new_address(self) -> int:
        """An expandable segment's reservation (``cuMemAddressReserve``): above every earlier one (the addresses of the
        ``expandable_segments:True`` records, validate/data/records/boundary)."""
        self._segments += 1
        return self._segments * ES_ADDRESS_SPACE * 2

    # ------------------------------------------------------------------ malloc path
    def get_free_block(self, size: int, small: bool) -> Block | None:
        """``get_free_block``: the smallest cached block of at least ``size`` (lower_bound on (size, address));
        with expandable segments a block whose next neighbour is unmapped counts as that much larger."""
        pool = self._pools[small]
        i = bisect.bisect_left(pool, (size, -1))
        if i == len(pool):
            return None
        if self.conf.expandable_segments:
            def expandable_size(b: Block) -> int:
                return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)
            while i + 1 < len(pool) and expandable_size(pool[i + 1][2]) < expandable_size(pool[i][2]):
                i += 1
        return pool.pop(i)[2]

    def alloc_block(self, size: int, alloc_size: int, small: bool) -> Block | None:
        """``alloc_block``: cudaMalloc a segment of ``alloc_size`` (or, expandable, map pages for ``size``)."""
        if self.conf.expandable_segments:
            return self.try_allocate_expandable_block(size, small)
        if not self._reserve(alloc_size):
            return None
        self._segments += 1
        return Block(self.placement(self._segments, alloc_size), alloc_size, small)

    def release_available_cached_blocks(self) -> bool:
        """``release_available_cached_blocks``: returns false at once while ``max_split_size`` is unlimited."""
        return False

    def release_cached_blocks(self) -> None:
        """``release_cached_blocks`` (also ``torch.cuda.empty_cache``): ``release_blocks`` frees every
        segment that is one free block; expandable segments ``unmap_block`` every free block's whole pages."""
        for small, pool in self._pools.items():
            if self.conf.expandable_segments:
                for entry in list(pool):
                    self.release_expandable_segment(self.unmap_block(entry[2]))
                continue
            keep = []
            for entry in pool:
                b = entry[2]
                if b.prev is None and b.next is None:
                    self.reserved -= b.size
                else:
                    keep.append(entry)
            self._pools[small] = keep

    empty_cache = release_cached_blocks

    def malloc(self, nbytes: int) -> Block | None:
        if nbytes == 0:
            return None                      # an empty tensor takes no block
        size = round_size(nbytes)
        small = size <= K_SMALL_SIZE
        block = self.get_free_block(size, small)
        if block is None:
            alloc_size = segment_size(size)
            block = self.alloc_block(size, alloc_size, small)
            if block is None and self.release_available_cached_blocks():
                block = self.alloc_block(size, alloc_size, small)   # pragma: no cover - never with the default config
            if block is None:
                self.release_cached_blocks()
                block = self.alloc_block(size, alloc_size, small)
            if block is None:
                free = (self.capacity or 0) - self.reserved
                raise AllocatorOutOfMemory(OutOfMemory(size, alloc_size, self.allocated, self.reserved, free))
        return self._alloc_found_block(block, size)

    def _alloc_found_block(self, block: Block, size: int) -> Block:
        """``alloc_found_block``: split off the remainder when ``should_split`` says so."""
        if should_split(block, size, self.conf.expandable_segments):
            rest = Block(block.addr + size, block.size - size, block.small, True, True, block.base, block, block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            self._insert(rest)
        block.free = False
        self._in_use.add(block)
        self.allocated += block.size
        if self.allocated > self.peak:
            self.peak = self.allocated
        return block

    def free(self, block: Block | None) -> None:
        """``free_block``: merge with free neighbours of the same mapped state (``try_merge_blocks``)."""
        if block is None:
            return
        self.allocated -= block.size
        self._in_use.discard(block)
        block.free = True
        self._insert(self._merge_neighbours(block))

    def _merge_neighbours(self, block: Block) -> Block:
        for neighbour in (block.prev, block.next):
            if neighbour is None or not neighbour.free or neighbour.mapped != block.mapped:
                continue
            if neighbour.mapped:
                self._remove(neighbour)
            else:
                self._unmapped[neighbour.small].remove(neighbour)
            if neighbour is block.prev:
                block.addr, block.prev = neighbour.addr, neighbour.prev
                if neighbour.prev is not None:
                    neighbour.prev.next = block
            else:
                block.next = neighbour.next
                if neighbour.next is not None:
                    neighbour.next.prev = block
            block.size += neighbour.size
        return block

    def mapped_ranges(self) -> tuple[MappedRange, ...]:
        """The segments as ``memory_snapshot`` lists them (``snapshot`` / ``get_all_blocks``: an expandable
        segment is reported once per contiguous mapped range), by pool and address."""
        heads = {}
        cached = [e[2] for pool in self._pools.values() for e in pool]
        for b in cached + list(self._in_use) + [b for u in self._unmapped.values() for b in u]:
            while b.prev is not None:
                b = b.prev
            heads[id(b)] = b
        out = []
        for head in sorted(heads.values(), key=lambda b: (b.small, b.addr)):
            chain, b = [], head
            while b is not None:
                chain.append(b)
                b = b.next
            out.extend(_mapped_runs(head, chain))
        return tuple(out)

    def reset_peak(self) -> None:
        """``reset_peak_memory_stats``: every peak restarts from the current value."""
        self.peak = self.allocated
        self.peak_reserved = self.reserved

    # ------------------------------------------------------------------ expandable segments
    def find_expandable_block(self, size: int, small: bool) -> Block:
        """``find_expandable_block``: the lowest unmapped range (with the free block before it) that
        reaches ``size``, over every segment of the pool; else a new segment's whole address range (1.125x the
        device memory, ``expandable_address_space``), reserved above the others."""
        def room(b: Block | None) -> bool:
            total = 0
            while total < size and b is not None and b.free:
                total, b = total + b.size, b.next
            return total >= size
        for u in sorted(self._unmapped[small], key=lambda b: b.addr):
            c = u.prev if u.prev is not None and u.prev.free else u
            if room(c):
                return c
        base = self._new_address()
        block = Block(base, expandable_address_space(self.device_total, small), small, True, False, base)
        self._unmapped[small].append(block)
        return block

    def map_block(self, block: Block, size: int) -> Block | None:
        """``map_block`` / ``ExpandableSegment::map``: map whole pages covering ``size`` from the start of an
        unmapped block, all or nothing; the mapped part merges with free mapped neighbours."""
        page = page_size(block.small)
        mapped = page * -(-size // page)
        if not self._reserve(mapped):
            return None
        self._unmapped[block.small].remove(block)
        block.mapped = True
        if mapped < block.size:
            rest = Block(block.addr + mapped, block.size - mapped, block.small, True, False, block.base, block, block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, mapped
            self._unmapped[block.small].append(rest)
        merged = self._merge_neighbours(block)
        self._insert(merged)
        return merged

    def try_allocate_expandable_block(self, size: int, small: bool) -> Block | None:
        """``try_allocate_expandable_block``: map pages until the candidate holds ``size``."""
        candidate = self.find_expandable_block(size, small)
        if not candidate.mapped:
            candidate = self.map_block(candidate, min(candidate.size, size))
            if candidate is None:
                return None
        while candidate.size < size:
            nxt = candidate.next
            candidate = self.map_block(nxt, min(size - candidate.size, nxt.size))
            if candidate is None:
                return None
        self._remove(candidate)
        return candidate

    def unmap_block(self, block: Block) -> Block | None:
        """``unmap_block`` / ``ExpandableSegment::unmap``: give back the whole pages inside a free block;
        the partial pages at either end stay mapped as free blocks. Returns the unmapped block (merged)."""
        page = page_size(block.small)
        begin = block.base + page * -(-(block.addr - block.base) // page)
        end = block.base + page * ((block.addr + block.size - block.base) // page)
        if begin >= end:
            return None
        self._remove(block)
        if begin > block.addr:
            before = Block(block.addr, begin - block.addr, block.small, True, True, block.base, block.prev, block)
            if block.prev is not None:
                block.prev.next = before
            block.prev = before
            self._insert(before)
        if end < block.addr + block.size:
            after = Block(end, block.addr + block.size - end, block.small, True, True, block.base, block, block.next)
            if block.next is not None:
                block.next.prev = after
            block.next = after
            self._insert(after)
        block.addr, block.size, block.mapped = begin, end - begin, False
        self.reserved -= end - begin
        merged = self._merge_neighbours(block)
        self._unmapped[block.small].append(merged)
        return merged

    def release_expandable_segment(self, block: Block | None) -> None:
        """``release_blocks`` then ``release_expandable_segment``: a segment left as one unmapped block (nothing
        mapped in it) gives back its address range; a later mapping reserves a new one."""
        if block is not None and block.prev is None and block.next is None:
            self._unmapped[block.small].remove(block)

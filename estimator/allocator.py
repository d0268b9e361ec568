"""What PyTorch's CUDA caching allocator charges for one tensor.

``torch.cuda.max_memory_allocated`` sums the sizes of *allocated blocks*, and every request is
rounded up to a multiple of 512 bytes (``kMinBlockSize`` in c10/cuda/CUDACachingAllocator.cpp,
``round_size``). A zero-byte tensor takes no block. Segment sizes (2 MiB small pool, 20 MiB
large buffers) and fragmentation belong to *reserved* memory, which the models do not predict.

Not modelled: ``PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions`` (off by default) and
expandable segments (the validation protocol turns them off).
"""
from __future__ import annotations

import sympy as sp

BLOCK_BYTES = 512


def allocated_block_bytes(nbytes: sp.Expr | int) -> sp.Expr:
    """Bytes the allocator counts for a request of ``nbytes``: ceil to a 512-byte multiple (0 stays 0)."""
    return sp.ceiling(sp.Integer(1) * nbytes / BLOCK_BYTES) * BLOCK_BYTES


# ---------------------------------------------------------------------------------------------
# Block-level model of the caching allocator, for replaying a model's timeline exactly.
#
# ``allocated_block_bytes`` is what one tensor costs when it gets a block of exactly its rounded
# size. The real allocator can hand a request a cached free block up to 1 MiB larger without
# splitting it (``should_split``), and ``max_memory_allocated`` then counts the whole block. Whether
# that happens depends on which blocks are free at that moment, so it is a property of the whole
# allocation sequence: ``CachingAllocator`` follows the rules of c10/cuda/CUDACachingAllocator.cpp
# (one device, one stream, no expandable segments, no max_split_size) so that ``replay`` can run a
# model's timeline through it.
# ---------------------------------------------------------------------------------------------
import bisect
from dataclasses import dataclass as _dataclass

K_SMALL_SIZE = 1 << 20          # requests up to 1 MiB use the small pool
K_SMALL_BUFFER = 2 << 20        # small-pool segments are 2 MiB
K_LARGE_BUFFER = 20 << 20       # requests under 10 MiB get a 20 MiB segment
K_MIN_LARGE_ALLOC = 10 << 20
K_ROUND_LARGE = 2 << 20         # larger segments round up to 2 MiB


def round_size(nbytes: int) -> int:
    """CUDACachingAllocator round_size: at least one 512-byte block, then 512-byte multiples."""
    return BLOCK_BYTES if nbytes < BLOCK_BYTES else BLOCK_BYTES * -(-nbytes // BLOCK_BYTES)


def segment_size(size: int) -> int:
    """CUDACachingAllocator get_allocation_size: the cudaMalloc size for a request of ``size``."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * -(-size // K_ROUND_LARGE)


@_dataclass
class _Block:
    addr: int
    size: int
    small: bool
    free: bool = True
    prev: "_Block | None" = None
    next: "_Block | None" = None


class CachingAllocator:
    """Best-fit over cached free blocks, split when the remainder is worth keeping, merge on free."""

    def __init__(self) -> None:
        self._pools: dict[bool, list[tuple[int, int, _Block]]] = {True: [], False: []}
        self._next_segment = 0
        self.allocated = 0
        self.peak = 0
        self.reserved = 0

    def _insert(self, b: _Block) -> None:
        bisect.insort(self._pools[b.small], (b.size, b.addr, b))

    def _remove(self, b: _Block) -> None:
        pool = self._pools[b.small]
        i = bisect.bisect_left(pool, (b.size, b.addr))
        while pool[i][2] is not b:
            i += 1
        pool.pop(i)

    def malloc(self, nbytes: int) -> _Block | None:
        if nbytes == 0:
            return None                      # an empty tensor takes no block
        size = round_size(nbytes)
        small = size <= K_SMALL_SIZE
        pool = self._pools[small]
        i = bisect.bisect_left(pool, (size, -1))
        if i < len(pool):
            block = pool.pop(i)[2]
        else:                                # cudaMalloc a new segment; addresses grow with segments
            seg = segment_size(size)
            block = _Block(self._next_segment << 40, seg, small)
            self._next_segment += 1
            self.reserved += seg
        remaining = block.size - size
        if (small and remaining >= BLOCK_BYTES) or (not small and remaining > K_SMALL_SIZE):
            rest = _Block(block.addr + size, remaining, small, True, block, block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            self._insert(rest)
        block.free = False
        self.allocated += block.size
        self.peak = max(self.peak, self.allocated)
        return block

    def free(self, block: _Block | None) -> None:
        if block is None:
            return
        self.allocated -= block.size
        block.free = True
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free:
                self._remove(neighbour)
                if neighbour is block.prev:
                    neighbour.size += block.size
                    neighbour.next = block.next
                    if block.next is not None:
                        block.next.prev = neighbour
                    block = neighbour
                else:
                    block.size += neighbour.size
                    block.next = neighbour.next
                    if neighbour.next is not None:
                        neighbour.next.prev = block
        self._insert(block)

    def reset_peak(self) -> None:
        self.peak = self.allocated

    def empty_cache(self) -> None:
        """torch.cuda.empty_cache: give back every segment with nothing allocated in it."""
        for small, pool in self._pools.items():
            keep = []
            for entry in pool:
                block = entry[2]
                if block.prev is None and block.next is None:
                    self.reserved -= block.size
                else:
                    keep.append(entry)
            self._pools[small] = keep

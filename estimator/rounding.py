"""What PyTorch's CUDA caching allocator charges for one tensor: the 512-byte rounding rule.

``torch.cuda.max_memory_allocated`` sums the sizes of *allocated blocks*, and every request is
rounded up to a multiple of 512 bytes (``kMinBlockSize``; ``DeviceCachingAllocator::round_size`` in
c10/cuda/CUDACachingAllocator.cpp). A zero-byte tensor takes no block (the allocator is not called).
This is all the symbolic engine needs; segments, splitting and the out-of-memory path are the
simulator's (``allocator.py``).

Not modelled: ``roundup_power2_divisions`` (off by default; ``allocator.AllocatorConf`` refuses it).
"""
from __future__ import annotations

from functools import lru_cache

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sympy as sp

BLOCK_BYTES = 512   # kMinBlockSize


@lru_cache(maxsize=65536)
def allocated_block_bytes(nbytes: sp.Expr | int) -> sp.Expr:
    """Bytes the allocator counts for a request of ``nbytes``: ceil to a 512-byte multiple (0 stays 0). Cached: a stack
    of layers asks for the same few hundred formulas thousands of times."""
    import sympy as sp  # deferred: sympy ~177 ms at import (importtime), only this path needs it
    return sp.ceiling(sp.Integer(1) * nbytes / BLOCK_BYTES) * BLOCK_BYTES


def round_size(nbytes: int) -> int:
    """``round_size``: at least one 512-byte block, then 512-byte multiples (concrete sizes)."""
    return BLOCK_BYTES if nbytes < BLOCK_BYTES else BLOCK_BYTES * -(-nbytes // BLOCK_BYTES)

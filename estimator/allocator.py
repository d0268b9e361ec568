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

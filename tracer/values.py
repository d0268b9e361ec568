"""Real values for the few small integer tensors host code reads.

A meta tensor has no values, so an operator whose output size depends on its input's values (``repeat_interleave``
with tensor repeats, ``nonzero``) or that returns a value to Python (``.item()``, ``.tolist()``) cannot run on it.
FLA reads such values from ``cu_seqlens`` (``prepare_chunk_indices``: ``repeat_interleave`` of per-sequence chunk
counts). Here a meta tensor may carry a *mirror*: a CPU tensor with its real values. An operator whose meta inputs
all carry mirrors also runs on the mirrors; its outputs get mirrors when small; when the meta operator cannot run
(values needed), the output's meta tensor is made from the real result's size and strides.

Only integer and boolean tensors of at most ``MIRROR_LIMIT`` elements, and floating scalars, are mirrored (activations
never are).
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten
from torch.utils.weak import WeakTensorKeyDictionary

MIRROR_LIMIT = 1 << 20


def mirrorable(t) -> bool:
    """An integer or boolean tensor of at most ``MIRROR_LIMIT`` elements, or a floating scalar (a loss's gradient
    seed, whose value 1.0 Liger's backward reads: ``tracer.losses``)."""
    if not isinstance(t, torch.Tensor) or t.is_complex():
        return False
    return t.numel() <= 1 if t.is_floating_point() else t.numel() <= MIRROR_LIMIT


class Mirrors:
    """meta tensor -> its real CPU copy, weakly keyed (a mirror dies with its tensor)."""

    def __init__(self):
        self.real = WeakTensorKeyDictionary()

    def add(self, meta, real) -> None:
        if mirrorable(real) and tuple(meta.shape) == tuple(real.shape):
            self.real[meta] = real

    def has(self, t) -> bool:
        return t in self.real

    def to_real(self, tree):
        """``tree`` with every mirrored meta tensor replaced by its mirror (None: some meta tensor has none)."""
        metas = [a for a in tensors(tree) if a.device.type == "meta"]
        if not metas or not self.real or any(a not in self.real for a in metas):
            return None
        flat, spec = tree_flatten(tree)
        return tree_unflatten([self.real[a] if isinstance(a, torch.Tensor) and a.device.type == "meta" else a
                               for a in flat], spec)

    def any_meta(self, tree) -> bool:
        return any(a.device.type == "meta" for a in tensors(tree))


def tensors(tree):
    """The tensors in an operator's arguments (tuples, lists and dicts of them), without pytree's generality."""
    stack = [tree]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))                 # in order: an operator's outputs are its allocations' order
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))


def meta_like(real):
    """A new meta tensor with ``real``'s size, strides and dtype (its own storage)."""
    return torch.empty_strided(real.shape, real.stride(), dtype=real.dtype, device="meta")

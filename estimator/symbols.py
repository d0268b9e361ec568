"""The shape symbols every lifetime model is written in.

S    tokens per sequence
MBS  sequences per micro-batch, packed back to back with boundaries (cu_seqlens)
H    query/key heads
HV   value heads (grouped value attention when HV > H; equal to H otherwise)
DK   key head dimension
DV   value head dimension

Tokens in the packed batch are T = MBS * S. Chunk counts use ceiling division per sequence,
because packed kernels never let a chunk straddle a sequence boundary.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

S, MBS, H, HV, DK, DV = sp.symbols("S MBS H HV DK DV", positive=True, integer=True)

SHAPE_SYMBOLS: tuple[sp.Symbol, ...] = (S, MBS, H, HV, DK, DV)

T = MBS * S  # packed tokens


def cdiv(numerator: sp.Expr, denominator: int | sp.Expr) -> sp.Expr:
    """Ceiling division, kept symbolic: ``triton.cdiv`` / ``-(-a // b)`` in the sources."""
    return sp.ceiling(sp.Integer(1) * numerator / denominator)


def chunks_per_batch(chunk: int) -> sp.Expr:
    """Chunks of ``chunk`` tokens over the packed batch, each sequence chunked on its own."""
    return MBS * cdiv(S, chunk)


@lru_cache(maxsize=64)
def _lambdified(unique: tuple):
    """``sp.lambdify`` of these distinct expressions, once per process: a depth search's stacks of 6, 12, 24 ... layers
    repeat the same few hundred formulas (sympy's printing is most of a compile)."""
    return sp.lambdify(SHAPE_SYMBOLS, list(unique), modules="math")


def shared_lambdify(exprs: list):
    """One function of (S, MBS, H, HV, DK, DV) -> the values of ``exprs``, compiled once per distinct expression (a
    stack of layers repeats a few hundred formulas over thousands of buffers)."""
    unique: dict = {}
    index = tuple(unique.setdefault(e, len(unique)) for e in exprs)
    fn = _lambdified(tuple(unique))

    def values(S, MBS, H, HV, DK, DV, _fn=fn, _index=index):
        distinct = _fn(S, MBS, H, HV, DK, DV)
        return [distinct[i] for i in _index]
    return values

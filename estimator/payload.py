"""Autograd's saved payload: what the graph retains for backward, as records, and the engine that sums them.

A lifetime model answers "how much is live at the peak"; a payload model answers "what does
autograd keep between forward and backward". Each ``SavedRecord`` is one kind of tensor an
operation stashes (its autograd formula in tools/autograd/derivatives.yaml says which), with the
number of *distinct* tensors of that kind (the payload is deduplicated by storage, offset, shape,
stride and dtype), the number of save events (every stash counts, duplicates too), and their
elements, all as expressions in T (tokens), d, dv (head dims), bq, bk (block sizes).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .dtypes import itemsize

T, D, DV, BQ, BK = sp.symbols("T d dv bq bk", positive=True, integer=True)
PAYLOAD_SYMBOLS = (T, D, DV, BQ, BK)
NR = sp.ceiling(T / BQ)          # query blocks
NC = sp.ceiling(T / BK)          # key blocks
ROWS = sp.Min(BQ, T)             # the largest query block
COLS = sp.Min(BK, T)             # the largest key block


@dataclass(frozen=True)
class SavedRecord:
    name: str
    op: str                      # the operation whose backward needs it
    formula: str                 # what its derivative formula uses (derivatives.yaml)
    dtype: str
    shape: str                   # one instance's shape, for people
    elements: sp.Expr            # elements of all distinct instances together
    events: sp.Expr              # save events (duplicates included)
    largest: sp.Expr             # elements of the largest instance

    @property
    def nbytes(self) -> sp.Expr:
        return self.elements * itemsize(self.dtype)


@dataclass(frozen=True)
class PayloadModel:
    key: str
    summary: str
    records: tuple[SavedRecord, ...]
    torch_version: str           # the autograd formulas read (they can change with versions)


def totals(model: PayloadModel) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """(bytes, save events, largest saved tensor's elements) as expressions."""
    nbytes = sum((r.nbytes for r in model.records), sp.Integer(0))
    events = sum((r.events for r in model.records), sp.Integer(0))
    largest = sp.Max(*[r.largest for r in model.records], evaluate=False)
    return nbytes, events, largest


@dataclass(frozen=True)
class PayloadPrediction:
    model: PayloadModel
    T: int
    d: int
    dv: int
    bq: int
    bk: int
    bytes: int
    events: int
    largest: int


def predict_payload(model: PayloadModel, T: int, d: int, dv: int | None = None, bq: int = 32, bk: int = 32) -> PayloadPrediction:
    dv = d if dv is None else dv
    fn = sp.lambdify(PAYLOAD_SYMBOLS, list(totals(model)), modules="math")
    b, e, largest = fn(T, d, dv, bq, bk)
    return PayloadPrediction(model, T, d, dv, bq, bk, int(b), int(e), int(largest))

"""One figure of a record against the model's: the check ``validate --from-records`` makes of every figure a record
holds (kernel and layer records: ``validate.check.record_figures``; whole-model step records: ``validate.check.model_records``).

A figure passes to the byte, or at exactly the size of a named miss (a known, explained difference: a record edited
anywhere still fails), or, where the model gives a range rather than one figure, inside that range (the allocator's
bounds of a history-dependent record; a device-wide reading, which other processes can only raise). No check is
loosened to let a record pass: a figure the model misses is named with its size and why.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

WILDCARD_STEP = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class FigureCheck:
    record: str                      # the record file (and its place in the file)
    field: str                       # the field as the record spells it: ``reserved_bytes[1]``, ``steps[0].nonpytorch.bytes``
    measured: int | None
    predicted: int | None
    expected_error: int = 0          # a named miss's size, predicted - measured (0: to the byte)
    why: str = ""
    bounds: tuple[int | None, int | None] | None = None   # measured must lie in [low, high] instead (None: open end)
    bounds_why: str = ""
    unit: str = " B"                 # "" for a count (SMs, steps)

    @property
    def error(self) -> int | None:
        return None if self.measured is None or self.predicted is None else self.predicted - self.measured

    @property
    def passed(self) -> bool:
        if self.bounds is None:
            return self.error == self.expected_error
        low, high = self.bounds
        return self.measured is not None and (low is None or self.measured >= low) and (high is None or self.measured <= high)

    def failure(self) -> str:
        """One line naming the field and why it failed."""
        measured, predicted, u = _count(self.measured), _count(self.predicted), self.unit
        if self.bounds is not None:
            low, high = (_count(b) if b is not None else "-" for b in self.bounds)
            return f"{self.record}: {self.field}: measured {measured}{u}, outside [{low}, {high}]{u} ({self.bounds_why})"
        named = f"; the named miss is {self.expected_error:+,}{u}" if self.expected_error else ""
        return f"{self.record}: {self.field}: measured {measured}{u}, predicted {predicted}{u}{named}"


def _count(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,}"


def named_miss(misses: dict, key: tuple, field: str) -> tuple[int, str]:
    """The named miss of ``field`` (a key ``key + (field,)``), else one named for every step (``reserved_bytes[*]``,
    ``steps[*].nonpytorch.bytes``: each step misses by that size); (0, "") when none is named."""
    exact = misses.get(key + (field,))
    return exact if exact is not None else misses.get(key + (WILDCARD_STEP.sub("[*]", field),), (0, ""))


def _int(n) -> int | None:
    """A figure as a Python int (a model's may be a sympy Integer, which f-strings cannot group)."""
    return None if n is None else int(n)


def figure(record: str, field: str, measured, predicted, expected_error: int = 0, why: str = "") -> FigureCheck:
    """A figure to the byte, or at exactly its named miss."""
    return FigureCheck(record, field, _int(measured), _int(predicted), expected_error, why)


def count(record: str, field: str, measured, predicted) -> FigureCheck:
    """A count (SMs, steps) exactly."""
    return FigureCheck(record, field, _int(measured), _int(predicted), unit="")


def at_least(record: str, field: str, measured, floor: int, why: str) -> FigureCheck:
    """A reading the model bounds from below only (``why`` says why no upper bound holds)."""
    return FigureCheck(record, field, _int(measured), _int(floor), bounds=(_int(floor), None), bounds_why=why)


def within(record: str, field: str, measured, predicted: int, low: int, high: int, why: str) -> FigureCheck:
    return FigureCheck(record, field, _int(measured), _int(predicted), bounds=(_int(low), _int(high)), bounds_why=why)

"""The answers of the Python API: frozen objects whose fields are the keys a script reads, built from the very dicts
the command line prints with ``--json`` (``livebytes.report``), so the two never disagree.

A single answer's ``to_dict()`` is its object in the ``--json`` document's ``results`` (``Prediction``, ``SweepPoint``,
``PlanAnswer``, ``Explanation``, ``ModelInfo``); a collection's (``Comparison``, ``Sweep``, ``Plan``) is the whole
document, which ``livebytes COMMAND --json`` prints.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from livebytes.estimator.devices import GiB


def _picked(cls, data: dict) -> dict:
    """The keys of ``data`` that are init fields of ``cls`` (a key the command does not give: the field's default)."""
    return {f.name: data[f.name] for f in fields(cls) if f.init and f.name in data and not f.name.startswith("_")}


@dataclass(frozen=True)
class _Answer:
    """One result object of a command's JSON; ``_data`` is that object, as ``livebytes.report`` built it."""
    _data: dict = field(repr=False, compare=False)

    @classmethod
    def of(cls, data: dict, **extra):
        return cls(_data=data, **_picked(cls, data), **extra)

    def to_dict(self) -> dict:
        """The object in ``results`` of the command's ``--json`` (a copy: the answer stays frozen)."""
        return copy.deepcopy(self._data)


@dataclass(frozen=True)
class Prediction(_Answer):
    """``predict`` (and each column of ``compare``): the peak, its breakdown in ``to_dict()``, and the verdict of a
    fresh process on the device. Out of memory (``fits`` false), the peaks are those of a device without a limit."""
    impl: str = ""
    device: str = ""
    shape: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    fits: bool = False
    oom: Optional[dict] = None
    peak_bytes: int = 0
    peak_step: str = ""
    allocated_peak_bytes: int = 0
    reserved_peak_bytes: int = 0
    reserved_low_bytes: int = 0         # the reserved band over the driver's placements (reserved_decided_by: whose run)
    reserved_high_bytes: int = 0
    reserved_decided_by: dict = field(default_factory=dict)
    device_need_bytes: int = 0
    capacity_bytes: int = 0
    headroom_bytes: int = 0
    alloc_conf: str = ""
    alloc_conf_source: str = ""
    status: str = ""
    warnings: tuple = ()
    # what the command line's tables render from: the engine's prediction, its records, the protocol replay's peak
    engine: Any = field(default=None, repr=False, compare=False)

    @property
    def summary(self) -> str:
        """The verdict in one plain sentence, the human output's first line."""
        if self.fits:
            return (f"fits: peak {_gib(self.allocated_peak_bytes)} allocated, {_gib(self.reserved_peak_bytes)} reserved, "
                    f"{_gib(self.headroom_bytes)} to spare on the {self.device}")
        at = f"at {self.oom['step']}" if self.oom else "in its run"
        if self.headroom_bytes < 0:     # the process needs more than the device holds
            return (f"runs out of memory {at}: needs {_gib(-self.headroom_bytes)} more than the {self.device} has "
                    f"(peak {_gib(self.allocated_peak_bytes)} allocated, {_gib(self.reserved_peak_bytes)} reserved "
                    "on a device without a limit)")
        # the need is below the device's memory and yet a request finds no room: the free memory is in pieces
        return (f"runs out of memory {at}: tried to allocate {_gib(self.oom['tried_bytes'])} with "
                f"{_gib(self.oom['free_bytes'])} free on the {self.device}")


def _gib(nbytes: int) -> str:
    return f"{nbytes / GiB:,.1f} GiB"


@dataclass(frozen=True)
class SweepPoint(_Answer):
    """One model at one grid point of ``sweep``: the allocated peak and predict's verdict, with its two peaks."""
    impl: str = ""
    device: str = ""
    shape: dict = field(default_factory=dict)
    peak_bytes: int = 0
    allocated_peak_bytes: int = 0
    reserved_peak_bytes: int = 0
    fits: bool = False
    oom: Optional[dict] = None
    device_need_bytes: int = 0
    alloc_conf: str = ""
    alloc_conf_source: str = ""


@dataclass(frozen=True)
class PlanAnswer(_Answer):
    """One model's ``plan`` answer: the largest ``value`` of the solved dimension that runs (or fits the budget), the
    next one tried, and (without a budget) the verdicts at both (``at_value`` null: not even the smallest runs)."""
    impl: str = ""
    device: str = ""
    shape: dict = field(default_factory=dict)
    value: Optional[int] = None
    next_value: Optional[int] = None
    at_value: Optional[dict] = None
    at_next: Optional[dict] = None
    peak_at_value_bytes: Optional[int] = None
    peak_at_next_bytes: Optional[int] = None
    alloc_conf: str = ""
    alloc_conf_source: str = ""


@dataclass(frozen=True)
class Explanation(_Answer):
    """``explain``: a memory snapshot's live blocks, each named by the model's buffer or left unexplained."""
    impl: str = ""
    device: str = ""
    shape: dict = field(default_factory=dict)
    snapshot: str = ""
    at: str = ""
    live_bytes: int = 0
    explained_bytes: int = 0
    unexplained_bytes: int = 0
    blocks: list = field(default_factory=list)
    warnings: tuple = ()          # where the blocks do not fit the model at this shape (the --json document's)


@dataclass(frozen=True)
class ModelInfo(_Answer):
    """One registered model (``models``): its key, default GPU, options and what it covers."""
    impl: str = ""
    device: str = ""
    options: dict = field(default_factory=dict)
    allowed_options: dict = field(default_factory=dict)
    implementation: str = ""
    version: str = ""
    phase: str = ""
    covers: str = ""


@dataclass(frozen=True)
class _Document:
    """A command's whole ``--json`` document: ``results`` its answers, ``warnings`` the lines printed on stderr."""
    _document: dict = field(repr=False, compare=False)
    results: tuple = ()
    warnings: tuple = ()

    def to_dict(self) -> dict:
        """What ``livebytes COMMAND --json`` prints (a copy)."""
        return copy.deepcopy(self._document)


@dataclass(frozen=True)
class Comparison(_Document):
    """``compare``: one ``Prediction`` per model at one shape, each with its change against the first."""
    shape: dict = field(default_factory=dict)
    # the engine's predictions and records of the columns, what the command line's table renders
    engine: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Sweep(_Document):
    """``sweep``: one ``SweepPoint`` per model and grid point."""


@dataclass(frozen=True)
class Plan(_Document):
    """``plan``: one ``PlanAnswer`` per model; ``budget_bytes`` None: the device simulation decided."""
    solve: str = ""
    budget_bytes: Optional[int] = None


def document_of(cls, answer_cls, document: dict, **extra):
    """A collection answer from a ``--json`` document: its results as ``answer_cls``, its own keys as fields."""
    own = {k: document[k] for k in ("shape", "solve", "budget_bytes") if k in document and k in cls.__dataclass_fields__}
    return cls(_document=document, results=tuple(answer_cls.of(r) for r in document["results"]),
               warnings=tuple(document["warnings"]), **own, **extra)

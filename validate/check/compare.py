"""A record against its model: the one comparison policy, used by `validate` and by the tests (no torch).

The prediction for a measured record is the replay of its process under its protocol
(``protocol.protocol_replay``: the warmup's and earlier shapes' calls replayed whole before it). Then:

1. out of memory: passes when the model says the shape does not fit the device;
2. published (a document's figure, rounded to its precision): the steady-state peak within 0.1 %;
3. ``history_dependent`` (the allocator's layout depends on what the protocol did not control):
   within the allocator's bounds, every block at its rounded size up to 1 MiB more per large block
   live at the peak;
4. otherwise: the replay equals ``max_memory_allocated`` within ``tolerance`` (0: byte-exact); in a
   shared process the measurement may exceed it by FLA tensor-cache entries of earlier shapes.

Requested bytes (``requested_bytes.all.peak``, every tensor's own size) are checked beside it, with
the same shared-process allowance; and every other figure the record holds that a model predicts, each step's
included (``record_figures``: one ``FigureCheck`` per field, named when it fails).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from livebytes.estimator import get_model, predict
from livebytes.estimator.allocator import allocated_block_bytes
from livebytes.estimator.devices import get_device
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import show
from livebytes.estimator.registry import shape_options
from livebytes.estimator.engine import unsplit_block_bound
from livebytes.estimator.replay import requested_peak
from livebytes.estimator.shapes import Shape

from . import protocol, record_figures
from .figures import FigureCheck
from .records import Record

# Runs 1-3 shared a process between shapes without recording which came first, so the FLA tensor_cache
# entries those earlier shapes left (a few 512-B blocks each, at most 4 entries per function) cannot be
# replayed: such records are held to this bound instead. Records that list earlier_shapes_in_process get none.
SHARED_PROCESS_LEFTOVERS = 16 * 1024
PUBLISHED_TOLERANCE = 1e-3             # a document's figures are rounded (the KDA report: 3 decimals of GiB)


@dataclass(frozen=True)
class Comparison:
    record: Record
    predicted: int             # replay of the protocol (what max_memory_allocated should show)
    measured: int | None       # None for an out-of-memory
    passed: bool
    requested_error: int | None
    note: str
    figures: tuple[FigureCheck, ...] = ()     # every figure the record holds that the model predicts

    @property
    def failures(self) -> list[str]:
        """One line per failing figure, naming its field."""
        return [f.failure() for f in self.figures if not f.passed]

    @property
    def error_bytes(self) -> int | None:
        return None if self.measured is None else self.predicted - self.measured

    @property
    def error_fraction(self) -> float | None:
        return None if self.measured is None else self.error_bytes / self.measured


def model_at(record: Record) -> protocol.ModelAt:
    """The model the record's harness runs at a shape of its process: the record's options, and what the shape implies
    (``shape_options``: a GVA shape (HV > H) selects the GVA path, as predict does; a layer shape's fields build the
    stack, and the warmup's shape, which has none, builds the harness's default layer)."""
    return lambda shape: get_model(record.impl, record.gpu or None, **record.options, **shape_options(record.impl, shape))


def model_of(record: Record):
    """The record's model: its harness's at the record's shape."""
    return model_at(record)(record.shape)


def earlier_shapes(record: Record) -> tuple[Shape, ...]:
    return tuple(Shape.from_dict(d) for d in record.data.get("earlier_shapes_in_process", []))


def _slack(record: Record) -> int:
    """Bytes of history a record does not let us replay: only a shared process that did not list its earlier shapes."""
    unknown = record.mode != "fresh-process" and "earlier_shapes_in_process" not in record.data
    return SHARED_PROCESS_LEFTOVERS if unknown else 0


def allocator_bounds(model, record: Record, history: tuple[int, ...]) -> tuple[int, int]:
    """[low, high] that max_memory_allocated must fall in whatever the allocator's history: every block at
    its rounded size (the history's too), up to 1 MiB more per large block live at the peak."""
    p = predict(model, record.shape)
    low = p.peak_bytes + sum(allocated_block_bytes(n) for n in history)
    return low, low + unsplit_block_bound(p) + _slack(record)


def _requested_error(model, record: Record, history: tuple[int, ...]) -> int | None:
    if record.requested_peak_bytes is None:
        return None
    return requested_peak(model, record.shape) + sum(history) - record.requested_peak_bytes


def _within(error: int | None, slack: int) -> bool:
    """predicted - measured in [-slack, 0]: a shared process may hold a few uncounted cache entries more."""
    return error is None or -slack <= error <= 0


def tolerance_range(predicted: int, slack: int, tolerance: float) -> tuple[int, int]:
    """The measured peaks that pass against ``predicted``: predicted - measured in [-slack, 0] (``_within``), or
    |predicted - measured| <= tolerance x measured, i.e. measured in [predicted / (1 + t), predicted / (1 - t)]. Both
    ranges hold ``predicted``, so together they are one range."""
    return (min(predicted, math.ceil(predicted / (1 + tolerance))),
            max(predicted + slack, math.floor(predicted / (1 - tolerance))))


def _peak_rule(model, record: Record, history: tuple[int, ...], tolerance: float) -> tuple[record_figures.PeakRange, str]:
    """How a step's measured peak is judged: the allocator bounds of a history-dependent record, else the tolerance."""
    if record.history_dependent:
        bounds = allocator_bounds(model, record, history)
        return (lambda predicted: bounds), "the allocator bounds of a history-dependent record"
    slack = _slack(record)
    return (lambda predicted: tolerance_range(predicted, slack, tolerance)), (
        f"{tolerance * 100:g} % of the measured peak" + (f", or up to {slack:,} B of earlier shapes' cache entries" if slack else ""))


def figure_checks(record: Record, model, replayed, history: tuple[int, ...], tolerance: float) -> tuple[FigureCheck, ...]:
    """Every figure of a measured record that did not run out of memory (``record_figures``)."""
    peak_range, why = _peak_rule(model, record, history, tolerance)
    requested = None if record.requested_peak_bytes is None else requested_peak(model, record.shape) + sum(history)
    return tuple(record_figures.peak_checks(record, replayed.peaks, peak_range, why)
                 + ([] if requested is None else record_figures.requested_checks(record, requested, _slack(record)))
                 + record_figures.baseline_checks(record, replayed.allocated_before)
                 + record_figures.reserved_checks(record, replayed.reserved_peaks)
                 + record_figures.device_checks(record) + record_figures.process_checks(record, model))


def compare(record: Record, tolerance: float = 0.0) -> Comparison:
    model = model_of(record)
    if record.oom:
        p = predict(model, record.shape)
        fits = p.peak_bytes <= get_device(record.gpu).capacity_bytes
        figures = tuple(record_figures.device_checks(record))
        return Comparison(record, int(p.peak_bytes), None, bool(not fits and all(f.passed for f in figures)), None,
                          "out of memory; predicted not to fit" if not fits else "out of memory, but predicted to fit", figures)
    if not record.peak_bytes:           # a tolerance is a share of it, and so is the error (error_fraction)
        raise LivebytesError(f"peak_bytes: {record.peak_bytes} B measured: no peak to compare a prediction against")
    if record.origin == "published":
        predicted = predict(model, record.shape).peak_bytes
        passed = abs(predicted - record.peak_bytes) <= PUBLISHED_TOLERANCE * record.peak_bytes
        return Comparison(record, int(predicted), record.peak_bytes, bool(passed), None, "published figure: steady state within 0.1 %")
    if record.protocol_version not in protocol.PROTOCOLS:
        raise LivebytesError(f"protocol: {record.protocol_version or 'no version'} is not a protocol this livebytes replays "
                             f"(versions {min(protocol.PROTOCOLS)}-{max(protocol.PROTOCOLS)}: protocol.version or its name kda-report-vN)")
    replayed, history = protocol.protocol_replay(model, record.shape, record.protocol_version, earlier_shapes(record),
                                                 record.total_memory, record.data.get("triton_cache"), model_at(record))
    requested_error = _requested_error(model, record, history)
    requested_ok = _within(requested_error, _slack(record))
    if record.history_dependent:
        low, high = allocator_bounds(model, record, history)
        passed = low <= record.peak_bytes <= high
        note = "history-dependent: checked against the allocator bounds"
    else:
        error = replayed.peak_bytes - record.peak_bytes
        passed = _within(error, _slack(record)) or abs(error) <= tolerance * record.peak_bytes
        note = ""
    figures = figure_checks(record, model, replayed, history, tolerance)
    return Comparison(record, int(replayed.peak_bytes), record.peak_bytes,
                      bool(passed and requested_ok and all(f.passed for f in figures)), requested_error, note, figures)


def parse_tolerance(text: str) -> float:
    """A percentage with its sign, ``0.1%`` -> 0.001 (a fraction of the measured peak, zero or more). A bare number is
    refused: ``0.1`` read as a fraction is 10 %, a hundred times the default that prints as ``0.1%``."""
    t = text.strip()
    if not t.endswith("%"):
        raise LivebytesError(f"tolerance {show(text)}: give a percentage with its sign, e.g. 0.1% (a bare number "
                             "could mean a fraction or a percent)")
    try:
        value = float(t[:-1]) / 100
    except ValueError:
        raise LivebytesError(f"tolerance {show(text)} is not a number with a percent sign (0.1%)") from None
    if not 0 <= value < 1:
        raise LivebytesError(f"tolerance must be at least 0% and below 100%, got {show(text)}")
    return value

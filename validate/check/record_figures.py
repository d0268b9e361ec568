"""Every figure a kernel or layer record holds that its model predicts, one check each (``compare`` judges a record by
them all; docs/validation.md's table says which field each check covers and which fields no model predicts):

- ``peaks_bytes[i]`` and ``peak_bytes``: each measured step's ``max_memory_allocated`` against the protocol's replay of
  that step, by the record's rule (the tolerance and a shared process's leftovers; a history-dependent record's
  allocator bounds);
- ``requested_peak_bytes[i]``: each step's tensors' own bytes;
- ``baseline_bytes[i]``: ``memory_allocated`` as each step starts, to the byte or at a named miss;
- ``reserved_bytes[i]`` (each step's ``max_memory_reserved``) and ``device_memory.reserved_peak_bytes`` (the runner's
  maximum of them): the replay's reserved peaks, to the byte or at a named miss (``record_misses``);
- ``device.total_memory`` and ``device.sm_count``: the device preset's (the H200's were measured on the GPU);
- ``device_memory.nonpytorch_after_bytes``: the process-memory model's figure for the record's call, to the byte or
  at a named miss; ``nonpytorch_before_bytes`` (before the first step): at least the CUDA context's figure.
"""
from __future__ import annotations

from collections.abc import Callable

from livebytes.estimator.devices import get_device
from livebytes.estimator.process.memory import process_memory

from .figures import FigureCheck, at_least, count, figure, named_miss, within
from .record_misses import NAMED_MISSES
from .records import Record

PeakRange = Callable[[int], tuple[int, int]]      # a step's predicted peak -> the measured peaks that pass
DEVICE_WIDE = ("mem_get_info is device-wide: other processes on the GPU only add to it, so the model's figure for this "
               "process bounds it from below only")


def _figure(record: Record, field: str, measured, predicted: int) -> FigureCheck:
    """A figure to the byte, or at exactly its named miss."""
    return figure(record.label, field, measured, predicted, *named_miss(NAMED_MISSES, (record.path.name, record.index), field))


def peak_checks(record: Record, predicted_peaks: tuple[int, ...], peak_range: PeakRange, why: str) -> list[FigureCheck]:
    """Each measured step's allocated peak, and the record's ``peak_bytes`` (their median), in ``peak_range``."""
    measured = record.data.get("peaks_bytes")
    out = []
    if measured is not None:
        if len(measured) != len(predicted_peaks):      # the protocol measures a fixed number of steps
            return [count(record.label, "peaks_bytes (number of steps)", len(measured), len(predicted_peaks))]
        out += [within(record.label, f"peaks_bytes[{i}]", m, p, *peak_range(p), why)
                for i, (m, p) in enumerate(zip(measured, predicted_peaks))]
    if "peak_bytes" in record.data:
        median = sorted(predicted_peaks)[len(predicted_peaks) // 2]
        out.append(within(record.label, "peak_bytes", record.data["peak_bytes"], median, *peak_range(median), why))
    return out


def requested_checks(record: Record, predicted: int, slack: int) -> list[FigureCheck]:
    """Each step's ``requested_bytes.all.peak``: the model's, up to ``slack`` more (a shared process's cache entries)."""
    return [within(record.label, f"requested_peak_bytes[{i}]", m, predicted, predicted, predicted + slack,
                   "the tensors' own bytes" + (f", up to {slack:,} B of earlier shapes' cache entries" if slack else ""))
            for i, m in enumerate(record.data.get("requested_peak_bytes") or [])]


def baseline_checks(record: Record, predicted_before: tuple[int, ...]) -> list[FigureCheck]:
    """Each step's ``memory_allocated`` as it starts (inputs and what the process holds), to the byte or named."""
    measured = record.data.get("baseline_bytes") or []
    if measured and len(measured) != len(predicted_before):
        return [count(record.label, "baseline_bytes (number of steps)", len(measured), len(predicted_before))]
    return [_figure(record, f"baseline_bytes[{i}]", m, p) for i, (m, p) in enumerate(zip(measured, predicted_before))]


def reserved_checks(record: Record, predicted_reserved: tuple[int, ...]) -> list[FigureCheck]:
    """Each step's reserved peak, and ``device_memory.reserved_peak_bytes`` (the runner writes their maximum)."""
    measured = record.data.get("reserved_bytes") or []
    if measured and len(measured) != len(predicted_reserved):
        return [count(record.label, "reserved_bytes (number of steps)", len(measured), len(predicted_reserved))]
    out = [_figure(record, f"reserved_bytes[{i}]", m, p) for i, (m, p) in enumerate(zip(measured, predicted_reserved))]
    device_memory = record.data.get("device_memory")
    if device_memory is not None and predicted_reserved:
        out.append(_figure(record, "device_memory.reserved_peak_bytes", device_memory["reserved_peak_bytes"],
                           max(predicted_reserved)))
    return out


def device_checks(record: Record) -> list[FigureCheck]:
    """The device the record names against its preset: total memory and SM count."""
    if not record.gpu:
        return []
    device = get_device(record.gpu)
    held = record.data.get("device", {})
    out = [_figure(record, "device.total_memory", held["total_memory"], device.capacity_bytes)] if "total_memory" in held else []
    return out + ([count(record.label, "device.sm_count", held["sm_count"], device.sm_count)] if "sm_count" in held else [])


def process_checks(record: Record, model) -> list[FigureCheck]:
    """The process's memory outside PyTorch (format 2's ``device_memory``): after the measured steps against the
    process-memory model's figure after the call; before the first step at least the CUDA context."""
    device_memory = record.data.get("device_memory")
    if device_memory is None or not record.gpu:
        return []
    state = "warm" if record.triton_cache == "warm" else "cold"     # cuDNN ("n/a"): no Triton cache to be warm
    p = process_memory(get_device(record.gpu), model, state, record.shape, derived_frames=False)
    return [_figure(record, "device_memory.nonpytorch_after_bytes", device_memory["nonpytorch_after_bytes"], p.bytes),
            at_least(record.label, "device_memory.nonpytorch_before_bytes", device_memory["nonpytorch_before_bytes"],
                     p.context.bytes, f"the CUDA context's figure; {DEVICE_WIDE}")]

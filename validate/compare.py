"""A record against its model: the comparison the `validate` command prints (no torch needed)."""
from __future__ import annotations

from dataclasses import dataclass

from livebytes.estimator import Group, Shape, get_model, predict
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import requested_peak, unsplit_block_bound
from livebytes.estimator.registry import shape_options
from livebytes.estimator.replay import replay

from .records import Record


@dataclass(frozen=True)
class Comparison:
    record: Record
    predicted: int             # replay of the protocol (what max_memory_allocated should show)
    measured: int | None       # None for an out-of-memory
    passed: bool
    requested_error: int | None
    note: str

    @property
    def error_bytes(self) -> int | None:
        return None if self.measured is None else self.predicted - self.measured

    @property
    def error_fraction(self) -> float | None:
        return None if self.measured is None else self.error_bytes / self.measured


SHARED_PROCESS_LEFTOVERS = 16 * 1024   # FLA tensor_cache entries of shapes measured earlier in one process


def earlier_caches(model, record: Record) -> int:
    """Bytes that shapes measured before this one in the same process left cached: every library cache of
    those shapes (Buffer.cached) and, for a head count not seen before, its warmup graph's leftovers."""
    total, heads_seen = 0, {record.shape.heads}
    for d in record.data.get("earlier_shapes_in_process", []):
        p = predict(model, Shape.from_dict(d))
        total += sum(n for b, n in zip(model.buffers, p.buffer_bytes) if b.cached)
        if p.shape.heads not in heads_seen:
            total += sum(n for b, n in zip(model.buffers, p.buffer_bytes) if b.group is Group.WARMUP)
            heads_seen.add(p.shape.heads)
    return total


def allocator_bounds(model, record: Record) -> tuple[int, int]:
    """[low, high] that max_memory_allocated must fall in whatever the allocator's history: every block at
    its rounded size (plus caches earlier shapes left), up to 1 MiB more per large block live at the peak."""
    p = predict(model, record.shape)
    low = p.peak_bytes + earlier_caches(model, record)
    return low, low + unsplit_block_bound(p) + SHARED_PROCESS_LEFTOVERS


def compare(record: Record, tolerance: float = 1e-3) -> Comparison:
    # a GVA shape (HV > H) selects the model's GVA path, as predict does
    model = get_model(record.impl, record.gpu or None, **record.options, **shape_options(record.impl, record.shape))
    if record.oom:
        p = predict(model, record.shape)
        capacity = get_device(record.gpu).capacity_bytes
        fits = p.peak_bytes <= capacity
        return Comparison(record, p.peak_bytes, None, not fits, None,
                          "out of memory; predicted not to fit" if not fits else "out of memory, but predicted to fit")
    # what that process held: the replay of this shape plus the caches earlier shapes in it left behind
    predicted = (replay(model, record.shape, empty_cache_after_warmup=record.protocol_version >= 3).peak_bytes
                 + earlier_caches(model, record))
    requested_error = None
    if record.requested_peak_bytes is not None:
        requested_error = requested_peak(model, record.shape) - record.requested_peak_bytes
    if record.history_dependent:
        low, high = allocator_bounds(model, record)
        passed = low <= record.peak_bytes <= high
        note = "history-dependent: checked against the allocator bounds"
    else:
        passed = abs(predicted - record.peak_bytes) <= tolerance * record.peak_bytes
        note = ""
    return Comparison(record, predicted, record.peak_bytes, passed, requested_error, note)


def parse_tolerance(text: str) -> float:
    t = text.strip()
    return float(t[:-1]) / 100 if t.endswith("%") else float(t)

"""Every committed validation record, re-checked against the models on the CPU.

Three checks, from the strictest:
1. requested bytes: the model's peak of the tensors' own sizes equals the measured
   ``requested_bytes.all.peak`` (records from run 3 on carry it): every buffer, byte for byte;
2. allocated bytes: ``replay`` (the timeline run through the block-level allocator model) equals
   ``max_memory_allocated`` within 16 KiB (the FLA tensor_cache entries of earlier shapes in a shared
   process), which is far inside the 0.1 % tolerance;
3. records whose allocator state depends on what ran before them (flagged ``history_dependent`` with
   the reason) are held to the allocator's own bounds: predict <= measured <= predict + 1 MiB per
   large block live at the peak.
"""
import pytest

from livebytes.estimator import Group, Shape, get_model, predict
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import requested_peak, unsplit_block_bound
from livebytes.estimator.replay import replay
from livebytes.validate.records import load_records

RECORDS = load_records()
MEASURED = [r for r in RECORDS if r.origin == "measured" and not r.oom]
SHARED_PROCESS_LEFTOVERS = 16 * 1024   # FLA tensor_cache entries of shapes measured earlier in the process


def rid(r):
    return f"{r.path.stem}:{r.impl}:{r.options.get('contract', '')}:{r.shape.label()}"


def model_of(r):
    return get_model(r.impl, r.gpu or None, **r.options)


def test_there_are_records_of_every_measured_implementation():
    impls = {r.impl for r in MEASURED}
    assert {"fla-kda@0.6.0", "fla-kda-fwd@0.6.0", "cudnn-kda-hopper-cuda@1.32.0", "cudnn-kda-hopper@1.32.0"} <= impls
    assert all(r.gpu == "H200" and r.data["fla"] == "0.6.0" for r in MEASURED)


@pytest.mark.parametrize("r", [r for r in MEASURED if r.requested_peak_bytes], ids=rid)
def test_requested_bytes_match_every_buffer(r):
    predicted = requested_peak(model_of(r), r.shape)
    slack = 0 if r.mode == "fresh-process" else SHARED_PROCESS_LEFTOVERS
    assert 0 <= r.requested_peak_bytes - predicted <= slack


@pytest.mark.parametrize("r", [r for r in MEASURED if not r.history_dependent], ids=rid)
def test_replay_matches_max_memory_allocated(r):
    measured = r.peak_bytes
    replayed = replay(model_of(r), r.shape, empty_cache_after_warmup=r.protocol >= "kda-report-v3").peak_bytes
    slack = 0 if r.mode == "fresh-process" else SHARED_PROCESS_LEFTOVERS
    assert 0 <= measured - replayed <= slack
    assert abs(measured - replayed) <= 0.001 * measured


def earlier_caches(model, r) -> int:
    """Bytes that shapes measured before this one in the same process left cached: every library cache of
    those shapes (Buffer.cached) and, for a head count not seen before, its warmup graph's leftovers."""
    total, heads_seen = 0, {r.shape.heads}
    for d in r.data.get("earlier_shapes_in_process", []):
        p = predict(model, Shape.from_dict(d))
        total += sum(n for b, n in zip(model.buffers, p.buffer_bytes) if b.cached)
        if p.shape.heads not in heads_seen:
            total += sum(n for b, n in zip(model.buffers, p.buffer_bytes) if b.group is Group.WARMUP)
            heads_seen.add(p.shape.heads)
    return total


@pytest.mark.parametrize("r", MEASURED, ids=rid)
def test_measured_within_the_allocators_bounds(r):
    model = model_of(r)
    p = predict(model, r.shape)
    low = p.peak_bytes + earlier_caches(model, r)
    assert low <= r.peak_bytes <= low + unsplit_block_bound(p) + SHARED_PROCESS_LEFTOVERS


@pytest.mark.parametrize("r", [r for r in RECORDS if r.oom], ids=rid)
def test_out_of_memory_was_predicted(r):
    p = predict(model_of(r), r.shape)
    assert p.peak_bytes > get_device(r.gpu).capacity_bytes


@pytest.mark.parametrize("r", [r for r in RECORDS if r.origin == "published"], ids=rid)
def test_published_figures_within_0p1_percent(r):
    p = predict(model_of(r), r.shape)
    assert abs(p.peak_bytes - r.peak_bytes) <= 0.001 * r.peak_bytes


def test_device_preset_is_the_measured_h200():
    import json
    from livebytes.validate.records import RECORDS_DIR
    probe = json.loads((RECORDS_DIR / "h200_device.json").read_text())
    h200 = get_device("H200")
    assert h200.capacity_bytes == probe["device"]["total_memory"]
    assert h200.usable_bytes == probe["largest_single_allocation_bytes"]
    assert h200.sm_count == probe["device"]["sm_count"]

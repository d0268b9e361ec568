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

from livebytes.estimator import get_model, predict
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import requested_peak
from livebytes.estimator.replay import replay
from livebytes.validate.compare import SHARED_PROCESS_LEFTOVERS, allocator_bounds, compare
from livebytes.validate.records import load_records

RECORDS = load_records()
MEASURED = [r for r in RECORDS if r.origin == "measured" and not r.oom]


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
    replayed = replay(model_of(r), r.shape, empty_cache_after_warmup=r.protocol_version >= 3).peak_bytes
    slack = 0 if r.mode == "fresh-process" else SHARED_PROCESS_LEFTOVERS
    assert 0 <= measured - replayed <= slack
    assert abs(measured - replayed) <= 0.001 * measured


@pytest.mark.parametrize("r", MEASURED, ids=rid)
def test_measured_within_the_allocators_bounds(r):
    low, high = allocator_bounds(model_of(r), r)
    assert low <= r.peak_bytes <= high


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


def test_validate_command_passes_every_committed_record():
    """What `livebytes validate --from-records all` prints: the same policy as the tests above."""
    failures = [c for c in map(compare, MEASURED + [r for r in RECORDS if r.oom]) if not c.passed]
    assert not failures, [rid(c.record) for c in failures]

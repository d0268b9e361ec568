"""Every committed validation record, re-checked against the models on the CPU, through the one
comparison policy of ``livebytes.validate.check.compare`` (the same function `livebytes validate
--from-records all` calls):

1. requested bytes: the model's peak of the tensors' own sizes, plus what the protocol's history left,
   equals the measured ``requested_bytes.all.peak`` (records from run 3 on carry it);
2. allocated bytes: the replay of the record's process (warmup and earlier shapes' leftovers derived
   from the models' cache declarations) equals ``max_memory_allocated`` to the byte, in a fresh process;
3. records whose allocator state depends on what ran before them (flagged ``history_dependent`` with
   the reason) are held to the allocator's own bounds.
"""
import pytest

from livebytes.validate.check.compare import compare
from livebytes.validate.check.records import load_records

RECORDS = load_records()
MEASURED = [r for r in RECORDS if r.origin == "measured" and not r.oom]


def rid(r):
    return f"{r.path.stem}:{r.impl}:{r.options.get('contract', '')}:{r.shape.label()}"


def test_there_are_records_of_every_measured_implementation():
    impls = {r.impl for r in MEASURED}
    assert {"fla-kda@0.6.0", "fla-kda-fwd@0.6.0", "cudnn-kda-hopper-cuda@1.32.0", "cudnn-kda-hopper@1.32.0",
            "fla-gdn@0.6.0", "fla-gdn-fwd@0.6.0"} <= impls
    assert all(r.gpu == "H200" and r.data["fla"] == "0.6.0" for r in MEASURED)


@pytest.mark.parametrize("r", RECORDS, ids=rid)
def test_every_record_passes_the_comparison_policy(r):
    c = compare(r)
    assert c.passed, (c.predicted, c.measured, c.requested_error, c.note)


@pytest.mark.parametrize("r", [r for r in MEASURED if r.mode == "fresh-process" and not r.history_dependent], ids=rid)
def test_fresh_process_records_replay_to_the_byte(r):
    c = compare(r)
    assert c.error_bytes == 0
    assert c.requested_error in (None, 0)


@pytest.mark.parametrize("r", [r for r in MEASURED if r.mode == "fresh-process" and r.requested_peak_bytes], ids=rid)
def test_requested_bytes_match_every_buffer_in_a_fresh_process(r):
    assert compare(r).requested_error == 0


def test_a_looser_tolerance_never_fails_a_record_the_strict_policy_passes():
    strict = {rid(r) for r in RECORDS if compare(r).passed}
    loose = {rid(r) for r in RECORDS if compare(r, tolerance=1e-3).passed}
    assert strict <= loose


def test_device_preset_is_the_measured_h200():
    import json

    from livebytes.estimator.devices import get_device
    from livebytes.validate.check.records import RECORDS_DIR
    probe = json.loads((RECORDS_DIR / "h200_device.json").read_text())
    h200 = get_device("H200")
    assert h200.capacity_bytes == probe["device"]["total_memory"]
    # the old budget (largest torch.empty after init, bisected to 64 MiB) agrees with what the simulation
    # gives a bare process: total minus the measured CUDA context (estimator/data/process_memory.json)
    from livebytes.estimator.capacity import process_memory
    bare = h200.capacity_bytes - process_memory(h200, "no-library@0").context.bytes     # 149,557,477,376
    assert 0 <= bare - probe["largest_single_allocation_bytes"] < probe["resolution_bytes"]
    assert h200.sm_count == probe["device"]["sm_count"]


@pytest.mark.parametrize("r", MEASURED, ids=rid)
def test_every_measured_record_states_its_allocator_config_and_triton_cache_state(r):
    assert r.allocator_conf in ("expandable_segments:False", "expandable_segments:True"), r.allocator_conf
    assert r.triton_cache in ("cold", "warm", "n/a", "not recorded")
    if r.protocol_version >= 4:        # from format 2 on the runner records what it measured
        assert r.triton_cache != "not recorded"


def test_only_a_shared_process_that_did_not_list_its_earlier_shapes_gets_slack():
    from livebytes.validate.check.compare import SHARED_PROCESS_LEFTOVERS, _slack
    listed = [r for r in MEASURED if r.mode == "shared-process" and "earlier_shapes_in_process" in r.data]
    unlisted = [r for r in MEASURED if r.mode == "shared-process" and "earlier_shapes_in_process" not in r.data]
    fresh = [r for r in MEASURED if r.mode == "fresh-process"]
    assert listed and unlisted and fresh
    assert {_slack(r) for r in listed + fresh} == {0} and {_slack(r) for r in unlisted} == {SHARED_PROCESS_LEFTOVERS}

"""Traces stored for records measured under another torch (``validate/data/records/models/traces``): what they are, that
the records' check reads them, and why they exist (torch 2.11 and 2.13 free in another order under fp32-amp)."""
from __future__ import annotations

import gzip
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from livebytes.estimator.errors import LivebytesError
from livebytes.lifetimes.traced import model as traced
from livebytes.validate.check import model_records

STORE = model_records.TRACE_STORE
STORED = sorted(STORE.glob("*/*.json.gz"))


def test_the_store_holds_traces():
    """Run 28's fp32-amp records (three files: a1 at 2 layers, a2 at 3 and 4; a3 under Triton 3.9.0) at least."""
    assert len(STORED) >= 4


@pytest.mark.parametrize("path", STORED, ids=[f"{p.parent.name}/{p.name}" for p in STORED])
def test_a_stored_trace_is_named_by_its_spec_and_foldered_by_its_versions(path):
    data = json.loads(gzip.open(path, "rt").read())
    assert path.name == traced.stored_trace_name(data["spec"])
    assert path.parent.name == traced.store_name(data["versions"])
    assert data["versions"]["flash-linear-attention"] == traced.PINNED


@pytest.mark.parametrize("name", ["h200_run28_a1-kda-8k.json", "h200_run28_a2-kda-ckpt.json",
                                  "h200_run28_a3-gdn-8k.json"])
def test_a_record_of_another_torch_reads_its_stored_traces(name):
    """The records ran torch 2.11.0+cu130 (Triton 3.6.0 for KDA, 3.9.0 for GDN): on this machine's torch their
    traces come from the store, and every trace their model reads is there."""
    data = model_records.read(model_records.MODEL_RECORDS_DIR / name)
    if traced.store_name(traced.installed_versions()) == traced.store_name(data["versions"]):
        pytest.skip("this machine has the record's torch and Triton: traced here")
    folder = model_records.stored_for(data)
    assert folder and Path(folder).name == traced.store_name(data["versions"])
    req = model_records.request_of(data)
    runs = traced.stored_traces(traced.Request(**{**req.__dict__, "stored": folder}))["runs"]
    assert [r["layers"] for r in runs] == list(traced.layer_counts(req.depth, req.config_dict["model_type"]))


def _request(name: str, folder: Path) -> traced.Request:
    req = model_records.request_of(model_records.read(model_records.MODEL_RECORDS_DIR / name))
    return traced.Request(**{**req.__dict__, "stored": str(folder)})


def test_a_missing_stored_trace_is_one_line(tmp_path):
    with pytest.raises(LivebytesError, match="holds no stored trace of this request at 2 layers"):
        traced.stored_traces(_request("h200_run28_a1-kda-8k.json", tmp_path))


def test_a_stored_trace_of_another_request_is_refused(tmp_path):
    """A file renamed to another spec's digest is not that spec's trace."""
    req = _request("h200_run28_a1-kda-8k.json", tmp_path)
    other = next(p for p in STORED if p.name != traced.stored_trace_name(traced.trace_spec(req, 2)))
    shutil.copy(other, tmp_path / traced.stored_trace_name(traced.trace_spec(req, 2)))
    with pytest.raises(LivebytesError, match="not a trace of this request"):
        traced.stored_traces(req)


def test_the_environment_of_stored_traces_changes_with_their_files(tmp_path):
    """The compiled-model cache keys on it: a stored file edited is another model."""
    (tmp_path / "a.json.gz").write_bytes(b"1")
    before = traced.environment(str(tmp_path))
    (tmp_path / "a.json.gz").write_bytes(b"2")
    assert traced.environment(str(tmp_path)) != before


def _free_order(trace: dict) -> tuple[list, Counter]:
    """The trace's events as (kind, id) in order, and the multiset of them."""
    events = [(e["e"], e.get("id")) for e in trace["events"] if e["e"] in ("alloc", "free")]
    return events, Counter(events)


def test_torch_211_and_213_differ_only_in_the_order_of_frees_under_fp32_amp():
    """Why the store exists: a1 traced under this machine's torch 2.13 has the stored torch 2.11 trace's events, each
    allocation the same, but 12 frees at other places per shape (2.11 frees a custom Function's saved tensors after the
    engine casts its bf16 weight gradient to the fp32 parameter's dtype, 2.13 before): the allocator replay of 2.13's
    order misses the record's allocated figures by 1 MiB, of 2.11's is exact."""
    name = "h200_run28_a1-kda-8k.json"
    data = model_records.read(model_records.MODEL_RECORDS_DIR / name)
    here = traced.installed_versions()
    if not str(here.get("torch", "")).startswith("2.13"):
        pytest.skip("the comparison is of torch 2.13's trace with the stored 2.11 one")
    req = model_records.request_of(data)
    mine = traced.traces(req)["runs"][0]["traces"]
    stored = traced.stored_traces(traced.Request(**{**req.__dict__, "stored": model_records.stored_for(data)}))
    for a, b in zip(mine, stored["runs"][0]["traces"]):
        order_a, set_a = _free_order(a)
        order_b, set_b = _free_order(b)
        assert set_a == set_b and order_a != order_b
        moved = sum(1 for x, y in zip(order_a, order_b) if x != y)
        assert 0 < moved <= 4 * 12


@pytest.mark.parametrize("body,line", [
    (b"not gzip", "not a readable stored trace"),
    (gzip.compress(b""), "not a readable stored trace"),
    (gzip.compress(b"[1, 2]"), "not a stored trace (no runs or versions)"),
    (gzip.compress(b'{"runs": []}'), "not a stored trace (no runs or versions)"),
])
def test_a_broken_stored_trace_is_one_line(body, line, tmp_path):
    """An interrupted or foreign file under a request's name: one line, no traceback."""
    req = _request("h200_run28_a1-kda-8k.json", tmp_path)
    (tmp_path / traced.stored_trace_name(traced.trace_spec(req, 2))).write_bytes(body)
    with pytest.raises(LivebytesError, match=re.escape(line)):
        traced.stored_traces(req)


def test_a_stored_trace_in_another_versions_folder_is_refused(tmp_path):
    """A trace made under torch 2.11 and Triton 3.6.0 copied into a folder named for 3.9.0 is not that folder's."""
    folder = tmp_path / "torch-2.11.0_triton-3.9.0"
    folder.mkdir()
    req = _request("h200_run28_a1-kda-8k.json", folder)
    name = traced.stored_trace_name(traced.trace_spec(req, 2))
    shutil.copy(STORE / "torch-2.11.0_triton-3.6.0" / name, folder / name)
    with pytest.raises(LivebytesError, match="made under torch-2.11.0_triton-3.6.0, not the torch-2.11.0_triton-3.9.0"):
        traced.stored_traces(req)


# ------------------------------------------------- which tracer made a stored trace, and a check that falls back

from livebytes.validate.check import store_traces  # noqa: E402

A1 = "h200_run28_a1-kda-8k.json"            # torch 2.11.0, Triton 3.6.0: one trace, at 2 layers


@pytest.mark.parametrize("path", STORED, ids=[f"{p.parent.name}/{p.name}" for p in STORED])
def test_a_stored_trace_names_the_tracer_that_made_it(path):
    """Every committed trace carries its tracer's digest (32 hex digits of ``tracer_digest``); one another tracer made
    is a warning when read (``trace_notes``), not a failure, so this holds whatever the tracer is now."""
    digest = json.loads(gzip.open(path, "rt").read())[store_traces.TRACER_DIGEST]
    assert re.fullmatch(r"[0-9a-f]{32}", digest)


def test_store_writes_the_tracers_digest(tmp_path, monkeypatch):
    """``store`` adds this tracer's digest to the tracer's raw output (traced by a stand-in here: no torch 2.11)."""
    data = model_records.read(model_records.MODEL_RECORDS_DIR / A1)
    monkeypatch.setattr(traced, "installed_versions", lambda: dict(data["versions"]))
    monkeypatch.setattr(traced, "run_tracers", lambda specs: [{"spec": s, "runs": [], "versions": {}} for s in specs])
    [written] = store_traces.store([model_records.MODEL_RECORDS_DIR / A1], tmp_path)
    stored = json.loads(gzip.open(written, "rt").read())
    assert stored[store_traces.TRACER_DIGEST] == traced.tracer_digest() and stored["runs"] == []


def _store_a1(tmp_path, monkeypatch, digest: str | None, elsewhere: bool = True) -> tuple[dict, Path]:
    """a1's committed trace copied into a store under ``tmp_path`` with ``digest`` (None: without one); this machine
    made to have another torch than the record's (``elsewhere``) or the record's own."""
    data = model_records.read(model_records.MODEL_RECORDS_DIR / A1)
    here = {**data["versions"], "torch": "2.13.0"} if elsewhere else dict(data["versions"])
    monkeypatch.setattr(traced, "installed_versions", lambda: here)
    store = tmp_path / "traces"
    folder = store / traced.store_name(data["versions"])
    folder.mkdir(parents=True)
    name = traced.stored_trace_name(traced.trace_spec(model_records.request_of(data), 2))
    trace = json.loads(gzip.open(STORE / folder.name / name, "rt").read())
    trace.pop(store_traces.TRACER_DIGEST, None)
    if digest is not None:
        trace[store_traces.TRACER_DIGEST] = digest
    (folder / name).write_bytes(gzip.compress(json.dumps(trace).encode()))
    monkeypatch.setattr(model_records, "TRACE_STORE", store)
    return data, folder / name


@pytest.mark.parametrize("digest, said", [
    ("0" * 32, f"{'0' * 32}"),          # another tracer's digest, named beside the file
    (None, "(no digest)"),             # a trace stored before the store wrote digests
])
def test_a_trace_another_tracer_made_is_a_warning_naming_the_record(tmp_path, monkeypatch, digest, said):
    data, path = _store_a1(tmp_path, monkeypatch, digest)
    [note] = model_records.trace_notes(A1, data)
    assert note.startswith(f"{A1}: its stored traces in ") and "made by another tracer than this one" in note
    assert f"{path.name} {said}" in note or f"{path.name} ({said})" in note
    assert model_records.stored_for(data) == str(path.parent)          # still checked through them: a warning only


def test_a_trace_this_tracer_made_says_nothing(tmp_path, monkeypatch):
    data, _ = _store_a1(tmp_path, monkeypatch, traced.tracer_digest())
    assert model_records.trace_notes(A1, data) == []


def test_a_record_without_its_stored_traces_says_it_was_checked_against_traces_made_here(tmp_path, monkeypatch):
    """The fallback (``stored_for`` None although the record ran another torch) is said, naming the record."""
    data, path = _store_a1(tmp_path, monkeypatch, traced.tracer_digest())
    path.unlink()
    assert model_records.stored_for(data) is None
    [note] = model_records.trace_notes(A1, data)
    assert note.startswith(f"{A1}: ran under torch-2.11.0_triton-3.6.0, this machine has torch-2.13.0_triton-3.6.0")
    assert "lacks 1 of the 1 traces it reads: checked against traces made here" in note


def test_a_record_of_this_machines_torch_needs_no_store(tmp_path, monkeypatch):
    data, path = _store_a1(tmp_path, monkeypatch, None, elsewhere=False)
    assert model_records.trace_notes(A1, data) == [] and model_records.stored_for(data) is None


def test_check_all_returns_each_records_notes(tmp_path, monkeypatch):
    """check_all collects the notes of the records it checks (the figures' check stubbed: no model built here)."""
    data, _ = _store_a1(tmp_path, monkeypatch, "0" * 32)
    (tmp_path / A1).write_text(json.dumps(data))
    monkeypatch.setattr(model_records, "check", lambda path: [])
    checks, skipped, notes = model_records.check_all(tmp_path / A1)
    assert (checks, skipped) == ([], []) and len(notes) == 1 and notes[0].startswith(f"{A1}: its stored traces")


def test_validate_prints_each_note_as_a_warning_line(monkeypatch):
    """``validate --from-records`` of model-step records: each note one ``warning:`` line after the summary."""
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    note = f"{A1}: ran under torch-2.11.0_triton-3.6.0, this machine has torch-2.13.0_triton-3.6.0, and ..."
    monkeypatch.setattr(model_records, "check_all", lambda source, progress=None: ([], [], [note]))
    r = CliRunner().invoke(app, ["validate", "--from-records", str(model_records.MODEL_RECORDS_DIR / A1)])
    assert r.exit_code == 0, r.output
    assert f"warning: {note}" in r.output.splitlines()


def _stored(path: Path, digest: str | None, ops: list[str]) -> Path:
    with gzip.open(path, "wt") as fh:
        json.dump({"tracer_digest": digest, "runs": [{"events": [{"e": "alloc", "op": op} for op in ops]}]}, fh)
    return path


def test_a_tracer_change_carries_only_the_traces_it_cannot_touch(tmp_path):
    """``store_traces.restamp``: a trace the previous tracer made that calls none of the changed operators takes this
    tracer's digest (the old one kept); another tracer's or an undigested trace stays as it is, byte for byte; a batch
    holding a trace that calls a changed operator is refused in one line before any file is written."""
    from livebytes.validate.check.store_traces import restamp
    old, changed = "0ld", ("aten.log_sigmoid_forward.default",)
    carried = _stored(tmp_path / "a.json.gz", old, ["aten.mm.default"])
    other = _stored(tmp_path / "b.json.gz", "another", ["aten.mm.default"])
    bare = _stored(tmp_path / "c.json.gz", None, ["aten.mm.default"])
    untouched = {p: p.read_bytes() for p in (other, bare)}
    touched = _stored(tmp_path / "d.json.gz", old, ["aten.log_sigmoid_forward.default"])
    before = carried.read_bytes()
    with pytest.raises(LivebytesError, match=r"^d\.json\.gz calls aten\.log_sigmoid_forward\.default, which the "
                                             r"tracer change touches: store it again$"):
        restamp([carried, touched], changed, old)
    assert carried.read_bytes() == before                      # refused before any file was written
    assert restamp([carried, other, bare], changed, old) == [carried]
    done = json.loads(gzip.open(carried, "rt").read())
    assert done["tracer_digest"] == traced.tracer_digest()
    assert done["restamped"] == [{"from": old, "changed_ops": list(changed)}]
    assert {p: p.read_bytes() for p in (other, bare)} == untouched


@pytest.mark.parametrize("previous, changed, refusal", [
    ("", ("aten.x",), "--from DIGEST"),
    ("0ld", (), "--changed-op NAME"),
    ("typo", ("aten.x",), r"^none of the 1 traces was made by the tracer typo$"),
    (None, ("aten.x",), "is this tracer: nothing to carry"),          # None: this tracer's own digest
])
def test_a_restamp_that_would_carry_nothing_is_refused(tmp_path, previous, changed, refusal):
    from livebytes.validate.check.store_traces import restamp
    trace = _stored(tmp_path / "a.json.gz", "0ld", ["aten.mm.default"])
    with pytest.raises(LivebytesError, match=refusal):
        restamp([trace], changed, traced.tracer_digest() if previous is None else previous)

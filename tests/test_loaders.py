"""Hand-edited records and traces: every field of a committed file removed or retyped, the file truncated, one
bad file in a folder. Never a traceback: the command answers as before, or exits 1 with one ``error:`` line
naming the file, and, for a field the loader reads, naming the field."""
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator.fields import Obj
from livebytes.learn.traces import TRACE_LAYOUT
from livebytes.validate.check.records import RECORD_LAYOUT, RECORDS_DIR, REQUIRED_V2, load_records

RECORDS = load_records()
# one record of each kind: format 2 (every field the writer requires), an old one, a published one, an out-of-memory
SAMPLES = {
    "format2": next(r for r in RECORDS if r.record_format == 2 and "earlier_shapes_in_process" not in r.data),
    "shared": next(r for r in RECORDS if "earlier_shapes_in_process" in r.data),
    "old": next(r for r in RECORDS if r.record_format == 1 and r.origin == "measured" and not r.oom),
    "oom": next(r for r in RECORDS if r.oom),
}
TRACES = Path(__file__).resolve().parents[1] / "validate" / "data" / "traces" / "fla-gdn-fwd_0.6.0"


def paths(data: dict, prefix: str = "") -> list[str]:
    """Every field of ``data``, nested objects' fields too ("shape.seq", "device.preset")."""
    out = []
    for key, value in data.items():
        out.append(prefix + key)
        if isinstance(value, dict):
            out += paths(value, prefix + key + ".")
    return out


def declared(layout, path: str) -> bool:
    """Whether the loader's layout declares this field (so a wrong type there must be named)."""
    for part in path.split("."):
        if not isinstance(layout, Obj) or part not in layout.fields:
            return False
        layout = layout.fields[part]
    return True


def wrong_type(value):
    if isinstance(value, str):
        return 12345
    if isinstance(value, list) and value:
        return ["lots"] if not isinstance(value[0], str) else [12345]
    return "lots"


def mutated(data: dict, path: str, how: str) -> dict:
    data = json.loads(json.dumps(data))
    *parents, last = path.split(".")
    node = data
    for p in parents:
        node = node[p]
    if how == "removed":
        del node[last]
    else:
        node[last] = wrong_type(node[last])
    return data


def one_error_line(result, name: str) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and name in lines[0], result.stderr
    return lines[0]


def validate_file(path: Path):
    return CliRunner().invoke(app, ["validate", "--from-records", str(path)])


CASES = [(kind, path, how) for kind, r in SAMPLES.items() for path in paths(r.data) for how in ("removed", "retyped")]


@pytest.mark.parametrize("kind,path,how", CASES, ids=[f"{k}-{p}-{h}" for k, p, h in CASES])
def test_a_record_with_a_field_removed_or_retyped(tmp_path, kind, path, how):
    record = SAMPLES[kind]
    target = tmp_path / "edited.json"
    target.write_text(json.dumps({"records": [mutated(record.data, path, how)]}))
    r = validate_file(target)
    assert r.exit_code in (0, 1, 3), r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    required = path in ("impl", "shape", "shape.mbs", "shape.seq", "shape.heads") or (
        record.record_format == 2 and path in REQUIRED_V2) or (path.count(".") == 1 and path.split(".")[0] in (
            "device_memory", "seconds", "oom_figures") and path.split(".")[1] in RECORD_LAYOUT.fields[path.split(".")[0]].required)
    if (how == "retyped" and declared(RECORD_LAYOUT, path)) or (how == "removed" and required):
        assert r.exit_code == 1
        assert path in one_error_line(r, str(target))
    elif r.exit_code == 1:
        one_error_line(r, str(target))


@pytest.mark.parametrize("fraction", [0, 0.001, 0.25, 0.5, 0.999])
def test_a_truncated_record_file(tmp_path, fraction):
    text = json.dumps({"records": [SAMPLES["format2"].data]}, indent=1)
    target = tmp_path / "cut.json"
    target.write_text(text[:int(len(text) * fraction)])
    r = validate_file(target)
    assert r.exit_code == 1
    one_error_line(r, str(target))


def _records_folder(tmp_path) -> Path:
    folder = tmp_path / "records"
    run = folder / "runs" / "mine"
    run.mkdir(parents=True)
    shutil.copy(SAMPLES["format2"].path, run / SAMPLES["format2"].path.name)
    shutil.copy(RECORDS_DIR / "h200_device.json", folder)          # a device probe: no records, never an error
    return folder


@pytest.mark.parametrize("bad", ["", '{"records": [', "[1, 2]", '{"impl": "fla-kda@0.6.0"}', "\xff\xfe"])
def test_a_folder_with_one_bad_file_names_it(tmp_path, bad):
    folder = _records_folder(tmp_path)
    assert validate_file(folder).exit_code == 0          # clean without the bad file
    (folder / "runs" / "mine" / "zz_bad.json").write_bytes(bad.encode("latin-1"))
    r = validate_file(folder)
    assert r.exit_code == 1
    one_error_line(r, "zz_bad.json")


@pytest.mark.parametrize("text,phrase", [
    ('{"records": "lots"}', "records: expected a list"),
    ('{"format": 3, "records": []}', "format: expected one of 1, 2"),
    ('[{"impl": "fla-kda@0.6.0", "shape": {"mbs": 1, "seq": "64K", "heads": 8}, "peak_bytes": 1}]', "shape.seq"),
    ('[{"impl": "fla-kda@0.6.0", "shape": {"mbs": 1, "seq": 1024, "heads": 8}, "peak_bytes": "lots"}]', "peak_bytes"),
    ('[{"impl": "fla-kda@0.6.0", "peak_bytes": 1}]', "shape: missing"),
    ('[{"impl": "nope@1", "shape": {"mbs": 1, "seq": 1024, "heads": 8}, "peak_bytes": 1}]', "nope@1"),
    ('[{"impl": "fla-kda@0.6.0", "shape": {"mbs": 1, "seq": 1024, "heads": 8, "v_heads": 3}, "peak_bytes": 1}]', "shape"),
])
def test_the_reported_record_tracebacks_are_one_line(tmp_path, text, phrase):
    target = tmp_path / "hand.json"
    target.write_text(text)
    assert phrase in one_error_line(validate_file(target), str(target))


RECORD = '{"impl": "fla-kda@0.6.0", "shape": {"mbs": 1, "seq": 1024, "heads": 8}, "peak_bytes": 1}'
NESTED = "the file holds a list where a record object is expected"
PASTED_FILE = 'the file holds a record file ({"records": [...]}) where a record object is expected'


@pytest.mark.parametrize("name,text,phrase", [
    ("nested.json", f"[[{RECORD}, {RECORD}]]", NESTED),                       # a list of records inside a list
    ("nested.jsonl", f"[{RECORD}]\n", NESTED),                                # a JSON line holding a list
    ("files.json", f'[{{"records": [{RECORD}]}}]', PASTED_FILE),               # once reported as "impl: missing"
    ("files2.json", f'[{{"records": [{RECORD}]}}, {{"records": [{RECORD}]}}]', PASTED_FILE),
    ("numbers.json", "[1, 2]", "record 1: expected a record object, got 1"),
])
def test_a_list_that_holds_something_else_than_records_says_what_it_holds(tmp_path, name, text, phrase):
    target = tmp_path / name
    target.write_text(text)
    line = one_error_line(validate_file(target), str(target))
    assert phrase in line and "impl: missing" not in line and "top level" not in line


@pytest.mark.parametrize("text,count", [(f"[{RECORD}]", 1), (f"[{RECORD}, {RECORD}]", 2)])
def test_a_list_of_records_is_still_read(tmp_path, text, count):
    from livebytes.validate.check.records import load_file
    target = tmp_path / "hand.json"
    target.write_text(text)
    assert [r.peak_bytes for r in load_file(target)] == [1] * count


# ---------------------------------------------------------------- traces

def _trace_folder(tmp_path) -> tuple[Path, Path]:
    folder = tmp_path / "traces"
    shutil.copytree(TRACES, folder)
    return folder, sorted(folder.glob("*.json"))[0]


TRACE_DATA = json.loads(sorted(TRACES.glob("*.json"))[0].read_text())
TRACE_CASES = [(p, h) for p in paths(TRACE_DATA) for h in ("removed", "retyped")]


@pytest.mark.parametrize("path,how", TRACE_CASES, ids=[f"{p}-{h}" for p, h in TRACE_CASES])
def test_a_trace_with_a_field_removed_or_retyped(tmp_path, path, how):
    folder, victim = _trace_folder(tmp_path)
    victim.write_text(json.dumps(mutated(TRACE_DATA, path, how)))
    r = CliRunner().invoke(app, ["learn", "--traces", str(folder)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    required = path in TRACE_LAYOUT.required or path.startswith("shape.")
    if (how == "retyped" and declared(TRACE_LAYOUT, path)) or (how == "removed" and required):
        assert r.exit_code == 1
        assert path in one_error_line(r, victim.name)
    else:
        assert r.exit_code == 0 or one_error_line(r, victim.name)


@pytest.mark.parametrize("text,phrase", [
    ("[]", "expected an object"), ("[1, 2]", "expected an object"), ("", "empty"),
    (json.dumps(TRACE_DATA)[:500], "not valid JSON"),
    (json.dumps(dict(TRACE_DATA, format="livebytes-trace/2")), "format"),
    (json.dumps(dict(TRACE_DATA, events=[["a", 0, 512]])), "events[0]"),
    (json.dumps(dict(TRACE_DATA, events=[["f", 7]])), "events[0]"),
    (json.dumps(dict(TRACE_DATA, events=[["a", 0, "lots", []]])), "events[0]"),
])
@pytest.mark.parametrize("command", [["learn"], ["drift", "--impl", "fla-gdn-fwd@0.6.0"]])
def test_a_bad_trace_in_a_folder_is_one_line(tmp_path, text, phrase, command):
    folder, victim = _trace_folder(tmp_path)
    victim.write_text(text)
    r = CliRunner().invoke(app, command + ["--traces", str(folder)])
    assert r.exit_code == 1
    assert phrase in one_error_line(r, victim.name)

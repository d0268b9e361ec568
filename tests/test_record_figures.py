"""validate --from-records checks every figure a kernel or layer record holds that its model predicts
(``validate.check.record_figures``): a copy of a committed record edited in any checked figure fails, naming that field."""
import json
import re

import pytest

from livebytes.validate.check import compare as cmp
from livebytes.validate.check.figures import FigureCheck, named_miss
from livebytes.validate.check.record_misses import NAMED_MISSES
from livebytes.validate.check.records import RECORDS_DIR, load_file, load_records
from tests.test_cli import run

RUNS = RECORDS_DIR / "runs"
# (file, record index, why it is in the sample): one record of each kind
SAMPLE = [
    (RECORDS_DIR / "h200_run5_fla-core-0.6.0.json", 0, "format 1, fresh process, replayed to the byte"),
    (RECORDS_DIR / "h200_run1_fla-core-0.6.0.json", 2, "format 1, history-dependent: allocator bounds, reserved named"),
    (RUNS / "run6" / "cudnn-kda-hopper-cuda_1.32.0_1_8192_32_128_2026-11-30T061408Z_1830.json", 0,
     "format 2, cuDNN, process memory to the byte"),
    (RUNS / "run9" / "fla-kda_0.6.0_2_8192_96_128_2026-11-30T073123Z_472.json", 0,
     "format 2, FLA, device-wide process memory named"),
    (RUNS / "run16" / "fla-kda-layer_0.6.0_1_8192_32_128_hidden=2304_layers=4_2026-12-01T111815Z_703.json", 0,
     "format 2, a layer stack in a shared process, reserved named"),
]
EXACT_FIELDS = ["peaks_bytes[0]", "peaks_bytes[2]", "peak_bytes", "requested_peak_bytes[1]", "baseline_bytes[1]", "reserved_bytes[0]",
                "reserved_bytes[2]", "device.total_memory", "device.sm_count"]
FORMAT2_FIELDS = ["device_memory.reserved_peak_bytes", "device_memory.nonpytorch_after_bytes"]
EDITS = {"x2": lambda v: 2 * v, "x3": lambda v: 3 * v, "set to 1": lambda v: 1}


def _path(field: str) -> list:
    """'a.b[2]' -> ['a', 'b', 2]."""
    return [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", field)]


def _edited(source, index: int, field: str, edit, tmp_path):
    """A copy of ``source`` whose record ``index`` has ``field`` changed by ``edit``; its records, loaded."""
    data = json.loads(source.read_text())
    record = data["records"][index]
    *parents, last = _path(field)
    holder = record
    for key in parents:
        holder = holder[key]
    holder[last] = edit(holder[last])
    copy = tmp_path / source.name
    copy.write_text(json.dumps(data))
    return load_file(copy)[index]


def _holds(source, index: int, field: str) -> bool:
    """Whether the record has the field (runs 1-2 recorded no requested bytes)."""
    value = json.loads(source.read_text())["records"][index]
    for key in _path(field):
        if not isinstance(value, (dict, list)) or (key not in value if isinstance(value, dict) else key >= len(value)):
            return False
        value = value[key]
    return True


def _cases():
    for source, index, kind in SAMPLE:
        fields = EXACT_FIELDS + (FORMAT2_FIELDS if "format 2" in kind else [])
        for field in fields:
            assert _holds(source, index, field) or field.startswith("requested"), (source.name, field)
            if not _holds(source, index, field):
                continue
            for name in EDITS:
                yield pytest.param(source, index, field, name, id=f"{source.name[:40]}#{index}:{field}:{name}")


@pytest.mark.parametrize("source,index,field,edit", list(_cases()))
def test_an_edited_figure_fails_naming_its_field(source, index, field, edit, tmp_path):
    c = cmp.compare(_edited(source, index, field, EDITS[edit], tmp_path))
    failed = [f.field for f in c.figures if not f.passed]
    assert not c.passed and field in failed, failed


@pytest.mark.parametrize("field", ["device.total_memory", "device.sm_count"])
@pytest.mark.parametrize("edit", EDITS)
def test_an_out_of_memory_record_is_held_to_its_device_too(field, edit, tmp_path):
    """Run 1's one out-of-memory record (record 18 of its file) is judged by the verdict, and by its device's figures."""
    c = cmp.compare(_edited(RECORDS_DIR / "h200_run1_fla-core-0.6.0.json", 17, field, EDITS[edit], tmp_path))
    assert c.measured is None and not c.passed and [f.field for f in c.figures if not f.passed] == [field]


@pytest.mark.parametrize("source,index", [(s, i) for s, i, kind in SAMPLE if "format 2" in kind])
def test_the_before_reading_fails_below_the_context_only(source, index, tmp_path):
    """nonpytorch_before_bytes is device-wide (other processes add to it): bounded from below by the CUDA context's
    measured figure (552,402,944 B on the H200), so 1 B fails and three times the reading does not."""
    field = "device_memory.nonpytorch_before_bytes"
    one = cmp.compare(_edited(source, index, field, EDITS["set to 1"], tmp_path))
    assert field in [f.field for f in one.figures if not f.passed]
    tripled = cmp.compare(_edited(source, index, field, EDITS["x3"], tmp_path))
    assert tripled.passed


def test_the_samples_are_the_kinds_they_claim():
    """The sample covers what the perturbations are meant to reach: a history-dependent record, a named reserved
    miss, a named process miss, and one held to the byte."""
    records = {(s.name, i): load_file(s)[i] for s, i, _ in SAMPLE}
    assert records[("h200_run1_fla-core-0.6.0.json", 2)].history_dependent
    kinds = {(name, i): {f.field: f.expected_error for f in cmp.compare(r).figures} for (name, i), r in records.items()}
    assert kinds[("h200_run1_fla-core-0.6.0.json", 2)]["reserved_bytes[0]"] != 0
    assert kinds[(SAMPLE[3][0].name, 0)]["device_memory.nonpytorch_after_bytes"] != 0
    assert kinds[(SAMPLE[2][0].name, 0)]["device_memory.nonpytorch_after_bytes"] == 0


def test_every_committed_record_passes_every_figure():
    failures = [line for r in load_records() if r.origin == "measured" for line in cmp.compare(r).failures]
    assert failures == []


def test_every_named_miss_is_one_the_records_have_at_exactly_its_size():
    """A named miss no record has (a stale entry, or a miss the model no longer makes) is a defect: each entry must
    be the expected error of a figure that passes at it."""
    used = {}
    for r in load_records():
        if r.origin == "measured" and not r.oom:
            for f in cmp.compare(r).figures:
                if f.expected_error:
                    used.setdefault((r.path.name, r.index, re.sub(r"\[\d+\]", "[*]", f.field)), set()).add(f.expected_error)
                    used.setdefault((r.path.name, r.index, f.field), set()).add(f.expected_error)
    for key, (size, _) in NAMED_MISSES.items():
        assert used.get(key) == {size}, key


def test_the_cli_names_each_failing_field_on_its_own_line(tmp_path):
    """Two figures edited: two FAILED lines, each naming its field, and the failed-validation exit code (3)."""
    source = RECORDS_DIR / "h200_run5_fla-core-0.6.0.json"
    data = json.loads(source.read_text())
    data["records"][0]["reserved_bytes"][1] *= 2
    data["records"][0]["device"]["sm_count"] = 1
    copy = tmp_path / source.name
    copy.write_text(json.dumps(data))
    r = run("validate", "--from-records", str(copy))
    failed = [line for line in r.stdout.splitlines() if line.startswith("FAILED ")]
    assert r.exit_code == 3, r.output
    assert len(failed) == 2
    assert ": reserved_bytes[1]: " in failed[0] and ": device.sm_count: measured 1, predicted 132" in failed[1]   # the H200: 132 SMs


@pytest.mark.parametrize("predicted,slack,tolerance,expected", [
    (1000, 0, 0.0, (1000, 1000)),            # to the byte
    (1000, 16384, 0.0, (1000, 17384)),       # 1000 + 16,384 B of a shared process's leftovers
    (1000, 0, 0.1, (910, 1111)),             # ceil(1000 / 1.1) = ceil(909.09) = 910; floor(1000 / 0.9) = floor(1111.1) = 1111
])
def test_the_tolerance_range_is_the_rule_it_replaces(predicted, slack, tolerance, expected):
    """|predicted - measured| <= tolerance x measured: 910 passes (90 <= 91.0), 909 does not (91 > 90.9); 1111 passes
    (111 <= 111.1), 1112 does not (112 > 111.2)."""
    assert cmp.tolerance_range(predicted, slack, tolerance) == expected


@pytest.mark.parametrize("field,expected", [
    ("reserved_bytes[1]", (5, "every step")),         # no entry of its own: the [*] entry
    ("reserved_bytes[0]", (7, "step 0 alone")),       # its own entry first
    ("peaks_bytes[0]", (0, "")),                      # none named: to the byte
])
def test_a_named_miss_is_the_fields_own_else_every_steps(field, expected):
    misses = {("f.json", 0, "reserved_bytes[*]"): (5, "every step"), ("f.json", 0, "reserved_bytes[0]"): (7, "step 0 alone")}
    assert named_miss(misses, ("f.json", 0), field) == expected


@pytest.mark.parametrize("check,passed", [
    (FigureCheck("r", "f", 100, 100), True),                            # 100 - 100 = 0: to the byte
    (FigureCheck("r", "f", 100, 104, expected_error=4), True),          # 104 - 100 = 4: the named miss
    (FigureCheck("r", "f", 100, 105, expected_error=4), False),         # 5 != 4
    (FigureCheck("r", "f", 100, 90, bounds=(90, 100)), True),           # 90 <= 100 <= 100
    (FigureCheck("r", "f", 101, 90, bounds=(90, 100)), False),          # 101 > 100
    (FigureCheck("r", "f", 89, 90, bounds=(90, None)), False),          # 89 < 90, no upper bound
    (FigureCheck("r", "f", None, 90, bounds=(90, None)), False),        # a missing figure never passes
])
def test_a_figure_passes_to_the_byte_at_its_named_miss_or_inside_its_bounds(check, passed):
    assert check.passed is passed

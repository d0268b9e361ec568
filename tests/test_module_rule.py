"""validate/check/module_rule.py (issue 33): the committed processes' module figures, the loaded sets' sizes matched
config by config, and the probe's per-image summary."""
import json

from pathlib import Path

import pytest

from livebytes.validate.check import module_rule as mr


def test_measured_gdn_d128_cold_is_the_data_files_figure():
    rows = {(r["record"], r["tag"]): r for r in mr.kernel_process_rows()}
    r = rows[("run20/process_memory_20.jsonl", "fla-gdn_D128_H16_HV32_T4096_cold")]
    # 6,286,016,512 alone - 552,402,944 context - reservation of 21,856 B x 270,336 threads in 2 MiB pages:
    # 5,908,463,616 -> 5,909,774,336 B, less the default 1,024 B's 276,824,064 B = 5,632,950,272 B -> 100,663,296 B (96 MiB)
    assert (r["modules"], r["method"], r["cubins"]) == (100_663_296, "alone", 117)


def test_the_16b_layer_rows_are_left_out():
    assert not [r for r in mr.kernel_process_rows() if r["record"].endswith("process_memory_16b.jsonl")]


def _event(kind, fn, h, **extra):
    return json.dumps({"event": kind, "fn": fn, "name": fn, "hash": h, "num_warps": 4, "num_stages": 2,
                       "constexprs": {"BT": 64}, **extra})


def test_loaded_configs_follow_load_events_through_their_compiles(tmp_path):
    log = tmp_path / "x_cold.kernels.jsonl"
    log.write_text("\n".join([_event("compile", "a", "h1"), _event("compile", "b", "h2"), _event("load", "a", "h1")]))
    assert mr.loaded_configs(log) == [mr.config_key("a", {"BT": 64}, 4, 2)]        # b compiled, never loaded


@pytest.mark.parametrize("keys, matched, image, device", [
    (["k1", "k2"], 2, 3_000 + 5_000, 700 + 900),      # both matched: the sums of their fields
    (["k1", "zz"], 1, 3_000, 700),                   # one unmatched: left out of the sums, listed
])
def test_loaded_bytes_sum_the_matched_candidates(keys, matched, image, device):
    sizes = {"k1": {"image_bytes": 3_000, "device_section_bytes": 700}, "k2": {"image_bytes": 5_000, "device_section_bytes": 900}}
    out = mr.loaded_bytes(keys, sizes)
    assert (out["matched"], out["image_bytes"], out["device_section_bytes"]) == (matched, image, device)
    assert out["unmatched"] == [k for k in keys if k not in sizes]


def test_probe_summary_sums_growth_per_image_and_counts_the_copies_that_grew():
    g = lambda load, fn: {"load": {"device_used": load}, "get_function": {"device_used": fn}, "launch": None}  # noqa: E731
    rows = [{"kind": "header"}] + [
        {"kind": "load", "variant": "tiny", "copy": i, "device_section_bytes": 792, "image_bytes": 2_864,
         "growth": g(2_097_152 if i == 2 else 0, 0)} for i in range(4)] + [
        {"kind": "triton", "unroll": 256, "step": "load_binary", "copy": i, "device_section_bytes": 5_032,
         "image_bytes": 18_560, "growth": {"device_used": 65_536}} for i in range(2)]
    tiny, triton = mr.probe_summary(rows)
    # tiny: one 2 MiB step in 4 copies = 2,097,152 / 4 = 524,288 B per copy
    assert (tiny["copies"], tiny["growth"]["load"], tiny["per_copy"], tiny["copies_that_grew"]) == (4, 2_097_152, 524_288, 1)
    # Triton: 64 KiB at each of 2 load_binary calls
    assert (triton["image"], triton["growth"]["load"], triton["per_copy"], triton["copies_that_grew"]) == ("256", 131_072, 65_536, 2)


def test_a_missing_file_is_one_line_and_exit_1(tmp_path, capsys):
    assert mr.main(["probe", str(tmp_path / "absent.jsonl")]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_the_loaded_set_sizes_in_modules_md_come_from_the_committed_records(tmp_path):
    """MODULES.md's table: the sizes records (cpu_frames, four cases) matched to run 13a's worker logs."""
    import tarfile
    runs = Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "runs"   # the checkout's: .tgz ship not
    for name, folder in (("cpu_frames/candidates_sizes.tgz", "c"), ("run13/kernels_13a.tgz", "k")):
        with tarfile.open(runs / name) as t:
            t.extractall(tmp_path / folder, filter="data")
    rows = {r["tag"]: r for r in mr.sizes_table(tmp_path / "c" / "sizes", [tmp_path / "k"])}
    got = {tag: (r["matched"], len(r["unmatched"]), r["image_bytes"], r["device_section_bytes"]) for tag, r in rows.items()}
    assert got["fla-gdn-fwd_D32_H16_HV32_cold"] == (59, 0, 3_148_072, 756_638)
    assert got["fla-gdn-fwd_D32_H16_HV32_warm"] == (6, 0, 365_680, 86_432)
    assert got["fla-report_D32_H16_HV16_cold"] == (204, 0, 21_377_256, 6_823_334)
    assert got["fla-report_D32_H16_HV16_warm"] == (17, 0, 1_175_872, 309_343)

"""The command line: thin commands, one error path (one line on stderr; exit 1 domain, 2 usage, 3 failed
validation), machine-readable JSON under one documented key set."""
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.cli import render

runner = CliRunner()
GiB = 2**30


def run(*args):
    return runner.invoke(app, list(args))


def test_predict_json_has_the_documented_fields():
    r = run("predict", "--impl", "fla-kda@07b80f27", "--mbs", "1", "--seq", "128K", "--heads", "96", "--dim", "128", "--json")
    assert r.exit_code == 0, r.output
    envelope = json.loads(r.stdout)
    (d,) = envelope["results"]
    assert (envelope["schema"], envelope["command"], d["impl"], d["device"]) == (3, "predict", "fla-kda@07b80f27", "B300")
    assert d["shape"] == {"batch_size": 1, "seq_len": 131072, "num_heads": 96, "head_dim": 128}     # 128K = 128 * 1024
    assert isinstance(d["peak_bytes"], int) and d["peak_step"] == "bwd.intra_db_sum"
    assert sum(d["group_bytes"].values()) == d["peak_bytes"]
    # machine keys, the prose as labels: every group named has its label, every buffer's group is one of them
    assert set(d["group_bytes"]) == set(d["group_labels"]) >= {b["group"] for b in d["buffers_at_peak"]}
    assert d["group_labels"]["inputs"] == "inputs, dO and output" and all(k.isidentifier() for k in d["group_labels"])
    assert sum(b["allocated_bytes"] for b in d["buffers_at_peak"]) == d["peak_bytes"]
    assert d["measured"][0]["origin"] == "published"          # the report's 99.422 GiB


def test_compare_prints_both_report_figures():
    r = run("compare", "--impl", "fla-kda@07b80f27", "--impl", "cudnn-kda-frost@e0b4ce98",
            "--mbs", "1", "--seq", "128K", "--heads", "96", "--dim", "128", "--json")
    assert r.exit_code == 0, r.output
    fla, frost = json.loads(r.stdout)["results"]
    assert round(fla["peak_bytes"] / GiB, 3) == 99.422
    assert round(frost["peak_bytes"] / GiB, 2) == 54.06                # report: 54.063
    assert frost["change_vs_first_fraction"] == pytest.approx(-0.456, abs=0.001)   # 54.06 / 99.42 - 1
    assert fla["change_vs_first_fraction"] is None


def test_unmeasured_shapes_are_labelled_predicted():
    r = run("predict", "--impl", "fla-kda@0.6.0", "--seq", "256K", "--heads", "128", "--json")
    (d,) = json.loads(r.stdout)["results"]
    assert d["status"] == "predicted (never measured)" and d["measured"] == []
    assert d["fits"] is False and d["device"] == "H200" and d["oom"] is not None and d["peaks_unbounded"]
    assert d["headroom_bytes"] == d["device_memory"]["total_bytes"] - d["device_need_bytes"] < 0


def test_models_lists_the_registry():
    r = run("models", "--json")
    keys = {m["impl"] for m in json.loads(r.stdout)["results"]}
    assert {"fla-kda@07b80f27", "fla-kda@0.6.0", "cudnn-kda-frost@e0b4ce98", "cudnn-kda-hopper-cuda@1.32.0"} <= keys


def test_an_engine_refusal_carries_the_engines_reason():
    r = run("predict", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--seq", "8K", "--heads", "4", "--contract", "report")
    assert r.exit_code == 1 and "safe_gate/a_log/dt_bias are unsupported" in r.stderr
    r = run("predict", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--seq", "8K", "--heads", "4", "--dim", "64")
    assert r.exit_code == 1 and "head dim 128 only" in r.stderr


def test_validate_without_a_gpu_says_so_in_one_line():
    r = run("validate", "--impl", "fla-kda@0.6.0", "--shapes", "1,8K,96,128")
    assert r.exit_code == 1
    assert "cannot validate fla-kda@0.6.0 here" in r.stderr


def test_validate_from_records_rechecks_committed_measurements():
    r = run("validate", "--from-records", "h200_run5_fla-core-0.6.0.json")
    assert r.exit_code == 0, r.output
    assert "FAIL" not in r.stdout and r.stdout.count("pass (") == 5
    assert r.stdout.strip().splitlines()[-1] == "5 passed, 0 failed, 0 out of memory"


def test_validate_from_records_judges_a_tampered_copy_on_its_own_figures(tmp_path):
    """A copy of a committed file with every peak set to 1 FAILs (exit 3): the file is loaded, not its name matched."""
    from livebytes.validate.check.records import RECORDS_DIR
    data = json.loads((RECORDS_DIR / "h200_run5_fla-core-0.6.0.json").read_text())
    for rec in data["records"]:
        rec["peak_bytes"], rec["peaks_bytes"] = 1, [1, 1, 1]
    copy = tmp_path / "h200_run5_fla-core-0.6.0.json"
    copy.write_text(json.dumps(data))
    r = run("validate", "--from-records", str(copy))
    assert r.exit_code == 3, r.output
    assert r.stdout.strip().splitlines()[-1] == "0 passed, 5 failed, 0 out of memory"


@pytest.mark.parametrize("plan,message", [
    (None, "no such file"),
    ('[{"impl": "fla-kda@0.6.0", "shapes": "1,8K,16,128,hv=24"}]', "must be a positive multiple of heads"),
    ('[{"impl": "fla-kda@0.6.0", "shapes": "1,8K,16,128", "seed": 3}]', "unknown keys seed"),
    ('[{"impl": "fla-kda@07b80f27", "shapes": "1,8K,16,128"}]', "no runner for fla-kda@07b80f27"),
])
def test_validate_bad_plans_and_sources_are_one_line(tmp_path, plan, message):
    if plan is None:
        r = run("validate", "--from-records", "no-such-file.json")
    else:
        (tmp_path / "plan.json").write_text(plan)
        r = run("validate", "--plan", str(tmp_path / "plan.json"))
    assert r.exit_code == 1 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_failed_validation_exits_3(monkeypatch):
    from livebytes.validate.check import compare as cmp
    real = cmp.compare
    monkeypatch.setattr(cmp, "compare", lambda rec, tol: real(rec, tol).__class__(
        **{**real(rec, tol).__dict__, "passed": False}))
    r = run("validate", "--from-records", "h200_run5_fla-core-0.6.0.json")
    assert r.exit_code == 3 and r.stdout.count("FAIL (") == 5


# ----------------------------------------------------------------------------------- bad input table
P = ("predict", "--impl", "fla-kda@0.6.0")
FROST = "cudnn-kda-frost@1.32.0"
HOPPER = "cudnn-kda-hopper-cuda@1.32.0"
S8 = ("--seq", "8K", "--heads", "4")
GDN_TRACES = str(Path(__file__).resolve().parents[1] / "validate" / "data" / "traces" / "fla-gdn-fwd_0.6.0")

BAD_INPUTS = [
    # (arguments, exit code, a phrase the one line must contain)
    # the HF/FLA flags and their old short aliases: a message names the HF flag
    ((*P, "--mbs", "0", *S8), 1, "--batch-size: must be positive"),
    ((*P, "--batch-size", "-1", *S8), 1, "--batch-size"),
    ((*P, "--seq", "eight", "--heads", "4"), 1, "--seq-len"),
    ((*P, "--seq-len", "8K", "--num-heads", "0"), 1, "--num-heads: must be positive"),
    ((*P, *S8, "--expand-v", "1/3"), 1, "--expand-v: head_dim 128 x '1/3' = 42.6667 is not a whole value head dimension"),
    ((*P, *S8, "--expand-v", "0"), 1, "--expand-v: must be positive"),
    ((*P, *S8, "--dim", "512"), 1, "key head dim <= 256"),
    ((*P, *S8, "--dim", "16"), 1, "head dim >= 32"),
    ((*P, *S8, "--v-heads", "6"), 1, "multiple of heads"),
    ((*P, *S8, "--contract", "fancy"), 1, "contract"),
    ((*P, *S8, "--gpu", "X100"), 1, "unknown GPU"),
    (("predict", "--impl", "nope@1", *S8), 1, "unknown implementation"),
    (("predict", "--impl", FROST, *S8, "--gpu", "H200"), 1, "Blackwell-only"),
    (("predict", "--impl", FROST, *S8, "--no-recompute"), 1, "does not take --no-recompute"),
    (("predict", "--impl", FROST, *S8, "--contract", "plain"), 1, "does not take --contract"),
    (("predict", "--impl", FROST, *S8, "--v-heads", "8"), 1, "GVA"),
    (("predict", "--impl", HOPPER, *S8, "--dim", "64"), 1, "head dim 128 only"),
    (("predict", "--impl", HOPPER, *S8, "--gpu", "B300"), 1, "only on sm90"),
    (("predict", "--impl", HOPPER, *S8, "--no-recompute"), 1, "does not take --no-recompute"),
    ((*P, "--impl", HOPPER, *S8), 2, "use livebytes compare"),
    ((*P, "--seq", "8K"), 2, "--num-heads is required with --impl"),
    (("predict", "--seq", "8K", "--heads", "4"), 2, "give --impl KEY"),
    ((*P, *S8, "--bogus"), 2, "No such option"),
    (("predicts",), 2, "No such command"),
    (("compare", "--impl", "fla-kda@0.6.0", "--impl", FROST, *S8, "--no-recompute"), 1, "does not take --no-recompute"),
    (("compare", "--impl", "fla-kda@0.6.0", "--impl", FROST, *S8, "--contract", "plain"), 1, "does not take --contract"),
    (("compare", "--impl", "fla-kda@0.6.0", "--impl", FROST, *S8, "--gpu", "H200"), 1, "Blackwell-only"),
    (("plan", "--impl", FROST, "--gpu", "H200"), 1, "Blackwell-only"),
    (("plan", "--impl", FROST, "--no-recompute"), 1, "does not take --no-recompute"),
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", "80"), 1, "needs a unit"),
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", "-5GiB"), 1, "must be positive"),
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", "lotsGiB"), 1, "'lots' is not a number"),
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", "80XB"), 1,
     "unknown unit 'XB'; the units are TiB, GiB, MiB, KiB, TB, GB, MB, KB, B"),
    (("plan", "--impl", "fla-kda@0.6.0", "--solve", "dim"), 2,
     "--solve: the dimension to solve for must be one of seq_len, batch_size, num_heads, num_hidden_layers"),
    # the solved dimension given: the answer would replace it unannounced (old names and HF names alike)
    (("plan", "--impl", "fla-kda@0.6.0", "--solve", "heads", "--seq", "32K", "--heads", "7"), 2,
     "--num-heads has no effect with --solve num_heads: plan solves for it"),
    (("plan", "--impl", "fla-kda@0.6.0", "--solve", "seq_len", "--seq", "1K"), 2,
     "--seq-len has no effect with --solve seq_len"),
    (("plan", "--impl", "fla-kda@0.6.0", "--seq-len=8K"), 2, "--seq-len has no effect with --solve seq_len"),   # the default
    (("plan", "--impl", "fla-kda@0.6.0", "--solve", "batch_size", "--mbs", "1", "--budget", "80GiB"), 2,
     "--batch-size has no effect with --solve batch_size"),
    (("formula", "--impl", FROST, "--gpu", "H200"), 1, "Blackwell-only"),
    (("formula", "--impl", FROST, "--contract", "plain"), 1, "does not take --contract"),
    (("formula", "--impl", "fla-kda@0.6.0", "--impl", FROST), 2, "formula takes one --impl"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--heads", ""), 1, "no values"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K..10K"), 1, "would stop at 8192"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--seq", "16K..8K"), 1, "empty range"),
    (("sweep", "--impl", FROST, "--no-recompute"), 1, "does not take --no-recompute"),
    (("sweep", "--impl", HOPPER, "--dim", "64"), 1, "head dim 128 only"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--csv", "{tmp}"), 1, "is a folder"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--csv", "/nonexistent-dir/grid.csv"), 1, "No such file or directory"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--out", "{tmp}/grid.txt"), 1, ".csv"),
    (("timeline", "--impl", "fla-kda@0.6.0", *S8, "--out", "{tmp}/t"), 1, "name the file with one of"),
    (("timeline", "--impl", "fla-kda@0.6.0", *S8, "--out", "{tmp}/t.xyz"), 1, "name the file with one of"),
    (("timeline", "--impl", "fla-kda@0.6.0", *S8, "--out", "{tmp}/"), 1, "is a folder"),
    (("timeline", "--impl", "fla-kda@0.6.0", *S8, "--out", "/nonexistent-dir/t.png"), 1, "No such file or directory"),
    (("timeline", "--impl", FROST, *S8, "--no-recompute"), 1, "does not take --no-recompute"),
    (("timeline", "--impl", HOPPER, *S8, "--triton-cache", "warm"), 1, "runs no Triton kernels"),
    (("timeline", "--impl", "fla-kda@0.6.0", *S8, "--alloc-conf", "expandable_segments:True", "--out", "{tmp}/t.pickle"),
     1, "a snapshot of expandable segments is not modelled"),
    (("validate", "--from-records", "all", "--tolerance", "-5%"), 1, "at least 0"),
    (("validate", "--from-records", "all", "--tolerance", "abc"), 1, "give a percentage with its sign"),
    (("validate", "--from-records", "all", "--tolerance", "abc%"), 1, "not a number"),
    (("validate", "--from-records", "all", "--tolerance", "0.1"), 1, "give a percentage with its sign"),
    (("predict", "--impl", "fla-kda@0.6.0", "--seq", "9" * 5000, "--heads", "8"), 1, "5,000-digit number"),
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", "9" * 5000 + "GiB"), 1, "(5,005 characters)"),
    # given twice: the last would win silently
    (("predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--seq", "16K", "--heads", "8"), 2, "--seq-len given more than once"),
    (("predict", "--impl", "fla-kda@0.6.0", "--seq=8K", "--seq-len", "16K", "--heads", "8"), 2,
     "--seq-len given more than once"),      # an alias and its HF name: one option
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", "8GiB", "--budget", "9GiB"), 2, "--budget given more than once"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--out", "{tmp}/a.csv", "--csv", "{tmp}/b.csv"), 2, "--out given more than once"),
    (("predict", "--impl", "fla-kda@0.6.0", *S8, "--alloc-conf", "expandable_segments:True,expandable_segments:False"), 2,
     "expandable_segments given more than once"),
    (("plan", "--impl", "fla-kda@0.6.0", "--alloc-conf", "expandable_segments:True, expandable_segments:True"), 2,
     "given more than once"),
    # no effect together
    (("formula", "--impl", "fla-kda@0.6.0", "--latex", "--json"), 2, "--latex has no effect with --json"),
    (("learn", "--traces", GDN_TRACES, "--shapes", "2,1024,2,2,64,64"), 2, "--shapes has no effect without --probe"),
    (("learn", "--traces", "{tmp}", "--probe", "fla-kda@0.6.0"), 2, "--probe needs --shapes"),
    (("learn", "--traces", "{tmp}", "--probe", "nope", "--shapes", "2,1024,2,2,64,64;2,2048,2,2,64,64"), 1,
     "unknown implementation 'nope'"),
    # the one shape-string syntax (key=value, the JSON's shape keys) reads as the old N,S,H,HV,K,V does
    (("learn", "--traces", "{tmp}", "--probe", "nope", "--shapes", "seq_len=1024,num_heads=2;seq_len=2048,num_heads=2"),
     1, "unknown implementation 'nope'"),
    (("learn", "--traces", "{tmp}", "--probe", "nope", "--shapes", "seq_len=1024;seq_len=2048,num_heads=2"), 1,
     "shape 'seq_len=1024': num_heads= is missing"),
    (("validate", "--from-records", "/nonexistent/x.json"), 1, "no such file"),
    (("validate", "--impl", "fla-kda@0.6.0"), 2, "--shapes are required"),
    (("payload", "--fn", "sparse", "--no-measure"), 1, "--fn must be one of"),
    (("payload", "--dim", "0", "--no-measure"), 1, "--head-dim: must be positive"),
    (("payload", "--seq", "0", "--no-measure"), 1, "--seq-len: must be positive"),
    (("payload", "--block-q", "x", "--no-measure"), 1, "--block-q"),
    # options that would be accepted and ignored are refused
    (("predict", "--impl", "fla-kda@0.6.0", *S8, "--triton-cache", "cold-after-warmup"), 1, "must be one of cold, warm"),
    (("predict", "--impl", HOPPER, *S8, "--triton-cache", "warm"), 1, "runs no Triton kernels"),
    # beside a Triton model the flag applies to it (a warning, tests/test_triton_versions.py); alone, it is refused
    (("compare", "--impl", HOPPER, "--impl", "cudnn-kda-hopper@1.32.0", *S8, "--triton-cache", "cold"), 1,
     "run no Triton kernels: --triton-cache 'cold' changes nothing for them"),
    (("plan", "--impl", HOPPER, "--triton-cache", "warm"), 1, "runs no Triton kernels"),
    (("sweep", "--impl", HOPPER, "--seq", "8K", "--heads", "4", "--triton-cache", "warm"), 1, "runs no Triton kernels"),
    (("validate", "--from-records", "all", "--out-dir", "{tmp}"), 2, "--out-dir has no effect with --from-records"),
    (("validate", "--from-records", "all", "--shapes", "1,8K,4"), 2, "--shapes has no effect with --from-records"),
    (("plan", "--impl", HOPPER, "--budget", "80GiB", "--triton-cache", "warm"), 1, "runs no Triton kernels"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--heads", "16,,32"), 1, "--num-heads: an empty item"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K,"), 1, "--seq-len: an empty item"),
    (("compare", "--impl", HOPPER, "--impl", HOPPER, *S8), 2, f"--impl {HOPPER} given more than once"),
    (("plan", "--impl", HOPPER, "--impl", HOPPER), 2, "given more than once"),
    (("drift", "--impl", "fla-kda@0.6.0", "--traces", GDN_TRACES), 1, "a different implementation"),
]


@pytest.mark.parametrize("args,code,phrase", BAD_INPUTS, ids=[" ".join(a[0])[:70] for a in BAD_INPUTS])
def test_bad_input_is_one_line_on_stderr(args, code, phrase, tmp_path):
    r = run(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == code, r.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and phrase in lines[0], r.stderr
    assert "Traceback" not in r.output and r.stdout == ""


def test_the_table_has_at_least_40_rows():
    assert len(BAD_INPUTS) >= 40


def test_an_absurd_shape_answers_with_one_warning():
    r = run("predict", "--impl", "fla-kda@0.6.0", "--seq", "10M", "--heads", "100000", "--json")
    assert r.exit_code == 0
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "implausible" in lines[0]
    (d,) = json.loads(r.stdout)["results"]
    assert d["fits"] is False and d["oom"] is not None and json.loads(r.stdout)["warnings"] == [lines[0][len("warning: "):]]


@pytest.mark.parametrize("seq,warned", [
    ("16M", True),            # 16 * 2^20 = 16,777,216 tokens: the threshold itself warns
    ("16383K", False),        # 16,776,192 tokens, 1024 below it
    ("8M", False),
])
def test_16m_tokens_warns_and_fewer_do_not(seq, warned):
    r = run("predict", "--impl", "fla-kda@0.6.0", "--seq", seq, "--heads", "4", "--json")
    assert r.exit_code == 0, r.output
    assert ("implausible" in r.stderr) is warned, r.stderr


@pytest.mark.parametrize("tokens,label", [
    (16 * 2**20, "16M"), (2**20, "1M"), (3 * 2**20 + 1024, "3073K"), (8192, "8K"), (5000, "5000"), (512, "512"),
])
def test_token_labels_use_the_largest_exact_suffix(tokens, label):
    from livebytes.estimator.shapes import format_tokens, parse_size
    assert format_tokens(tokens) == label and parse_size(label) == tokens


def test_payload_without_torch_is_one_line(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "torch", None)            # import torch -> ImportError
    monkeypatch.delitem(sys.modules, "livebytes.validate.gpu.payload", raising=False)
    r = run("payload", "--seq", "128")
    assert r.exit_code == 1 and r.stderr.strip().count("\n") == 0 and "--measure needs torch" in r.stderr


def test_payload_keeps_its_old_option_names():
    new = json.loads(run("payload", "--seq", "128,256", "--dim", "16", "--no-measure", "--json").stdout)
    old = json.loads(run("payload", "--T", "128,256", "--d", "16", "--no-measure", "--json").stdout)
    assert new == old and [r["shape"]["seq_len"] for r in new["results"]] == [128, 256]


def test_timeline_writes_exactly_the_file_named(tmp_path):
    target = tmp_path / "t.svg"
    r = run("timeline", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "4", "--out", str(target))
    assert r.exit_code == 0 and target.stat().st_size > 0 and r.stdout.strip() == f"wrote {target}"
    assert [p.name for p in tmp_path.iterdir()] == ["t.svg"]


@pytest.mark.parametrize("key,contract", [("fla-kda@0.6.0", "plain"), ("cudnn-kda-hopper-cuda@1.32.0", "plain")])
def test_sweep_runs_column_is_predicts_verdict_around_the_plan_answer(key, contract):
    """plan's largest seq V runs and V + 1 does not; sweep says the same as predict at V - 1, V, V + 1, V + 2."""
    d = json.loads(run("plan", "--impl", key, "--contract", contract, "--heads", "96", "--json").stdout)
    largest = d["results"][0]["value"]
    seqs = [largest - 1, largest, largest + 1, largest + 2]
    r = run("sweep", "--impl", key, "--contract", contract, "--heads", "96", "--seq", ",".join(map(str, seqs)), "--json")
    assert r.exit_code == 0, r.output
    swept = {row["shape"]["seq_len"]: row["fits"] for row in json.loads(r.stdout)["results"]}
    for seq in seqs:
        p = json.loads(run("predict", "--impl", key, "--contract", contract, "--heads", "96", "--seq", str(seq),
                           "--json").stdout)["results"][0]
        assert swept[seq] is p["fits"], seq
    assert swept[largest] and not swept[largest + 1]


def test_sweep_no_longer_says_fits_where_predict_says_out_of_memory():
    """The newcomer's case: 175,000 tokens x 96 heads on the H200 (136.6 GiB of blocks, under the old usable-bytes rule)."""
    args = ("--impl", "fla-kda@0.6.0", "--contract", "plain", "--seq", "175000", "--heads", "96", "--gpu", "H200", "--json")
    row = json.loads(run("sweep", *args).stdout)["results"][0]
    assert json.loads(run("predict", *args).stdout)["results"][0]["oom"] == row["oom"] is not None
    assert row["fits"] is False


def test_sweep_writes_csv(tmp_path):
    target = tmp_path / "grid.csv"
    r = run("sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K..32K", "--heads", "4,8", "--out", str(target))
    assert r.exit_code == 0, r.output
    lines = target.read_text().splitlines()
    assert len(lines) == 1 + 3 * 2                       # header + seq {8K, 16K, 32K} x heads {4, 8}


def test_plan_defaults_to_each_models_device():
    d = json.loads(run("plan", "--impl", "fla-kda@0.6.0", "--impl", FROST, "--json").stdout)
    assert [r["device"] for r in d["results"]] == ["H200", "B300"]
    # the B300's total is a public report (estimator/data/devices.json capacity_kind "reported"), said as such
    assert [r["device_memory"]["status"] for r in d["results"]] == ["measured", "reported"]
    assert d["results"][1]["device_memory"]["source"].startswith("public report, not measured by us: ")
    assert all(r["shape"] == {"batch_size": 1, "seq_len": r["value"], "num_heads": 96, "head_dim": 128} for r in d["results"])
    assert d["budget_bytes"] is None


def test_plan_budget_with_a_unit():
    d = json.loads(run("plan", "--impl", "fla-kda@0.6.0", "--budget", "80GiB", "--json").stdout)
    r = d["results"][0]
    assert d["budget_bytes"] == 80 * GiB and r["peak_at_value_bytes"] <= 80 * GiB < r["peak_at_next_bytes"]


@pytest.mark.parametrize("key", ["fla-kda@0.6.0", "cudnn-kda-hopper-cuda@1.32.0"])
def test_plan_budget_bounds_max_memory_allocated_not_the_block_sum(key):
    """The budget bounds predict's allocated_peak_bytes (the replay: unsplit blocks, first call), which is at
    least the 512-byte block sum: the answer is never larger than a block-sum answer would be."""
    from livebytes.estimator import Shape, get_model, predict
    from livebytes.estimator.planning import largest_fitting
    r = json.loads(run("plan", "--impl", key, "--contract", "plain", "--budget", "80GiB", "--json").stdout)["results"][0]
    at, above = (json.loads(run("predict", "--impl", key, "--contract", "plain", "--heads", "96", "--seq", str(v),
                                "--json").stdout)["results"][0] for v in (r["value"], r["next_value"]))
    assert (r["peak_at_value_bytes"], r["peak_at_next_bytes"]) == (at["allocated_peak_bytes"], above["allocated_peak_bytes"])
    assert at["peak_bytes"] <= at["allocated_peak_bytes"] <= 80 * GiB < above["allocated_peak_bytes"]
    blocks = largest_fitting(get_model(key, contract="plain"), Shape(1, 8192, 96), "seq", 80 * GiB)
    assert r["value"] <= blocks.value and predict(get_model(key, contract="plain"), Shape(1, r["value"], 96, 128)).peak_bytes <= 80 * GiB


def test_the_two_allocated_figures_carry_two_labels():
    """The footer is the block sum (steady state), the line below the replay's max_memory_allocated."""
    r = run("predict", "--impl", "fla-kda@0.6.0", "--contract", "plain", "--seq", "168K", "--heads", "96")
    footer = next(line for line in r.stdout.splitlines() if "512-B blocks" in line)
    assert "allocated peak" not in r.stdout and "peak (allocated)" not in r.stdout
    assert "max_memory_allocated" in r.stdout and "max_memory_allocated" not in footer


OOM_SHAPE = ("--seq", "256K", "--heads", "128")     # fla-kda@0.6.0 on the H200: 281 GiB of blocks, 139.8 GiB there
HOPPER_3x8000 = ("--impl", "cudnn-kda-hopper-cuda@1.32.0", "--contract", "plain", "--mbs", "3", "--seq", "8000", "--heads", "96")


def test_a_measured_record_is_shown_as_validate_judges_it():
    """Steady-state replay 13.602 GiB vs the record's 13.631 GiB: the record was taken in the validator's process,
    whose replay (warmup leftovers included) gives 13.631 GiB to the byte, the +0 B validate reports."""
    from livebytes.validate.check.compare import compare
    from livebytes.validate.check.records import load_records
    d = json.loads(run("compare", *HOPPER_3x8000, "--json").stdout)["results"][0]
    by_name = {}
    for rec in load_records():
        by_name.setdefault(rec.path.name, []).append(rec)
    quoted = [m for m in d["measured"] if m["error_bytes"] == 0 and m["protocol_replay_bytes"] is not None]
    assert quoted and all(m["protocol_replay_bytes"] == m["peak_bytes"] for m in quoted)
    assert d["replay_peak_bytes"] < quoted[0]["protocol_replay_bytes"]      # 13.602 < 13.631 GiB: other histories
    for m in d["measured"]:
        (c,) = [compare(rec) for rec in by_name[m["record"]] if rec.peak_bytes == m["peak_bytes"]]
        assert (m["protocol_replay_bytes"], m["error_bytes"]) == (c.predicted, c.error_bytes)
    text = run("compare", *HOPPER_3x8000).stdout
    assert "= replay of the validator's process 13.631 GiB (+0 B)" in " ".join(text.replace("│", " ").split())


@pytest.mark.parametrize("args", [(), ("-h",), ("--help",), ("predict", "-h")])
def test_help_exits_0(args):
    r = run(*args)
    assert r.exit_code == 0 and "Usage" in r.stdout and "<bool>" not in r.stdout


def test_version():
    r = run("--version")
    assert r.exit_code == 0 and r.stdout.startswith("livebytes ")


def test_every_option_has_help_text():
    from typer.main import get_command
    group = get_command(app)
    missing = [f"{name} {p.opts[0]}" for name, cmd in group.commands.items() for p in cmd.params
               if not getattr(p, "help", None) and p.opts[0] not in ("--help",)]
    assert missing == []


def test_predict_quotes_the_boundary_probe_that_ran_the_case():
    """172,800 (report, warm, expandable segments) ran in run 12c; 172,700 never ran: no such line."""
    base = ["predict", "--impl", "fla-kda@0.6.0", "--gpu", "H200", "--heads", "96", "--dim", "128", "--contract", "report",
            "--alloc-conf", "expandable_segments:True", "--triton-cache", "warm", "--json"]
    ran = json.loads(CliRunner().invoke(app, base + ["--seq", "172800"]).stdout)["results"][0]["probed"]
    assert [(p["record"], p["fits"], p["after_warmup"], p["earlier_trials"]) for p in ran] == [
        ("h200_run12c_fla-kda-report_H96_expandable_warm_values.jsonl", True, True, 0)]
    assert json.loads(CliRunner().invoke(app, base + ["--seq", "172700"]).stdout)["results"][0]["probed"] == []


@pytest.mark.parametrize("layers,extra,quoted", [
    ("4", [], [("h200_run19c_fla-kda-layer_L4_H32_D128_default_cold_firstcall_answer.jsonl", False, "first_call")]),
    ("4", ["--checkpoint"], []),           # the probe ran the stack without checkpointing: another case
    ("2", [], []),
])
def test_predict_quotes_a_layer_probe_only_for_its_own_stack(layers, extra, quoted):
    """Run 19c: 4 KDA layers (H32 D128 hidden 2304, conv 4, no checkpointing) ran out of memory at 239,232 in the first
    call; the probe's trials carry the kernel fields, its stack options are matched against the model's resolved ones."""
    result = CliRunner().invoke(app, ["predict", "--impl", "fla-kda-layer@0.6.0", "--seq", "239232", "--heads", "32",
                                      "--dim", "128", "--hidden", "2304", "--layers", layers, "--json", *extra])
    assert result.exit_code == 0, result.output
    probed = json.loads(result.stdout)["results"][0]["probed"]
    assert [(p["record"], p["fits"], p["phase"]) for p in probed] == quoted


def test_alloc_conf_with_budget_is_kept_because_it_changes_the_answer():
    """Not refused as 'no effect': expandable segments split blocks differently, so the replayed max_memory_allocated,
    and with it plan --budget's answer for kda_hopper_cuda, changes (142,227 -> 142,239 tokens); the assumed line names it."""
    base = ["plan", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--budget", "80GiB"]
    default, expandable = (json.loads(run(*base, *more, "--json").stdout)["results"][0]
                           for more in ((), ("--alloc-conf", "expandable_segments:True")))
    assert default["value"] != expandable["value"]
    assert (default["alloc_conf"], expandable["alloc_conf"]) == ("expandable_segments:False", "expandable_segments:True")
    assert "expandable_segments:True" in " ".join(run(*base, "--alloc-conf", "expandable_segments:True").stdout.split())


@pytest.mark.parametrize("args,phrase", [
    (("predict", "--impl", "fla-kda@0.6.0", *OOM_SHAPE), "with no memory limit: it runs out of memory"),
    (("predict", "--impl", "fla-kda@0.6.0", "--contract", "plain", "--no-recompute", *S8), "contract plain, recompute off"),
    # 85,017,493,504 B (run 39's H100: total_memory) / 2^30 = 79.179 GiB, labelled measured
    (("plan", "--impl", "fla-kda@0.6.0", "--gpu", "H100"), "device H100 79.179 GiB (measured)"),
    (("plan", "--impl", "fla-kda@0.6.0", "--gpu", "B200", "--budget", "80GiB"),
     "estimated: fla-kda@0.6.0: stack reservation: off the H200: the H200's frames used (sm90's compile), and the "
     "reservation rule (the limit for every resident thread, in 2 MiB pages) measured on the H200 only, its error on "
     "this GPU not measured (no process of this GPU committed)"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "4", "--no-recompute"), "recompute off"),
    (("timeline", "--impl", "fla-kda@0.6.0", *S8, "--contract", "plain"), "contract plain"),
    # 150,109,880,320 B measured / 2^30 = 139.801 GiB; the allocator and process terms predict names
    # and the Triton whose kernels' process memory counts: fla-kda@0.6.0's default, 3.6.0
    (("timeline", "--impl", "fla-kda@0.6.0", *S8), "expandable_segments:False, cold Triton 3.6.0 cache; device H200 "
                                                   "139.801 GiB (measured); process memory"),
    (("timeline", "--impl", HOPPER, *S8, "--alloc-conf", "expandable_segments:True"),
     "expandable_segments:True, no Triton kernels; device H200 139.801 GiB (measured)"),
    (("formula", "--impl", "fla-kda@0.6.0", "--no-recompute", "--no-groups"), "recompute off"),
    # GDN fwd+bwd's frames at H4/HV4 were never compiled (run 33 compiled H4/HV8): estimated from the D128 cases
    (("predict", "--impl", "fla-gdn@0.6.0", *S8), "estimated: stack reservation: stack frames not measured or derived "
                                                  "for fla-gdn at head_dim=128 num_heads=4"),
    (("predict", "--impl", "fla-gdn@0.6.0", *S8), "Triton 3.9.0 kernels, its bundled legacy ptxas"),
])
def test_every_answer_names_what_it_assumed(args, phrase):
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert phrase in " ".join(r.stdout.split()), r.stdout


@pytest.mark.parametrize("args,phrase", [
    (("compare", "--impl", "fla-kda@0.6.0", "--impl", "cudnn-kda-hopper-cuda@1.32.0", *S8), "differ in contract"),
    (("compare", "--impl", "fla-kda@0.6.0", "--impl", "fla-kda@07b80f27", *S8), "differ in device"),
    (("compare", "--impl", "fla-kda@0.6.0", "--impl", "fla-kda-fwd@0.6.0", *S8), "differ in phase"),
    # 150,109,880,320 B measured / 2^30 = 139.801 GiB < 200 GiB
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", "200GiB", "--gpu", "H200"), "is above the H200's 139.801 GiB"),
])
def test_unlike_answers_warn_in_one_line(args, phrase):
    r = run(*args)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 0 and len(lines) == 1 and lines[0].startswith("warning: ") and phrase in lines[0], r.stderr


def test_like_for_like_compare_does_not_warn():
    r = run("compare", "--impl", "fla-kda@0.6.0", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--contract", "plain", *S8)
    assert r.exit_code == 0 and r.stderr == ""


# ----------------------------------------------------------------------------------- review of issue 19, round 2
def test_plan_refuses_the_solved_dimension_but_takes_the_held_ones():
    """--heads with --solve seq is held (kept); --heads with --solve heads would be replaced by the answer (refused)."""
    held = json.loads(run("plan", "--impl", HOPPER, "--heads", "32", "--json").stdout)["results"][0]
    assert held["shape"]["num_heads"] == 32
    assert run("plan", "--impl", HOPPER, "--solve", "heads", "--heads", "32").exit_code == 2


def _timeline(tmp_path, out: str | None, *args):
    """timeline with the terminal view (None), a plot or a snapshot file, or --json."""
    more = [] if out is None else (["--json"] if out == "json" else ["--out", str(tmp_path / out)])
    return run("timeline", "--impl", "fla-kda@0.6.0", *args, *more)


@pytest.mark.parametrize("out", [None, "t.png", "t.pickle", "json"])
@pytest.mark.parametrize("shape,runs", [(OOM_SHAPE, False), (S8, True)])
def test_timeline_warns_when_the_device_runs_out_of_memory(tmp_path, out, shape, runs):
    """The verdict is predict's (``capacity.verdict``): one warning line for every output, the same in JSON."""
    r = _timeline(tmp_path, out, *shape)
    assert r.exit_code == 0, r.output
    predicted = json.loads(run("predict", "--impl", "fla-kda@0.6.0", *shape, "--json").stdout)["results"][0]
    assert predicted["fits"] is runs
    lines = [line for line in r.stderr.splitlines() if line.strip() and not line.startswith("wrote ")]
    if runs:
        assert lines == []
        return
    assert len(lines) == 1 and lines[0].startswith("warning: fla-kda@0.6.0 at batch_size=1, seq_len=256K, num_heads=128, head_dim=128 runs out of "
                                                   "memory on the H200"), r.stderr
    o = predicted["oom"]
    assert f"at {o['step']} allocating {o['buffer']}" in lines[0] and "no memory limit" in lines[0]
    if out == "json":
        data = json.loads(r.stdout)
        assert data["warnings"] == [lines[0][len("warning: "):]]
        assert data["results"][0]["oom"] == o and data["results"][0]["fits"] is False


HOPPER_EDGE = ("--seq", "165000", "--heads", "96")   # plan's largest seq at H96: 164,053 cold, more warm or expandable


@pytest.mark.parametrize("flags", [(), ("--triton-cache", "warm"), ("--alloc-conf", "expandable_segments:True")])
def test_timelines_verdict_takes_the_allocator_settings_predict_takes(tmp_path, flags):
    """Near the edge the allocator settings decide the verdict: timeline's is predict's with the same flags, and its
    JSON names them."""
    d = json.loads(_timeline(tmp_path, "json", *HOPPER_EDGE, *flags).stdout)
    p = json.loads(run("predict", "--impl", "fla-kda@0.6.0", *HOPPER_EDGE, *flags, "--json").stdout)["results"][0]
    r = d["results"][0]
    assert (r["fits"], r["oom"], r["alloc_conf"], r["triton_cache"]) == (p["fits"], p["oom"], p["alloc_conf"], p["triton_cache"])
    assert r["process_memory"] == p["process_memory"] and r["device_memory"] == p["device_memory"]
    assert (d["warnings"] == []) is r["fits"]


def test_the_allocator_settings_change_timelines_verdict_at_the_edge(tmp_path):
    """Cold, the default, runs out of memory at 165,000 tokens; a warm cache (no autotuning buffers, less stack)
    runs it: a test of the flags above that can fail."""
    fits = [json.loads(_timeline(tmp_path, "json", *HOPPER_EDGE, *flags).stdout)["results"][0]["fits"]
            for flags in ((), ("--triton-cache", "warm"))]
    assert fits == [False, True]


def _wide(monkeypatch, *args) -> str:
    """The command's stdout at 250 columns, table borders and runs of spaces collapsed."""
    import io
    import re

    from rich.console import Console

    from livebytes.cli import render
    console = Console(width=250, file=io.StringIO(), color_system=None, force_terminal=False)
    monkeypatch.setattr(render, "console", console)
    r = run(*args)
    assert r.exit_code == 0, r.output
    return " ".join(re.sub(r"[│┃]", " ", console.file.getvalue() + r.stdout).split())


@pytest.mark.parametrize("shape,unbounded", [(OOM_SHAPE, True), (S8, False)])
def test_predict_labels_every_unbounded_figure(monkeypatch, shape, unbounded):
    """Out of memory, the allocated peak, the reserved peak, the device need and the table's peaks are those of a
    device with no memory limit, each said so; a shape that runs has no such label."""
    from livebytes.cli.render import g
    text = _wide(monkeypatch, "predict", "--impl", "fla-kda@0.6.0", *shape)
    r = json.loads(run("predict", "--impl", "fla-kda@0.6.0", *shape, "--json").stdout)["results"][0]
    assert r["peaks_unbounded"] is unbounded
    labelled = [f"max_memory_allocated {g(r['allocated_peak_bytes'])} GiB (fresh process, first call included; with no "
                "memory limit: it runs out of memory before this)",
                f"reserved peak {g(r['reserved_peak_bytes'])} GiB (with no memory limit)",
                f"device need {g(r['device_need_bytes'])} GiB (with no memory limit) of",
                "these peaks are with no memory limit: it runs out of memory before them"]
    assert [phrase in text for phrase in labelled] == [unbounded] * 4, text
    assert ("with no memory limit" in text) is unbounded


@pytest.mark.parametrize("shape,unbounded", [(OOM_SHAPE, True), (S8, False)])
def test_compare_labels_every_unbounded_figure(monkeypatch, shape, unbounded):
    """Each column's block peak and steady-state replay carry the label when its verdict is out of memory, and its
    verdict line says so."""
    from livebytes.cli.render import g
    args = ("compare", "--impl", "fla-kda@0.6.0", "--impl", HOPPER, "--contract", "plain", *shape)
    text = _wide(monkeypatch, *args)
    results = json.loads(run(*args, "--json").stdout)["results"]
    assert [r["peaks_unbounded"] for r in results] == [unbounded] * 2
    for r in results:
        for figure in (r["peak_bytes"], r["replay_peak_bytes"]):
            assert (f"{g(figure)} GiB (with no memory limit)" in text) is unbounded, g(figure)
    assert text.count("its peaks above are with no memory limit: it runs out of memory before them") == 2 * unbounded


def test_validate_summary_counts_are_named_as_counts():
    """``passed`` is a bool everywhere; the summary's counts are ``*_count``: measured rows that passed, rows that
    failed, out-of-memory rows (a predicted out-of-memory passes but counts only there)."""
    d = json.loads(run("validate", "--from-records", "all", "--json").stdout)
    rows, summary = d["results"], d["summary"]
    assert set(summary) == {"passed_count", "failed_count", "out_of_memory_count", "device_seconds"}
    assert summary["passed_count"] == sum(r["passed"] and r["measured_bytes"] is not None for r in rows)
    assert summary["failed_count"] == sum(not r["passed"] for r in rows) and d["passed"] is (summary["failed_count"] == 0)
    assert summary["out_of_memory_count"] == sum(r["measured_bytes"] is None for r in rows) > 0
    passed_ooms = sum(r["passed"] and r["measured_bytes"] is None for r in rows)
    assert summary["passed_count"] + summary["failed_count"] + passed_ooms == len(rows)   # each row counted once


@pytest.mark.parametrize("snapshot", [
    {"segments": []},                                                        # nothing allocated
    {"segments": [], "device_traces": [[]]},                                 # an empty trace
    {"segments": [{"address": 0, "blocks": [{"size": 512, "state": "inactive"}]}]},   # cached, nothing live
])
@pytest.mark.parametrize("at", ["peak", "snapshot"])
def test_explain_on_a_snapshot_with_no_live_block_is_one_error(tmp_path, snapshot, at):
    import pickle
    target = tmp_path / "empty.pickle"
    target.write_bytes(pickle.dumps(snapshot))
    r = run("explain", str(target), "--impl", "fla-kda@0.6.0", *S8, "--at", at)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 1 and r.stdout == ""
    assert len(lines) == 1 and lines[0].startswith(f"error: {target}: no live block") and "nothing to explain" in lines[0]


@pytest.mark.parametrize("seqs,rows", [("8K", 1), ("8K,16K", 2)])      # heads 4: one row per seq
def test_sweep_counts_the_rows_it_wrote(tmp_path, seqs, rows):
    target = tmp_path / "grid.csv"
    r = run("sweep", "--impl", "fla-kda@0.6.0", "--seq", seqs, "--heads", "4", "--out", str(target))
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == f"wrote {rows} row{'s' * (rows > 1)} to {target}"
    assert len(target.read_text().splitlines()) == 1 + rows


def test_sweep_takes_the_stack_and_agrees_with_predict():
    """sweep builds the layer model for --hidden/--layers (one stack for the grid): its peak at 64K is predict's."""
    stack = ["--heads", "32", "--hidden", "2304", "--layers", "4"]
    swept = json.loads(run("sweep", "--impl", "fla-kda-layer@0.6.0", "--seq", "64K", *stack, "--json").stdout)["results"]
    one = json.loads(run("predict", "--impl", "fla-kda-layer@0.6.0", "--seq", "64K", *stack, "--json").stdout)["results"][0]
    assert [(r["shape"]["num_hidden_layers"], r["shape"]["hidden_size"], r["peak_bytes"]) for r in swept] == [
        (4, 2304, one["peak_bytes"])]


def test_plan_solving_layers_names_the_answers_depth_and_the_held_shape():
    """--solve layers: JSON options carry the answer's depth (the searched model was built at 1 layer), and the table's
    caption names the shape held at the answer (a flag left out shows as its default: here head_dim 128). At the
    default H96 the layer's frames are derived (run 36: its largest 12,408 B, limit 12,416 B): one layer of 128K runs, two
    do not."""
    args = ["plan", "--impl", "fla-kda-layer@0.6.0", "--solve", "layers", "--seq", "128K", "--hidden", "2304"]
    (r,) = json.loads(run(*args, "--heads", "32", "--json").stdout)["results"]
    assert r["options"]["layers"] == r["shape"]["num_hidden_layers"] == r["value"] == 8
    text = " ".join(run(*args, "--heads", "32").stdout.split())
    assert "fla-kda-layer@0.6.0 at its answer: batch_size=1, seq_len=128K, num_heads=32, head_dim=128, hidden_size=2304" in text
    (h96,) = json.loads(run(*args, "--json").stdout)["results"]
    assert (h96["value"], h96["next_value"], h96["at_next"]["fits"]) == (1, 2, False)
    assert h96["process_memory"]["figures"]["stack"]["status"].startswith("derived")


@pytest.mark.parametrize("args, words", [
    # run 20b's failure: the process's second call, the boundary probe's steady_1
    (["--impl", "fla-kda-layer@0.6.0", "--seq", "234773", "--heads", "32", "--hidden", "2304", "--layers", "4"],
     "OUT OF MEMORY in steady call 1 (the process's call 2)"),
    # one token above plan's GDN answer at H32 D128 (849,408): the first call's L2-flush buffer, 268,435,456 B tried,
    # 257,032,192 B free (its modules estimated: their high end, 2 MiB, counted): 0.25 and 0.24 GiB, 10.9 MiB apart,
    # over 0.01 GiB (10.24 MiB), so the GiB figures tell the shortfall (render._short, below, says it in MiB under that)
    (["--impl", "fla-gdn@0.6.0", "--seq", "849409", "--heads", "32", "--dim", "128"],
     "tried to allocate 0.25 GiB; 133.56 GiB allocated, 0.13 GiB reserved but unallocated, 0.24 GiB free (process"),
])
def test_an_out_of_memory_verdict_says_which_call_and_how_short(args, words):
    assert words in " ".join(run("predict", *args).stdout.split())


@pytest.mark.parametrize("tried,free,said", [
    (268_435_456, 259_129_344, " (8.9 MiB short)"),     # 9,306,112 B: 0.25 and 0.24 GiB, under 0.01 GiB apart
    (268_435_456, 257_032_192, ""),                     # 11,403,264 B: over 0.01 GiB (10,737,418 B), the GiB figures tell it
    (268_435_456, 268_435_456, "")])                    # nothing short
def test_a_shortfall_under_a_hundredth_of_a_gib_is_said_in_mib(tried, free, said):
    assert render._short({"tried_bytes": tried, "free_bytes": free}) == said


# ------------------------------------------------------------------------------ the HF/FLA flags and their aliases

# (HF/FLA flag, the old short flag kept as its alias, a value): every shape flag of issue 34's one vocabulary
HF_FLAGS = [("--seq-len", "--seq", "8K"), ("--batch-size", "--mbs", "2"), ("--num-heads", "--heads", "16"),
            ("--head-dim", "--dim", "64"), ("--num-v-heads", "--v-heads", "32"), ("--hidden-size", "--hidden", "2304"),
            ("--num-hidden-layers", "--layers", "2")]


def test_every_hf_flag_reads_as_its_alias():
    """A layer model takes every shape flag: the HF names and the old short names give the one answer."""
    def answer(names):
        args = [a for name, (_, _, value) in zip(names, HF_FLAGS) for a in (name, value)]
        r = run("predict", "--impl", "fla-kda-layer@0.6.0", *args, "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["results"][0]
    hf, old = answer([f[0] for f in HF_FLAGS]), answer([f[1] for f in HF_FLAGS])
    assert hf == old and hf["peak_bytes"] > 0


@pytest.mark.parametrize("command", ["predict", "compare", "timeline", "plan", "sweep", "explain", "diff", "formula"])
def test_the_help_names_the_hf_flag_and_lists_its_alias(command):
    """--help lists each option by its HF name, its old short name at the end of its help ("alias: --seq")."""
    text = " ".join(run(command, "-h").stdout.replace("│", " ").split())
    wanted = [(hf, old) for hf, old, _ in HF_FLAGS if command != "formula" or hf in ("--hidden-size", "--num-hidden-layers")]
    for hf, old in wanted:
        assert f"{hf} " in text and f"alias: {old})" in text, (hf, old)
        assert f"{hf},{old}" not in text      # not typer's own listing, whose names column overflows 80 columns


@pytest.mark.parametrize("expand_v,head_v_dim", [("2", 256), ("0.5", 64), ("1.5", 192)])
def test_expand_v_sets_the_value_head_dim_as_fla(expand_v, head_v_dim):
    """FLA's layers: head_v_dim = int(head_dim * expand_v); 128 x 2 = 256, 128 x 0.5 = 64, 128 x 1.5 = 192; a value
    head twice as wide holds more bytes than a square one."""
    args = ["predict", "--impl", "fla-gdn-layer@0.6.0", "--seq-len", "8K", "--num-heads", "16", "--json"]
    wide = json.loads(run(*args, "--expand-v", expand_v).stdout)["results"][0]
    square = json.loads(run(*args).stdout)["results"][0]
    assert wide["shape"]["head_v_dim"] == head_v_dim
    assert (wide["peak_bytes"] > square["peak_bytes"]) == (head_v_dim > 128)


def test_formula_names_its_symbols_by_the_shape_keys():
    """formula keeps the math symbols; its output says which shape key each one is (S the --seq-len, ...)."""
    text = " ".join(run("formula", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--no-groups").stdout.split())
    assert ("in S=seq_len, MBS=batch_size, H=num_heads, HV=num_v_heads, DK=head_dim, DV=head_v_dim (HV=num_heads and "
            "DV=head_dim unless given)") in text


GDN_LAYER_MEASURE = ("livebytes process measure --impl fla-gdn-layer@0.6.0 --head-dim 128 --num-heads 32 --triton 3.9.0 "
                     "--seq-len 8192 --hidden-size 2048 --num-hidden-layers 1 --conv-size 4")
KDA_MEASURE = "livebytes process measure --impl fla-kda@0.6.0 --contract report --head-dim 128 --num-heads 32 --triton 3.6.0"


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
@pytest.mark.parametrize("args, command", [
    # predict's verdict lines
    (["predict", "--impl", "fla-gdn-layer@0.6.0", "--seq-len", "8192", "--num-heads", "32", "--head-dim", "128",
      "--triton", "3.9.0"], GDN_LAYER_MEASURE),
    # a table's caption, drawn (wide) or stacked (narrow)
    (["sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K..16K", "--heads", "32,96", "--gpu", "H200"],
     f"{KDA_MEASURE} --seq-len 16384")])
def test_a_suggested_command_is_one_line_whatever_the_width(args, command, width, monkeypatch, tmp_path):
    """An unbounded label ends in the command that measures the case; it was wrapped at the console's (or caption's)
    width like the rest of its line, so a copy pasted several shell lines. It is now a line of its own, whole, after
    its line's colon."""
    from tests.test_golden import rendered
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path))         # nothing measured here: the label is unbounded
    lines = [line.rstrip() for line in rendered(monkeypatch, args, width).splitlines()]
    assert command in lines, (width, [line for line in lines if line.startswith("livebytes")])
    assert lines[lines.index(command) - 1].endswith("(minutes):")


@pytest.mark.parametrize("line, expected", [
    ("unbounded: modules: measure it (minutes): livebytes process measure --impl k --seq-len 8192",
     ["unbounded: modules: measure it (minutes):", "livebytes process measure --impl k --seq-len 8192"]),
    ("bounded: stack: held by CUDA's limit", ["bounded: stack: held by CUDA's limit"]),
    ("a: livebytes frames list said: livebytes frames derive --impl k",
     ["a: livebytes frames list said:", "livebytes frames derive --impl k"])])      # the last ': livebytes '
def test_only_the_text_after_the_last_livebytes_is_the_command(line, expected):
    from livebytes.cli import render
    lines = render.with_commands(line)
    assert [t.plain for t in lines] == expected
    assert [bool(t.no_wrap) for t in lines] == [False] * (len(expected) - 1) + [len(expected) > 1]


def _api_names() -> list[str]:
    """Every ``livebytes.NAME...`` docs/api.md writes (its title: ``import livebytes``)."""
    import re
    text = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
    return sorted(set(re.findall(r"\blivebytes(?:\.[A-Za-z_]\w*)+", text)))


def test_docs_api_names_modules():
    """The scan below finds the documented submodules (a doc that stopped naming them would test nothing)."""
    assert {"livebytes.process", "livebytes.frames", "livebytes.calls"} <= set(_api_names())


@pytest.mark.parametrize("name", _api_names())
def test_every_name_docs_api_writes_is_reachable_after_import_livebytes(name):
    """``import livebytes`` then ``livebytes.process`` raised AttributeError (only ``import livebytes.process``
    worked); each name docs/api.md writes resolves from ``import livebytes`` alone, in a fresh interpreter (in this one
    another test may have imported the submodule, which sets the attribute anyway)."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", f"import livebytes; {name}; print('ok')"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-300:]


def test_import_livebytes_imports_no_submodule():
    """The submodules are attributes imported on first use: ``import livebytes`` itself stays cheap."""
    import subprocess
    import sys
    code = ("import sys, livebytes; print(sorted(m for m in sys.modules if m.startswith('livebytes.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr[-300:]

"""The command line: thin commands, one-line domain errors with exit code 1, machine-readable JSON."""
import json

import pytest
from livebytes.cli.app import app
from typer.testing import CliRunner

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_predict_json_has_the_documented_fields():
    r = run("predict", "--impl", "fla-kda@07b80f27", "--mbs", "1", "--seq", "128K", "--heads", "96", "--dim", "128", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["impl"] == "fla-kda@07b80f27"
    assert d["shape"] == {"mbs": 1, "seq": 131072, "heads": 96, "dim": 128}
    assert isinstance(d["peak_bytes"], int) and d["peak_step"] == "bwd.intra_db_sum"
    assert sum(d["groups"].values()) == d["peak_bytes"]
    assert d["measured"][0]["origin"] == "published"          # the report's 99.422 GiB


def test_compare_prints_both_report_figures():
    r = run("compare", "--impl", "fla-kda@07b80f27", "--impl", "cudnn-kda-frost@e0b4ce98",
            "--mbs", "1", "--seq", "128K", "--heads", "96", "--dim", "128", "--json")
    assert r.exit_code == 0, r.output
    fla, frost = json.loads(r.output)
    assert round(fla["peak_gib"], 3) == 99.422
    assert round(frost["peak_gib"], 2) == 54.06                # report: 54.063
    assert frost["reduction_vs_first"] == pytest.approx(0.456, abs=0.001)


def test_unmeasured_shapes_are_labelled_predicted():
    r = run("predict", "--impl", "fla-kda@0.6.0", "--seq", "256K", "--heads", "128", "--json")
    d = json.loads(r.output)
    assert d["status"] == "predicted (never measured)" and d["measured"] == []
    assert d["fits"]["fits"] is False and d["fits"]["gpu"] == "H200"


def test_models_lists_the_registry():
    r = run("models", "--json")
    keys = {m["key"] for m in json.loads(r.output)}
    assert {"fla-kda@07b80f27", "fla-kda@0.6.0", "cudnn-kda-frost@e0b4ce98", "cudnn-kda-hopper-cuda@1.32.0"} <= keys


@pytest.mark.parametrize("args,needle", [
    (("--mbs", "0", "--seq", "8K", "--heads", "4"), "MBS: must be positive"),
    (("--mbs", "-1", "--seq", "8K", "--heads", "4"), "MBS"),
    (("--seq", "eight", "--heads", "4"), "sequence"),
    (("--seq", "8K", "--heads", "4", "--dim", "512"), "key head dim <= 256"),
    (("--seq", "8K", "--heads", "4", "--contract", "fancy"), "contract"),
])
def test_bad_input_is_one_line_and_exit_1(args, needle):
    r = run("predict", "--impl", "fla-kda@0.6.0", *args)
    assert r.exit_code == 1
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.output


def test_unknown_implementation_and_refused_device():
    r = run("predict", "--impl", "nope@1", "--seq", "8K", "--heads", "4")
    assert r.exit_code == 1 and "unknown implementation" in r.output
    r = run("predict", "--impl", "cudnn-kda-frost@1.32.0", "--seq", "8K", "--heads", "4", "--gpu", "H200")
    assert r.exit_code == 1 and "Blackwell-only" in r.output


def test_an_engine_refusal_carries_the_engines_reason():
    r = run("predict", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--seq", "8K", "--heads", "4", "--contract", "report")
    assert r.exit_code == 1 and "safe_gate/a_log/dt_bias are unsupported" in r.output
    r = run("predict", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--seq", "8K", "--heads", "4", "--dim", "64")
    assert r.exit_code == 1 and "head dim 128 only" in r.output


def test_validate_without_a_gpu_says_so_in_one_line():
    r = run("validate", "--impl", "fla-kda@0.6.0", "--shapes", "1,8K,96,128")
    assert r.exit_code == 1
    assert "cannot validate fla-kda@0.6.0 here" in r.output


def test_validate_from_records_rechecks_committed_measurements():
    r = run("validate", "--from-records", "h200_run5_fla-core-0.6.0.json")
    assert r.exit_code == 0, r.output
    assert "FAIL" not in r.output and r.output.count("│ pass") == 5
    assert r.output.strip().splitlines()[-1] == "5 passed, 0 failed, 0 out of memory"


def test_validate_from_records_judges_a_tampered_copy_on_its_own_figures(tmp_path):
    """A copy of a committed file with every peak set to 1 FAILs: the file is loaded, not its name matched."""
    import json

    from livebytes.validate.records import RECORDS_DIR
    data = json.loads((RECORDS_DIR / "h200_run5_fla-core-0.6.0.json").read_text())
    for rec in data["records"]:
        rec["peak_bytes"], rec["peaks_bytes"] = 1, [1, 1, 1]
    copy = tmp_path / "h200_run5_fla-core-0.6.0.json"
    copy.write_text(json.dumps(data))
    r = run("validate", "--from-records", str(copy))
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines()[-1] == "0 passed, 5 failed, 0 out of memory"


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
    assert r.exit_code == 1 and message in r.output and len(r.output.strip().splitlines()) == 1

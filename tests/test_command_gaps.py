"""Issue 34, point 3: the gaps in the commands, each closed by a flag that works (here) or refused in one line with its
reason (the fixtures in tests/test_bad_inputs.py's BAD_COMMANDS)."""
import json
import re
from dataclasses import replace

import pytest
from typer.testing import CliRunner

import livebytes
from livebytes.choose import OPTION_FLAGS, SHAPE_SET_OPTIONS
from livebytes.cli.app import app

KDA = ("--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "4")


def run(*args: str, **kw):
    return CliRunner().invoke(app, list(args), **kw)


def document(*args: str) -> dict:
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ------------------------------------------------------------------------------ sweep --v-heads (Qwen3-Next's 16/32)

def test_sweep_takes_value_heads_each_point_as_predict_has_it():
    """16 q/k heads with 32 value heads is grouped value attention (2 value heads per head: the GVA path); 32 with 32 is
    not. Every point is predict's answer at the same flags."""
    rows = document("sweep", "--impl", "fla-gdn@0.6.0", "--seq", "8K,16K", "--heads", "16,32", "--v-heads", "32")["results"]
    assert [(r["shape"]["seq_len"], r["shape"]["num_heads"], r["shape"]["num_v_heads"]) for r in rows] == [
        (8192, 16, 32), (8192, 32, 32), (16384, 16, 32), (16384, 32, 32)]
    assert [r["options"]["gva"] for r in rows] == [True, False, True, False]
    for r in rows:
        s = r["shape"]
        (p,) = document("predict", "--impl", "fla-gdn@0.6.0", "--seq", str(s["seq_len"]), "--heads", str(s["num_heads"]),
                        "--v-heads", "32")["results"]
        assert (r["peak_bytes"], r["fits"], r["device_need_bytes"]) == (p["peak_bytes"], p["fits"], p["device_need_bytes"])
    assert rows[0]["peak_bytes"] != rows[1]["peak_bytes"]


def test_sweep_value_heads_in_the_csv_and_the_python_api(tmp_path):
    target = tmp_path / "grid.csv"
    r = run("sweep", "--impl", "fla-gdn@0.6.0", "--seq", "8K", "--heads", "16", "--v-heads", "32,64", "--csv", str(target))
    assert r.exit_code == 0, r.output
    lines = target.read_text().splitlines()
    assert [line.split(",")[9:12] for line in lines] == [["num_heads", "num_v_heads", "head_dim"], ["16", "32", "128"],
                                                         ["16", "64", "128"]]     # the CSV's columns: the JSON's keys
    cli = document("sweep", "--impl", "fla-gdn@0.6.0", "--seq", "8K", "--heads", "16", "--v-heads", "32,64")
    api = livebytes.sweep("fla-gdn@0.6.0", seq_len="8K", num_heads=16, num_v_heads=[32, 64])
    assert api.to_dict() == cli


# ------------------------------------------------------------------------------ sweep --expand-v (FLA's value head dim)

def test_sweep_takes_expand_v_as_flas_layers_define_it():
    """head_v_dim = head_dim * expand_v (FLA's layers: ``self.head_v_dim = int(self.head_dim * expand_v)``). fla-kda at
    8K tokens, 16 heads, head_dim 128: expand_v 2 makes head_v_dim 256. Every [T, HV, DV] bf16 tensor live at the peak
    (v, dO, o, u, v_new, dv) grows by 8,192 x 16 x 128 x 2 B = 33,554,432 B, and h and dh, [NT = 8,192 / 64 = 128, HV,
    DK, DV] bf16, by 128 x 16 x 128 x 128 x 2 B = 67,108,864 B each: 6 x 33,554,432 + 2 x 67,108,864 = 335,544,320 B
    more at the same peak step. Each point is predict's answer at --expand-v."""
    rows = document("sweep", *KDA[:2], "--seq", "8K", "--heads", "16", "--expand-v", "1,2")["results"]
    assert [r["shape"]["head_v_dim"] for r in rows] == [128, 256]
    assert rows[1]["peak_bytes"] - rows[0]["peak_bytes"] == 6 * 33_554_432 + 2 * 67_108_864 == 335_544_320
    for r, ratio in zip(rows, ("1", "2")):
        (p,) = document("predict", *KDA[:2], "--seq", "8K", "--heads", "16", "--expand-v", ratio)["results"]
        assert (r["peak_bytes"], r["fits"], r["device_need_bytes"]) == (p["peak_bytes"], p["fits"], p["device_need_bytes"])
    (p,) = document("predict", *KDA[:2], "--seq", "8K", "--heads", "16", "--expand-v", "2")["results"]
    h = next(b for b in p["buffers_at_peak"] if b["name"] == "h")
    assert (h["shape"], h["allocated_bytes"]) == ("[MBS*ceiling(S/64), HV, DK, DV]", 128 * 16 * 128 * 256 * 2)


def test_sweep_expand_v_is_a_list_or_a_doubling_range_per_head_dim():
    """--expand-v 0.5..2 is 0.5, 1, 2 at each head dim: head_dim 64 gives head_v_dim 32, 64, 128 (the last varies
    fastest, after the head dims)."""
    rows = document("sweep", *KDA[:2], "--seq", "8K", "--heads", "4", "--head-dim", "64,128", "--expand-v", "0.5..2")
    assert [(r["shape"]["head_dim"], r["shape"]["head_v_dim"]) for r in rows["results"]] == [
        (64, 32), (64, 64), (64, 128), (128, 64), (128, 128), (128, 256)]


def test_sweep_expand_v_in_the_csv_table_and_the_python_api(tmp_path):
    target = tmp_path / "grid.csv"
    r = run("sweep", *KDA[:2], "--seq", "8K", "--heads", "16", "--expand-v", "1,2", "--csv", str(target))
    assert r.exit_code == 0, r.output
    lines = target.read_text().splitlines()
    assert [line.split(",")[11:13] for line in lines] == [["head_dim", "head_v_dim"], ["128", "128"], ["128", "256"]]
    cli = document("sweep", *KDA[:2], "--seq", "8K", "--heads", "16", "--expand-v", "1,2")
    assert livebytes.sweep("fla-kda@0.6.0", seq_len="8K", num_heads=16, expand_v=[1, 2]).to_dict() == cli
    assert livebytes.sweep("fla-kda@0.6.0", seq_len="8K", num_heads=16, expand_v="1..2").to_dict() == cli
    table = " ".join(run("sweep", *KDA[:2], "--seq", "8K", "--heads", "16", "--expand-v", "1,2").stdout.split())
    # the axis that varies is a column; what the grid holds, its title
    assert "sweep at batch_size=1, seq_len=8K, num_heads=16, head_dim=128:" in table and "┃ head_v_dim ┃" in table


# ------------------------------------------------------------------------------ formula and diff: the layer flags

def test_formula_takes_the_layer_flags():
    """The closed form of the stack the flags describe: the library's own of that model."""
    from livebytes.estimator.planning import closed_form
    from livebytes.estimator.registry import get_model
    one = document("formula", "--impl", "fla-kda-layer@0.6.0", "--no-groups")["results"][0]
    two = document("formula", "--impl", "fla-kda-layer@0.6.0", "--layers", "2", "--hidden", "1024", "--no-groups")
    (two,) = two["results"]
    assert (one["options"]["layers"], two["options"]["layers"], two["options"]["hidden"]) == (1, 2, 1024)
    expr, _ = closed_form(get_model("fla-kda-layer@0.6.0", hidden=1024, layers=2))
    assert two["peak_bytes_expression"] == str(expr) != one["peak_bytes_expression"]


@pytest.fixture
def layer_twin(monkeypatch):
    """A second registered version of fla-kda-layer (its own builder): diff compares two models of one implementation,
    and the registry holds one version of each layer model."""
    from livebytes.estimator import registry
    key = "fla-kda-layer@0.6.0"
    registry._builder(key)                      # the builders loaded
    twin = replace(registry.spec(key), key="fla-kda-layer@twin")
    monkeypatch.setitem(registry._REGISTRY, twin.key, twin)
    return key, twin.key


def test_diff_builds_both_layer_models_at_the_layer_flags(layer_twin):
    key, twin = layer_twin
    data = document("diff", "--impl", key, "--impl", twin, "--layers", "2", "--checkpoint", "--seq", "8K", "--heads", "16")
    assert data["shape"] == {"batch_size": 1, "seq_len": 8192, "num_heads": 16, "head_dim": 128, "num_hidden_layers": 2,
                             "checkpoint": True}
    assert [(r["options"]["layers"], r["options"]["checkpoint"]) for r in data["results"]] == [(2, True), (2, True)]
    (p,) = document("predict", "--impl", key, "--seq", "8K", "--heads", "16", "--layers", "2", "--checkpoint")["results"]
    assert data["changes"] == [] and [r["peak_bytes"] for r in data["results"]] == [p["peak_bytes"]] * 2
    without_shape = document("diff", "--impl", key, "--impl", twin, "--layers", "3")
    assert without_shape["shape"] is None and [r["options"]["layers"] for r in without_shape["results"]] == [3, 3]


# ------------------------------------------------------------------------------ models: every option has its setter

def test_every_option_models_lists_is_set_by_a_flag_or_by_the_shape():
    listed = {(m["impl"], name) for m in document("models")["results"] for name in m["allowed_options"]}
    assert {name for _, name in listed} >= {"gva", "cp_rank"}
    assert [(k, n) for k, n in listed if n not in OPTION_FLAGS and n not in SHAPE_SET_OPTIONS] == []


CP4 = ("--impl", "fla-kda-cp@0.6.0", "--cp", "4", "--seq", "8K", "--heads", "16")


@pytest.mark.parametrize("flags,option,value", [
    (CP4, "cp_rank", "first"),                                   # the default
    ((*CP4, "--cp-rank", "middle"), "cp_rank", "middle"),
    ((*CP4, "--cp-rank", "LAST"), "cp_rank", "last"),             # any case, as --gpu
    (("--impl", "fla-gdn@0.6.0", "--seq", "8K", "--heads", "16", "--v-heads", "32"), "gva", True),
    (("--impl", "fla-gdn@0.6.0", "--seq", "8K", "--heads", "16"), "gva", False),
])
def test_each_listed_option_is_set_by_what_models_names(flags, option, value):
    (r,) = document("predict", *flags)["results"]
    assert r["options"][option] == value


def test_the_python_apis_cp_rank_is_the_flags():
    cli = document("predict", *CP4, "--cp-rank", "last")["results"][0]
    assert livebytes.predict("fla-kda-cp@0.6.0", seq_len="8K", num_heads=16, cp=4, cp_rank="last").to_dict() == cli


def test_a_word_flag_reads_in_any_case_as_gpu_does():
    lower = document("predict", *KDA, "--gpu", "h200", "--triton-cache", "warm", "--contract", "plain")
    upper = document("predict", *KDA, "--gpu", "H200", "--triton-cache", "WARM", "--contract", "Plain")
    assert upper == lower and lower["results"][0]["triton_cache"] == "warm"


# ------------------------------------------------------------------------------ validate --impl with --from-records

def test_validate_impl_with_from_records_says_what_it_leaves_out():
    from livebytes.validate.check.records import records_from
    measured = [r for r in records_from("all") if r.origin == "measured"]
    mine = [r for r in measured if r.impl == "cudnn-kda-hopper@1.32.0"]
    assert 0 < len(mine) < len(measured)
    r = run("validate", "--from-records", "all", "--impl", "cudnn-kda-hopper@1.32.0", "--json")
    data = json.loads(r.stdout)
    line = (f"--impl cudnn-kda-hopper@1.32.0: re-checking its {len(mine)} of the {len(measured)} measured records in "
            f"all; the other {len(measured) - len(mine)} are other models'")
    assert len(data["results"]) == len(mine) and data["warnings"] == [line] and r.stderr == f"warning: {line}\n"


# ------------------------------------------------------------------------------ what the help did not say

def help_text(command: str) -> str:
    out = run(command, "-h", terminal_width=200).stdout
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split())


@pytest.mark.parametrize("command,phrase", [
    ("validate", "auto (default: warm when such a file is committed, else cold)"),
    ("validate", "with --from-records: re-check only its records"),
    ("payload", "(--T: the payload model's T, docs/payload.md)"),
    ("payload", "(--d: the payload model's d)"),
    ("payload", "(--dv: the payload model's dv)"),
    ("sweep", "--v-heads"),
    ("formula", "--layers"),
    ("diff", "--checkpoint"),
    ("predict", "--cp-rank"),
])
def test_the_help_says_it(monkeypatch, command, phrase):
    monkeypatch.setenv("COLUMNS", "200")
    assert phrase in help_text(command)

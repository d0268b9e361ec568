"""``livebytes diff``: the buffer-level difference between two models of one implementation (estimator/diff.py),
checked on the two real version pairs by hand arithmetic, and the command's JSON, warnings and error lines."""
import json

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.cli.schema import DIFF_KINDS
from livebytes.estimator import Shape, get_model
from livebytes.estimator.diff import KINDS, diff_models
from livebytes.estimator.errors import LivebytesError

runner = CliRunner()


def test_the_cudnn_versions_differ_in_the_workspace_lifetime():
    shape = Shape(1, 247466, 96, 128)
    d = diff_models(get_model("cudnn-kda-hopper-cuda@1.32.0", "H200"), get_model("cudnn-kda-hopper-cuda@1.31.0", "H200"), shape)
    assert [(c.kind, c.allocation) for c in d.changes] == [("lives longer", "fwd_workspace"), ("lives longer", "bwd_workspace")]
    ws = d.changes[1]
    assert len(ws.regions) == 12 and ws.old.lifetime == "bwd.kernel -> bwd.kernel"
    assert ws.new.lifetime.startswith("held across calls by the library")
    assert ws.old_bytes == ws.new_bytes == 76_215_172_096          # the arena of tests/test_cudnn_versions.py, 71 GiB
    fwd = d.changes[0]
    assert (fwd.old.source.split()[0], fwd.new.source.split()[0]) == ("cudnn/linear_attention/ops/common.py:72",
                                                                      "cudnn/linear_attention/ops/common.py:50")
    assert d.renumbered == 13       # 7 inputs, o and 5 gradients: the same lines, numbered as 1.31.0's ops/kda.py is
    assert d.peak.new_peak - d.peak.old_peak == 512                 # the one-byte forward workspace's block
    # held after the call: 5 fp32 [1, 96, 128, 128] plan states = 5 * 6,291,456 = 31,457,280 B; 1.31.0 adds the arena
    # and the forward workspace's 512-byte block
    assert (d.peak.old_held, d.peak.new_held) == (31_457_280, 31_457_280 + 76_215_172_096 + 512)
    assert any("graph_workspace" in n for n in d.notes)


def test_the_fla_snapshot_differs_in_three_dtypes():
    """MBS 1 x 8K, H32: dq2 and dk2 [T, HV, K] fp32 -> bf16 save 2 * 8192 * 32 * 128 * 2 = 134,217,728 B and the
    sigmoid of beta [T, HV] 8192 * 32 * 2 = 524,288 B, all live at the peak: 134,742,016 B lower."""
    d = diff_models(get_model("fla-kda@0.6.0", "H200"), get_model("fla-kda@07b80f27", "H200"), Shape(1, 8192, 32, 128))
    assert {(c.kind, c.allocation, c.old.dtype, c.new.dtype) for c in d.changes} == {
        ("retyped", "beta_sigmoid", "fp32", "bf16"), ("retyped", "dq2", "fp32", "bf16"), ("retyped", "dk2", "fp32", "bf16")}
    assert d.peak.old_peak - d.peak.new_peak == 134_217_728 + 524_288 == 134_742_016


def test_a_model_against_itself_has_no_difference():
    m = get_model("fla-gdn@0.6.0", "H200")
    d = diff_models(m, m, Shape(1, 4096, 16, 128))
    assert d.changes == () and d.renumbered == 0 and d.peak.old_peak == d.peak.new_peak


def test_added_removed_resized_and_longer_are_told_apart():
    """Two toy models of one implementation: b drops x, adds z, doubles y and keeps w to the end of the call."""
    from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source, Step
    src = Source("lib.py", "f", 1, "t = torch.empty(n)")
    steps = (Step("a", "forward"), Step("b", "backward"))
    a = LifetimeModel("toy@1", "toy", "1", "", steps, (Buffer("x", Group.SCRATCH, (8,), "fp32", src, "a", "a"),
                                                       Buffer("y", Group.SCRATCH, (8,), "fp32", src, "a", "b"),
                                                       Buffer("w", Group.SCRATCH, (8,), "fp32", src, "a", "a")))
    b = LifetimeModel("toy@2", "toy", "2", "", steps, (Buffer("y", Group.SCRATCH, (16,), "fp32", src, "a", "b"),
                                                       Buffer("w", Group.SCRATCH, (8,), "fp32", src, "a", None),
                                                       Buffer("z", Group.SCRATCH, (8,), "int64", src, "b", "b")))
    kinds = {(c.kind, c.allocation) for c in diff_models(a, b).changes}
    assert kinds == {("removed", "x"), ("resized", "y"), ("lives longer", "w"), ("added", "z")}
    with pytest.raises(LivebytesError, match="one implementation"):
        diff_models(a, get_model("fla-gdn@0.6.0", "H200"))


def test_the_kinds_the_schema_allows_are_the_library_s():
    assert DIFF_KINDS == KINDS


def test_the_command_json_and_its_errors():
    r = runner.invoke(app, ["diff", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--impl", "cudnn-kda-hopper-cuda@1.31.0",
                            "--seq", "247466", "--heads", "96", "--json"])
    assert r.exit_code == 0 and r.stderr == "", r.output
    data = json.loads(r.stdout)
    old, new = data["results"]
    assert (data["command"], data["warnings"], old["impl"], new["impl"]) == (
        "diff", [], "cudnn-kda-hopper-cuda@1.32.0", "cudnn-kda-hopper-cuda@1.31.0")
    assert new["change_vs_first_bytes"] == new["peak_bytes"] - old["peak_bytes"] == 512     # the forward workspace's block
    # held after the call: the 5 fp32 plan states, 5 * 6,291,456 B; 1.31.0 adds the 71 GiB arena and the 512-byte block
    assert (old["held_after_call_bytes"], new["held_after_call_bytes"]) == (31_457_280, 31_457_280 + 76_215_172_096 + 512)
    assert [c["allocation"] for c in data["changes"]] == ["fwd_workspace", "bwd_workspace"]
    assert data["changes"][1]["old"]["allocated_bytes"] == data["changes"][1]["new"]["allocated_bytes"] == 76_215_172_096
    assert data["renumbered_sources"] == 13


PAIR = ["--impl", "fla-kda@0.6.0", "--impl", "fla-kda@07b80f27"]


@pytest.mark.parametrize("args,code,needle", [
    (["--impl", "fla-kda@0.6.0"], 2, "two --impl"),
    ([*PAIR, "--impl", "fla-gdn@0.6.0"], 2, "two --impl"),
    (["--impl", "fla-kda@0.6.0", "--impl", "fla-kda@0.6.0"], 2, "given more than once"),
    ([*PAIR, "--seq", "8K", "--seq", "16K", "--heads", "96"], 2, "--seq-len given more than once"),
    ([*PAIR, "--seq", "8K"], 2, "both --seq-len and --num-heads"),
    ([*PAIR, "--mbs", "2", "--v-heads", "32"], 2,
     "--batch-size, --num-v-heads have no effect without --seq-len and --num-heads"),
    ([*PAIR, "--expand-v", "2"], 2, "--expand-v has no effect without --seq-len and --num-heads"),
    ([*PAIR, "--dim", "64"], 2, "--head-dim has no effect without --seq-len and --num-heads"),
    (["--impl", "fla-kda@0.6.0", "--impl", "cudnn-kda-hopper@1.32.0"], 1, "one implementation"),
    ([*PAIR, "--gpu", "H201"], 1, "H201"),
    ([*PAIR, "--seq", "8K", "--heads", "0"], 1, "--num-heads: must be positive"),
])
def test_every_bad_input_is_one_error_line(args, code, needle):
    r = runner.invoke(app, ["diff", *args, "--json"])
    assert (r.exit_code, r.stdout) == (code, "") and r.stderr.startswith("error:") and needle in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("as_json", [True, False])
def test_a_shape_beyond_any_gpu_is_one_warning_line(as_json):
    r = runner.invoke(app, ["diff", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--impl", "cudnn-kda-hopper-cuda@1.31.0",
                            "--seq", "16M", "--heads", "96"] + (["--json"] if as_json else []))
    assert r.exit_code == 0 and r.stderr.startswith("warning:") and len(r.stderr.strip().splitlines()) == 1, r.output
    if as_json:     # the JSON carries the line it printed, word for word
        assert json.loads(r.stdout)["warnings"] == [r.stderr.strip().removeprefix("warning: ")]

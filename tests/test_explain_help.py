"""explain's help offers what explain takes, --model among it (issue 50, point 4: ``explain --model CONFIG`` explains a
whole training step's snapshot against the config's traced step)."""
from __future__ import annotations

import json
import pickle

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app

TINY = {"model_type": "kda", "hidden_size": 256, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 64,
        "vocab_size": 1000}


def run(*args):
    return CliRunner().invoke(app, list(args))


def test_explain_help_offers_model():
    """explain takes --model now (it exited 2): its help says so, as predict's does."""
    explain = CliRunner().invoke(app, ["explain", "--help"], env={"COLUMNS": "200"})
    predict = CliRunner().invoke(app, ["predict", "--help"], env={"COLUMNS": "200"})
    assert explain.exit_code == 0 and "model key, implementation@version" in explain.output
    assert "--model" in explain.output and "--model" in predict.output
    assert "a whole training step's snapshot" in explain.output


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_text(json.dumps(TINY))
    return path


@pytest.mark.parametrize("at", ["peak", "snapshot"])
def test_explain_model_names_every_block_of_the_predicted_step(tmp_path, tiny, at):
    """The step's predicted process written as PyTorch's snapshot (``timeline --model ... --out``), explained against
    the same config: every live block one buffer, all but a few tiny ones by the source line its frames name."""
    target = tmp_path / "step.pickle"
    shape = ["--model", str(tiny), "--seq-len", "1K", "--checkpoint"]
    r = run("timeline", *shape, "--out", str(target))
    assert r.exit_code == 0, r.output
    assert pickle.loads(target.read_bytes())["segments"]
    r = run("explain", str(target), *shape, "--at", at, "--json")
    assert r.exit_code == 0, r.output
    (result,) = json.loads(r.stdout)["results"]
    assert result["impl"] == "fla-kda-model@0.6.0" and result["unexplained_bytes"] == 0 and result["blocks"]
    assert len({b["buffer"] for b in result["blocks"]}) == len(result["blocks"])      # each buffer one block
    # every block of 512 B and more by the source line its frames name; a few of a few bytes (norm weights' and the
    # loss's scalars, of sizes many allocations share, one line making all parameters) fall to their size
    by_size = [b for b in result["blocks"] if b["match"] != "source line"]
    assert all(b["match"] == "size" and b["bytes"] < 512 for b in by_size)
    assert sum(b["bytes"] for b in by_size) * 1000 < result["live_bytes"]


def test_explain_model_refuses_what_a_whole_model_takes_not(tmp_path, tiny):
    r = run("explain", str(tmp_path / "none.pickle"), "--model", str(tiny), "--seq-len", "1K", "--num-heads", "4")
    assert r.exit_code in (1, 2) and "--num-heads has no effect with --model" in r.output


def test_a_whole_models_search_names_only_its_own_flags():
    from livebytes.validate.check.explain import Fit, fit_warnings
    from livebytes.estimator.shapes import Shape
    fit = Fit(live_bytes=10, explained_bytes=0, peak_request_bytes=10, frame_matches=0, size_matched_bytes=0, framed=False)
    shape = Shape(mbs=1, seq=1024, heads=2, dim=64)
    whole = fit_warnings("fla-kda-model@0.6.0", shape, fit, False, None, whole_model=True)
    kernel = fit_warnings("fla-kda@0.6.0", shape, fit, False, None)
    assert whole[-1] == "no shape one of --seq-len, --batch-size away explains more of it: another model?"
    assert "--num-heads" in kernel[-1]

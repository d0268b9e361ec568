"""Issue 50 point 5, first answers: ``plan --solve num_hidden_layers`` of a whole model starts its depth search at three
layers (whose traces, with four's, serve every deeper stack: one and two are traced only when three do not fit), and a
config deeper than a traced model expands (``MAX_LAYERS``, 1,024) is refused in one line before anything is traced."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.planning import LAYER_SEARCH_LIMIT, _largest_value
from livebytes.lifetimes.traced.model import canonical_config, depth_search_start

TINY = {"model_type": "kda", "hidden_size": 256, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 64,
        "vocab_size": 1000}


def search(fits, start: int, solve: str = "layers"):
    """(the answer, the values tried in order) of ``_largest_value`` over ``fits(v)``."""
    tried = []

    def ok(v):
        tried.append(v)
        return fits(v)
    return _largest_value(ok, solve, start), tried


def test_from_one_the_search_is_unchanged():
    """Up to 40 fit: doubling 1, 2, 4, 8, 16, 32, 64 (fails), then bisecting [32, 64): 48, 40, 44, 42, 41."""
    assert search(lambda v: v <= 40, 1) == (40, [1, 2, 4, 8, 16, 32, 64, 48, 40, 44, 42, 41])


def test_from_three_one_and_two_are_not_tried_when_three_fits():
    """Up to 40 fit: 3, 6, 12, 24, 48 (fails), then bisecting [24, 48): 36, 42, 39, 40, 41."""
    assert search(lambda v: v <= 40, 3) == (40, [3, 6, 12, 24, 48, 36, 42, 39, 40, 41])


@pytest.mark.parametrize("most, answer, tried", [
    (2, 2, [3, 1, 2]),         # three fail: one fits, bisecting [1, 3) tries 2
    (1, 1, [3, 1, 2]),
    (0, None, [3, 1]),         # not even one
])
def test_below_three_only_when_three_fails(most, answer, tried):
    assert search(lambda v: v <= most, 3) == (answer, tried)


def test_the_layer_limit_is_tried_itself_from_three():
    """From three the doubling reaches 96, then the limit 128 itself (not 192): 100 fit, so [96, 128) is bisected;
    everything fitting is refused at the limit, as from one."""
    assert search(lambda v: v <= 100, 3) == (100, [3, 6, 12, 24, 48, 96, 128, 112, 104, 100, 102, 101])
    for start in (1, 3):
        with pytest.raises(LivebytesError, match=f"^{LAYER_SEARCH_LIMIT} layers fit at this shape"):
            search(lambda v: True, start)


def test_the_start_by_family():
    """A uniform stack starts at three (``layer_counts``: three and four traced for any depth from three); a hybrid at
    one (traced at its own depth up to ``MAX_HYBRID_LAYERS``)."""
    assert depth_search_start(canonical_config(dict(TINY))) == 3
    assert depth_search_start(canonical_config({"model_type": "qwen3_next"})) == 1


@pytest.fixture
def no_trace(monkeypatch):
    from livebytes.lifetimes.traced import model

    def refuse(*args, **kwargs):
        raise AssertionError("a trace started for a config that should have been refused first")
    monkeypatch.setattr(model, "run_tracers", refuse)


@pytest.mark.parametrize("depth", [1025, 4096])
def test_a_config_deeper_than_the_expansion_is_one_line_before_any_trace(no_trace, tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(TINY | {"num_hidden_layers": depth}))
    r = CliRunner().invoke(app, ["predict", "--model", str(path), "--seq-len", "8K"])
    assert r.exit_code == 1, r.output
    (line,) = r.stderr.splitlines()
    assert line == (f"error: fla-kda-model@0.6.0: the config's num_hidden_layers {depth:,}: a traced model expands up "
                    "to 1,024 (its cost grows with the depth); give --num-hidden-layers 1,024 or fewer")


def test_plan_over_depth_traces_three_and_four_layers_only(tmp_path, monkeypatch):
    """The tiny model at 256K under a 32 GiB budget: three layers fit (the H200 runs 64 of them at 256K, about 2 GiB
    each), so the search traces three and four layers (one pair of tracer runs) and never one or two."""
    from livebytes.lifetimes.traced import model
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "cache"))
    traced, real = [], model.run_tracers

    def run(specs):
        traced.extend(spec["runs"][0]["layers"] for spec in specs)
        return real(specs)
    monkeypatch.setattr(model, "run_tracers", run)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    r = CliRunner().invoke(app, ["plan", "--model", str(path), "--solve", "num_hidden_layers", "--seq-len", "256K",
                                 "--budget", "32GiB", "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["results"]
    assert row["value"] >= 3 and row["options"]["layers"] == row["value"]
    assert sorted(traced) == [3, 4]

"""A config is checked before anything is traced (issue 50 point 3): each planted file in ``tests/data/bad_configs``
gives one line naming the file and the field, exit 1, and no ``--flag`` (none was given for the config's sizes).

The first eight are the issue's (``conv_size: 0`` silently dropped the convolution, ``tie_word_embeddings: "no"`` was
read as tied, a huge ``num_heads`` was blamed on ``--num-heads``, ``hidden_size`` >= 2^63 answered one ``"``,
``model_type`` a list or an object was a TypeError traceback); the rest are ours. No trace may start: the tracer is
replaced by one that fails the test, so each case runs in well under a second."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app

FOLDER = Path(__file__).parent / "data" / "bad_configs"

# file -> what its one line must say after "error: <file>: "
EXPECTED = {
    "model_type_a_list": 'model_type ["kda"] is not traced (known: kda, gated_deltanet, qwen3_next, kimi_linear, abc, ',
    "model_type_an_object": 'model_type {"kda": 1} is not traced',
    "conv_size_zero": "conv_size must be a positive integer (at most 2^50), got 0",
    "tie_word_embeddings_no": "tie_word_embeddings must be true or false, got 'no'",
    "rms_norm_eps_x": "rms_norm_eps must be a positive number, got 'x'",
    "use_short_conv_yes": "use_short_conv must be true or false, got 'yes'",
    "num_heads_huge": "num_heads must be a positive integer (at most 2^50), got 1152921504606846976",
    "hidden_size_2_63": "hidden_size must be a positive integer (at most 2^50), got 9223372036854775808",
    "norm_eps_negative": "norm_eps must be a positive number, got -1e-06",
    "attn_mode_recurrent": "attn_mode must be one of 'chunk', got 'fused_recurrent'",
    "output_gate_activation_relu": "output_gate_activation must be one of 'swish', 'silu', 'sigmoid', got 'relu'",
    "layer_types_sliding": "layer_types must be a list of 'linear_attention' or 'full_attention' or null, got [",
    "mlp_only_layers_negative": "mlp_only_layers must be a list of layer indices (non-negative integers) or null, got [-1]",
    "kimi_short_conv_zero": "linear_attn_config.short_conv_kernel_size must be a positive integer (at most 2^50), got 0",
    "kimi_linear_attn_config_text": "linear_attn_config must be an object, got 'kda'",
    "expand_v_zero": "expand_v must be a positive number, got 0",
    "num_v_heads_text": "num_v_heads must be a positive integer (at most 2^50) or null, got '8'",
    "attention_dropout_above_one": "attention_dropout must be a number from 0 to 1 or null, got 1.5",
    # 2^30 experts x 2^20 x 2,048 = 2^61 elements
    "experts_beyond_any_gpu": ("the experts' weights would hold num_experts 1,073,741,824 x moe_intermediate_size "
                               "1,048,576 x hidden_size 2,048 = 2,305,843,009,213,693,952 elements, beyond any GPU"),
    # 1,024 x 2^40 x 128 = 2^57 elements
    "query_projection_beyond_any_gpu": ("the query projection would hold hidden_size 1,024 x num_heads 1,099,511,627,776 "
                                        "x head_dim 128 = 144,115,188,075,855,872 elements"),
    # 1,024 x 2^45 = 2^55 elements
    "mlp_beyond_any_gpu": ("the MLP would hold hidden_size 1,024 x intermediate_size 35,184,372,088,832 = "
                           "36,028,797,018,963,968 elements, beyond any GPU (at most 2^50); check those fields"),
    # 2,048 x 2^40 x 128 = 2^58 elements
    "linear_value_projection_beyond_any_gpu": ("the linear attention's value projection would hold hidden_size 2,048 x "
                                               "linear_num_value_heads 1,099,511,627,776 x linear_value_head_dim 128 = "
                                               "288,230,376,151,711,744 elements"),
    "num_hidden_layers_zero": "num_hidden_layers must be an integer from 1 to 4096, got 0",
    "head_dim_true": "head_dim must be a positive integer (at most 2^50), got True",
    "vocab_size_null": "vocab_size is null: give a positive integer (at most 2^50) or leave it out (its class's default)",
    "model_type_missing": "model_type None is not traced",
    "fuse_cross_entropy_one": "fuse_cross_entropy must be true or false, got 1",
    "routed_scaling_factor_nan": "routed_scaling_factor must be a positive number, got nan",
    "a_list_not_an_object": "a config is a JSON object",
    "hidden_act_empty": "hidden_act must be a non-empty string, got ''",
}


def test_every_planted_file_has_its_expected_line():
    assert sorted(p.stem for p in FOLDER.glob("*.json")) == sorted(EXPECTED)


@pytest.fixture
def no_trace(monkeypatch):
    """A trace would take tens of seconds: any call that would start one fails the test."""
    from livebytes.lifetimes.traced import model

    def refuse(*args, **kwargs):
        raise AssertionError("a trace started for a config that should have been refused first")
    monkeypatch.setattr(model, "run_tracers", refuse)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("command", [["predict", "--seq-len", "4096"], ["plan", "--solve", "seq_len", "--gpu", "H200"]])
def test_a_bad_config_is_one_line_before_any_trace(no_trace, name, command):
    path = FOLDER / f"{name}.json"
    r = CliRunner().invoke(app, [command[0], "--model", str(path), *command[1:]])
    assert r.exit_code == 1, r.output
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"error: {path}: ") and EXPECTED[name] in line
    assert "--" not in line.removeprefix(f"error: {path}")       # no flag was given for the config's fields


def test_the_api_names_the_field_too(no_trace):
    """The same check for a config given to the library as a dict (``where``: "config")."""
    import livebytes
    from livebytes.estimator.errors import LivebytesError
    data = json.loads((FOLDER / "conv_size_zero.json").read_text())
    with pytest.raises(LivebytesError, match=r"^config: conv_size must be a positive integer \(at most 2\^50\), got 0$"):
        livebytes.predict(data, seq_len=4096)


@pytest.mark.parametrize("config, most", [
    ({"model_type": "kda", "hidden_size": 8192}, 4),                  # min(8, cdiv(32,000 default vocab, 8,192)) = 4
    ({"model_type": "qwen3_next", "hidden_size": 65536}, 3),          # min(8, cdiv(151,936 default vocab, 65,536)) = 3
    ({"model_type": "kimi_linear", "vocab_size": 4608}, 2),           # min(8, cdiv(4,608, 2,304 default hidden)) = 2
    ({"model_type": "kda", "vocab_size": 4096, "hidden_size": 4096}, 1)])
def test_a_config_without_vocab_or_hidden_size_reads_its_class_default(config, most):
    """The fused loss's chunk count (loops._lce_most) read config["vocab_size"]: a KeyError after the whole trace."""
    from livebytes.lifetimes.traced.loops import _lce_most
    assert _lce_most(config) == most


"""transformers 5.17's Qwen3NextForCausalLM through the traced source (issue 36 point 1): a hybrid stack (Gated DeltaNet
layers, a full-attention layer every ``full_attention_interval``) with a mixture of experts in every block, traced on
this CPU at its own depth; its full attention as torch 2.11's CUDA build runs it (cuDNN), its experts as
transformers' grouped_mm. Traces live (about a minute cold; cached in ``LIVEBYTES_CACHE_DIR``)."""
import json

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import evaluate
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.registry import get_model
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced import model as traced
from livebytes.lifetimes.traced.model import canonical_config, config_sizes, options_for

# 4 layers: linear, linear, linear, full attention (interval 4); 8 experts, top 2
TINY = {"model_type": "qwen3_next", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "linear_num_key_heads": 4,
        "linear_num_value_heads": 8, "linear_key_head_dim": 64, "linear_value_head_dim": 64, "num_experts": 8,
        "num_experts_per_tok": 2, "moe_intermediate_size": 256, "shared_expert_intermediate_size": 256,
        "vocab_size": 32000, "full_attention_interval": 4}
H200 = get_device("H200")
AT_4K = Shape(1, 4096, 4, 128)
runner = CliRunner()
pytestmark = pytest.mark.skipif(traced.untraceable_here("qwen3_next") is not None,
                                reason="this Triton refuses the Gated DeltaNet backward on Hopper")


@pytest.fixture(scope="module")
def model():
    key, options = options_for(canonical_config(dict(TINY)))
    return get_model(key, H200, **options)


def test_the_key_is_transformers_version():
    key, _ = options_for(canonical_config(dict(TINY)))
    assert key == "qwen3-next-model@5.17.0"


@pytest.mark.parametrize("config,sizes", [
    ({"model_type": "qwen3_next"}, (16, 256)),                    # configuration_qwen3_next.py:97 and :108
    (TINY, (4, 128)),
])
def test_heads_and_head_dim_are_the_full_attention_layers(config, sizes):
    assert config_sizes(canonical_config(dict(config))) == sizes


def bytes_of(model, note_has: str) -> list[int]:
    return [evaluate(b.nbytes, AT_4K) for b in model.buffers if note_has in (b.note or "")]


def test_full_attention_is_cudnns_seed_offset_output_and_stats(model):
    """One full-attention layer (layer 3): cuDNN's forward keeps seed, offset (8 B each), the output [1, 4, T, 128]
    bf16 = 4 * 4096 * 128 * 2 = 4,194,304 B and the stats [1, 4, T, 1] fp32 = 4 * 4096 * 4 = 65,536 B for the
    backward, which makes dq (as q) and dk, dv [1, 2, T, 128] bf16 = 2,097,152 B each."""
    assert bytes_of(model, "aten._scaled_dot_product_cudnn_attention.default") == [8, 8, 4_194_304, 65_536]
    assert bytes_of(model, "aten._scaled_dot_product_cudnn_attention_backward.default") == [4_194_304, 2_097_152,
                                                                                          2_097_152]
    assert not bytes_of(model, "_safe_softmax")                  # no math path's [B, H, S, S]
    assert any("cuDNN's SDPA graph workspace" in line for line in model.not_modelled)


def test_experts_buffers_are_sized_by_tokens_not_routing(model):
    """grouped_mm's up projection, each MoE block's first grouped GEMM of the forward: [T * top_k, 2 *
    moe_intermediate] bf16 = 4096 * 2 * 512 * 2 = 8,388,608 B per MoE block (four), whatever the routing. (Its name
    follows the op before it, which transformers changed: ``...experts.ge.out1`` under 5.17.0, after the sentinel
    mask's compare; ``..._grouped_mm.out`` under 5.25.0, which builds the mask only under expert parallelism.)"""
    ups: dict = {}
    for b in model.buffers:
        if "aten._grouped_mm" in (b.note or "") and b.name.startswith("for."):
            ups.setdefault(b.name.split(".experts.")[0], b)
    assert [evaluate(b.nbytes, AT_4K) for b in ups.values()] == [8_388_608] * 4
    assert any(line.startswith("routing: balanced (each of the E experts takes T x top_k / E") and
               "no traced buffer depends on it" in line for line in model.notes)


def test_worst_routing_is_the_same_bytes_and_says_why(model):
    """--routing worst: the busiest experts take every token they can; grouped_mm's buffers are [T * top_k, ...]
    however the tokens split, so every buffer is balanced's, byte formula for byte formula."""
    key, options = options_for(canonical_config(dict(TINY)), routing="worst")
    worst = get_model(key, H200, **options)
    assert [(b.name, str(b.nbytes)) for b in worst.buffers] == [(b.name, str(b.nbytes)) for b in model.buffers]
    (line,) = [n for n in worst.notes if n.startswith("routing: worst")]
    assert "the same bytes as balanced" in line and "[n_e, 2*moe_intermediate_size]" in line and "n_e = T x top_k / E " \
        "balanced, T worst" in line


@pytest.mark.parametrize("args,line", [
    (["--layers", "2000"], "2,000 layers: a traced model expands up to 1,024"),
])
def test_what_is_not_traced_is_said_in_one_line(tmp_path, args, line):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    r = runner.invoke(app, ["predict", "--model", str(path), "--seq-len", "4096", *args])
    assert r.exit_code == 1 and line in r.output and "Traceback" not in r.output, r.output


def test_triton_below_3_7_1_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(traced, "installed_versions", lambda: {"triton": "3.6.0"})
    assert traced.untraceable_here("qwen3_next").startswith("Qwen3-Next (its Gated DeltaNet layers) traces for "
                                                            "Hopper under Triton >= 3.7.1 only")


def test_a_transformers_outside_5x_is_refused(monkeypatch):
    """Another 5.x is traced as installed (tests/test_transformers_versions.py); 4.x is refused in one line."""
    real = traced.installed_versions()
    monkeypatch.setattr(traced, "installed_versions", lambda: dict(real, transformers="4.57.1"))
    with pytest.raises(LivebytesError, match=r"qwen3-next-model@5\.17\.0 traces transformers 5\.x as installed "
                                             r"\(validated under 5\.17\.0\); this environment has 4\.57\.1"):
        traced.check_environment("", None, "qwen3_next")


def test_predict_at_4k_on_the_cpu(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    r = runner.invoke(app, ["predict", "--model", str(path), "--seq-len", "4096", "--json"])
    assert r.exit_code == 0, r.output
    (d,) = json.loads(r.stdout)["results"]
    assert d["impl"] == "qwen3-next-model@5.17.0" and d["shape"]["num_heads"] == 4 and d["shape"]["head_dim"] == 128
    assert {"model.layers.3.self_attn", "model.layers.0.linear_attn", "model.layers.0.mlp"} <= set(d["module_bytes"])


def test_predict_states_worst_routing_with_the_answer(tmp_path):
    """--routing worst: the answer's options say it, and its warnings say why the bytes are balanced's."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    r = runner.invoke(app, ["predict", "--model", str(path), "--seq-len", "4096", "--routing", "worst", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["results"][0]["options"]["routing"] == "worst"
    # under a transformers other than 5.17.0 the answer's first warning is its version label (test_transformers_versions)
    (line,) = [w for w in data["warnings"] if not w.startswith("qwen3-next-model@5.17.0: transformers ")]
    assert line.startswith("routing: worst (the busiest experts take every token they can") and "the same bytes as " \
        "balanced: no traced buffer depends on it" in line


def test_checkpointing_predicts_below_the_plain_step(predict_config_peak):
    """The full-attention layer's recompute routes SDPA to cuDNN as its forward did (before: 81 tensors saved against
    83, checkpoint's CheckpointError); checkpointing keeps each layer's input, not its activations."""
    at_1k = ("--seq-len", "1K")
    assert predict_config_peak(TINY, *at_1k, "--checkpoint") < predict_config_peak(TINY, *at_1k)

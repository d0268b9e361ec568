"""transformers 5.17's KimiLinearForCausalLM through the traced source (issue 36 point 1): KDA layers (flash-linear-
attention's ``chunk_kda``), an MLA full-attention layer, a mixture of experts after a dense first block; traced on this
CPU at its own depth, one sequence per batch. Traces live (about a minute cold; cached in ``LIVEBYTES_CACHE_DIR``)."""
import json

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import evaluate
from livebytes.estimator.registry import get_model
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced.model import canonical_config, config_sizes, options_for

# 4 layers: KDA, KDA, KDA, MLA; layer 0 a dense MLP (first_k_dense_replace 1), layers 1-3 8 experts top 2
TINY = {"model_type": "kimi_linear", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": 128, "q_lora_rank": None,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "linear_num_heads": 4,
        "linear_head_dim": 64, "num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
        "n_shared_experts": 1, "vocab_size": 32000, "pad_token_id": None}
H200 = get_device("H200")
AT_4K = Shape(1, 4096, 4, 192)
runner = CliRunner()


@pytest.fixture(scope="module")
def model():
    key, options = options_for(canonical_config(dict(TINY)))
    return get_model(key, H200, **options)


@pytest.fixture(scope="module")
def checkpointed():
    key, options = options_for(canonical_config(dict(TINY)))
    return get_model(key, H200, **options, checkpoint=True)


@pytest.mark.parametrize("config,sizes", [
    ({"model_type": "kimi_linear"}, (32, 192)),     # configuration_kimi_linear.py: 32 heads, 128 + 64
    (TINY, (4, 192)),
])
def test_heads_and_head_dim_are_the_mla_layers(config, sizes):
    assert config_sizes(canonical_config(dict(config))) == sizes


def bytes_of(model, note_has: str) -> list[int]:
    return [evaluate(b.nbytes, AT_4K) for b in model.buffers if note_has in (b.note or "")]


def test_mla_runs_cudnn_with_unequal_head_dims(model):
    """q/k head dim 192, v 128: flash refuses (unequal dims), cuDNN takes both (at most 256 on sm90). Forward: seed,
    offset, out [1, 4, T, 128] bf16 = 4 * 4096 * 128 * 2 = 4,194,304 B, stats 4 * 4096 * 4 = 65,536 B; backward dq and
    dk [1, 4, T, 192] bf16 = 6,291,456 B each, dv 4,194,304 B."""
    assert bytes_of(model, "aten._scaled_dot_product_cudnn_attention.default") == [8, 8, 4_194_304, 65_536]
    assert bytes_of(model, "aten._scaled_dot_product_cudnn_attention_backward.default") == [6_291_456, 6_291_456,
                                                                                          4_194_304]


def test_checkpoint_recompute_runs_cudnn_as_its_forward(checkpointed):
    """--checkpoint: the MLA layer's recompute (in the backward) routes SDPA to cuDNN as its forward did, so the same
    seed, offset, out 4 * 4096 * 128 * 2 = 4,194,304 B and stats 4 * 4096 * 4 = 65,536 B twice (before the fix the
    recompute took the math path: 68 tensors saved against the forward's 70, checkpoint's CheckpointError)."""
    assert bytes_of(checkpointed, "aten._scaled_dot_product_cudnn_attention.default") == [8, 8, 4_194_304, 65_536] * 2
    assert bytes_of(checkpointed, "aten._scaled_dot_product_cudnn_attention_backward.default") == [
        6_291_456, 6_291_456, 4_194_304]


def test_experts_after_the_dense_first_block(model):
    """Layers 1-3 route: grouped_mm's up projection, each MoE block's first grouped GEMM of the forward, [T * 2,
    2 * 256] bf16 = 4096 * 2 * 512 * 2 = 8,388,608 B each (named ``...experts.ge.out1`` under transformers 5.17.0,
    ``..._grouped_mm.out`` under 5.25.0: test_traced_qwen3_next says why)."""
    ups: dict = {}
    for b in model.buffers:
        if "aten._grouped_mm" in (b.note or "") and b.name.startswith("for."):
            ups.setdefault(b.module.split(".")[2], b)
    assert [(layer, evaluate(b.nbytes, AT_4K)) for layer, b in ups.items()] == [(str(i), 8_388_608) for i in (1, 2, 3)]


@pytest.mark.parametrize("change,line", [
    ({"pad_token_id": 163839}, "the config's pad_token_id is not a token of its vocab_size"),
    # the class indexes layer_types by layer: a depth it does not list is refused before tracing
    ({"num_hidden_layers": 5}, "config: layer_types must list one entry per layer (5), got 4"),
])
def test_a_config_the_library_refuses_is_one_line(tmp_path, change, line):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(TINY, **change)))
    r = runner.invoke(app, ["predict", "--model", str(path), "--seq-len", "4096"])
    assert r.exit_code == 1 and line in r.output and "Traceback" not in r.output, r.output


def test_predict_at_4k_on_the_cpu(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    r = runner.invoke(app, ["predict", "--model", str(path), "--seq-len", "4096", "--json"])
    assert r.exit_code == 0, r.output
    (d,) = json.loads(r.stdout)["results"]
    assert d["impl"] == "kimi-linear-model@5.17.0" and d["shape"]["num_heads"] == 4 and d["shape"]["head_dim"] == 192


def test_checkpointing_predicts_below_the_plain_step(predict_config_peak):
    """Checkpointing keeps each layer's input, not its activations, until the backward recomputes them."""
    at_1k = ("--seq-len", "1K")
    assert predict_config_peak(TINY, *at_1k, "--checkpoint") < predict_config_peak(TINY, *at_1k)

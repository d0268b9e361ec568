"""Issue 36 point 3: presets for the published configs (``--model qwen3-next-80b-a3b``, ``kimi-linear-48b-a3b``) and
small configs of each that fit one H200, listed by ``livebytes models``; their parameter counts against the published
sizes, by hand and by transformers 5.17 building the model on meta tensors. No tracing here."""
import json

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.lifetimes.traced.hybrid import find_pattern, layer_kinds
from livebytes.lifetimes.traced.model import config_sizes
from livebytes.lifetimes.traced.presets import config_of, preset_config, preset_names, presets

runner = CliRunner()


def test_the_presets():
    assert preset_names() == ["kimi-linear-48b-a3b", "kimi-linear-small", "qwen3-next-80b-a3b", "qwen3-next-small"]
    for name, data in presets().items():
        assert data["source"] and data["config"]["model_type"] in ("qwen3_next", "kimi_linear"), name


@pytest.mark.parametrize("name,model_type,layers,sizes", [
    ("qwen3-next-80b-a3b", "qwen3_next", 48, (16, 256)),    # 16 attention heads of 256
    ("qwen3-next-small", "qwen3_next", 4, (16, 256)),
    ("kimi-linear-48b-a3b", "kimi_linear", 27, (32, 192)),  # MLA: 32 heads, q/k 128 + 64
    ("kimi-linear-small", "kimi_linear", 4, (32, 192)),
])
def test_a_preset_is_its_config(name, model_type, layers, sizes):
    config = json.loads(preset_config(name))
    assert config["model_type"] == model_type and config["num_hidden_layers"] == layers
    assert config_sizes(preset_config(name)) == sizes
    assert config_of(name) == preset_config(name)


def test_a_config_file_is_still_a_file(tmp_path):
    path = tmp_path / "qwen3-next-small"            # a file named like a preset is the file
    path.write_text(json.dumps({"model_type": "qwen3_next", "num_hidden_layers": 2}))
    assert json.loads(config_of(str(path)))["num_hidden_layers"] == 2


def short(kinds) -> str:
    """l/f (linear or full attention) and s/d (experts or dense MLP) per layer."""
    return " ".join(a[0] + m[0] for a, m in kinds)


@pytest.mark.parametrize("name,head,period,tail,repeats", [
    # 48 layers: full attention at 3, 7, ..., 47 (every fourth, interval 4), experts everywhere: layer 0, 11 periods
    # (l l f l) from layer 1, the tail 45-47 (l l f): 1 + 44 + 3 = 48; traced at 1 + 4 + 3 = 8 and 12 layers
    ("qwen3-next-80b-a3b", "ls", "ls ls fs ls", "ls ls fs", 11),
    # 27 layers: MLA at 4, 8, ..., 24, 27 (1-indexed), layer 0 dense: 1 + 6 x 4 + 2 = 27; traced at 7 and 11 layers
    ("kimi-linear-48b-a3b", "ld", "ls ls fs ls", "ls fs", 6),
])
def test_the_published_stacks_repeat_a_period(name, head, period, tail, repeats):
    config = presets()[name]["config"]
    pattern = find_pattern(layer_kinds(config, config["num_hidden_layers"]))
    assert (short(pattern.head), short(pattern.period), short(pattern.tail), pattern.repeats) == (head, period, tail,
                                                                                                     repeats)


def meta_parameters(name: str) -> tuple[int, int]:
    """(all parameters, those of the routed experts) of the preset's model, built by transformers on meta tensors."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    config = json.loads(preset_config(name))
    kind = config.pop("model_type")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **config))
    named = list(model.named_parameters())
    return sum(p.numel() for _, p in named), sum(p.numel() for n, p in named if ".experts." in n)


def test_qwen3_next_80b_a3b_has_80b_parameters_3b_active():
    """Hidden 2048, vocab 151,936, 48 layers (36 Gated DeltaNet, 12 gated attention), 512 experts of 512, top 10.
    embed + lm_head (untied) 2 x 151,936 x 2048 = 622,329,856; final norm 2048.
    A block's MoE: router 512 x 2048 = 1,048,576; experts gate_up 512 x 1024 x 2048 = 1,073,741,824 and down
    512 x 2048 x 512 = 536,870,912; shared expert 3 x 512 x 2048 = 3,145,728 and its gate 2048: 1,614,809,088; norms
    2 x 2048 = 4096.
    Gated DeltaNet: in_proj_qkvz 2048 x (2 x 16 x 128 + 2 x 32 x 128) = 25,165,824, in_proj_ba 2048 x 64 = 131,072,
    conv1d 8192 x 4 = 32,768, dt_bias + A_log 64, norm 128, out_proj 4096 x 2048 = 8,388,608: 33,718,464.
    Gated attention: q_proj 2048 x 16 x 256 x 2 = 16,777,216, k and v 2 x 2048 x 512 = 2,097,152, o_proj
    4096 x 2048 = 8,388,608, q/k norms 512: 27,263,488.
    Total 622,329,856 + 2048 + 48 x (1,614,809,088 + 4096) + 36 x 33,718,464 + 12 x 27,263,488 = 79,674,391,296 (80B).
    Active: the routed experts are 48 x 1,610,612,736 = 77,309,411,328, of which a token uses 10/512: 79,674,391,296 -
    77,309,411,328 x 502 / 512 = 3,874,929,408, 3,252,599,552 without the embeddings (3B)."""
    hand = 622_329_856 + 2048 + 48 * (1_614_809_088 + 4096) + 36 * 33_718_464 + 12 * 27_263_488
    assert hand == 79_674_391_296
    total, experts = meta_parameters("qwen3-next-80b-a3b")
    assert (total, experts) == (hand, 48 * 1_610_612_736)
    active = total - experts * 502 // 512
    assert (active, active - 622_329_856) == (3_874_929_408, 3_252_599_552)


def test_kimi_linear_48b_a3b_has_48b_parameters_3b_active():
    """Hidden 2304, vocab 163,840, 27 layers (20 KDA, 7 MLA), block 0 dense (9216), 26 MoE blocks of 256 experts of
    1024, top 8, one shared expert. embed + lm_head 2 x 163,840 x 2304 = 754,974,720. Routed experts per block:
    gate_up 256 x 2048 x 2304 + down 256 x 2304 x 1024 = 1,811,939,328; x 26 = 47,110,422,528. The rest (attention,
    the dense MLP 3 x 9216 x 2304 = 63,700,992, shared experts, routers, norms) brings it to 49,122,675,072 (the
    model card's 48B). Active: 49,122,675,072 - 47,110,422,528 x 248 / 256 = 3,484,453,248, 2,729,478,528 without the
    embeddings (3B)."""
    total, experts = meta_parameters("kimi-linear-48b-a3b")
    assert experts == 26 * (256 * 2048 * 2304 + 256 * 2304 * 1024) == 47_110_422_528
    assert total == 49_122_675_072
    active = total - experts * 248 // 256
    assert (active, active - 754_974_720) == (3_484_453_248, 2_729_478_528)


def test_models_lists_the_presets():
    r = runner.invoke(app, ["models", "--json"])
    assert r.exit_code == 0, r.output
    covers = {m["impl"]: m["covers"] for m in json.loads(r.stdout)["results"]}
    assert covers["qwen3-next-model@5.17.0"].endswith("presets: --model qwen3-next-80b-a3b, qwen3-next-small")
    assert covers["kimi-linear-model@5.17.0"].endswith("presets: --model kimi-linear-48b-a3b, kimi-linear-small")
    assert "presets" not in covers["fla-kda-model@0.6.0"]


def test_the_library_takes_a_preset_and_routing():
    """``livebytes.predict("qwen3-next-small", routing="worst", ...)``: a preset's name is a config, routing a whole
    model's keyword (nothing traced to choose the model)."""
    from livebytes.functions import ArgumentError, chosen, is_config
    assert is_config("qwen3-next-80b-a3b") and not is_config("fla-kda@0.6.0")
    key, options, heads, dim = chosen("qwen3-next-small", {"routing": "worst"})
    assert (key, options["routing"], heads, dim) == ("qwen3-next-model@5.17.0", "worst", 16, 256)
    assert chosen("kimi-linear-small", {})[1]["routing"] == "balanced"
    with pytest.raises(ArgumentError, match="routing has no effect for a kernel or layer model"):
        chosen("fla-kda@0.6.0", {"routing": "worst"})


def test_checkpointing_a_hybrid_is_refused_in_words():
    """The tracer's last line under --checkpoint (torch.utils.checkpoint's CheckpointError tip) becomes the reason."""
    from livebytes.lifetimes.traced.model import known_refusal
    said = known_refusal("with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to enable "
                         "checkpoint\u2011debug mode globally.")
    assert said.startswith("--checkpoint is not traced for this model yet: torch.utils.checkpoint found a different "
                           "number of tensors saved by the recomputation than by the forward")

"""The hybrids in the setups people train with (issue 51 point 3): transformers' Qwen3-Next and Kimi-Linear presets at
a batch of several rows, under fp32-amp, and on every GPU whose SDPA backend differs (A100: flash or memory-efficient;
H200: cuDNN; B200: flash or memory-efficient). Traced live on this CPU (minutes cold; cached in LIVEBYTES_CACHE_DIR).

Qwen3-Next is traced for the A100 here: its Gated DeltaNet backward refuses Hopper under this machine's Triton
(fla-core #640, ``model.untraceable_here``); Kimi-Linear for the H200, the A100 and the B200."""
import json

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import evaluate
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.registry import get_model, shape_options
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced import model as traced
from livebytes.lifetimes.traced.model import options_for
from livebytes.lifetimes.traced.presets import preset_config

runner = CliRunner()
GPU = {"qwen3-next-small": "A100-80GB", "kimi-linear-small": "H200"}
SETUPS = {
    "batch of two rows": ("--batch-size", "2"),
    "two sequences packed": ("--batch-size", "2", "--packed"),
    "fp32-amp": ("--precision", "fp32-amp"),
    "A100": ("--gpu", "A100-80GB"),
    "B200": ("--gpu", "B200"),
}


def untraceable(preset: str, gpu: str) -> str | None:
    """Why this machine cannot trace ``preset`` for ``gpu`` (fla-core's #640 on Hopper), or None."""
    major, minor = get_device(gpu).capability
    return traced.untraceable_here(json.loads(preset_config(preset))["model_type"], major * 10 + minor)


@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("preset", list(GPU))
def test_every_setup_answers(preset, setup):
    args = SETUPS[setup]
    gpu = args[1] if args[0] == "--gpu" else GPU[preset]
    if untraceable(preset, gpu):
        pytest.skip(untraceable(preset, gpu))
    flags = [a for a in args if a not in ("--gpu", gpu)]
    r = runner.invoke(app, ["predict", "--model", preset, "--gpu", gpu, "--seq-len", "4096", *flags, "--json"])
    assert r.exit_code == 0, r.output
    (d,) = json.loads(r.stdout)["results"]
    assert d["shape"]["batch_size"] == (2 if "two" in setup else 1)


def model_of(preset: str, gpu: str, **options):
    key, given = options_for(preset_config(preset), **options)
    rows = given.pop("rows", None)
    return get_model(key, get_device(gpu), **given, **({"rows": rows} if rows else {}))


def sizes(model, shape: Shape, op: str, first: str = "") -> list[int]:
    """The bytes at ``shape`` of the buffers whose note names ``op`` (and whose name starts with ``first``)."""
    return [evaluate(b.nbytes, shape) for b in model.buffers if op in (b.note or "") and b.name.startswith(first)]


# ---------------------------------------------------------------------------------------- several rows

def test_a_batch_of_several_rows_is_the_several_row_program():
    """``shape_options``: one row -> rows one, two and more -> rows many (transformers' loss is two programs)."""
    key = traced.model_key("kimi_linear")
    assert shape_options(key, Shape(1, 4096, 32, 192))["rows"] == "one"
    assert shape_options(key, Shape(2, 4096, 32, 192))["rows"] == "many"
    assert "rows" not in shape_options(traced.model_key("kda"), Shape(2, 4096, 16, 128))


def test_two_rows_copy_the_shifted_labels():
    """loss_utils.py ForCausalLMLoss: pad the labels to [N, S + 1] int64, then ``labels[..., 1:].contiguous()``: at one
    row a view, at two a copy. One row at 4,096: the pad [1, 4097] x 8 = 32,776 B, no clone. Two rows: the pad
    [2, 4097] x 8 = 65,552 B and the clone [2, 4096] x 8 = 65,536 B."""
    one = model_of("kimi-linear-small", "H200")
    many = get_model(traced.model_key("kimi_linear"), get_device("H200"), **options_for(
        preset_config("kimi-linear-small"))[1], rows="many")
    at_one, at_two = Shape(1, 4096, 32, 192), Shape(2, 4096, 32, 192)
    pads = [evaluate(b.nbytes, at_one) for b in one.buffers if (b.note or "").startswith("int64")
            and "constant_pad_nd" in b.note and "ForCausalLM" in b.module]
    clones = [evaluate(b.nbytes, at_one) for b in one.buffers if (b.note or "").startswith("int64")
              and "aten.clone" in b.note and "ForCausalLM" in b.module]
    assert (pads, clones) == ([32_776], [])
    pads = [evaluate(b.nbytes, at_two) for b in many.buffers if (b.note or "").startswith("int64")
            and "constant_pad_nd" in b.note and "ForCausalLM" in b.module]
    clones = [evaluate(b.nbytes, at_two) for b in many.buffers if (b.note or "").startswith("int64")
              and "aten.clone" in b.note and "ForCausalLM" in b.module]
    assert (pads, clones) == ([65_552], [65_536])


def test_the_torch_conv_fallback_pads_every_row():
    """transformers' causal_conv1d_fn fallback: ``F.conv1d(x, padding=K-1)`` on [N, C, S], output [N, C, S + 3]
    (K = 4), a size per row beyond the tokens (``symbolic._per_row``). Kimi's KDA conv: C = 3 x 32 heads x 128 =
    12,288; two rows at 4,096: 2 x 12,288 x 4,099 x 2 B = 201,474,048 B in each of the three KDA layers."""
    many = get_model(traced.model_key("kimi_linear"), get_device("H200"), **options_for(
        preset_config("kimi-linear-small"))[1], rows="many")
    assert sizes(many, Shape(2, 4096, 32, 192), "aten.convolution.default", "for.") == [201_474_048] * 3


def test_rows_of_a_family_traced_with_any_batch_is_refused_in_one_line():
    """rows belongs to transformers' hybrids alone (fla's causal LMs are one program at any batch), one of two words."""
    key, given = options_for(json.dumps({"model_type": "kda"}))
    with pytest.raises(LivebytesError, match=r"^fla-kda-model@0.6.0: does not take option\(s\) rows$"):
        get_model(key, get_device("H200"), **given, rows="many")
    with pytest.raises(LivebytesError, match=r"option rows='some' not supported \(choose from one, many\)$"):
        get_model(traced.model_key("kimi_linear"), get_device("H200"),
                  **options_for(preset_config("kimi-linear-small"))[1], rows="some")


# ---------------------------------------------------------------------------------------- fp32-amp

def test_fp32_amp_experts_run_grouped_mm_in_fp32():
    """fp32 weights: moe.py casts the input to fp32 and torch._grouped_mm takes CUDA's fallback (GroupedBlas.cpp),
    whose output is fp32 (tracer/grouped_mm.py). Kimi's gate-up projection: [8 x T, 2 x 1024] fp32 at T = 4,096:
    4,096 x 8 x 2,048 x 4 B = 268,435,456 B in each of the three expert layers."""
    amp = model_of("kimi-linear-small", "H200", precision="fp32-amp")
    ups = [b for b in amp.buffers if "aten._grouped_mm.default" in (b.note or "") and b.name.startswith("for.")
           and b.name.endswith("experts.ge.out1")]
    assert [evaluate(b.nbytes, Shape(1, 4096, 32, 192)) for b in ups] == [268_435_456] * 3
    assert all((b.note or "").startswith("float32") for b in ups)


def test_fp32_amp_casts_fp32_attention_inputs_as_autocast_does():
    """Qwen3-Next's q, k, v reach SDPA in fp32 under fp32-amp; autocast's scaled_dot_product_attention kernel
    (lower_precision_fp) casts them to bf16 first: q [1, 16, T, 256] = 4,096 x 16 x 256 x 2 = 33,554,432 B, k and v
    [1, 2, T, 256] = 4,194,304 B each, named autocast.scaled_dot_product_attention; then A100's flash kernel."""
    if untraceable("qwen3-next-small", "A100-80GB"):
        pytest.skip(untraceable("qwen3-next-small", "A100-80GB"))
    amp = model_of("qwen3-next-small", "A100-80GB", precision="fp32-amp")
    at_4k = Shape(1, 4096, 16, 256)
    assert sizes(amp, at_4k, "autocast.scaled_dot_product_attention") == [33_554_432, 4_194_304, 4_194_304]
    assert sizes(amp, at_4k, "aten._scaled_dot_product_flash_attention.default", "for.")[:2] == [33_554_432, 262_144]


# ---------------------------------------------------------------------------------------- every GPU's SDPA

@pytest.mark.parametrize("gpu", ["A100-80GB", "B200"])
def test_kimi_mla_runs_the_memory_efficient_kernel_off_hopper(gpu):
    """q/k head dim 192, v 128: flash refuses unequal dims; sm80 does not prefer cuDNN and sm100's cuDNN stops at 128:
    the memory-efficient kernel. At 4,096: out [1, T, 32, 128] bf16 = 4,096 x 32 x 128 x 2 = 33,554,432 B, logsumexp
    [1, 32, ceil(4096/32) x 32] fp32 = 524,288 B, output_accum (max dim 192 > 128) fp32 67,108,864 B; backward dq, dk
    [.., 192] bf16 = 4,096 x 32 x 192 x 2 = 50,331,648 B each, dv 33,554,432 B, delta [1, 32, T] fp32 524,288 B."""
    m = model_of("kimi-linear-small", gpu)
    at_4k = Shape(1, 4096, 32, 192)
    assert sizes(m, at_4k, "aten._scaled_dot_product_efficient_attention.default") == [33_554_432, 524_288,
                                                                                       67_108_864]
    assert sizes(m, at_4k, "aten._scaled_dot_product_efficient_attention_backward.default") == [
        50_331_648, 50_331_648, 33_554_432, 524_288]
    assert any("CUTLASS workspace" in line for line in m.not_modelled)


# ---------------------------------------------------------------------------------------- packed

def test_packed_is_the_flattening_collators_batch():
    """DataCollatorWithFlattening(return_flash_attn_kwargs=True): Qwen3-Next's Gated DeltaNet reads cu_seq_lens_q
    (int32, with its values) as cu_seqlens: fla's varlen path computes its chunk indices from it (int32 buffers in the
    linear-attention layer), and the answer says what each layer does with the boundaries."""
    if untraceable("qwen3-next-small", "A100-80GB"):
        pytest.skip(untraceable("qwen3-next-small", "A100-80GB"))
    packed = model_of("qwen3-next-small", "A100-80GB", packed=True)
    assert any(b.module.startswith("model.layers.0.linear_attn") and (b.note or "").startswith("int32")
               for b in packed.buffers)
    (note,) = [n for n in packed.notes if n.startswith("packed:")]
    assert "cu_seq_lens_q to fla's chunk_gated_delta_rule as cu_seqlens" in note and "use_cache" in note

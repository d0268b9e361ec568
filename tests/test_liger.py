"""Issue 51 point 2: ``--loss liger``, Liger-Kernel's fused linear cross-entropy, on the transformers hybrids, beside
transformers' default loss (and flash-linear-attention's own, which its models keep).

Traced live (a few minutes cold; cached in ``LIVEBYTES_CACHE_DIR``): both small presets at 32K tokens. Qwen3-Next on a
B200 (this Triton refuses its Gated DeltaNet backward on Hopper, fla-core's #640), Kimi-Linear on the H200. The
traces are symbolic in S: the 32K answers come from traces at 777 to 2,574 tokens."""
import json

import pytest
from typer.testing import CliRunner

import livebytes
from livebytes.cli.app import app
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import predict
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.registry import get_model
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced.loops import LOOPS, _liger_chunks
from livebytes.lifetimes.traced.model import config_sizes, options_for
from livebytes.lifetimes.traced.presets import config_of
from livebytes.tracer.versions import liger_version

pytestmark = pytest.mark.skipif(liger_version() is None, reason="liger-kernel is not installed")

S = 32768
# preset -> (GPU, vocab, hidden): configs of qwen3-next-small and kimi-linear-small
PRESETS = {"qwen3-next-small": ("B200", 151_936, 2048), "kimi-linear-small": ("H200", 163_840, 2304)}
LIGER_FILE = "liger_kernel/ops/fused_linear_cross_entropy.py"
runner = CliRunner()


def at_32k(preset: str, loss: str | None):
    config = config_of(preset)
    key, options = options_for(config, loss=loss)
    model = get_model(key, get_device(PRESETS[preset][0]), **options)
    heads, dim = config_sizes(config)
    return model, predict(model, Shape(1, S, heads, dim))


def buffers(model, p, where: str) -> list[int]:
    """The bytes at 32K of the buffers allocated at ``where`` (a file:line of their frame)."""
    return [n for b, n in zip(model.buffers, p.buffer_bytes) if f"{b.source.file}:{b.source.line}" == where]


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_chunk_is_liger_rule(preset):
    """ops/fused_linear_cross_entropy.py:103-106: inc = cdiv(V, H); C = min(next_power_of_2(cdiv(BT, inc)), BT).
    qwen3-next-small: cdiv(151936, 2048) = 75, cdiv(32768, 75) = 437 -> 512; kimi-linear-small: cdiv(163840, 2304) =
    72, cdiv(32768, 72) = 456 -> 512; 64 chunks each. At 1,030 tokens (a learning shape): cdiv(1030, 75) = 14 -> 16,
    65 chunks, the last 1030 - 64 * 16 = 6 rows."""
    config = {"model_type": json.loads(config_of(preset))["model_type"], "vocab_size": PRESETS[preset][1],
              "hidden_size": PRESETS[preset][2]}
    assert _liger_chunks(S, config) == [512] * 64
    if preset == "qwen3-next-small":
        assert _liger_chunks(1030, config) == [16] * 64 + [6]
    assert _liger_chunks(3, config) == [1, 1, 1]          # C = next_power_of_2(1) = 1: one row a chunk
    assert LOOPS[1].file == LIGER_FILE and LOOPS[1].by_launches


@pytest.mark.parametrize("preset", list(PRESETS))
def test_liger_holds_less_than_the_default_loss_at_32k(preset):
    """The default loss materialises the logits [1, S, V]: bf16 out of lm_head, fp32 (``logits.float()``,
    loss_utils.py) for cross_entropy, and their gradients; Liger's loss holds one [C, V] bf16 chunk of them (C = 512:
    ``test_the_chunk_is_liger_rule``) and computes the gradients of the hidden states ([S, H] bf16) and of lm_head
    ([V, H] bf16, made in the forward) as it goes.

    qwen3-next-small: bf16 logits 32768 * 151936 * 2 = 9,957,277,696 B, fp32 19,914,555,392 B; Liger's chunk
    512 * 151936 * 2 = 155,582,464 B, its dX 32768 * 2048 * 2 = 134,217,728 B, its dW 151936 * 2048 * 2 =
    622,329,856 B.
    kimi-linear-small: bf16 logits 32768 * 163840 * 2 = 10,737,418,240 B, fp32 21,474,836,480 B; Liger's chunk
    512 * 163840 * 2 = 167,772,160 B, its dX 32768 * 2304 * 2 = 150,994,944 B, its dW 163840 * 2304 * 2 =
    754,974,720 B."""
    gpu, vocab, hidden = PRESETS[preset]
    default_model, default = at_32k(preset, None)
    liger_model, liger = at_32k(preset, "liger")
    bf16_logits, fp32_logits = S * vocab * 2, S * vocab * 4
    assert {bf16_logits, fp32_logits} <= set(default.buffer_bytes)            # the default's logits, whole
    assert max(liger.buffer_bytes) < bf16_logits                              # Liger's: none that large
    assert buffers(liger_model, liger, f"{LIGER_FILE}:151") == [512 * vocab * 2]          # logits_storage
    assert buffers(liger_model, liger, f"{LIGER_FILE}:108") == [S * hidden * 2]           # grad_input
    assert buffers(liger_model, liger, f"{LIGER_FILE}:116") == [vocab * hidden * 2]       # grad_weight
    assert buffers(liger_model, liger, f"{LIGER_FILE}:125") == [S * 4]                    # loss_1d
    # the peaks: Liger's is lower by at least the fp32 logits less all Liger's own loss buffers
    saved = default.peak_bytes - liger.peak_bytes
    liger_own = 512 * vocab * 2 + S * hidden * 2 + vocab * hidden * 2 + S * 4
    assert saved >= fp32_logits - liger_own > 0, (default.peak_bytes, liger.peak_bytes)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_answer_names_the_loss(preset):
    """The API's answer carries ``loss`` among its options and a note that names Liger and its version."""
    gpu = PRESETS[preset][0]
    answer = livebytes.predict(preset, seq_len=S, gpu=gpu, loss="liger")
    assert answer.options.get("loss") == "liger"
    model, _ = at_32k(preset, "liger")
    assert any(line.startswith(f"loss: liger: Liger-Kernel's fused linear cross-entropy (liger-kernel "
                               f"{liger_version()}") for line in model.notes)
    default, _ = at_32k(preset, None)
    assert any(line.startswith("loss: default: transformers' ForCausalLMLoss") for line in default.notes)
    assert dict(default.options)["loss"] == "default" and answer.options["loss"] == "liger"
    assert livebytes.predict(preset, seq_len=S, gpu=gpu).options["loss"] == "default"


def test_the_cli_names_the_loss():
    result = runner.invoke(app, ["predict", "--model", "kimi-linear-small", "--seq", "32K", "--gpu", "H200",
                                 "--loss", "liger"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "(fwd+bwd; routing balanced, loss liger)" in flat         # the assumed line
    assert "lm_head's gradient (0.703 GiB) is made in the forward" in flat     # 163840 * 2304 * 2 B = 0.703 GiB


KDA_CONFIG = '{"model_type": "kda", "hidden_size": 256, "num_hidden_layers": 1, "num_heads": 4, "head_dim": 64}'


@pytest.mark.parametrize("model,loss,phrase", [
    ("qwen3-next-small", "fla", "--loss fla: transformers' Qwen3NextForCausalLM computes transformers' loss, not "
                                "flash-linear-attention's (--loss takes default or liger for qwen3-next-model@5.17.0)"),
    ("kimi-linear-small", "nope", "--loss must be one of default, liger, fla, got 'nope'"),
    ("kimi-linear-small", "", "--loss must be one of default, liger, fla, got ''"),
    (KDA_CONFIG, "liger", "--loss liger: KDAForCausalLM computes flash-linear-attention's loss, as its config picks it "
                          "(fuse_linear_cross_entropy); Liger patches transformers' models (--loss takes fla for "
                          "fla-kda-model@0.6.0)"),
    (KDA_CONFIG, "default", "--loss default: KDAForCausalLM's loss is flash-linear-attention's"),
])
def test_a_loss_the_model_does_not_offer_is_one_line(model, loss, phrase):
    """Refused before anything is traced (``options_for``)."""
    config = model if model.startswith("{") else config_of(model)
    with pytest.raises(LivebytesError) as err:
        options_for(config, loss=loss)
    assert phrase in str(err.value) and "\n" not in str(err.value)


def test_fla_is_an_fla_models_own_loss():
    """``--loss fla`` on an fla model is its own loss: the same options (and traces) as leaving it out."""
    assert options_for(KDA_CONFIG, loss="fla") == options_for(KDA_CONFIG)
    assert options_for(config_of("kimi-linear-small"), loss="DEFAULT ") == options_for(config_of("kimi-linear-small"))


@pytest.mark.parametrize("args,code,phrase", [
    (("predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "4", "--loss", "liger"), 2,
     "--loss has no effect without --model; leave it out"),
    (("predict", "--model", "qwen3-next-small", "--seq", "8K", "--loss", "fla"), 1,
     "--loss fla: transformers' Qwen3NextForCausalLM computes transformers' loss"),
])
def test_a_bad_loss_flag_is_one_line(args, code, phrase):
    result = runner.invoke(app, list(args))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == code, result.output
    assert len(lines) == 1 and phrase in " ".join(lines[0].split()), result.stderr


def test_the_api_refuses_a_loss_for_a_kernel():
    with pytest.raises(Exception) as err:
        livebytes.predict("fla-kda@0.6.0", seq_len=8192, num_heads=4, loss="liger")
    assert "loss" in str(err.value)


def test_liger_reads_the_tracers_meta_as_cuda():
    """``meta_is_cuda``: Liger's own source recompiled at its own file and lines, its device tests reading meta as
    CUDA: ``_can_use_mm_out`` of bf16 meta tensors without grad is True (ops/fused_linear_cross_entropy.py:32-48), as
    for CUDA ones, so the one [C, V] ``logits_storage`` is traced (:150-154), not a new chunk per ``@``."""
    import torch
    from liger_kernel.ops import fused_linear_cross_entropy as ops

    from livebytes.tracer.losses import meta_is_cuda
    x = torch.empty(4, 8, dtype=torch.bfloat16, device="meta")
    w = torch.empty(16, 8, dtype=torch.bfloat16, device="meta")
    meta_is_cuda()
    with torch.no_grad():
        assert ops._can_use_mm_out(x, w)
    assert ops.fused_linear_cross_entropy_forward.__code__.co_filename.endswith(LIGER_FILE)
    assert ops.fused_linear_cross_entropy_forward.__code__.co_firstlineno == 51
    assert not ops._can_use_mm_out(x.float(), w)            # its other conditions are Liger's own: dtypes differ


def test_the_seed_of_backward_carries_its_value():
    """``loss.backward()`` seeds the gradient with ``torch.ones_like(loss)`` (torch/autograd/__init__.py
    ``_make_grads``): the recorder gives it a real twin (a floating scalar is mirrorable), so Liger's backward can
    compare it with 1.0 (:420) on meta tensors; an activation-sized float never is."""
    import torch

    from livebytes.tracer.recorder import Recorder
    from livebytes.tracer.values import mirrorable
    rec = Recorder()
    x = torch.empty(3, device="meta", requires_grad=True)
    with rec.mode():
        loss = (x * 2).sum()
        seed = torch.ones_like(loss)
        one = torch.ones_like(seed, dtype=torch.float32)
        assert rec.mirrors.has(seed) and torch.equal(seed, one)
    assert mirrorable(torch.zeros(())) and not mirrorable(torch.zeros(2))

"""LoRA of a traced whole model (``--lora-rank R --lora-alpha A --lora-targets T``): the request's ``lora`` option, the
tracer's spec and the words an answer says of it.

The tracer applies it with peft's own code (``tracer.step.with_lora``: ``get_peft_model(model, LoraConfig(r=R,
lora_alpha=A, target_modules=T))``), so the frozen base weights, the adapters' gradients and AdamW states, and what the
frozen path still saves for the backward are whatever peft and autograd do; nothing here adds a byte.

The option is canonical JSON (``{"alpha": A, "r": R, "targets": "all-linear" | [names]}``), absent for a full
fine-tune; the defaults are peft 0.21's ``LoraConfig``: ``lora_alpha`` 8, and ``all-linear`` (every ``nn.Linear`` but
the output layer) for the targets, which peft leaves to the user (its default None means its per-architecture list,
which has no entry for these models).
"""
from __future__ import annotations

import json
import re
from typing import Optional

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import show

DEFAULT_ALPHA = 8                   # peft 0.21.2 tuners/lora/config.py: ``lora_alpha: int = field(default=8)``
ALL_LINEAR = "all-linear"           # peft's keyword: every Linear but the output layer (tuners_utils.py)
MAX_RANK = 65_536
QUANTS = ("4bit",)                  # --lora-quant: QLoRA's base (bitsandbytes), refused (``check_quant``)
# a module name as peft's target_modules matches it: a suffix of a module's path (``in_proj_qkvz``, ``mlp.gate_proj``)
TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")


def lora_option(rank: Optional[str | int], alpha: Optional[str | float] = None, targets: Optional[str] = None,
                quant: Optional[str] = None) -> Optional[str]:
    """The ``lora`` option of the LoRA flags (canonical JSON), None for a full fine-tune (no rank, or rank 0); every
    problem one line naming its flag. ``--lora-alpha`` or ``--lora-targets`` without a rank are refused (they would
    change nothing)."""
    r = _rank(rank)
    if quant is not None:
        check_quant(quant)
    if not r:
        stray = [flag for flag, value in (("--lora-alpha", alpha), ("--lora-targets", targets)) if value is not None]
        if stray:
            raise LivebytesError(f"{', '.join(stray)} without --lora-rank: a full fine-tune has no adapters; give "
                                 "--lora-rank R (R >= 1)")
        return None
    return json.dumps({"r": r, "alpha": _alpha(alpha), "targets": _targets(targets)}, sort_keys=True)


def _rank(rank) -> int:
    if rank is None:
        return 0
    text = str(rank).strip()
    if isinstance(rank, bool) or not re.fullmatch(r"\d+", text):
        raise LivebytesError(f"--lora-rank must be a whole number from 1 to {MAX_RANK:,} (0 or left out: a full "
                             f"fine-tune), got {show(rank)}")
    r = int(text)
    if r > MAX_RANK:
        raise LivebytesError(f"--lora-rank must be a whole number from 1 to {MAX_RANK:,}, got {r:,}")
    return r


def _alpha(alpha) -> int | float:
    """peft's ``lora_alpha`` (a scale, alpha / r, on the adapters' output: it changes no buffer's size)."""
    if alpha is None:
        return DEFAULT_ALPHA
    if isinstance(alpha, bool):
        raise LivebytesError(f"--lora-alpha must be a number, got {show(alpha)}")
    try:
        value = float(str(alpha).strip())
    except ValueError:
        raise LivebytesError(f"--lora-alpha must be a number, got {show(alpha)}") from None
    if not (value == value and abs(value) != float("inf")) or value <= 0:
        raise LivebytesError(f"--lora-alpha must be a positive finite number, got {show(alpha)}")
    return int(value) if value.is_integer() else value


def _targets(targets) -> str | list[str]:
    """``all-linear`` (default), or the module names of a comma list, each once, in order."""
    if targets is None or str(targets).strip().lower() == ALL_LINEAR:
        return ALL_LINEAR
    names = [t.strip() for t in str(targets).split(",")]
    bad = [t for t in names if not TARGET.fullmatch(t)]
    if bad or not names:
        raise LivebytesError(f"--lora-targets is {ALL_LINEAR} or a comma list of module names (q_proj,v_proj), got "
                             f"{show(targets)}")
    return list(dict.fromkeys(names))


def check_quant(quant: str) -> None:
    """QLoRA's 4-bit base: refused in one line. Tried under the tracer (bitsandbytes 0.50.2): a ``Linear4bit`` built on
    meta quantizes there when asked (``Params4bit._quantize("meta")``: its ops have fake kernels) and its forward and
    backward run, but no load path does it: transformers quantizes at ``from_pretrained`` with a
    ``BitsAndBytesConfig`` (``Params4bit`` moved to CUDA), which a model built from its config on meta never takes,
    and QLoRA's recipe adds peft's ``prepare_model_for_kbit_training`` (fp32 casts of the unquantized weights); neither
    is traced yet."""
    word = str(quant).strip().lower()
    if word not in QUANTS:
        raise LivebytesError(f"--lora-quant must be {', '.join(QUANTS)}, got {show(quant)}")
    raise LivebytesError(QUANT_REFUSED)


QUANT_REFUSED = ("--lora-quant 4bit (QLoRA): not traced: transformers quantizes to bitsandbytes' 4-bit storage when it "
                 "loads weights onto CUDA (from_pretrained with a BitsAndBytesConfig), which a model built from its "
                 "config on this CPU's meta tensors never does; LoRA of the bf16 base answers (--lora-rank alone)")


def adapter_parameter(fqn: str) -> bool:
    """Whether a parameter of a LoRA model requires grad: peft 0.21.2 freezes every parameter but the adapters'
    (tuners_utils.py:506 ``_mark_only_adapters_as_trainable``: those on a tuner layer, not its ``base_layer``), and a
    LoRA layer's adapter attributes are all named ``lora_*`` (``adapter_layer_names``: lora_A, lora_B,
    lora_embedding_A/B, lora_magnitude_vector). With bias "none" (peft's default; --lora-* sets no other) nothing else
    trains. FSDP2's placement checks it against the trace: an optimizer state of a parameter taken as frozen is
    refused (``fsdp.shard_model``)."""
    return any(part.startswith("lora_") for part in fqn.split("."))


def settings(lora: Optional[str]) -> dict | None:
    return json.loads(lora) if lora else None


def words(lora: Optional[str]) -> str:
    """``LoRA r16, alpha 8, all-linear`` (or the named targets); a full fine-tune: ``full fine-tune``."""
    s = settings(lora)
    if s is None:
        return "full fine-tune"
    targets = s["targets"] if isinstance(s["targets"], str) else ",".join(s["targets"])
    return f"LoRA r{s['r']}, alpha {s['alpha']:g}, targets {targets}"


def assumption(lora: Optional[str], peft_version: str) -> str:
    """The answer's line on LoRA: its settings and what peft makes of them."""
    return (f"{words(lora)} (peft {peft_version}'s get_peft_model, no dropout): the base weights frozen (no "
            "gradients, no optimizer states), each targeted Linear's lora_A [r, in] and lora_B [out, r] trained in "
            "fp32 (peft's autocast_adapter_dtype), their gradients and optimizer states fp32; the optimizer takes the "
            "adapters alone (HF Trainer's); what the frozen path saves for the backward is what autograd keeps")

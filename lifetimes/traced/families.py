"""Every traced model family as one row: a ``Family`` says all this source knows of one causal LM (as ``FlaLayer`` does
for one layer): its ``model_type``, registry name, the distribution and version whose code it traces, its causal-LM
class, its config class's defaults and fields, where its heads and head dim are, what kind of stack it is, the notes
every answer carries, and the layer its GPU probes build. ``model``, ``spec``, ``config_fields`` and the GPU probes
(``validate/gpu``) read the rows; nothing picks a family by name.

Adding a family is adding its row (and its notes) to ``ROWS``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import show

from .config_fields import COMMON, FLA_ANY, GATED_DELTANET, KDA, KIMI_LINEAR, KIMI_LINEAR_ATTN, QWEN3_NEXT

FLA = "flash-linear-attention"
PINNED = "0.6.0"            # the flash-linear-attention version the registered models trace (``model.check_environment``)
TRANSFORMERS = "5.17.0"     # the transformers version whose hybrids are traced (the H200 image's)


def frozen(mapping: Mapping) -> Mapping:
    """A read-only copy (a row's tables cannot change under the rows that share them)."""
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Probe:
    """The layer a family's GPU probes build (``validate/gpu/harnesses/fla_layer.py``, ``probes/boundary_probe.py``,
    ``probes/cpu_frames.py``): its probe name, harness key, class and the options it is built with beyond the shape's."""

    impl: str                       # "fla-kda-layer": the probes' case name
    harness: str                    # "fla-kda-layer@0.6.0": the harness (and layer model) key
    module: str                     # "fla.layers.kda"
    cls: str                        # "KimiDeltaAttention"
    options: Mapping = field(default_factory=lambda: frozen({}))

    def build(self, **sizes):
        """The layer, built with ``sizes`` and the row's options (imports the library)."""
        return getattr(importlib.import_module(self.module), self.cls)(**sizes, **self.options)


@dataclass(frozen=True)
class Family:
    """What one traced causal LM is (a row of ``ROWS``)."""

    model_type: str                 # the config's model_type
    name: str                       # registry key less its version: "fla-kda-model"
    causal_lm: str                  # the class the trace builds
    dist: str                       # the distribution whose code that class is
    version: str                    # ... its pinned version (the key's version: the one its records validated)
    defaults: Mapping               # the config class's defaults for what a config.json may leave out
    fields: Mapping                 # config field -> its Kind (``config_fields``), checked before a trace
    as_installed: str = ""          # a release series traced as installed ("5.": the user's transformers 5.x, any
                                    # release, said with every answer under another than ``version``); "": pinned
    weights: Mapping = field(default_factory=lambda: frozen({}))   # weight -> its factors' fields (``check_weights``)
    subfields: Mapping = field(default_factory=lambda: frozen({}))  # a sub-object field -> its fields' Kinds
    heads_field: str = "num_heads"  # where the config keeps the query heads the answer's shape counts ("": none, one)
    head_dim_fields: tuple[str, ...] = ("head_dim",)   # summed: the query/key head dim; (): hidden x expand_k / heads
    hybrid: bool = False            # layer types differ along the stack (config.layer_types): traced at its depth
    one_row: bool = False           # transformers' loss copies the shifted labels from two rows on: one row per batch
    moe: bool = False               # its blocks route tokens to experts (``model.ROUTINGS`` applies)
    packed_refused: str = ""        # why a packed batch is not traced ("" when it is)
    packed_batch: str = "cu_seqlens"  # a packed batch's inputs (``tracer.step.batch``): fla's ``cu_seqlens`` keyword,
                                    # or "flattening": transformers' DataCollatorWithFlattening with its flash kwargs
    gated_backward: str = ""        # the name fla-core's #640 refusal of the gated backward on Hopper gives it
    notes: tuple[str, ...] = ()     # said with every answer
    not_modelled: tuple[str, ...] = ()
    probe: Probe | None = None      # the layer its GPU probes build; None: no probe
    validated: bool = True          # checked against H200 measurements (False: its answers are labelled so)
    example: Mapping = field(default_factory=lambda: frozen({}))   # a small config of it (less model_type) that traces
    losses: tuple[str, ...] = ("fla",)   # the losses --loss takes for it, its default first (``model.LOSS_SAID``)

    @property
    def key(self) -> str:
        """The registry key: ``fla-kda-model@0.6.0``, ``qwen3-next-model@5.17.0``."""
        return f"{self.name}@{self.version}"


# ------------------------------------------------------------------------------------------------ the notes

# transformers 5.17.0 integrations/moe.py, sdpa_attention.py: what a hybrid's answer assumes
_CONV_FALLBACK = ("causal_conv1d: transformers' torch fallback (the causal-conv1d package is not installed, here or on "
                  "the H200)")
_GROUPED_MM = ("torch._grouped_mm's own CUDA workspace (CUTLASS grouped GEMM: problem-size arrays and scheduler "
               "workspace), allocated inside each call; which experts the tokens go to changes its work, not the "
               "traced buffers",)

# ------------------------------------------------------------------------------------------------ the rows

_WEIGHTS_FLA = frozen({"the embedding": ("vocab_size", "hidden_size"),
                       "the query projection": ("hidden_size", "num_heads", "head_dim"),
                       "the MLP": ("hidden_size", "intermediate_size")})

KDA_MODEL = Family(
    model_type="kda", name="fla-kda-model", causal_lm="KDAForCausalLM", dist=FLA, version=PINNED,
    # fla 0.6.0 configuration_kda.py:23-52
    defaults=frozen({"num_heads": 16, "head_dim": 128, "num_hidden_layers": 24, "hidden_size": 2048,
                     "vocab_size": 32000}),
    fields=frozen({**COMMON, **KDA}), weights=_WEIGHTS_FLA,
    probe=Probe("fla-kda-layer", "fla-kda-layer@0.6.0", "fla.layers.kda", "KimiDeltaAttention"))

GATED_DELTANET_MODEL = Family(
    model_type="gated_deltanet", name="fla-gdn-model", causal_lm="GatedDeltaNetForCausalLM", dist=FLA, version=PINNED,
    # fla 0.6.0 configuration_gated_deltanet.py:23-55
    defaults=frozen({"num_heads": 6, "head_dim": 256, "num_hidden_layers": 21, "hidden_size": 2048,
                     "vocab_size": 32000}),
    fields=frozen({**COMMON, **GATED_DELTANET}), weights=_WEIGHTS_FLA, gated_backward="GatedDeltaNet",
    probe=Probe("fla-gdn-layer", "fla-gdn-layer@0.6.0", "fla.layers.gated_deltanet", "GatedDeltaNet",
                frozen({"use_gate": True})))

QWEN3_NEXT_MODEL = Family(
    model_type="qwen3_next", name="qwen3-next-model", causal_lm="Qwen3NextForCausalLM", dist="transformers",
    version=TRANSFORMERS, as_installed="5.",
    # transformers 5.17.0 configuration_qwen3_next.py:86-119
    defaults=frozen({"num_attention_heads": 16, "head_dim": 256, "num_hidden_layers": 48, "hidden_size": 2048,
                     "vocab_size": 151936, "num_experts": 512, "moe_intermediate_size": 512,
                     "intermediate_size": 5632, "linear_num_value_heads": 32, "linear_value_head_dim": 128}),
    fields=frozen({**COMMON, **QWEN3_NEXT}),
    weights=frozen({"the embedding": ("vocab_size", "hidden_size"),
                    "the query projection": ("hidden_size", "num_attention_heads", "head_dim"),
                    "the linear attention's value projection": ("hidden_size", "linear_num_value_heads",
                                                                 "linear_value_head_dim"),
                    "the MLP": ("hidden_size", "intermediate_size"),
                    "the experts' weights": ("num_experts", "moe_intermediate_size", "hidden_size")}),
    heads_field="num_attention_heads", hybrid=True, one_row=True, moe=True,
    packed_batch="flattening",
    gated_backward="Qwen3-Next (its Gated DeltaNet layers)",
    notes=("full attention: transformers' sdpa with no mask (is_causal, enable_gqa), which torch 2.11's CUDA build runs "
           "as cuDNN attention on sm90 (tracer.sdpa)", _CONV_FALLBACK),
    not_modelled=_GROUPED_MM, losses=("default", "liger"))

KIMI_LINEAR_MODEL = Family(
    model_type="kimi_linear", name="kimi-linear-model", causal_lm="KimiLinearForCausalLM", dist="transformers",
    version=TRANSFORMERS, as_installed="5.",
    # transformers 5.17.0 configuration_kimi_linear.py:77-113
    defaults=frozen({"num_attention_heads": 32, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                     "num_hidden_layers": 27, "hidden_size": 2304, "vocab_size": 163840, "intermediate_size": 9216}),
    fields=frozen({**COMMON, **KIMI_LINEAR}),
    weights=frozen({"the embedding": ("vocab_size", "hidden_size"),
                    "the query projection": ("hidden_size", "num_attention_heads", "qk_nope_head_dim"),
                    "the MLP": ("hidden_size", "intermediate_size")}),
    # Kimi-Linear's checkpoints keep the linear layers' sizes in a sub-object (configuration_kimi_linear.py:123-136)
    subfields=frozen({"linear_attn_config": KIMI_LINEAR_ATTN}),
    # its MLA layers' heads and qk_nope_head_dim + qk_rope_head_dim, the qk_head_dim its config derives
    heads_field="num_attention_heads", head_dim_fields=("qk_nope_head_dim", "qk_rope_head_dim"), hybrid=True, one_row=True, moe=True,
    packed_batch="flattening",
    notes=("full attention (MLA): transformers' sdpa with no mask, q/k head dim qk_nope + qk_rope, v head dim "
           "v_head_dim, which torch 2.11's CUDA build runs as cuDNN attention on sm90 (tracer.sdpa)", _CONV_FALLBACK),
    not_modelled=_GROUPED_MM, losses=("default", "liger"))

# ------------------------------------------------------------------------------ every other fla causal LM, unvalidated

_TRACED = "its buffers are those its own layers allocate in flash-linear-attention 0.6.0's training step, traced on the CPU"
UNVALIDATED = f"unvalidated: no GPU measurement checks this family; {_TRACED}"
# GLA and DeltaNet: one GPU run each (three steps at 1 x 8,192 tokens, hidden 1,024, 4 layers, bf16, AdamW, cold, an
# H100), what it found in its own words
_ONE_RUN = ("unvalidated: one GPU run checks this family (three steps at 1 x 8,192 tokens, hidden 1,024, 4 layers, bf16, "
            "AdamW: its stack limit the one derived on the CPU before the run, {found}); elsewhere " + _TRACED)
ONE_RUN_GLA = _ONE_RUN.format(found="requested peaks exact, reserved inside the predicted band, allocated within 5 MiB "
                                    "at the peaks, 308 MiB more held after the first step than modelled, not found")
ONE_RUN_DELTA_NET = _ONE_RUN.format(found="requested and reserved peaks exact, allocated within 1 MiB")


def unvalidated(model_type: str, causal_lm: str, folder: str, defaults: dict, example: dict, notes: tuple = (),
                status: str = UNVALIDATED, **more) -> Family:
    """A row of an fla 0.6.0 causal LM (``fla/models/<folder>``) that traces on the CPU but that no measurement has
    checked across shapes (``status``: how far one has): ``defaults`` are its config class's
    (``configuration_<folder>.py``), ``example`` a small config of it."""
    return Family(model_type=model_type, name=f"fla-{model_type.replace('_', '-')}-model", causal_lm=causal_lm,
                  dist=FLA, version=PINNED, defaults=frozen(defaults), fields=frozen({**COMMON, **FLA_ANY}),
                  weights=frozen({"the embedding": ("vocab_size", "hidden_size")}), notes=(status,) + notes,
                  validated=False, example=frozen(example), **more)


ABC_MODEL = unvalidated(
    "abc", "ABCForCausalLM", "abc",
    defaults={"num_heads": 4, "expand_k": 0.5, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})
DELTA_NET_MODEL = unvalidated(
    "delta_net", "DeltaNetForCausalLM", "delta_net",
    defaults={"num_heads": 16, "expand_k": 1.0, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4}, status=ONE_RUN_DELTA_NET)
FORGETTING_TRANSFORMER_MODEL = unvalidated(
    "forgetting_transformer", "ForgettingTransformerForCausalLM", "forgetting_transformer",
    defaults={"num_heads": 32, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})
GLA_MODEL = unvalidated(
    "gla", "GLAForCausalLM", "gla",
    defaults={"num_heads": 4, "expand_k": 0.5, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4}, status=ONE_RUN_GLA)
GSA_MODEL = unvalidated(
    "gsa", "GSAForCausalLM", "gsa",
    defaults={"num_heads": 4, "expand_k": 1, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})
GATED_DELTAPRODUCT_MODEL = unvalidated(
    "gated_deltaproduct", "GatedDeltaProductForCausalLM", "gated_deltaproduct",
    defaults={"num_heads": 6, "head_dim": 256, "num_hidden_layers": 21, "hidden_size": 2048, "vocab_size": 32000},
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4, "head_dim": 64})
HGRN2_MODEL = unvalidated(
    "hgrn2", "HGRN2ForCausalLM", "hgrn2",
    defaults={"num_heads": 16, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})
HGRN_MODEL = unvalidated(
    "hgrn", "HGRNForCausalLM", "hgrn",
    defaults={"num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, heads_field="", head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False})
LIGHTNET_MODEL = unvalidated(
    "lightnet", "LightNetForCausalLM", "lightnet",
    defaults={"num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})
LINEAR_ATTN_MODEL = unvalidated(
    "linear_attn", "LinearAttentionForCausalLM", "linear_attn",
    defaults={"num_heads": 4, "expand_k": 1.0, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})
MESA_NET_MODEL = unvalidated(
    "mesa_net", "MesaNetForCausalLM", "mesa_net",
    defaults={"num_heads": 16, "head_dim": 128, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000},
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4, "head_dim": 64})
PARALLAX_MODEL = unvalidated(
    "parallax", "ParallaxForCausalLM", "parallax",
    defaults={"num_heads": 32, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})
PRECOND_KDA_MODEL = unvalidated(
    "precond_kda", "PrecondKDAForCausalLM", "precond_kda",
    defaults={"num_heads": 16, "head_dim": 128, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000},
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4, "head_dim": 64})
RWKV6_MODEL = unvalidated(
    "rwkv6", "RWKV6ForCausalLM", "rwkv6",
    defaults={"num_heads": 4, "expand_k": 0.5, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})
RAVEN_MODEL = unvalidated(
    "raven", "RavenForCausalLM", "raven",
    defaults={"num_heads": 4, "expand_k": 1, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4},
    notes=("Raven's layer (fla/layers/raven.py) runs fla's chunk_gsa kernels (gated slot attention), GSA's own",))
RETNET_MODEL = unvalidated(
    "retnet", "RetNetForCausalLM", "retnet",
    defaults={"num_heads": 8, "expand_k": 1.0, "num_hidden_layers": 24, "hidden_size": 2048, "vocab_size": 32000}, head_dim_fields=(),
    example={"hidden_size": 256, "num_hidden_layers": 1, "vocab_size": 4096, "fuse_cross_entropy": False, "num_heads": 4})

ROWS: tuple[Family, ...] = (KDA_MODEL, GATED_DELTANET_MODEL, QWEN3_NEXT_MODEL, KIMI_LINEAR_MODEL, ABC_MODEL,
                            DELTA_NET_MODEL, FORGETTING_TRANSFORMER_MODEL, GLA_MODEL, GSA_MODEL, GATED_DELTAPRODUCT_MODEL,
                            HGRN2_MODEL, HGRN_MODEL, LIGHTNET_MODEL, LINEAR_ATTN_MODEL,
                            MESA_NET_MODEL, PARALLAX_MODEL, PRECOND_KDA_MODEL, RWKV6_MODEL, RAVEN_MODEL,
                            RETNET_MODEL)

# fla 0.6.0's causal LMs that do not trace on the CPU, and why (each refused in this one line)
_FLASH_ATTN = "its attention calls flash-attn's CUDA kernels (flash_attn_func), which the tracer's meta tensors cannot run"
_ITEM = "its forward reads a tensor's value (.item()), which a meta tensor does not have"
_CUDA = "its kernels refuse any tensor but a CUDA device's, which the tracer's meta tensors are not"
_TRITON_640 = ("fla-core 0.6.0 refuses its gated backward under Triton >= 3.4.0 and < 3.7.1 (#640), the Triton this "
               "tracer runs")
_FAILS = "its training step on the tracer's meta tensors fails inside fla 0.6.0 at a small config, not yet traced"
REFUSED = frozen({
    "bitnet": _FLASH_ATTN, "deltaformer": _FLASH_ATTN, "mla": _FLASH_ATTN, "transformer": _FLASH_ATTN,
    "moba": _FLASH_ATTN, "samba": _FLASH_ATTN, "cat": _ITEM, "mom": _ITEM, "cyclic_flow_attention": _CUDA, "mamba3": _CUDA,
    "stickbreaking_attn": _CUDA, "comba": _TRITON_640, "precond_gated_deltanet": _TRITON_640, "yoco": _TRITON_640,
    "mamba2": ("its step at one sequence and at two runs other code (fla/utils/decorators.py:93 copies an input to make "
               "it contiguous at two), which the formulas over the batch size do not join yet"),
    "mamba": ("without the mamba_ssm and causal_conv1d CUDA kernels its layer loops over every token (fla 0.6.0 "
              "fla/layers/mamba.py:304-383 slow_forward): a GPU with mamba_ssm runs other code, and its trace at the "
              "learning shapes ran past 10 minutes here"),
    "path_attn": ("its PaTH kernel's workspace (fla/ops/path_attn/cumprod_householder_fwd.py:120) grows with the "
                  "sequence length by a rounding that no formula in T, N and S fits from the learning shapes yet"),
    "log_linear_mamba2": "its training step raises NotImplementedError in fla 0.6.0",
    "nsa": f"{_FAILS} (TypeError: 'NoneType' object is not callable)",
    "rwkv7": f"{_FAILS} (ZeroDivisionError: division by zero)",
    "rodimus": f"{_FAILS} (TypeError: 'NoneType' object is not subscriptable)",
})

BY_TYPE = frozen({f.model_type: f for f in ROWS})


def family(model_type) -> Family:
    """The row of ``model_type``; any other, one line naming those traced."""
    row = BY_TYPE.get(model_type) if isinstance(model_type, str) else None
    if row is None and isinstance(model_type, str) and model_type in REFUSED:
        raise LivebytesError(f"model_type {show(model_type)} is not traced: {REFUSED[model_type]}")
    if row is None:
        raise LivebytesError(f"model_type {show(model_type)} is not traced (known: {', '.join(BY_TYPE)})")
    return row


def probed(impl: str) -> Probe:
    """The GPU probes' layer named ``impl`` (``fla-kda-layer``); any other, one line naming those probed."""
    probes = {f.probe.impl: f.probe for f in ROWS if f.probe is not None}
    if impl not in probes:
        raise LivebytesError(f"no family's GPU probe builds the layer {show(impl)} (known: {', '.join(probes)})")
    return probes[impl]


def probe_impls() -> tuple[str, ...]:
    return tuple(f.probe.impl for f in ROWS if f.probe is not None)

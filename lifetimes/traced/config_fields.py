"""What each family's config class reads, checked before anything is traced: one line naming the field and the file.

A config's class takes what ``config.json`` holds with no check of its own: ``conv_size: 0`` built a model with no
short convolution, ``tie_word_embeddings: "no"`` (a non-empty string, true to Python) tied the embeddings,
``rms_norm_eps: "x"`` and ``model_type: ["kda"]`` failed deep in a trace or as a traceback. The tables here declare,
per family (each row's ``Family.fields``, ``families``), the fields its class's ``__init__`` reads (fla 0.6.0
``fla/models/kda/configuration_kda.py`` and ``fla/models/gated_deltanet/configuration_gated_deltanet.py``; transformers 5.17.0
``models/qwen3_next/configuration_qwen3_next.py`` and ``models/kimi_linear/configuration_kimi_linear.py``) with the
type and domain each must have; ``check_config`` holds a config to them. A field no table declares (provenance such as
``rope_theta`` or ``model_max_length``, a token id) is passed through as it is: nothing here reads it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import show
from livebytes.estimator.shapes import MAX_SIZE


@dataclass(frozen=True)
class Kind:
    """A field's type and domain: ``ok(value)``, and the words an error says it must be."""
    ok: Callable[[object], bool]
    says: str


def _integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _nullable(kind: Kind) -> Kind:
    return Kind(lambda v: v is None or kind.ok(v), f"{kind.says} or null")


def _word(*words: str) -> Kind:
    return Kind(lambda v: v in words and isinstance(v, str), "one of " + ", ".join(repr(w) for w in words))


def _list_of(kind: Kind, what: str) -> Kind:
    return Kind(lambda v: isinstance(v, list) and all(kind.ok(x) for x in v), f"a list of {what}")


# a size: a count of heads, a width, a vocabulary; the shape's own bound (estimator/shapes.py MAX_SIZE, 2^50): beyond
# it no tensor of the model has a byte count any GPU holds, and the product of two such stays an exact integer
SIZE = Kind(lambda v: _integer(v) and 0 < v <= MAX_SIZE, "a positive integer (at most 2^50)")
COUNT = Kind(lambda v: _integer(v) and 0 <= v <= MAX_SIZE, "a non-negative integer (at most 2^50)")
FLAG = Kind(lambda v: isinstance(v, bool), "true or false")
POSITIVE = Kind(lambda v: _number(v) and v > 0, "a positive number")
NON_NEGATIVE = Kind(lambda v: _number(v) and v >= 0, "a non-negative number")
FRACTION = Kind(lambda v: _number(v) and 0 <= v <= 1, "a number from 0 to 1")
NUMBER = Kind(_number, "a number")
TEXT = Kind(lambda v: isinstance(v, str) and v != "", "a non-empty string")
OBJECT = Kind(lambda v: isinstance(v, dict), "an object")
LAYER_TYPES = _list_of(_word("linear_attention", "full_attention"), "'linear_attention' or 'full_attention'")

# every family: the sizes the traced model's own code reads (``model.config_sizes``, ``hybrid``, ``loops``); null is
# refused (leave a field out for its class's default)
COMMON = {name: SIZE for name in (
    "hidden_size", "vocab_size", "num_heads", "head_dim", "num_attention_heads", "num_key_value_heads", "num_experts",
    "num_experts_per_tok", "moe_intermediate_size", "full_attention_interval", "num_local_experts", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "kv_lora_rank", "linear_num_heads", "linear_head_dim", "linear_num_key_heads",
    "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim")}
COMMON.update(tie_word_embeddings=FLAG, use_cache=FLAG, hidden_act=TEXT, initializer_range=NON_NEGATIVE,
              max_position_embeddings=SIZE, intermediate_size=SIZE)

# fla 0.6.0's two models (configuration_kda.py:21-54, configuration_gated_deltanet.py:21-57); a training step runs
# the chunked kernels only (fla/layers/kda.py:218, gated_deltanet.py:234: ``assert mode == 'chunk'`` when training)
FLA = {"attn_mode": _word("chunk"), "expand_v": POSITIVE, "use_short_conv": FLAG, "allow_neg_eigval": FLAG,
       "conv_size": SIZE, "num_v_heads": _nullable(SIZE), "hidden_ratio": _nullable(SIZE),
       "intermediate_size": _nullable(SIZE), "norm_eps": POSITIVE, "attn": _nullable(OBJECT), "fuse_norm": FLAG,
       "fuse_swiglu": FLAG, "fuse_cross_entropy": FLAG, "use_l2warp": FLAG, "attnres_block_size": _nullable(SIZE)}
KDA = {**FLA, "safe_gate": FLAG, "lower_bound": _nullable(NUMBER)}
# any other fla 0.6.0 causal LM (``families.unvalidated``): the fields every fla config class shares, as their
# ``__init__`` reads them (configuration_gla.py, configuration_mamba2.py, ...); the rest passes through to the class
FLA_ANY = {"hidden_ratio": _nullable(POSITIVE), "intermediate_size": _nullable(SIZE), "expand_k": POSITIVE,
           "expand_v": POSITIVE, "norm_eps": POSITIVE, "fuse_norm": FLAG, "fuse_swiglu": FLAG, "fuse_cross_entropy": FLAG,
           "fuse_linear_cross_entropy": FLAG, "use_l2warp": FLAG}
GATED_DELTANET = {**FLA, "use_gate": FLAG, "fuse_linear_cross_entropy": FLAG,
                  "output_gate_activation": _word("swish", "silu", "sigmoid")}

# transformers 5.17.0's two hybrids (configuration_qwen3_next.py:86-119, configuration_kimi_linear.py:77-113)
HYBRID = {"rms_norm_eps": POSITIVE, "attention_bias": FLAG, "attention_dropout": _nullable(FRACTION),
          "norm_topk_prob": FLAG, "layer_types": _nullable(LAYER_TYPES)}
QWEN3_NEXT = {**HYBRID, "rope_parameters": _nullable(OBJECT), "decoder_sparse_step": SIZE,
              "shared_expert_intermediate_size": SIZE, "output_router_logits": FLAG, "router_aux_loss_coef": NON_NEGATIVE,
              "mlp_only_layers": _nullable(_list_of(COUNT, "layer indices (non-negative integers)"))}
KIMI_LINEAR = {**HYBRID, "n_shared_experts": COUNT, "routed_scaling_factor": POSITIVE, "q_lora_rank": _nullable(SIZE),
               "n_group": SIZE, "topk_group": _nullable(SIZE), "pretraining_tp": _nullable(SIZE),
               "mlp_layer_types": _nullable(_list_of(_word("dense", "sparse"), "'dense' or 'sparse'")),
               "first_k_dense_replace": COUNT, "linear_attn_config": OBJECT}
# Kimi-Linear's checkpoints keep the linear layers' sizes in a sub-object (configuration_kimi_linear.py:123-136; its
# layer lists are 1-indexed)
KIMI_LINEAR_ATTN = {"head_dim": SIZE, "num_heads": SIZE, "short_conv_kernel_size": SIZE,
                    "full_attn_layers": _list_of(SIZE, "layer numbers (positive integers)"),
                    "kda_layers": _list_of(SIZE, "layer numbers (positive integers)")}

def _refusal(where: str, field: str, kind: Kind, value) -> LivebytesError:
    if value is None:
        return LivebytesError(f"{where}: {field} is null: give {kind.says} or leave it out (its class's default)")
    return LivebytesError(f"{where}: {field} must be {kind.says}, got {show(value)}")


def check_fields(data: dict, table: dict, where: str, prefix: str = "") -> None:
    """Each field of ``data`` that ``table`` declares held to its kind; the first one that is not, one line."""
    for field, kind in table.items():
        if field in data and not kind.ok(data[field]):
            raise _refusal(where, prefix + field, kind, data[field])


def check_weights(data: dict, fam, where: str) -> None:
    """Each of the family's weights (``Family.weights``) at most 2^50 elements (a field left out: its class's default;
    one with none, or null, such as FLA's ``intermediate_size``, derived from others: that weight is not checked here)."""
    for weight, names in fam.weights.items():
        sizes = [config_value(data, name, fam.defaults) for name in names]
        if None in sizes or math.prod(sizes) <= MAX_SIZE:
            continue
        given = " x ".join(f"{name} {size:,}" for name, size in zip(names, sizes))
        raise LivebytesError(f"{where}: {weight} would hold {given} = {math.prod(sizes):,} elements, beyond any GPU "
                             f"(at most 2^50); check those fields")


def check_config(data: dict, fam, where: str) -> None:
    """A config of the family ``fam`` (``families.Family``) held to its class's fields, sub-objects too
    (``Family.subfields``), and its weights to a size some GPU could hold (``check_weights``)."""
    check_fields(data, fam.fields, where)
    for name, table in fam.subfields.items():
        if name in data:
            check_fields(data[name], table, where, f"{name}.")
    check_weights(data, fam, where)


def config_value(config: dict, name: str, defaults: dict):
    """``name`` of a (checked) config, or its class's default where the config leaves it out (``Family.defaults``;
    None where the row has none)."""
    return config[name] if name in config else defaults.get(name)

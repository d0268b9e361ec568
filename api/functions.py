"""The public functions of ``import livebytes``: the HF/FLA keyword names users type, turned into what the command
line's flags parse to (a model key, a ``Shape``, a ``calls.Setting``), then the same ``calls.*_at`` the command runs.

``model`` is a registry key (``"fla-kda@0.6.0"``, see ``livebytes.models()``) or, for a whole model's training step,
an HF config: a path to its config.json, a preset's name (``"qwen3-next-80b-a3b"``, ``livebytes models`` lists
them), a dict, or a ``transformers.PretrainedConfig``.
"""
from __future__ import annotations

import os
from dataclasses import replace

from . import calls
from .arguments import SWEEP_AXES, ArgumentError, checked, models as many_models
from livebytes.estimator.errors import LivebytesError
from .choose import ep_of, fsdp_of, device_of, what_if
from livebytes.estimator.process.memory import check_triton, triton_versions
from livebytes.estimator.shapes import Shape, head_v_dim, parse_size, parse_ratio
from livebytes.estimator.devices import parse_budget

# keyword -> the ``Shape`` field it sets (the names of HF configs and FLA's layers)
SHAPE_KEYWORDS = {"seq_len": "seq", "batch_size": "mbs", "num_heads": "heads", "num_v_heads": "v_heads",
                  "head_dim": "dim", "hidden_size": "hidden", "num_hidden_layers": "layers", "conv_size": "conv_size",
                  "checkpoint": "checkpoint"}
# the command line's options, each flag's name with underscores: those that choose the model, those of the verdict
MODEL_KEYWORDS = ("gpu", "contract", "no_recompute", "cp", "cp_layout", "cp_rank")
SETTING_KEYWORDS = (*MODEL_KEYWORDS, "alloc_conf", "triton_cache", "triton")
WHOLE_MODEL_KEYWORDS = ("optimizer", "precision", "packed", "routing", "loss", "lora_rank", "lora_alpha", "lora_targets",
                        "lora_quant", "fsdp", "ep")
# what a whole model's config fixes (its sizes), or a whole model does not take (a kernel's what-if; its ``cp`` is the
# context-parallel degree of the mesh, as --cp is for --model)
CONFIG_FIXED = ("num_heads", "head_dim", "num_v_heads", "expand_v", "hidden_size", "conv_size", "contract", "no_recompute",
                "cp_layout", "cp_rank")
# FLA's expand_v: the value head dim over head_dim (``shapes.head_v_dim``), where a model takes value-head width
VALUE_WIDTH = ("expand_v",)
ONE_SHAPE = (*SHAPE_KEYWORDS, *VALUE_WIDTH, *SETTING_KEYWORDS, *WHOLE_MODEL_KEYWORDS)


def refuse_given(why: str, given: dict, names) -> None:
    """Refuse the keywords of ``names`` present in ``given``: they change nothing ``why``."""
    refused = [n for n in names if given.get(n) not in (None, False)]
    if refused:
        raise ArgumentError(f"{', '.join(refused)} {'has' if len(refused) == 1 else 'have'} no effect {why}; leave "
                            f"{'it' if len(refused) == 1 else 'them'} out", refused[0])


def is_config(model) -> bool:
    """A whole model's config (a path to a .json file or an existing file, a preset's name such as
    "qwen3-next-80b-a3b", a dict, a PretrainedConfig), not a key."""
    if isinstance(model, str):
        from livebytes.lifetimes.traced.presets import preset_names  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        return model.endswith(".json") or os.path.isfile(model) or model in preset_names()
    return isinstance(model, (dict, os.PathLike)) or hasattr(model, "to_diff_dict")


def config_text(model) -> str:
    """The config as canonical JSON (``traced.model``): a PretrainedConfig as ``save_pretrained`` writes it."""
    from livebytes.lifetimes.traced.model import canonical_config  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.presets import config_of  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    if isinstance(model, (str, os.PathLike)):
        return config_of(os.fspath(model))
    data = model if isinstance(model, dict) else model.to_diff_dict()
    return canonical_config(dict(data), "config")


def chosen(model, given: dict) -> tuple[str, dict, int | None, int | None]:
    """(model key, the options a whole model's request adds, its config's heads and head dim) of ``model``; the
    keywords that mean nothing for that kind of model refused."""
    if not is_config(model):
        if not isinstance(model, str):
            raise ArgumentError(f"model must be a registry key such as 'fla-kda@0.6.0' or an HF config, got {type(model).__name__}", "model")
        refuse_given("for a kernel or layer model (they set a whole model's training step)", given, WHOLE_MODEL_KEYWORDS)
        return model, {}, None, None
    refuse_given("for a whole model: its config's sizes count, and it takes no kernel what-if", given, CONFIG_FIXED)
    from livebytes.lifetimes.traced.lora import lora_option  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import config_sizes, options_for
    lora = lora_option(*(given.get(f"lora_{k}") for k in ("rank", "alpha", "targets", "quant")))
    text = config_text(model)
    key, options = options_for(text, given.get("optimizer") or "adamw", given.get("precision") or "bf16",
                               bool(given.get("packed")), routing=given.get("routing"), lora=lora,
                               loss=given.get("loss"))
    heads, dim = config_sizes(text)
    _check_triton_first(key, given)
    return key, options | _mesh(given), heads, dim


def _mesh(given: dict) -> dict:
    """``fsdp`` W and ``ep`` E of a whole model (the command line's --fsdp and --ep; ``cp`` joins them through the
    what-if keywords, ``setting_of``), each problem an ArgumentError naming the keyword."""

    try:
        return fsdp_of(given.get("fsdp"), "fsdp") | ep_of(given.get("ep"), "ep")
    except LivebytesError as err:
        raise ArgumentError(str(err), "fsdp" if str(err).startswith("fsdp") else "ep") from None


def _check_triton_first(key: str, given: dict) -> None:
    """A whole model's ``triton`` checked before its trace (a minute), as its verdict would check it after
    (``choose.triton_for``): a version the process-memory data lack for it is refused now."""

    if given.get("triton") is None:
        return
    device = device_of(key, given.get("gpu"))
    if triton_versions(key, device):
        try:
            check_triton(key, given["triton"], device)
        except LivebytesError as err:
            raise ArgumentError(f"triton: {err}", "triton") from None


def shape_of(given: dict, heads=None, dim=None, seq_len=None):
    """The ``Shape`` the keywords describe (sizes take 8192 or "8K"; ``expand_v`` the value head dim over head_dim);
    ``heads``/``dim``: a whole model's config's."""
    sizes = {"num_heads": heads, "head_dim": dim or 128, "batch_size": 1, "seq_len": seq_len} | {
        k: v for k, v in given.items() if k in SHAPE_KEYWORDS and v is not None}
    for required in ("seq_len", "num_heads"):
        if sizes.get(required) is None:
            raise ArgumentError(f"{required} is required" + (" (a whole model's config gives it)" if required == "num_heads" else ""),
                                required)
    fields = {SHAPE_KEYWORDS[k]: parse_size(v, k) for k, v in sizes.items() if k != "checkpoint"}
    if given.get("expand_v") is not None:
        fields["dim_v"] = head_v_dim(fields["dim"], given["expand_v"])
    return Shape(**fields, checkpoint=True if sizes.get("checkpoint") else None)


def setting_of(given: dict, options: dict) -> calls.Setting:
    """The verdict's setting: the what-if keywords (``choose.what_if``) with a whole model's options."""
    return calls.Setting(given.get("gpu"), what_if(given.get("contract"), bool(given.get("no_recompute")), given.get("cp"),
                                                   given.get("cp_layout"), given.get("cp_rank")) | options,
                         given.get("alloc_conf"), given.get("triton_cache"), given.get("triton"))


@checked(ONE_SHAPE)
def predict(model, **keywords) -> calls.Prediction:
    """Peak memory of ``model`` at one shape, by storage group, and whether a fresh process runs it on the GPU.

    ``livebytes.predict("fla-kda@0.6.0", seq_len=8192, num_heads=96).fits`` -> True or False."""
    key, options, heads, dim = chosen(model, keywords)
    return calls.predict_at(key, shape_of(keywords, heads, dim), setting_of(keywords, options))


@checked(ONE_SHAPE)
def compare(models, **keywords) -> calls.Comparison:
    """Several registry keys side by side at one shape (or one whole model's config), each with its verdict."""
    keys = [models] if isinstance(models, str) or is_config(models) else list(models)
    picked = [chosen(m, keywords) for m in keys]
    if len(picked) > 1 and any(p[1] for p in picked):
        raise ArgumentError("models: a whole model's config compares alone (as compare --model); give registry keys to compare several", "models")
    key_list, options, heads, dim = [p[0] for p in picked], picked[0][1], picked[0][2], picked[0][3]
    return calls.compare_at(key_list, shape_of(keywords, heads, dim), setting_of(keywords, options))


@checked(ONE_SHAPE, kinds={"model": many_models})
def plan(model, solve: str = "seq_len", budget=None, **keywords) -> calls.Plan:
    """The largest ``solve`` (seq_len, batch_size, num_heads or num_hidden_layers; the short names seq, mbs, heads,
    layers too) that runs on the GPU, or whose allocated peak fits ``budget`` ("80GiB" or bytes); the other sizes held
    (seq_len 8K and num_heads 96 unless given)."""
    from livebytes.estimator.planning import solved_field  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    field = solved_field(solve)
    solved = next(k for k, f in SHAPE_KEYWORDS.items() if f == field)
    refuse_given(f"with solve={solve!r}: plan solves for it", keywords, (solved,))
    solve = field
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    picked = [chosen(m, keywords) for m in models]
    if picked[0][1] and solve == "heads":
        raise ArgumentError("solve='num_heads' for a whole model: the config fixes the heads; solve seq_len, batch_size or "
                            "num_hidden_layers", "solve")
    base = shape_of(keywords, picked[0][2] or 96, picked[0][3], seq_len="8K")
    base = replace(base, layers=base.layers or 1) if solve == "layers" else base
    limit = parse_budget(budget) if isinstance(budget, str) else None if budget is None else int(budget)   # whole bytes: checked
    return calls.plan_at([p[0] for p in picked], base, solve, setting_of(keywords, picked[0][1]), limit)


@checked(("hidden_size", "num_hidden_layers", "conv_size", "checkpoint", *SETTING_KEYWORDS), kinds=SWEEP_AXES)
def sweep(models, seq_len="8K..256K", num_heads="16,32,64,96,128", batch_size=1, head_dim=128, num_v_heads=None,
          expand_v=None, **keywords) -> calls.Sweep:
    """Predictions over a grid: each size an int, a list, or the command line's text ("8K..256K", "16,32");
    ``num_v_heads`` None: as many value heads as heads; ``expand_v`` (a number, a list, or "0.5..2") None: the value
    head dim is head_dim, else head_dim * expand_v at each point."""
    keys = list(models) if isinstance(models, (list, tuple)) else [models]
    for m in keys:
        if is_config(m) or not isinstance(m, str):
            raise ArgumentError("models: sweep takes registry keys (a whole model: the command line's sweep --model)", "models")
    stack = shape_of({**keywords, "seq_len": 1, "num_heads": 1}).layer_fields()     # one stack for the whole grid
    grid = calls.Grid(_sizes(batch_size, "batch_size"), _sizes(seq_len, "seq_len"), _sizes(num_heads, "num_heads"),
                      _sizes(head_dim, "head_dim"), stack,
                      None if num_v_heads is None else _sizes(num_v_heads, "num_v_heads"),
                      None if expand_v is None else _ratios(expand_v))
    return calls.sweep_at(keys, grid, setting_of(keywords, {}))


def _ratios(value) -> list[str]:
    """``expand_v``'s values as text (``shapes.head_v_dim`` reads each exactly): a number, a list, or "0.5..2"."""
    from livebytes.estimator.planning import parse_ratio_range  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    if isinstance(value, (list, tuple)):
        for v in value:
            parse_ratio(v, "expand_v")          # each refused here, naming the keyword
        return [str(v) for v in value]
    return parse_ratio_range(str(value), "expand_v")


def _sizes(value, name: str) -> list[int]:
    from livebytes.estimator.planning import parse_range  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    if isinstance(value, (list, tuple)):
        return [parse_size(v, name) for v in value]
    return parse_range(str(value), name)


@checked((*SHAPE_KEYWORDS, *VALUE_WIDTH, *MODEL_KEYWORDS))
def explain(snapshot, model, at: str = "peak", **keywords) -> calls.Explanation:
    """Each live block of a ``torch.cuda.memory._dump_snapshot`` file named by ``model``'s buffer at this shape."""
    key, options, heads, dim = chosen(model, keywords)
    return calls.explain_at(snapshot, key, shape_of(keywords, heads, dim), setting_of(keywords, options), at)


@checked()
def models() -> tuple:
    """Every registered model (``livebytes models``), as ``ModelInfo``."""
    return calls.models_at()

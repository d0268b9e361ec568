"""The public calls' arguments, checked before anything is built or traced: what each parameter accepts (``KINDS``, one
table: its types and, where the library reads it without a model, its domain), and ``checked``, the one decorator that
binds a call's arguments, refuses a keyword it does not take (naming the close match) and checks each value against
the table. Every refusal is one ``ArgumentError`` naming the argument (``.argument``), so a caller never sees Python's
own AttributeError, IndexError or TypeError from deep inside the library."""
from __future__ import annotations

import functools
import inspect
import math
import os
from difflib import get_close_matches
from typing import Callable, Optional

from livebytes.estimator.errors import UsageProblem
from livebytes.estimator.fields import show
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import parse_size, parse_ratio, HF_NAMES
from livebytes.estimator.devices import get_device, parse_budget
from livebytes.estimator.capacity import check_state
from .choose import word, alloc_conf_of


class ArgumentError(UsageProblem, TypeError):
    """A bad argument to a public call: a keyword the call does not take, a value of the wrong type, an empty list, a
    NaN or a value out of range; ``argument`` is the parameter's name (None: the call's positional arguments as a
    whole). A ``LivebytesError`` (so a ``ValueError``) and a ``TypeError``: ``except`` either catches it."""

    def __init__(self, message: str, argument: Optional[str] = None):
        super().__init__(message)
        self.argument = argument


ArgumentError.__module__ = "livebytes"     # its public name (``livebytes.ArgumentError``), as tracebacks print it


def _got(value) -> str:
    """The refused value as a message quotes it: its type where the repr alone does not say it (``list []``)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return show(value)
    return f"{type(value).__name__} {show(value)}"


def _refused(name: str, expected: str, value) -> ArgumentError:
    return ArgumentError(f"{name}: expected {expected}, got {_got(value)}", name)


def _parsed(name: str, parse: Callable, value):
    """``parse(value)``, its refusal (a ``LivebytesError`` naming ``name``) re-raised as this argument's."""
    try:
        return parse(value)
    except ArgumentError:
        raise
    except LivebytesError as err:
        raise ArgumentError(_naming(str(err), name), name) from None


def _naming(message: str, name: str) -> str:
    """``message`` naming the keyword ``name``: the command line's flag (``--alloc-conf``) said as the keyword, or the
    keyword put first where the library's message names neither."""
    flag = "--" + name.replace("_", "-")
    if flag in message:
        return message.replace(flag, name)
    return message if message.startswith(name) else f"{name}: {message}"


# ---------------------------------------------------------------------------------------------- the kinds of value

def size(name: str, value) -> None:
    """A positive whole size: 8192 or text ("8K"); ``shapes.parse_size``'s range (a float, NaN or bool refused)."""
    if not isinstance(value, (int, str)):       # a bool is refused by parse_size ("True is not a positive integer")
        raise _refused(name, "a positive integer or text such as '8K'", value)
    _parsed(name, lambda v: parse_size(v, name), value)


def sizes(name: str, value) -> None:
    """``sweep``'s axis: one size, a non-empty list or tuple of sizes, or the command line's text ("8K..256K", "16,32")."""
    from livebytes.estimator.planning import parse_range  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    if isinstance(value, (list, tuple)):
        if not value:
            raise ArgumentError(f"{name}: an empty {type(value).__name__}; give one value or more", name)
        for item in value:
            size(name, item)
    elif isinstance(value, str):
        _parsed(name, lambda v: parse_range(v, name), value)
    else:
        size(name, value)


def ratio(name: str, value) -> None:
    """A positive ratio (FLA's ``expand_v``): a finite number or its text, ``shapes.parse_ratio``'s range."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _refused(name, "a positive number such as 0.5, 1 or 2", value)
    _parsed(name, lambda v: parse_ratio(v, name), value)


def ratios(name: str, value) -> None:
    """``sweep``'s ``expand_v``: one ratio, a non-empty list or tuple of them, or the text "0.5..2" / "0.5,1"."""
    from livebytes.estimator.planning import parse_ratio_range  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    if isinstance(value, (list, tuple)):
        if not value:
            raise ArgumentError(f"{name}: an empty {type(value).__name__}; give one value or more", name)
        for item in value:
            ratio(name, item)
    elif isinstance(value, str):
        _parsed(name, lambda v: parse_ratio_range(v, name), value)
    else:
        ratio(name, value)


def flag(name: str, value) -> None:
    """True or False: "no", 0 or "false" are not read as a choice (a non-empty string is truthy)."""
    if not isinstance(value, bool):
        raise _refused(name, "True or False", value)


def text(name: str, value) -> None:
    """A word or a version (``contract="report"``, ``triton="3.6.0"``): its values are checked against the model."""
    if not isinstance(value, str) or not value.strip():
        raise _refused(name, "a word (text)", value)


def lora_setting(name: str, value) -> None:
    """A LoRA keyword (``lora_rank=16``, ``lora_alpha=32``, ``lora_targets="all-linear"``): a number or text, whose
    meaning ``lifetimes.traced.lora.lora_option`` checks."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _refused(name, "a number or text", value)


def one_of(*words: str) -> Callable:
    """One of ``words`` (a choice no model changes)."""
    def check(name: str, value) -> None:
        if value not in words:
            raise _refused(name, " or ".join(map(repr, words)), value)
    return check


def gpu(name: str, value) -> None:
    """A device preset's name (``devices.get_device``: "H200", "b300")."""
    text(name, value)
    _parsed(name, get_device, value)


def triton_cache(name: str, value) -> None:
    """The Triton cache state a verdict simulates (``capacity.check_state``)."""

    text(name, value)
    _parsed(name, lambda v: check_state(word(v)), value)


def alloc_conf(name: str, value) -> None:
    """PyTorch's allocator configuration as text ("expandable_segments:True"), read as ``choose.alloc_conf_of``."""
    if not isinstance(value, str):          # "" is PyTorch's default, as an empty PYTORCH_ALLOC_CONF
        raise _refused(name, "text such as 'expandable_segments:True'", value)
    _parsed(name, alloc_conf_of, value)


def solve(name: str, value) -> None:
    """The dimension ``plan`` solves for (``planning.solved_field``)."""
    from livebytes.estimator.planning import solved_field  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    text(name, value)
    _parsed(name, solved_field, value)


def budget(name: str, value) -> None:
    """A memory budget: text with a unit ("80GiB", ``devices.parse_budget``) or whole bytes (an int, or a whole float
    such as 8e10), positive and below 2^63 bytes as parse_budget's."""
    if isinstance(value, str):
        _parsed(name, parse_budget, value)
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refused(name, "a size with a unit such as '80GiB', or bytes as an integer", value)
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ArgumentError(f"{name}: {show(value)} is not a whole number of bytes (or give a unit: '80GiB')", name)
    if not 0 < value < 2**63:
        raise ArgumentError(f"{name}: must be positive and below 2^63 bytes, got {show(value)}", name)


def path(name: str, value) -> None:
    """A file's path: text or an ``os.PathLike`` (bytes refused: the library reads paths as text)."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value) or isinstance(os.fspath(value), bytes):
        raise _refused(name, "a file's path (text or a pathlib.Path)", value)


def seconds(name: str, value) -> None:
    """A time limit in seconds: a positive finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refused(name, "a number of seconds", value)
    if not (math.isfinite(value) and value > 0):
        raise ArgumentError(f"{name}: must be a positive finite number of seconds, got {show(value)}", name)


def key(name: str, value) -> None:
    """A registry key ("fla-kda@0.6.0")."""
    if not isinstance(value, str) or not value.strip():
        raise _refused(name, "a registry key such as 'fla-kda@0.6.0' (livebytes.models() lists them)", value)


def model(name: str, value) -> None:
    """A registry key or a whole model's HF config: a path, a preset's name, a dict or a ``PretrainedConfig``; a dict
    (or a config's ``to_diff_dict``) must hold only what JSON holds, as config.json does."""
    if isinstance(value, str):
        key(name, value)
        return
    if isinstance(value, os.PathLike):
        path(name, value)
        return
    if isinstance(value, dict) or hasattr(value, "to_diff_dict"):
        _config_fields(name, value if isinstance(value, dict) else value.to_diff_dict())
        return
    raise _refused(name, "a registry key such as 'fla-kda@0.6.0', or an HF config (a path, a preset's name, a dict "
                   "or a PretrainedConfig)", value)


def models(name: str, value) -> None:
    """One model (``model``) or a non-empty list or tuple of them, none given twice."""
    if not isinstance(value, (list, tuple)):
        model(name, value)
        return
    if not value:
        raise ArgumentError(f"{name}: an empty {type(value).__name__}; give one model or more", name)
    for item in value:
        model(name, item)
    named = [m if isinstance(m, str) else os.fspath(m) if isinstance(m, os.PathLike) else repr(m) for m in value]
    if len(set(named)) != len(named):
        raise ArgumentError(f"{name}: a model given more than once in {show(list(value), 80)}", name)


# JSON's values (what config.json can hold); a tuple is written as a list
_JSON_SCALARS = (str, int, float, bool, type(None))


def _config_fields(name: str, data: dict, where: str = "") -> None:
    """Every key of a config text, every value one JSON holds (NaN and infinity are not JSON: json.dumps would write
    them and no reader takes them back), ``model_type`` text."""
    for field, value in data.items():
        if not isinstance(field, str):
            raise ArgumentError(f"{name}: the config's key {_got(field)} is not text (config.json's keys are)", name)
        at = f"{where}{field}"
        if isinstance(value, dict):
            _config_fields(name, value, f"{at}.")
        elif isinstance(value, (list, tuple)):
            _config_fields(name, {f"[{i}]": v for i, v in enumerate(value)}, at)
        elif not isinstance(value, _JSON_SCALARS) or isinstance(value, float) and not math.isfinite(value):
            raise ArgumentError(f"{name}: the config's {at} is {_got(value)}, which config.json cannot hold (text, "
                                "finite numbers, true/false, null, lists and objects)", name)
    if not where and "model_type" in data and not isinstance(data["model_type"], str):
        raise ArgumentError(f"{name}: the config's model_type must be text such as 'kda', got {_got(data['model_type'])}",
                            name)


# ---------------------------------------------------------------------------------------------- the table

# parameter -> its kind, for every public call that names it (a call's own meaning, e.g. sweep's axes, in ``checked``'s
# ``kinds``)
KINDS: dict[str, Callable] = {
    "seq_len": size, "batch_size": size, "num_heads": size, "num_v_heads": size, "head_dim": size,
    "hidden_size": size, "num_hidden_layers": size, "conv_size": size, "cp": size, "fsdp": size, "ep": size,
    "expand_v": ratio,
    "checkpoint": flag, "no_recompute": flag, "packed": flag,
    "gpu": gpu, "contract": text, "cp_layout": text, "cp_rank": text, "alloc_conf": alloc_conf,
    "triton_cache": triton_cache, "triton": text, "optimizer": text, "precision": text, "routing": text, "loss": text,
    "lora_rank": lora_setting, "lora_alpha": lora_setting, "lora_targets": lora_setting, "lora_quant": lora_setting,
    "model": model, "models": models, "impl": key, "solve": solve, "budget": budget, "snapshot": path,
    "at": one_of("peak", "snapshot"),       # validate/check/explain.py's live_blocks
    "python": path, "timeout": seconds,
}
# sweep's axes: each a list, a range or one value
SWEEP_AXES = {"seq_len": sizes, "num_heads": sizes, "batch_size": sizes, "head_dim": sizes, "num_v_heads": sizes,
              "expand_v": ratios}


def unknown_keyword(call: str, unknown: list[str], takes: list[str]) -> ArgumentError:
    """The refusal of keywords ``call`` does not take, naming the close match of the first (the command line's alias
    ``seq`` -> ``seq_len``, else a near spelling) and every keyword it takes."""
    first = unknown[0]
    alias = HF_NAMES.get(first)
    lowered = {t.lower(): t for t in takes}         # At -> at: case is no distance
    close = [alias] if alias in takes else [lowered[m] for m in get_close_matches(first.lower(), list(lowered), n=1, cutoff=0.6)]
    hint = f" (did you mean {close[0]}?)" if close else ""
    plural = "s" if len(unknown) > 1 else ""
    return ArgumentError(f"{call}() got unexpected keyword argument{plural} {', '.join(unknown)}{hint}; it takes: "
                         f"{', '.join(takes) or 'no arguments'}", first)


def _bound(fn: Callable, signature: inspect.Signature, args: tuple, given: dict, accepted: tuple) -> dict:
    """The call's arguments by name (``**keywords`` among them); each problem of the call's form one ArgumentError."""
    params = signature.parameters
    named_params = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(n for n in given if n not in named_params and n not in accepted)
    if unknown:
        takes = [n for n in named_params if params[n].kind is params[n].KEYWORD_ONLY or params[n].default is not params[n].empty]
        raise unknown_keyword(fn.__name__, unknown, takes + list(accepted))
    positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    if len(args) > len(positional):
        takes = (f"{len(positional)} positional argument{'s' * (len(positional) != 1)} ({', '.join(positional)})"
                 if positional else "no positional arguments")
        raise ArgumentError(f"{fn.__name__}() takes {takes}, got {len(args)}: give the others by keyword", None)
    named = dict(zip(positional, args))
    for n in named:
        if n in given:
            raise ArgumentError(f"{fn.__name__}() got {n} twice (by position and by keyword)", n)
    named.update(given)
    for n, p in params.items():
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty and n not in named:
            raise ArgumentError(f"{fn.__name__}() needs {n}", n)
    return named


def checked(accepted: tuple = (), kinds: Optional[dict] = None) -> Callable:
    """A public call whose arguments are checked first: ``accepted`` the keywords its ``**keywords`` takes, ``kinds``
    its own meaning of a parameter over ``KINDS``. None is a value only where the call's default is None (an omitted
    keyword of ``**keywords`` too); any other value is checked by its kind."""
    table = {**KINDS, **(kinds or {})}

    def wrap(fn: Callable) -> Callable:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **given):
            for n, value in _bound(fn, signature, args, given, accepted).items():
                default = signature.parameters[n].default if n in signature.parameters else None
                if value is None and default is None:
                    continue
                if n in table:
                    table[n](n, value)
            return fn(*args, **given)
        return call
    return wrap

"""Named configs for ``--model``: the published Qwen3-Next-80B-A3B and Kimi-Linear-48B-A3B, and small configs of each
that fit one H200 (``presets/*.json``).

Each file is data: ``config`` (the HF config.json as published, or the small config), ``source`` (where the config
comes from), and for the published ones ``published`` (the sizes their model cards give) and
``differs_from_class_defaults`` (where the file departs from transformers 5.17's config class, field by field).
``--model NAME`` reads the file's ``config``; ``--model CONFIG.json`` reads a file as before.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import show
from .model import canonical_config, read_config

FOLDER = Path(__file__).parent / "presets"


@lru_cache(maxsize=1)
def presets() -> dict:
    """Preset name -> its file's content, in name order."""
    out = {}
    for path in sorted(FOLDER.glob("*.json")):
        data = json.loads(path.read_text())
        out[data["name"]] = data
    return out


def preset_names() -> list[str]:
    return list(presets())


def is_preset_name(text: str) -> bool:
    """A name, not a path: no folder separator and no .json ending (``--model q3n.json`` stays a file)."""
    return bool(text) and "/" not in text and "\\" not in text and not text.lower().endswith(".json")


def preset_config(name: str) -> str:
    """The preset's config as canonical JSON (``model.canonical_config``); an unknown name is one line listing them."""
    data = presets().get(name)
    if data is None:
        raise LivebytesError(f"--model {show(name)}: no such preset and no such file; presets: {', '.join(preset_names())} "
                             "(or give a config.json)")
    return canonical_config(dict(data["config"]), f"preset {name}")


def config_of(text: str) -> str:
    """``--model``'s value as canonical JSON: a preset's name, else a config file (``model.read_config``)."""
    if is_preset_name(text) and not Path(text).is_file():
        return preset_config(text)
    return read_config(text)


def presets_line(model_type: str) -> str:
    """``--model qwen3-next-80b-a3b, qwen3-next-small``: the presets of one model type, for ``livebytes models``."""
    names = [n for n, d in presets().items() if d["config"]["model_type"] == model_type]
    return f"presets: --model {', '.join(names)}" if names else ""

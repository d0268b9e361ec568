"""``livebytes models``: the registry, every model with its default GPU, options and what it covers."""
from __future__ import annotations

from .. import options as o
from .. import render
from ..render import Column
from livebytes.choose import OPTION_FLAGS, SHAPE_SET_OPTIONS

NAME = "models"


def command(as_json: bool = o.Json) -> None:
    """The registry: every model, its default GPU, options and what it covers."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import calls
    data = calls.models_document(calls.models_at())
    if as_json:
        render.print_json(data)
    else:
        render.show(models_table(data))


def option_text(name: str, allowed: list) -> str:
    """One option: its name, what sets it (a flag, or the shape: ``choose.SHAPE_SET_OPTIONS``) and its values, the
    default first; a config (no values) is given by --model."""
    if not allowed:
        return f"{name}: given by {OPTION_FLAGS[name]}"
    return f"{name} ({OPTION_FLAGS.get(name) or SHAPE_SET_OPTIONS[name]}): {'/'.join(map(str, allowed))}"


def _covers(m: dict) -> str:
    opts = "; ".join(option_text(k, v) for k, v in m["allowed_options"].items() if v or k == "config") or "none"
    return f"{m['implementation']}, {m['phase']}; options: {opts}. {m['covers']}"


COLUMNS = [Column("impl", lambda m: m["impl"], "key"), Column("GPU", lambda m: m["device"], "key"),
           Column("phase, options and what it covers", _covers, ratio=1)]


def models_table(data: dict):
    return render.table("lifetime models", COLUMNS, data["results"], show_lines=True)


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import NO_SHAPE, envelope, listof, mapof, obj, string
    return envelope(NAME, obj("one registered model", {
        "impl": string("model key"), "device": string("default device preset"), "shape": NO_SHAPE,
        "options": mapof({}, "option -> its default value"),
        "allowed_options": mapof(listof({}, "allowed values"), "option -> allowed values (first is the default; empty: "
                                                             "free text the model checks, a traced model's config)"),
        "implementation": string("library and kernel"), "version": string("library version or commit"),
        "phase": string("fwd+bwd or fwd", enum=("fwd+bwd", "fwd")), "covers": string("what the model covers")}),
        "the registry")

"""One module per command (``cli/commands/<name>.py``). Each holds ``NAME`` (what the command line types), ``command``
(the Typer function: parse, call ``livebytes.calls``, render; its docstring is its help), its table's columns as data
(``render.Column``) and ``schema()``, its ``--json`` document's JSON Schema (``cli/schema.py`` writes docs/schema/ and
docs/json.md from them). ``cli/app.py`` registers the modules of ``COMMANDS`` in this order, which is also the order
of ``--help`` and of docs/json.md: a new command is its module and one line here."""
from __future__ import annotations

from importlib import import_module

COMMANDS = (
    "predict",
    "compare",
    "models",
    "validate",
    "plan",
    "formula",
    "sweep",
    "timeline",
    "payload",
    "explain",
    "learn",
    "drift",
    "diff",
    "frames",
    "process",
)


def modules() -> list:
    """Every command's module, in ``COMMANDS`` order."""
    return [import_module(f"{__name__}.{name}") for name in COMMANDS]

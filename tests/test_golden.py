"""Golden tables at 80 and 200 columns: keys, shapes and numbers are never cut, rich markup in model text
(``[ceiling(DK/32), ...]``) shows as written. Regenerate after an intended change with
``LIVEBYTES_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`` and read the diff."""
import io
import os
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from livebytes.cli import render
from tests.cli_commands import EVERYDAY
from livebytes.cli.app import app

GOLDEN = Path(__file__).parent / "golden"
COMMANDS = {
    **EVERYDAY,
    "plan": ["plan", "--impl", "fla-kda@0.6.0", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--contract", "plain"],
    "sweep": ["sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K..16K", "--heads", "32,96", "--gpu", "H200"],
    "payload": ["payload", "--seq", "128,256", "--no-measure"],
    # narrow cases a newcomer found cut at 80 columns: the longest key, four keys side by side, 100,000 tokens
    "timeline_longest_key": ["timeline", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--seq", "8K", "--heads", "32"],
    "compare_four": ["compare", "--impl", "fla-kda@0.6.0", "--impl", "cudnn-kda-hopper-cuda@1.32.0",
                     "--impl", "cudnn-kda-hopper@1.32.0", "--impl", "fla-gdn@0.6.0", "--seq", "8K", "--heads", "32"],
    "payload_100000": ["payload", "--seq", "100000", "--no-measure"],
    "diff": ["diff", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--impl", "cudnn-kda-hopper-cuda@1.31.0",
             "--seq", "247466", "--heads", "96"],
    # the layer models: the kernel's buffers inside the layer's breakdown; the stack's plan (docs/layers.md)
    "predict_layer": ["predict", "--impl", "fla-kda-layer@0.6.0", "--seq", "8K", "--heads", "32", "--hidden", "2304",
                      "--layers", "2", "--checkpoint"],
    "plan_layers": ["plan", "--impl", "fla-kda-layer@0.6.0", "--solve", "seq", "--heads", "32", "--hidden", "2304",
                    "--layers", "4"],
}
WIDTHS = (80, 200)


def rendered(monkeypatch, args, width) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False, legacy_windows=False)
    monkeypatch.setattr(render, "console", console)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return console.file.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", COMMANDS)
def test_golden_table(monkeypatch, name, width):
    text = rendered(monkeypatch, COMMANDS[name], width)
    path = GOLDEN / f"{name}_{width}.txt"
    if os.environ.get("LIVEBYTES_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", COMMANDS)
def test_nothing_is_cut(monkeypatch, name, width):
    text = rendered(monkeypatch, COMMANDS[name], width)
    assert "…" not in text
    # only a suggested command runs past the width: a line of its own, after its line's colon, never wrapped
    lines = text.splitlines()
    wider = [i for i, line in enumerate(lines) if len(line) > width]
    assert all(lines[i].startswith("livebytes ") and lines[i - 1].rstrip().endswith(":") for i in wider), wider
    keys = {a for a in COMMANDS[name] if "@" in a} or (
        {line.split()[1] for line in text.splitlines() if "@" in line and line.startswith("│")})
    for key in keys:
        assert re.search(rf"(^|[\s│┃]){re.escape(key)}([\s│┃:]|$)", text, re.M), f"{key} not whole"


def test_model_text_is_not_read_as_markup(monkeypatch):
    text = rendered(monkeypatch, COMMANDS["predict"], 200)
    assert "db2 [ceiling(DK/32),MBS*S,HV] fp32" in text      # rich would have eaten [ceiling(DK/32), ...]


def test_every_buffer_shape_is_whole_at_80_columns(monkeypatch):
    from livebytes.estimator import get_model, predict
    from livebytes.estimator.shapes import Shape
    text = rendered(monkeypatch, COMMANDS["predict"], 80)
    p = predict(get_model("fla-kda@07b80f27"), Shape(1, 131072, 96, 128))
    for b, n in p.at_peak:
        if n:
            assert re.search(rf"\s{re.escape(b.name)}\s", text) and b.shape_text().replace(" ", "") in text, b.name


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["timeline_longest_key", "compare_four", "payload_100000"])
def test_every_number_is_whole(monkeypatch, name, width):
    """Every GiB figure (three decimals) or payload integer the JSON holds appears whole in the text."""
    import json
    text = rendered(monkeypatch, COMMANDS[name], width)
    data = json.loads(CliRunner().invoke(app, COMMANDS[name] + ["--json"]).stdout)
    if name == "payload_100000":
        numbers = [n for r in data["results"] for n in (f"{r['shape']['seq_len']:,}", f"{r['save_events']:,}",
                                                   f"{r['predicted_bytes'] / 1024:,.1f}")]
    elif name == "compare_four":
        numbers = [render.g(r["peak_bytes"]) for r in data["results"]]
    else:
        numbers = [render.g(st["live_bytes"]) for r in data["results"] for st in r["steps"]]
    for n in numbers:
        assert re.search(rf"(^|[\s│:/]){re.escape(n)}([\s│/]|$)", text, re.M), f"{n} not whole"


def test_help_is_not_cut_at_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    for command in ("validate", "plan", "sweep", "payload", "learn", "drift", "explain", "timeline", "predict", "compare", "diff"):
        out = CliRunner().invoke(app, [command, "-h"], terminal_width=80).stdout
        assert "…" not in out and "<str>" not in out, command


def test_the_readmes_sample_output_is_what_its_command_prints(monkeypatch):
    """README.md's first command and the block it says that command prints (rendered at the block's width)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    command = next(line for line in readme.splitlines() if line.startswith("python3 -m pip install . && livebytes "))
    args = command.split("&& livebytes ", 1)[1].split()
    block = readme.split("The first prints:\n\n```\n", 1)[1].split("\n```", 1)[0] + "\n"
    width = max(len(line) for line in block.splitlines())
    assert rendered(monkeypatch, args, width) == block


def test_the_validation_docs_table_is_every_records_comparison(monkeypatch):
    """docs/validation.md's table is `COLUMNS=160 livebytes validate --from-records all`: it drifts with every run."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "validation.md").read_text()
    block = doc.split("record; an out-of-memory record passes when the model predicted it):\n\n```\n", 1)[1].split("\n```", 1)[0]
    table, summary = block.rsplit("\n", 1)
    assert rendered(monkeypatch, ["validate", "--from-records", "all"], 160).rstrip("\n") == table
    assert summary in CliRunner().invoke(app, ["validate", "--from-records", "all"]).output


@pytest.mark.parametrize("width", [80, 100])
def test_a_long_key_folds_rather_than_the_table_being_cut(monkeypatch, width):
    """compare with cudnn-kda-hopper-cuda@1.32.0 (28 characters) beside FLA: rich crops a table whose columns carry
    min_width once it has shrunk them, so the keys carry none; every line fits and the right border is drawn (below 80
    columns compare lists its cells instead of a table)."""
    text = rendered(monkeypatch, ["compare", "--impl", "fla-kda@0.6.0", "--impl", "cudnn-kda-hopper-cuda@1.32.0",
                                  "--contract", "plain", "--seq", "8K", "--heads", "96"], width)
    table = [line for line in text.splitlines() if line[:1] in "┏┃┡│├└"]
    assert table and all(len(line.rstrip()) <= width for line in text.splitlines())
    assert all(line.rstrip()[-1] in "┓┃┩│┤┘" for line in table)

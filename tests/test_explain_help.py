"""explain's help offers only what explain takes (issue 50: it offered --model, which exits 2)."""
from __future__ import annotations

from typer.testing import CliRunner

from livebytes.cli.app import app


def test_explain_help_offers_no_model():
    """explain takes no --model (it exits 2): its help names it nowhere (its shared options' help said "; or --model",
    "--model: the config's"); predict's still does."""
    explain = CliRunner().invoke(app, ["explain", "--help"], env={"COLUMNS": "200"})
    predict = CliRunner().invoke(app, ["predict", "--help"], env={"COLUMNS": "200"})
    assert explain.exit_code == 0 and "model key, implementation@version" in explain.output
    assert "--model" not in explain.output and "--model" in predict.output
    assert "(required with --impl)" in explain.output and "layer models: layers in the stack (default 1)" in explain.output

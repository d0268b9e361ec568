"""A COLUMNS that is digits but no positive integer (issue 50: ``COLUMNS=0`` printed nothing and exit 0; 5,000 digits
or a '²' were ValueError tracebacks from rich's ``int()``) is ignored: the answer is drawn at the terminal's width
(80 where none), as for no COLUMNS."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from livebytes.cli.render import ignore_unusable_columns

PREDICT = ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "96"]


@pytest.mark.parametrize("columns, kept", [("0", False), ("000", False), ("9" * 5000, False), ("²", False),
                                           ("1", True), ("120", True), ("abc", True), ("-5", True), ("", True)])
def test_only_a_columns_no_reader_can_use_is_dropped(columns, kept):
    """Dropped: digits that make no positive integer; kept: a width, or what rich already ignores (not digits)."""
    environ = {"COLUMNS": columns}
    ignore_unusable_columns(environ)
    assert ("COLUMNS" in environ) is kept


@pytest.mark.parametrize("columns", ["0", "9" * 5000, "²"])
def test_the_answer_is_drawn_whatever_columns_says(columns):
    run = [sys.executable, "-c", "from livebytes.cli.app import main; main()"]
    plain = subprocess.run(run + PREDICT, env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
                           capture_output=True, text=True)
    odd = subprocess.run(run + PREDICT, env={**os.environ, "COLUMNS": columns}, capture_output=True, text=True)
    assert (odd.returncode, odd.stderr) == (0, "") and odd.stdout == plain.stdout and "H200: runs" in odd.stdout

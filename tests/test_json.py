"""Every command's --json output against the key tables of docs/json.md: no undocumented key, every
documented top-level key present, every value of its documented type."""
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli_commands import EVERYDAY
from livebytes.cli.app import app

DOC = Path(__file__).resolve().parents[1] / "docs" / "json.md"
SHAPE_KEYS = {"mbs", "seq", "heads", "dim", "v_heads", "dim_v"}
COMMANDS = {
    **EVERYDAY,
    "plan": ["plan", "--impl", "fla-kda@0.6.0", "--budget", "80GiB"],
    "plan-device": ["plan", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--solve", "mbs", "--seq", "32K"],
    "formula": ["formula", "--impl", "cudnn-kda-hopper-cuda@1.32.0"],
    "sweep": ["sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K..16K", "--heads", "32", "--gpu", "H200"],
    "payload": ["payload", "--seq", "128,256"],
}


def documented() -> dict[str, dict[str, str]]:
    out, current = {}, None
    for line in DOC.read_text().splitlines():
        heading = re.fullmatch(r"## `(\w+)`", line)
        if heading:
            current = out.setdefault(heading.group(1), {})
        row = re.match(r"\| `([^`]+)` \| ([\w|]+) \|", line)
        if row and current is not None:
            current[row.group(1)] = row.group(2)
    return out


DOCUMENTED = documented()
PYTYPES = {"int": int, "number": (int, float), "string": str, "bool": bool, "list": list, "object": dict, "map": dict,
           "shape": dict}


def check(value, path: str, table: dict, where: str) -> None:
    assert path in table, f"{where}: {path} is not documented in docs/json.md"
    kinds = table[path].split("|")
    if value is None:
        assert "null" in kinds, f"{where}: {path} is null"
        return
    expected = tuple(t for k in kinds if k != "null" for t in (PYTYPES[k] if isinstance(PYTYPES[k], tuple) else (PYTYPES[k],)))
    assert isinstance(value, expected) and not (isinstance(value, bool) and bool not in expected), f"{where}: {path}={value!r}"
    if "shape" in kinds:
        assert set(value) <= SHAPE_KEYS and {"mbs", "seq", "heads", "dim"} <= set(value)
    elif "object" in kinds:
        for k, v in value.items():
            check(v, f"{path}.{k}", table, where)
    elif "list" in kinds:
        for item in value:
            if isinstance(item, dict):
                for k, v in item.items():
                    check(v, f"{path}[].{k}", table, where)


@pytest.mark.parametrize("args,code", [(["learn"], 0), (["drift", "--impl", "fla-kda@0.6.0"], 0),
                                       (["drift", "--impl", "fla-kda@07b80f27"], 3)])
def test_learn_and_drift_json(synthetic_kda_traces, args, code):
    r = CliRunner().invoke(app, args + ["--traces", str(synthetic_kda_traces), "--json"])
    assert r.exit_code == code, r.output
    data = json.loads(r.stdout)
    table = DOCUMENTED[args[0]]
    for key, value in data.items():
        check(value, key, table, args[0])
    assert {k for k in table if "." not in k and "[]" not in k} == set(data)


def test_every_command_is_documented():
    from typer.main import get_command
    assert set(get_command(app).commands) == set(DOCUMENTED) == {c.split("-")[0] for c in COMMANDS} | {"learn", "drift", "diff"}


@pytest.mark.parametrize("name", COMMANDS)
def test_json_follows_the_documented_keys(name):
    r = CliRunner().invoke(app, COMMANDS[name] + ["--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    command = name.split("-")[0]
    table = DOCUMENTED[command]
    assert data["schema"] == 1 and data["command"] == command
    for key, value in data.items():
        check(value, key, table, name)
    top = {k for k in table if "." not in k and "[]" not in k}
    assert top == set(data), f"{name}: documented but missing: {top - set(data)}"


@pytest.mark.parametrize("extra", [[], ["--seq", "247466", "--heads", "96"]])
def test_diff_json(extra):
    r = CliRunner().invoke(app, ["diff", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--impl", "cudnn-kda-hopper-cuda@1.31.0",
                                 *extra, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    table = DOCUMENTED["diff"]
    for key, value in data.items():
        check(value, key, table, "diff")
    assert {k for k in table if "." not in k and "[]" not in k} - {"peak"} <= set(data)
    assert ("peak" in data) == bool(extra)

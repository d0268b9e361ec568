"""No process-memory status is read back out of words (issue 49 point 2): the core types a figure's status
(``estimator/process/status.py``: a ``Kind`` and its reasons), ``livebytes/process_words.py`` alone says it, and no
module of the core or the presentation tests a string for a kind's word (``startswith("bounded: ")``, ``"(on this
machine" in status``, ``split(": ", 1)`` of a note): a verdict is told by its kind.

The check reads every module's syntax tree: a string method called with a literal that opens with a kind's word, or an
``in`` test of such a literal, is a parse of a status."""
import ast
from pathlib import Path

import pytest

from livebytes.estimator.process.status import Kind

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("api", "cli", "estimator", "validate")
WORDS = tuple(k.value for k in Kind) + ("(on this machine", "on this machine")
METHODS = {"startswith", "endswith", "removeprefix", "removesuffix", "split", "rsplit", "partition", "rpartition",
           "find", "rfind", "index", "rindex", "count", "replace"}
DATA_BOUNDARY = {("process", "status.py")}     # reads the committed data files' own words, once, at load


def _literals(node, names: dict) -> list[str]:
    """The strings ``node`` is: a literal, a tuple of them, or a module-level name bound to one (``names``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for e in node.elts for v in _literals(e, names)]
    if isinstance(node, ast.Name):
        return names.get(node.id, [])
    return []


def _constants(tree: ast.Module) -> dict:
    """Module-level names bound to strings: ``BOUNDED = "bounded: "``, ``A, B = "x", "y"``, ``KINDS = (A, B)``."""
    names: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = _literals(node.value, names)
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for t, v in zip(target.elts, node.value.elts):
                        if isinstance(t, ast.Name):
                            names[t.id] = _literals(v, names)
    return names


def _says_a_kind(text: str) -> bool:
    return text.lstrip().startswith(WORDS)


def parses(source: str) -> list[int]:
    """Lines where ``source`` tests a string for a status kind's word."""
    tree = ast.parse(source)
    names, out = _constants(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
            if any(_says_a_kind(t) for arg in node.args for t in _literals(arg, names)):
                out.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            if any(_says_a_kind(t) for t in _literals(node.left, names)):
                out.append(node.lineno)
    return out


MODULES = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))
           if (p.parent.name, p.name) not in DATA_BOUNDARY]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_parses_a_status(path):
    assert not parses(path.read_text()), f"{path.relative_to(ROOT)}: a status read back out of words"


@pytest.mark.parametrize("source", [
    'if figure.status.startswith("bounded: "): pass',                      # api/report.py, cli/render.py before
    'kind, text = note.split(": ", 1) if note.startswith(("bounded: ", "unbounded: ")) else ("assumed", note)',
    'here = "(on this machine" in f.status',                                # ProcessMemory.kept_here before
    'derived = any(f["status"].startswith("derived") for f in figures)',
    'status.removeprefix("unbounded: ")'])
def test_the_check_sees_each_way_a_status_was_parsed(source):
    assert parses(source) == [1]


def test_the_check_sees_a_kind_named_by_a_constant():
    """estimator/process/memory.py and cli/render.py named the kinds' words before testing for them."""
    source = ('BOUNDED, UNBOUNDED = "bounded: ", "unbounded: "\nKINDS = (BOUNDED, UNBOUNDED)\n'
              'a = note.startswith(KINDS)\nb = status.startswith(UNBOUNDED)\n')
    assert parses(source) == [3, 4]


def test_the_check_lets_other_strings_be():
    assert parses('ok = key.startswith("fla-") and line.split(": ", 1) and "measured" == word') == []


def test_the_json_status_words_are_the_kinds():
    """The JSON's ``process_memory.status`` is a kind's word (``ProcessMemory.kind``), and the schema lists them all."""
    import json
    predict = json.loads((ROOT / "docs" / "schema" / "predict.json").read_text())
    process = predict["properties"]["results"]["items"]["properties"]["process_memory"]
    assert process["properties"]["status"]["enum"] == [k.value for k in Kind]

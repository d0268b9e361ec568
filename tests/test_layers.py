"""The layers import in one direction only: estimator (core) -> lifetimes (models) -> learn -> validate -> cli
(learn sits above the core, beside validate: the tracer in validate writes learn's trace format).

Every import statement of every module is parsed (function-local imports included); a module may
import its own layer or a lower one, never a higher one, and the package graph has no circle."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["estimator", "lifetimes", "learn", "validate", "cli"]   # lowest first
RANK = {name: i for i, name in enumerate(LAYERS)}


def imported_layers(path: Path) -> set[str]:
    """Layers named by the module's imports: absolute ``livebytes.X`` and relative ``from .. X``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                names = [node.module]
            elif node.level >= 2:
                names = ["livebytes." + (node.module or "")]
        for name in names:
            parts = name.split(".")
            if parts[0] == "livebytes" and len(parts) > 1 and parts[1] in RANK:
                out.add(parts[1])
    return out


MODULES = [(layer, p) for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))]


@pytest.mark.parametrize("layer,path", MODULES, ids=lambda x: str(x) if isinstance(x, str) else x.name)
def test_no_import_from_a_higher_layer(layer, path):
    higher = {other for other in imported_layers(path) if RANK[other] > RANK[layer]}
    assert not higher, f"{path.relative_to(ROOT)} imports {sorted(higher)} above {layer}"


def test_the_package_graph_has_no_circle():
    edges = {layer: set() for layer in LAYERS}
    for layer, path in MODULES:
        edges[layer] |= imported_layers(path) - {layer}
    order = {}

    def visit(node, stack):
        assert node not in stack, f"import circle: {' -> '.join(stack + [node])}"
        if node in order:
            return
        for nxt in edges[node]:
            visit(nxt, stack + [node])
        order[node] = True
    for layer in LAYERS:
        visit(layer, [])


def test_the_check_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from livebytes.cli import app\n")
    assert imported_layers(bad) == {"cli"}


def test_the_core_holds_no_learning_code():
    """learn, draft, drift, traces and synthetic live in learn/ (livebytes.learn), above the core."""
    assert not [m for m in ("learn", "draft", "drift", "traces", "synthetic") if (ROOT / "estimator" / f"{m}.py").exists()]
    assert all((ROOT / "learn" / f"{m}.py").exists() for m in ("learn", "draft", "drift", "traces", "synthetic"))

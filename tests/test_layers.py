"""The layers import in one direction only: estimator (core) -> lifetimes (models) -> learn -> validate -> cli
(learn sits above the core, beside validate: the tracer in validate writes the trace format learn reads, both naming
it from the core). Inside validate, check/ (re-checks records on a CPU) imports nothing of gpu/ (what measures).

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


def test_validate_and_learn_are_siblings():
    """Neither imports the other: the trace format both use is the core's (estimator.shapes.TRACE_FORMAT)."""
    assert not [p.name for p in (ROOT / "validate").rglob("*.py") if "learn" in imported_layers(p)]
    assert not [p.name for p in (ROOT / "learn").rglob("*.py") if "validate" in imported_layers(p)]


def validate_subpackages(path: Path, text: str | None = None) -> set[str]:
    """The subpackages of livebytes.validate (check, gpu, ...) a module under validate/ imports, relative imports resolved."""
    package = ["livebytes", *path.parent.relative_to(ROOT).parts]          # validate/check/x.py -> livebytes.validate.check
    out = set()
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        out |= {n.split(".")[2] for n in names if n.startswith("livebytes.validate.") and len(n.split(".")) > 2}
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "validate" / "check").rglob("*.py")), ids=lambda p: p.name)
def test_the_cpu_check_imports_nothing_of_the_gpu_side(path):
    assert "gpu" not in validate_subpackages(path), f"{path.relative_to(ROOT)} imports validate.gpu"


def test_the_subpackage_check_sees_relative_imports():
    """``from ..gpu import runner`` in validate/check/ is validate.gpu; ``from . import records`` is validate.check."""
    placed = ROOT / "validate" / "check" / "fake.py"       # never written: the path only places the text
    assert validate_subpackages(placed, "from ..gpu import runner\n") == {"gpu"}
    assert validate_subpackages(placed, "from . import records\nfrom .compare import compare\n") == {"check"}
    assert validate_subpackages(placed, "from livebytes.validate.gpu.batch import expand\n") == {"gpu"}

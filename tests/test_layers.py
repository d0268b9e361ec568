"""The layers import in one direction only: estimator (core) -> tracer -> lifetimes (models) -> learn -> validate -> api
(the ``livebytes`` package itself: the library's calls) -> cli (learn sits above the core, beside validate: the tracer
in validate writes the trace format learn reads, both naming it from the core; the tracer runs the models' own code in
a subprocess and names only the core). Inside validate, check/ (re-checks records on a CPU) imports nothing of gpu/
(what measures).

Every import statement of every module is parsed (function-local imports included, ``if TYPE_CHECKING`` ones not: they
never run); a module may import its own layer or a lower one, never a higher one, the package graph has no circle and
neither has the graph of modules."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["estimator", "tracer", "lifetimes", "learn", "validate", "api", "cli"]   # lowest first
RANK = {name: i for i, name in enumerate(LAYERS)}
PACKAGE_OF = {"api": "livebytes"}    # the folder installed as the package (pyproject's package-dir); others: livebytes.X
API_MODULES = {p.stem for p in (ROOT / "api").glob("*.py")} - {"__init__"}


def _runtime_imports(tree: ast.AST):
    """Import nodes that run: those under ``if TYPE_CHECKING:`` left out."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skip |= {id(n) for n in ast.walk(node)}
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skip]


def _layer_of(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "livebytes":
        return None
    if len(parts) == 1 or parts[1] in API_MODULES:
        return "api"
    return parts[1] if parts[1] in RANK else None


def package_of(path: Path) -> str:
    """The package a module's relative imports start from: ``api/x.py`` -> ``livebytes``, ``estimator/process/x.py`` ->
    ``livebytes.estimator.process`` (pyproject's package-dir)."""
    parts = list(path.relative_to(ROOT).parent.parts)
    return ".".join(["livebytes"] + ([] if parts[:1] == ["api"] else parts[:1]) + parts[1:])


def _imports(path: Path, text: str | None = None):
    """(module, names) of each running import, relative ones resolved: ``import a.b`` -> ("a.b", ()), ``from .x import
    y`` -> ("package.x", ("y",))."""
    package = package_of(path).split(".")
    for node in _runtime_imports(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            yield from ((a.name, ()) for a in node.names)
            continue
        base = package[:len(package) - node.level + 1] if node.level else []
        yield ".".join(base + ([node.module] if node.module else [])), tuple(a.name for a in node.names)


def imported_names(path: Path, text: str | None = None) -> list[str]:
    """The absolute names a module's running imports name: ``from .x import y`` -> ``package.x`` and ``package.x.y``."""
    return [n for module, names in _imports(path, text) for n in (module, *(f"{module}.{a}" for a in names))]


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The project's modules a module's imports name: ``from p import x`` names ``p.x`` where that is a module, else
    ``p`` (a package's own ``__init__`` is not counted where only its submodule is asked for)."""
    out = set()
    for module, names in _imports(path):
        out |= {f"{module}.{a}" if f"{module}.{a}" in modules else module for a in names} or {module}
    return out & modules


def imported_layers(path: Path, text: str | None = None) -> set[str]:
    """Layers named by the module's imports, absolute and relative."""
    return {layer for layer in map(_layer_of, imported_names(path, text)) if layer}


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


def test_the_check_catches_an_upward_import():
    placed = ROOT / "estimator" / "process" / "fake.py"      # never written: the path only places the text
    assert imported_layers(placed, "def f():\n    from livebytes.cli import app\n") == {"cli"}
    assert imported_layers(placed, "from livebytes.query import resolve\nfrom livebytes import predict\n") == {"api"}
    assert imported_layers(placed, "from ..devices import Device\nfrom . import loo\n") == {"estimator"}
    assert imported_layers(placed, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from livebytes.cli import app\n") == set()
    assert imported_layers(ROOT / "api" / "fake.py", "from .query import resolve\n") == {"api"}


def module_name(path: Path) -> str:
    """``estimator/process/memory.py`` -> ``livebytes.estimator.process.memory``; ``api/query.py`` -> ``livebytes.query``."""
    package = package_of(path)
    return package if path.name == "__init__.py" else f"{package}.{path.stem}"


def module_graph() -> dict[str, set[str]]:
    """Module -> the modules of this project its imports name (``from . import x`` names x where x is a module)."""
    paths = {module_name(p): p for _, p in MODULES}
    return {name: imported_modules(path, set(paths)) - {name} for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on.discard(comp[-1])
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_import_circle():
    """Not even through imports inside functions: a circle there is a module that cannot be read on its own."""
    assert circles(module_graph()) == []


def test_the_circle_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_module_graph_reads_relative_and_lazy_imports():
    graph = module_graph()
    assert "livebytes.estimator.compiler" in graph["livebytes.estimator.compiled"]          # lazy, inside compiled()
    assert "livebytes.notes" in graph["livebytes.query"]                                     # api/: livebytes.X
    assert "livebytes.validate.gpu.harnesses.base" in graph["livebytes.validate.gpu.harnesses.fla_kda"]


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

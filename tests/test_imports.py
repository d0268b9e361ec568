"""Imports sit at the top of their module. One inside a function or method stays there only with its reason on its line
or in the comment lines right above it: ``# deferred: <reason>`` (an optional library the core install lacks, a measured
import cost, an ImportError guard, a standalone script; docs/architecture.md, "Imports")."""
import ast
import gzip
import json
import re
from pathlib import Path

import pytest

from livebytes.lifetimes.traced.model import tracer_digest
from livebytes.validate.check import store_traces

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["estimator", "lifetimes", "learn", "validate", "api", "cli", "tracer"]
DEFERRED = re.compile(r"#\s*deferred:\s*\S")


def undeclared_deferrals(text: str) -> list[int]:
    """Line numbers of the imports inside a function body (at any depth) that carry no ``# deferred:`` reason."""
    lines = text.splitlines()
    out = []

    def said(lineno: int) -> bool:
        if DEFERRED.search(lines[lineno - 1]):
            return True
        i = lineno - 2
        while i >= 0 and lines[i].strip().startswith("#"):
            if DEFERRED.search(lines[i]):
                return True
            i -= 1
        return False

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)) and not said(child.lineno):
                out.append(child.lineno)
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    walk(ast.parse(text), False)
    return out


MODULES = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_function_level_imports_say_why(path):
    missing = undeclared_deferrals(path.read_text())
    assert not missing, (f"{path.relative_to(ROOT)}: import inside a function without '# deferred: <reason>' on lines "
                         f"{missing}: move it to the top of the module or say why it waits")


def test_the_check_finds_an_undeclared_deferral():
    assert undeclared_deferrals("import json\n\ndef f():\n    import re\n    return re\n") == [4]
    assert undeclared_deferrals("class A:\n    def f(self):\n        from . import x\n") == [3]
    assert undeclared_deferrals("def f():\n    def g():\n        import os\n") == [3]
    assert undeclared_deferrals("def f():\n    import torch  # deferred: not in the core install\n") == []
    assert undeclared_deferrals("def f():\n    # deferred: a cycle at load\n    # (second line)\n    from . import x\n") == []
    assert undeclared_deferrals("def f():\n    # deferred: a cycle at load\n    x = 1\n    from . import x\n") == [4]
    assert undeclared_deferrals("def f():\n    import torch  # deferred:\n") == [2]          # a reason, not the word
    assert undeclared_deferrals("import os\nif os:\n    import re\n") == []                     # module level: not a function


def test_every_stored_trace_is_this_tracers():
    """tracer/'s sources are the digest every stored trace carries: a change to them (an import moved included) stores
    the traces again under the records' torch, or carries them with ``store_traces --restamp``, in the same change."""
    stored = {json.loads(gzip.open(p, "rt").read()).get(store_traces.TRACER_DIGEST)
              for p in sorted((ROOT / "validate" / "data" / "records").rglob("*.json.gz"))} - {None}
    assert stored == {tracer_digest()}

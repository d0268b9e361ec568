"""A model as the evaluators take it: compiled (``evaluation.CompiledModel``, from the disk cache or built here once).
Replay, the autotune questions and the checks accept either kind of model through ``compiled``."""
from __future__ import annotations

from .evaluation import CompiledModel


def compiled(model) -> CompiledModel:
    """``model`` itself where it is compiled already; a ``LifetimeModel`` compiled once (``compiler.compile_model``)."""
    if isinstance(model, CompiledModel):
        return model
    # deferred: the builder imports sympy (0.41 s, python -X importtime), which a warm cache's answer never needs
    # (tests/test_compiled.py)
    from .compiler import compile_model
    return compile_model(model)

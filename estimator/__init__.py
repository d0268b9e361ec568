"""livebytes.estimator: the implementation-agnostic core (records, engine, registry, planning).

Names are imported on first use (PEP 562), so that ``livebytes.estimator.shapes`` or the compiled-model
cache can be used without importing sympy."""
from __future__ import annotations

import importlib

_EXPORTS = {
    "Buffer": "buffers", "Group": "groups", "LifetimeModel": "buffers", "Source": "buffers", "Step": "buffers",
    "DEVICES": "devices", "Device": "devices", "get_device": "devices",
    "Prediction": "prediction", "peak_expression": "engine", "predict": "engine", "step_expressions": "engine",
    "LivebytesError": "errors", "check_shape": "registry", "get_model": "registry", "spec": "registry", "specs": "registry",
    "keyed_specs": "registry",
    "Shape": "shapes", "parse_shape_list": "shapes", "parse_size": "shapes",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)

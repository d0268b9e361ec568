"""livebytes: the peak GPU memory of fused attention kernels, FLA layers and whole FLA training steps, predicted from
buffer lifetimes. The Python API (docs/api.md)::

    import livebytes
    answer = livebytes.predict("fla-kda@0.6.0", seq_len=8192, num_heads=96)
    answer.fits, answer.reserved_peak_bytes, answer.to_dict()    # to_dict(): the CLI's --json result

``predict``, ``compare``, ``plan``, ``sweep``, ``explain`` and ``models`` take the HF/FLA names (``seq_len``,
``batch_size``, ``num_heads``, ``num_v_heads``, ``head_dim``, ``hidden_size``, ``num_hidden_layers``) and the CLI's
options (``gpu``, ``checkpoint``, ``alloc_conf``, ``triton_cache``, ...); each returns frozen results.

Everything is imported on first use: ``import livebytes.estimator`` (and the ``livebytes`` command) runs this file
first, so it imports nothing heavy itself.
"""
from __future__ import annotations
from importlib import import_module

# public name -> the module that defines it
_LAZY = {
    "predict": "functions", "compare": "functions", "plan": "functions", "sweep": "functions", "explain": "functions",
    "models": "functions", "ArgumentError": "arguments",
    "Prediction": "results", "Comparison": "results", "Plan": "results", "PlanAnswer": "results", "Sweep": "results",
    "SweepPoint": "results", "Explanation": "results", "ModelInfo": "results", "LivebytesError": "estimator.errors",
}

# submodules docs/api.md names, reachable as attributes after ``import livebytes`` (imported on first use): the
# frames and processes kept on this machine, the calls the command line shares, the public functions' own module
_SUBMODULES = ("frames", "process", "calls", "functions")

__all__ = ["__version__", *_LAZY, *_SUBMODULES]


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, as pip installed it)."""
    # deferred: importlib.metadata ~11 ms (importtime), which every import of livebytes and the CLI's start would pay
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("livebytes")
    except PackageNotFoundError:      # imported from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str):
    if name == "__version__":
        return _version()
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    if name in _SUBMODULES:
        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'livebytes' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""One harness per implementation: its inputs, one step, what a step leaves to release, what the library
refuses to run on, the package and versions it drives. A harness registers itself under the model keys it
serves (``@harness(...)``); a model is runnable where a harness is registered for it, and no model names one.

Harnesses import torch and the libraries lazily (inside their methods): listing them, or declining a machine,
needs neither.
"""
from __future__ import annotations

from .. import environment
from . import cudnn_frost, cudnn_hopper, fla_cp, fla_gdn, fla_kda, fla_layer  # noqa: F401  (each registers its harness)
from .base import _HARNESSES, Harness
from livebytes.estimator.registry import spec

def harness_for(impl: str) -> type | None:
    """The harness class registered for a model key (None: the model cannot be run)."""
    return _HARNESSES.get(impl)


def runnable() -> tuple[str, ...]:
    """Every model key a harness serves."""
    return tuple(_HARNESSES)


def make(impl: str, contract: str, recompute: bool, forward_only: bool) -> Harness:
    cls = harness_for(impl)
    if cls is None:
        raise KeyError(f"no runner for {impl}")
    return cls(impl, contract, recompute, forward_only)


def _installed(package: str) -> tuple[str, str | None]:
    """(package, installed version)."""
    try:
        return package, __import__(package).__version__
    except (ImportError, AttributeError):
        return package, None


def decline_reason(impl: str) -> str | None:
    """Why this machine cannot run ``impl`` (None when it can)."""
    cls = harness_for(impl)
    if cls is None:
        return f"no runner for {impl}"
    if not environment.cuda_available():
        return "no CUDA device: the validator runs the real kernels and needs a GPU"
    torch = environment._torch()
    major, minor = torch.cuda.get_device_capability(0)
    reason = cls.refuse_device(major * 10 + minor, torch.cuda.get_device_name(0))
    if reason:
        return reason
    module, version = _installed(cls.package)
    if version != spec(impl).version:   # a snapshot model (fla-kda@07b80f27) is not what 0.6.0 runs
        return f"{impl} models {module} {spec(impl).version}; this machine has {module} {version or 'not installed'}"
    return None

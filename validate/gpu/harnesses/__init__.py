"""One harness per implementation: its inputs, one step, what a step leaves to release, what the library
refuses to run on, the package and versions it drives. A harness registers itself under the model keys it
serves (``@harness(...)``); a model is runnable where a harness is registered for it, and no model names one.

Harnesses import torch and the libraries lazily (inside their methods): listing them, or declining a machine,
needs neither.
"""
from __future__ import annotations

from livebytes.estimator.shapes import Shape

from .. import environment

_HARNESSES: dict[str, type] = {}


def harness(*keys: str):
    """Class decorator: register a harness under the model keys (``implementation@version``) it serves."""
    def register(cls: type) -> type:
        for key in keys:
            if key in _HARNESSES:
                raise ValueError(f"two harnesses for {key}")
            _HARNESSES[key] = cls
        cls.keys = tuple(keys)
        return cls
    return register


class Harness:
    """Builds inputs and runs one step of one implementation/configuration."""

    package = ""                  # the module whose __version__ must be the model's version (fla, cudnn)
    triton = False                # Triton kernels: the autotune cache state is part of the record
    takes_contract = False        # the runner's --contract reaches the library (else the plain contract)
    forward_context = "no_grad"   # a forward-only step runs under torch.no_grad (or inference_mode)
    keys: tuple[str, ...] = ()

    def __init__(self, impl: str, contract: str, recompute: bool, forward_only: bool):
        self.impl, self.recompute, self.forward_only = impl, recompute, forward_only
        self.contract = contract if self.takes_contract else "plain"

    @classmethod
    def refuse_device(cls, sm: int, device_name: str) -> str | None:
        """Why the library cannot run on a device of compute capability ``sm`` (None: it can)."""
        return None

    def inputs(self, shape: Shape) -> dict:
        raise NotImplementedError

    def forward(self, x: dict):
        raise NotImplementedError

    def step(self, x: dict):
        torch = environment._torch()
        if self.forward_only:
            ctx = torch.inference_mode() if self.forward_context == "inference_mode" else torch.no_grad()
            with ctx:
                return self.forward(x)
        o = self.forward(x)
        o.backward(x["dO"].view_as(o))
        return o

    @staticmethod
    def release(x: dict) -> None:
        for t in x.values():
            if getattr(t, "grad", None) is not None:
                t.grad = None

    @staticmethod
    def finite(o, x: dict) -> bool:
        torch = environment._torch()
        tensors = [o] + [t.grad for t in x.values() if getattr(t, "grad", None) is not None]
        return all(bool(torch.isfinite(t.float()).all()) for t in tensors)


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
    from livebytes.estimator.registry import spec
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


from . import cudnn_frost, cudnn_hopper, fla_cp, fla_gdn, fla_kda, fla_layer  # noqa: E402,F401  (each registers its harness)

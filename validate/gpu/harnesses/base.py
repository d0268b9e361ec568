"""The harness base class and the registry every harness module adds itself to (``@harness(...)``)."""
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

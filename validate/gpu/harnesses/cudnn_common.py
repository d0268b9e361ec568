"""What the cuDNN frontend harnesses share: THD inputs [T, H, D] with int32 boundaries (the engines
run the plain contract) and ``kimi_delta_attention`` with a named plan."""
from __future__ import annotations

from livebytes.estimator.shapes import Shape

from ..inputs import build_inputs, input_specs
from .base import Harness

VERSIONS = ("1.31.0", "1.32.0")    # nvidia-cudnn-frontend releases whose kimi_delta_attention(..., plan_name=) these drive


def cudnn_inputs(shape: Shape, contract: str, grad: bool, seed: int = 0, device: str = "cuda") -> dict:
    """cuDNN's THD layout [T, H, D], int32 boundaries (the Hopper engines take the plain contract)."""
    specs = input_specs(shape, contract, grad, batch_dim=False, cu_dtype="int32")
    return build_inputs(specs, device, shape.seq, seed)


def cudnn_forward(x: dict, plan: str):
    from cudnn.linear_attention import kimi_delta_attention  # deferred: cudnn is not in the core install (model/validate extras)
    o, _ = kimi_delta_attention(x["q"], x["k"], x["v"], x["g"], x["beta"], x["cu_seqlens"], plan_name=plan)
    return o


class CudnnKda(Harness):
    """One engine of ``kimi_delta_attention``, chosen by ``plan`` (its plan_name)."""
    package = "cudnn"
    plan = ""

    def inputs(self, shape: Shape) -> dict:
        return cudnn_inputs(shape, "plain", not self.forward_only)

    def forward(self, x: dict):
        return cudnn_forward(x, self.plan)


def keys(implementation: str, versions: tuple[str, ...] = VERSIONS) -> tuple[str, ...]:
    """The model keys of an implementation at the versions a harness drives."""
    return tuple(f"{implementation}@{v}" for v in versions)

"""FLA ``chunk_kda`` (Triton): varlen inputs [1, T, H, D] with int64 boundaries, the report or the plain
contract, recompute on or off; fla-core's versions this harness drives."""
from __future__ import annotations

from livebytes.estimator.shapes import Shape

from ..inputs import build_inputs, input_specs
from .base import Harness, harness

VERSIONS = ("0.6.0",)    # fla-core releases; the report's private snapshot (07b80f27) cannot be installed


def fla_inputs(shape: Shape, contract: str, grad: bool, seed: int = 0, device: str = "cuda") -> dict:
    """FLA's varlen layout [1, T, H, D], int64 boundaries (recipe: validate/gpu/inputs.py)."""
    specs = input_specs(shape, contract, grad, batch_dim=True, cu_dtype="int64")
    return build_inputs(specs, device, shape.seq, seed)


def fla_forward(x: dict, contract: str, recompute: bool = True, cp_context=None):
    """One chunk_kda call; ``cp_context`` (fla.ops.cp's): the CP path, which takes its boundaries from the context."""
    from fla.ops.kda import chunk_kda  # deferred: fla is not in the core install (model/validate extras)
    kw = {"cu_seqlens": x["cu_seqlens"], "disable_recompute": not recompute}
    if cp_context is not None:
        kw["cp_context"] = cp_context
    if contract == "report":
        kw.update(A_log=x["A_log"], dt_bias=x["dt_bias"], use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                  use_beta_sigmoid_in_kernel=True, safe_gate=True, lower_bound=-5.0)
    o, _ = chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], **kw)
    return o


@harness(*(f"{impl}@{v}" for v in VERSIONS for impl in ("fla-kda", "fla-kda-fwd")))
class FlaKda(Harness):
    package, triton, takes_contract = "fla", True, True

    def inputs(self, shape: Shape) -> dict:
        return fla_inputs(shape, self.contract, not self.forward_only)

    def forward(self, x: dict):
        return fla_forward(x, self.contract, self.recompute)

"""Gated DeltaNet inputs and one step, as Qwen3-Next trains with ``chunk_gated_delta_rule``.

Shared by the runner (validation records, ``FlaGdn``) and the tracer (``validate/gpu/trace.py``). Inputs are seeded on
the CPU and copied to the GPU once per tensor, in this order: q, k, v, g, beta, cu_seqlens, dO.
q, k ``[1, T, H, K]`` bf16 (raw: the kernel L2-normalises them); v ``[1, T, HV, V]`` bf16;
g ``[1, T, HV]`` fp32 log-space decay; beta ``[1, T, HV]`` bf16 after the sigmoid; int64 boundaries.
"""
from __future__ import annotations

from livebytes.estimator.shapes import Shape

from .base import Harness, harness


def gdn_cpu_inputs(shape: Shape, grad: bool, seed: int = 0) -> dict:
    """The seeded inputs on the CPU (no device memory)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    import torch.nn.functional as F  # deferred: torch is not in the core install (model/validate extras)
    gen = torch.Generator().manual_seed(seed)
    T, H, HV, K, V = shape.tokens, shape.heads, shape.hv, shape.dim, shape.dv
    bf16 = torch.bfloat16
    x = {
        "q": torch.randn(1, T, H, K, generator=gen).to(bf16),                      # [1, T, H, K] bf16
        "k": torch.randn(1, T, H, K, generator=gen).to(bf16),                      # [1, T, H, K] bf16
        "v": torch.randn(1, T, HV, V, generator=gen).to(bf16),                     # [1, T, HV, V] bf16
        "g": F.logsigmoid(torch.randn(1, T, HV, generator=gen)),                   # [1, T, HV] fp32
        "beta": torch.rand(1, T, HV, generator=gen).sigmoid().to(bf16),            # [1, T, HV] bf16
        "cu_seqlens": torch.arange(0, shape.mbs + 1, dtype=torch.int64) * shape.seq,  # [N+1] int64
    }
    if grad:
        x["dO"] = torch.randn(1, T, HV, V, generator=gen).to(bf16)                 # [1, T, HV, V] bf16
    return x


def to_device(cpu: dict, grad: bool, reuse: dict | None = None) -> dict:
    """One GPU allocation per input; tensors named in ``reuse`` are taken from there instead (the tracer
    reuses the warmup's cu_seqlens so the library's tensor_cache hits, as in the measured steady state)."""
    out = {}
    for name, t in cpu.items():
        if reuse and name in reuse:
            out[name] = reuse[name]
            continue
        d = t.to("cuda")
        if name not in ("cu_seqlens", "dO"):
            d.requires_grad_(grad)
        out[name] = d
    return out


def gdn_inputs(shape: Shape, grad: bool, seed: int = 0) -> dict:
    return to_device(gdn_cpu_inputs(shape, grad, seed), grad)


def gdn_forward(x: dict):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule  # deferred: fla is not in the core install (model/validate extras)
    o, _ = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], cu_seqlens=x["cu_seqlens"],
                                  use_qk_l2norm_in_kernel=True)
    return o


def gdn_step(x: dict, forward_only: bool):
    """One step: forward under no_grad, or forward + backward with dO."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    if forward_only:
        with torch.no_grad():
            return gdn_forward(x)
    o = gdn_forward(x)
    o.backward(x["dO"].view_as(o))
    return o


VERSIONS = ("0.6.0",)    # fla-core releases


@harness(*(f"{impl}@{v}" for v in VERSIONS for impl in ("fla-gdn", "fla-gdn-fwd")))
class FlaGdn(Harness):
    """Qwen3-Next's recipe, shared with the tracer (one block per input, CPU-seeded)."""
    package, triton = "fla", True

    def inputs(self, shape: Shape) -> dict:
        return gdn_inputs(shape, not self.forward_only)

    def forward(self, x: dict):
        return gdn_forward(x)

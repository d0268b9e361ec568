"""flash-linear-attention 0.6.0's KimiDeltaAttention and GatedDeltaNet layers, L of them chained, one training step
(forward, then backward with dY), checkpointing off or per layer (``torch.utils.checkpoint``, non-reentrant): what
``fla-kda-layer@0.6.0`` and ``fla-gdn-layer@0.6.0`` model.

Prepared for a GPU session (issue 21), not yet run. Allocation order: x, cu_seqlens, dY, then each layer's parameters
(built on the CPU, bf16 but A_log and dt_bias fp32, moved to the GPU one tensor at a time, bottom layer first; the model
lists the top layer's first: the same blocks, another order).
"""
from __future__ import annotations

from livebytes.estimator.shapes import Shape

from . import Harness, harness


def _layer(kind: str, shape: Shape, hidden: int, conv_size: int, seed: int, device: str = "cuda"):
    import torch
    torch.manual_seed(seed)
    common = dict(hidden_size=hidden, head_dim=shape.dim, num_heads=shape.heads, num_v_heads=shape.hv,
                  conv_size=conv_size, mode="chunk")
    if kind == "kda":
        from fla.layers.kda import KimiDeltaAttention
        layer = KimiDeltaAttention(expand_v=shape.dv / shape.dim, **common)
    else:
        from fla.layers.gated_deltanet import GatedDeltaNet
        layer = GatedDeltaNet(expand_v=shape.dv / shape.dim, use_gate=True, **common)
    for name, p in layer.named_parameters():
        if name not in ("A_log", "dt_bias"):
            p.data = p.data.to(torch.bfloat16)
    return layer.to(device)          # one copy per parameter, in registration order


class FlaLayer(Harness):
    package, triton = "fla", True
    kind = ""

    def inputs(self, shape: Shape, device: str = "cuda") -> dict:
        """``device`` "cpu": the same tensors on the CPU (validate/gpu/probes/cpu_frames.py compiles the layer's kernels)."""
        import torch
        hidden, conv = shape.hidden or 2048, shape.conv_size or 4
        gen = torch.Generator().manual_seed(0)
        x = {"x": torch.randn(1, shape.tokens, hidden, generator=gen).to(torch.bfloat16).to(device).requires_grad_(True),
             "cu_seqlens": (torch.arange(0, shape.mbs + 1, dtype=torch.int64) * shape.seq).to(device),
             "dO": torch.randn(1, shape.tokens, hidden, generator=gen).to(torch.bfloat16).to(device)}
        x["layers"] = [_layer(self.kind, shape, hidden, conv, seed=i, device=device) for i in range(shape.layers or 1)]
        x["checkpoint"] = bool(shape.checkpoint)
        return x

    def forward(self, x: dict):
        from torch.utils.checkpoint import checkpoint
        h = x["x"]
        for layer in x["layers"]:
            def run(h, layer=layer):
                return layer(h, cu_seqlens=x["cu_seqlens"])[0]
            h = checkpoint(run, h, use_reentrant=False) if x["checkpoint"] else run(h)
        return h

    @staticmethod
    def release(x: dict) -> None:
        x["x"].grad = None
        for layer in x["layers"]:
            for p in layer.parameters():
                p.grad = None

    @staticmethod
    def finite(o, x: dict) -> bool:
        import torch
        grads = [x["x"].grad] + [p.grad for layer in x["layers"] for p in layer.parameters()]
        return all(bool(torch.isfinite(t.float()).all()) for t in [o] + [g for g in grads if g is not None])


@harness("fla-kda-layer@0.6.0")
class FlaKdaLayer(FlaLayer):
    kind = "kda"


@harness("fla-gdn-layer@0.6.0")
class FlaGdnLayer(FlaLayer):
    kind = "gdn"

    @classmethod
    def refuse_device(cls, sm: int, device_name: str) -> str | None:
        import triton

        from livebytes.lifetimes.traced.model import GATED_BACKWARD_REFUSED
        version = tuple(int(part) for part in triton.__version__.split("+")[0].split(".")[:3])
        low, high = GATED_BACKWARD_REFUSED
        if sm == 90 and low <= version < high:
            return ("fla-core 0.6.0's gated chunk_bwd_dqkwg refuses Hopper with Triton >= 3.4.0 and < 3.7.1 (#640): "
                    "the GDN layer's backward does not run here")
        return None

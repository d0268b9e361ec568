"""flash-linear-attention 0.6.0's KimiDeltaAttention and GatedDeltaNet layers, L of them chained, one training step
(forward, then backward with dY), checkpointing off or per layer (``torch.utils.checkpoint``, non-reentrant): what
``fla-kda-layer@0.6.0`` and ``fla-gdn-layer@0.6.0`` model. Each harness is a family row's probe
(``lifetimes/traced/families.py``, ``Probe``: the layer's class and the options it is built with).

Prepared for a GPU session (issue 21), not yet run. Allocation order: x, cu_seqlens, dY, then each layer's parameters
(built on the CPU, bf16 but A_log and dt_bias fp32, moved to the GPU one tensor at a time, bottom layer first; the model
lists the top layer's first: the same blocks, another order).
"""
from __future__ import annotations

from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced.families import ROWS, Probe, family

from .base import Harness, harness
from livebytes.lifetimes.traced.model import GATED_BACKWARD_REFUSED


def _layer(probe: Probe, shape: Shape, hidden: int, conv_size: int, seed: int, device: str = "cuda"):
    """The family row's probe layer (``Probe.build``: its class, with its own options) at the shape's sizes."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    torch.manual_seed(seed)
    layer = probe.build(hidden_size=hidden, head_dim=shape.dim, num_heads=shape.heads, num_v_heads=shape.hv,
                        conv_size=conv_size, mode="chunk", expand_v=shape.dv / shape.dim)
    for name, p in layer.named_parameters():
        if name not in ("A_log", "dt_bias"):
            p.data = p.data.to(torch.bfloat16)
    return layer.to(device)          # one copy per parameter, in registration order


class FlaLayer(Harness):
    package, triton = "fla", True
    probe: Probe | None = None       # the family row's probe (``families.Probe``): set per harness below
    model_type = ""                  # ... and that row's model_type

    def inputs(self, shape: Shape, device: str = "cuda") -> dict:
        """``device`` "cpu": the same tensors on the CPU (validate/gpu/probes/cpu_frames.py compiles the layer's kernels)."""
        import torch  # deferred: torch is not in the core install (model/validate extras)
        hidden, conv = shape.hidden or 2048, shape.conv_size or 4
        gen = torch.Generator().manual_seed(0)
        x = {"x": torch.randn(1, shape.tokens, hidden, generator=gen).to(torch.bfloat16).to(device).requires_grad_(True),
             "cu_seqlens": (torch.arange(0, shape.mbs + 1, dtype=torch.int64) * shape.seq).to(device),
             "dO": torch.randn(1, shape.tokens, hidden, generator=gen).to(torch.bfloat16).to(device)}
        x["layers"] = [_layer(self.probe, shape, hidden, conv, seed=i, device=device) for i in range(shape.layers or 1)]
        x["checkpoint"] = bool(shape.checkpoint)
        return x

    def forward(self, x: dict):
        from torch.utils.checkpoint import checkpoint  # deferred: torch is not in the core install (model/validate extras)
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
        import torch  # deferred: torch is not in the core install (model/validate extras)
        grads = [x["x"].grad] + [p.grad for layer in x["layers"] for p in layer.parameters()]
        return all(bool(torch.isfinite(t.float()).all()) for t in [o] + [g for g in grads if g is not None])

    @classmethod
    def refuse_device(cls, sm: int, device_name: str) -> str | None:
        """A family whose layer runs fla-core's gated backward (``Family.gated_backward``) refused where #640 holds."""
        import triton  # deferred: triton is not in the core install (model/validate extras)

        version = tuple(int(part) for part in triton.__version__.split("+")[0].split(".")[:3])
        low, high = GATED_BACKWARD_REFUSED
        if family(cls.model_type).gated_backward and sm == 90 and low <= version < high:
            return ("fla-core 0.6.0's gated chunk_bwd_dqkwg refuses Hopper with Triton >= 3.4.0 and < 3.7.1 (#640): "
                    f"{cls.probe.impl}'s backward does not run here")
        return None


def probe_harness(row) -> type:
    """The harness of a family row's probe layer, registered under its key (``Probe.harness``)."""
    cls = type(f"Fla{row.probe.cls}Layer", (FlaLayer,), {"probe": row.probe, "model_type": row.model_type})
    return harness(row.probe.harness)(cls)



HARNESSES = {row.probe.harness: probe_harness(row) for row in ROWS if row.probe is not None}

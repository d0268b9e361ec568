"""FLA's in-kernel q/k L2 norm (fla-core 0.6.0 ``modules/norm/l2norm.py``), as ``chunk_kda`` and
``chunk_gated_delta_rule`` both call it: one declaration for the two models."""
from __future__ import annotations

from livebytes.estimator.buffers import Group, Source
from livebytes.estimator.declare import Declaration, source_root
from livebytes.estimator.symbols import DK, H, T, cdiv

src = source_root("fla")
L2 = "modules/norm/l2norm.py"
L2NORM_KEY = (DK, cdiv(T * H, 2048 * 32))   # l2norm kernels' autotune key (D, NB): a token bucket, new at larger T


def l2norm_forward(d: Declaration, x: str, call: Source, saved_until: str) -> None:
    """``{x}, {x}_rstd = l2norm_fwd({x})`` at ``call``: the normalised tensor and its rstd, saved for backward."""
    d.step(f"fwd.l2norm_{x}", "forward", call)
    d.autotune("l2norm_fwd_kernel", L2NORM_KEY, src(L2, "l2norm_fwd", 136,
               "l2norm_fwd_kernel[grid](x=x, y=y, rstd=rstd, eps=eps, T=T, D=D, BD=BD, NB=NB)"),
               note="key=['D', 'NB'] (l2norm.py:65), NB = triton.cdiv(T, 2048 * 32) over T*H rows (l2norm.py:131)")
    d.buffer(f"{x}_normed", Group.SAVED, (T, H, DK), "bf16", src(L2, "l2norm_fwd", 117, "y = torch.empty_like(x)"),
             saved_until)                                                                     # [T, H, K] bf16
    d.buffer(f"{x}_rstd", Group.SAVED, (T * H,), "fp32",
             src(L2, "l2norm_fwd", 128, "rstd = torch.empty((T,), dtype=torch.float32, device=x.device)"),
             saved_until)                                                                     # [T*H] fp32


def l2norm_backward(d: Declaration, x: str, call: Source) -> None:
    """``d{x} = l2norm_bwd({x}, {x}_rstd, d{x})`` at ``call``: the input gradient."""
    d.step(f"bwd.l2norm_{x}", "backward", call)
    d.autotune("l2norm_bwd_kernel", L2NORM_KEY, src(L2, "l2norm_bwd", 164,
               "l2norm_bwd_kernel[grid](y=y, rstd=rstd, dy=dy, dx=dx, eps=eps, T=T, D=D, BD=BD, NB=NB)"),
               note="key=['D', 'NB'] (l2norm.py:89), NB = triton.cdiv(T, 2048 * 32) over T*H rows (l2norm.py:159)")
    d.buffer(f"d{x}", Group.OUTPUT_GRAD, (T, H, DK), "bf16", src(L2, "l2norm_bwd", 149, "dx = torch.empty_like(y)"),
             note=f"the {x.upper()} gradient")                                                # [T, H, K] bf16

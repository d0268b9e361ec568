"""``torch._grouped_mm`` of other than bf16 inputs, as CUDA runs it, for a program run on meta tensors.

torch's meta registration of ``aten._grouped_mm`` (``_meta_grouped_mm_common``, torch/_meta_registrations.py) checks
``mat_a.dtype == torch.bfloat16 and mat_b.dtype == torch.bfloat16`` (the CUTLASS fast path's), but the CUDA kernel
takes any dtype: aten/src/ATen/native/cuda/GroupedBlas.cpp ``_grouped_mm_cuda`` (torch 2.11) validates the inputs
(``_grouped_mm_validate_inputs``: both operands of one dtype), makes the output with
``create_grouped_gemm_output_tensor`` (the rows of A by the columns of B, last dim padded to 16 bytes for TMA), and
when the operands are not both bf16 on sm90/sm100 calls ``_grouped_mm_fallback`` (GroupedMMUtils.h), one ``at::mm_out``
per group into slices of that output: no allocation of its own beyond cuBLAS's per-handle workspace, which the first
GEMM of the step already holds.

fp32-amp makes that call: transformers' ``_grouped_mm`` (integrations/moe.py) casts the input to the weight's dtype,
and under fp32-amp the experts' weights stay fp32 (``torch._grouped_mm`` is in none of autocast's lists).
``fallback_output`` makes the output as the CUDA kernel does, through torch's own ``_create_grouped_mm_output_tensor``.
"""
from __future__ import annotations

import torch
from torch._meta_registrations import _create_grouped_mm_output_tensor

OP = "aten._grouped_mm.default"


def takes_fallback(func, args) -> bool:
    """A ``_grouped_mm`` whose operands are not both bf16: torch's meta kernel refuses it, CUDA runs the fallback."""
    return (str(func) == OP and len(args) >= 2
            and not (args[0].dtype == torch.bfloat16 and args[1].dtype == torch.bfloat16))


def fallback_output(func, args, kwargs) -> tuple[list, object]:
    """``_grouped_mm_cuda``'s output for the fallback: (allocations in order, the op's result)."""
    mat_a, mat_b = args[0], args[1]
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    bias = args[3] if len(args) > 3 else kwargs.get("bias")
    out_dtype = args[4] if len(args) > 4 else kwargs.get("out_dtype")
    if mat_a.dtype != mat_b.dtype:                        # _grouped_mm_validate_inputs
        raise RuntimeError(f"_grouped_mm: expected mat_a and mat_b of one dtype, got {mat_a.dtype} and {mat_b.dtype}")
    if bias is not None:
        raise RuntimeError("_grouped_mm: a bias is not supported")
    out = _create_grouped_mm_output_tensor(mat_a, mat_b, offs, out_dtype)
    if not isinstance(out, torch.Tensor) or out.device.type != "meta":
        out = torch.empty_strided(out.shape, out.stride(), dtype=out.dtype, device="meta")
    return [out], out

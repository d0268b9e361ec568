"""ATen operators (outside attention, ``sdpa.py``) whose CUDA kernel allocates other than the kernel a program run on
meta tensors takes, as CUDA runs them.

- ``aten.log_sigmoid_forward`` (``F.logsigmoid``'s forward, returning the result and a ``buffer`` autograd saves for
  the backward): the CPU kernel fills a buffer of the input's size, and the meta kernel makes it so, but
  ``log_sigmoid_forward_cuda`` (aten/src/ATen/native/cuda/Activation.cpp, torch 2.11) makes ``at::empty({0})``:
  "buffer is only used by CPU dispatch". On a GPU only the result [*input] is allocated; the buffer holds no bytes.
  FLA's GLA gates take it (``F.logsigmoid(gk)`` in fla/layers/gla.py): without this rule the trace holds one
  [T, key_dim] bf16 buffer per layer from the forward to the backward that the GPU never allocates (8 MiB at 8,192
  tokens and hidden 1,024; the GLA model record's requested peak shows it).
"""
from __future__ import annotations

import torch


def log_sigmoid_forward(func, args, kwargs) -> tuple[list, object]:
    """``log_sigmoid_forward_cuda``: the result (``empty_like`` of the input) and an empty buffer, in that order."""
    result, _cpu_buffer = func(*args, **kwargs)
    buffer = torch.empty((0,), dtype=result.dtype, device=result.device)      # [0]: no storage bytes
    return [result, buffer], (result, buffer)


KERNELS = {"aten.log_sigmoid_forward.default": (log_sigmoid_forward, "")}

"""The traced model source: a model's own Python (forward, backward, ``optimizer.step()``, ``zero_grad``) run on meta
tensors, on a machine without a GPU, recording every allocation and free in order with its Python frames.

- ``target``: Triton's driver and ``torch.cuda``'s device queries describe the target GPU (``estimator.devices``), so
  the library's device-dependent host code (SM count, Hopper tiling, shared-memory checks) takes the GPU's branches;
- ``launches``: every Triton launch is recorded and never runs (an autotuned one with the key Triton would tune);
- ``values``: the few small integer tensors whose values host code reads (``cu_seqlens`` and what is computed from it)
  keep real CPU copies, so data-dependent operators (``repeat_interleave``, ``.tolist()``) get real answers;
- ``recorder``: a dispatch mode that sees every ATen operator below autograd, records each new storage (what the
  CUDA caching allocator would be asked for) and, through a finalizer on the storage, its free; with the module path
  (forward hooks; in the backward, the autograd node's module) and the thread a GPU would run it on;
- ``autocast``: CUDA autocast's kernels at their dispatch key for meta tensors (torch's own do not act on them), so
  ``torch.autocast("cuda")`` casts as on the GPU, with its weight cache (fp32-amp);
- ``sdpa``: ``scaled_dot_product_attention`` routed to the fused kernel torch's CUDA build picks for the target GPU
  (cuDNN or flash, else math), with that kernel's allocations, instead of the meta math path;
- ``step``: a training step as a script runs it (model built from an HF config, inputs, AdamW, checkpointing, the
  precision: bf16 parameters, or fp32 ones under autocast);
- ``__main__``: ``python -m livebytes.tracer SPEC.json`` prints the traces as JSON (what ``lifetimes`` reads).

What only a GPU adds is not here: cuBLAS workspaces, ATen's reduce staging, Triton's autotuning buffers, the process's
own memory. The recorder notes the operators those rules need (GEMMs, reductions, autotuned launches); the rules
live with the models (``lifetimes``). Needs torch, triton and the model's library (the ``model`` extra).
"""

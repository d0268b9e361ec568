"""``scaled_dot_product_attention`` as CUDA runs it, for a program run on meta tensors.

On meta tensors torch's SDPA takes the math path (``_fused_sdp_choice_meta`` answers math unless the tensor carries the
CUDA key: aten/src/ATen/native/transformers/attention.cpp), a [B, H, S, S] softmax in fp32; on the GPU the same call
runs a fused kernel whose buffers are others. Here the call is routed the way torch's CUDA build routes it:

- which kernel (``choose``): ``select_sdp_backend`` of aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, torch
  2.11.0 (git 70d99e998b49, the H200 image's): its priority order, cuDNN first when ``check_prefer_cudnn_attention``
  holds (cuDNN runtime > 9.15.0 on compute capability 9.x or 10.x with minor 0 or 3), else flash, efficient, math;
  each backend's ``can_use_*`` filters that a call from a model can fail (dtype, head dims, GQA, mask, causal shape,
  strides, architecture). The cuDNN runtime is the one torch's CUDA wheel pins (``CUDNN_OF_TORCH``).
- the call (``cuda_sdpa``): what ``at::native::scaled_dot_product_attention`` (attention.cpp) does for that backend:
  cuDNN ``at::_scaled_dot_product_cudnn_attention(q, k, v, mask, compute_logsumexp, ...)``; flash the last dim padded
  to a multiple of 8 and ``at::_scaled_dot_product_flash_attention``; math torch's own decomposition. Autograd records
  the fused operator, so the backward runs its ``*_backward`` operator as on the GPU.
- the kernels' allocations (``KERNELS``, used by the recorder in place of the meta kernel): the outputs the CUDA
  functions make, in their order, and their temporaries:
  cuDNN forward (attention.cu ``_cudnn_attention_forward``, cudnn/MHA.cpp ``run_cudnn_SDP_fprop``): the philox seed and
  offset (int64 scalars on the device, allocated even without dropout), then the output (q's layout:
  ``alloc_with_matching_layout``) and the softmax statistics [B, H, S_q, 1] fp32;
  cuDNN backward (attention_backward.cu ``_cudnn_attention_backward``): dq, dk, dv (``empty_like``), and a copy of
  grad_out in the output's layout when its innermost stride is not 1 (``permute_to_matching_layout``);
  flash forward (torch's meta registration, ``_flash_attention_forward``): output, logsumexp [B, H, S_q] fp32, the rng
  state; flash backward (flash_attn/flash_api.cpp ``mha_bwd``): ``.contiguous()`` copies of grad_out and out, dq, dk,
  dv, ``softmax_d`` [B, H, round128(S_q)] fp32, ``dq_accum`` [B, round128(S_q), H, round32(D)] fp32, and for GQA
  ``dk_expanded``/``dv_expanded`` [B, S_k, H_q, D] reduced into dk/dv.

  memory-efficient forward (attention.cu ``_efficient_attention_forward``'s ``launchKernel``): the output
  [B, S_q, H, D_v], logsumexp [B, H, ceil(S_q/32)*32] fp32 (``kAlignLSE`` 32; [B, H, 0] without grad), and for a
  16-bit call whose larger head dim exceeds 128 the fp32 ``output_accum`` [B, S_q, H, D_v] freed on return (the sm80
  table, kernels/cutlassF_*.cu ``dispatch_cutlassF_bf16_sm80``: 64x64 kMaxK 64, 64x128 kMaxK 128, 32x128 kMaxK 65536;
  kernel_forward.h ``kNeedsOutputAccumulatorBuffer = !kSingleValueIteration && output_accum_t != output_t``, single
  iteration when kMaxK <= kKeysPerBlock); philox seed and offset are host tensors without dropout;
  memory-efficient backward (attention_backward.cu ``_efficient_attention_backward``): ``grad_out.contiguous()`` of the
  [B, S_q, H, D_v] view when not contiguous, dq, dk, dv (``at::empty`` of q, k, v's [B, S, H, D] sizes), then
  ``delta`` [B, H, S_q] fp32 (``kKernelComputesDelta``: 16-bit kernels from sm80), or for fp32 the
  ``(grad_out.float() * out.float()).sum(-1).transpose(-2, -1).contiguous()`` temporaries; all but dq/dk/dv freed on
  return.

Not modelled: cuDNN's graph workspace (``mha_graph->get_workspace_size()``, allocated through the caching allocator
and freed when each call returns; its size is the execution plan's, known on the GPU only), and the memory-efficient
backward's CUTLASS workspace (attention_backward.cu ``p.workspace_size()``: fp32 dq/dk/dv accumulators per key split,
sized by the kernel ``dispatch_cutlassB`` picks for the GPU's shared memory, and by the split-keys heuristic): each
call is recorded as a ``scratch_op`` event naming it.

An explicit mask (a packed batch's block-diagonal one, transformers' ``sdpa_mask``) takes what attention.cpp does to
it before a fused kernel: ``convert_boolean_attn_mask`` (an additive copy in q's dtype), and for the memory-efficient
kernel ``preprocess_mask`` (its last dim padded to a multiple of 8 unless aligned). Flash takes no mask
(``flash_refusal``); cuDNN's filter here reads no mask (torch 2.11's ``check_attn_mask_shape`` takes a [1, 1, S_q, S_k]
one).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

# torch's CUDA 13.0 wheel pins its cuDNN (wheel METADATA Requires-Dist): torch 2.11.0 nvidia-cudnn-cu13==9.19.0.56.
# cudnnGetVersion() encodes major*10000 + minor*100 + patch (cuDNN 9 convention): 9.19.0 -> 91900.
CUDNN_OF_TORCH = {(2, 11): 91900}
TORCH_RULES = "2.11.0"       # the sdp_utils.cpp whose rules ``choose`` follows (the H200 image's torch)


class SdpaUnsupported(RuntimeError):
    """A call whose CUDA kernel this emulation does not make."""


@dataclass(frozen=True)
class Target:
    """What ``select_sdp_backend`` reads of the machine: the GPU's compute capability and cuDNN's runtime version."""
    capability: tuple[int, int]
    cudnn: int

    @classmethod
    def of(cls, device, torch_version: str) -> "Target":
        major_minor = tuple(int(x) for x in torch_version.split("+")[0].split(".")[:2])
        cudnn = CUDNN_OF_TORCH.get(major_minor, max(CUDNN_OF_TORCH.values()))   # a later wheel: at least 2.11's
        return cls(tuple(device.capability), cudnn)


def prefers_cudnn(target: Target) -> bool:
    """sdp_utils.cpp ``check_prefer_cudnn_attention`` (TORCH_CUDNN_SDPA_DEPRIORITIZED unset): cuDNN > 9.15.0 on
    compute capability 9.x or 10.x with minor 0 or 3."""
    major, minor = target.capability
    return target.cudnn > 91500 and major in (9, 10) and minor in (0, 3)


def priority(target: Target) -> tuple[str, ...]:
    """``priority_order``: the context's default order (flash, efficient, math, cudnn), or cuDNN's first."""
    if prefers_cudnn(target):
        return ("cudnn", "flash", "efficient", "math")
    return ("flash", "efficient", "math", "cudnn")


@dataclass(frozen=True)
class Call:
    """One SDPA call's arguments as the filters read them: q, k, v are [B, H, S, D] tensors (or their shapes)."""
    q_shape: tuple
    k_shape: tuple
    v_shape: tuple
    dtype: str                  # "bfloat16", "float16", "float32"
    has_mask: bool = False
    dropout_p: float = 0.0
    is_causal: bool = False
    enable_gqa: bool = False
    requires_grad: bool = True
    last_dim_strides: tuple = (1, 1, 1)

    @classmethod
    def of(cls, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False) -> "Call":
        return cls(tuple(q.shape), tuple(k.shape), tuple(v.shape), str(q.dtype).removeprefix("torch."),
                   attn_mask is not None, float(dropout_p), bool(is_causal), bool(enable_gqa),
                   torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)),
                   tuple(t.stride(-1) if t.shape[-1] != 1 else 1 for t in (q, k, v)))


def _heads_ok(c: Call, gqa_supported: bool, same_kv_heads: bool) -> str | None:
    """sdp_utils_cpp.h ``check_batch_size_and_num_heads_dense``: one batch size; equal heads, or under ``enable_gqa``
    query heads a multiple of the key/value heads (``check_grouped_query_attention``)."""
    (bq, hq), (bk, hk), (bv, hv) = c.q_shape[:2], c.k_shape[:2], c.v_shape[:2]
    if not bq == bk == bv:
        return "query, key and value batch sizes differ"
    if hq == hk == hv:
        return None
    if not (c.enable_gqa and gqa_supported):
        return "query and key/value head counts differ without grouped-query support"
    if same_kv_heads and hk != hv:
        return "key and value head counts differ"
    if hq % hk or hq % hv:
        return "query heads are not a multiple of key/value heads"
    return None


def _common(c: Call, t: Target, low: tuple, high: tuple) -> str | None:
    """Filters every fused backend applies: 4-D inputs, the architecture range, nonzero sequence lengths, stride-1
    last dims (``check_tensor_shapes``, ``check_*_hardware_support``, ``check_nonzero_sequence_lengths_dense``,
    ``check_last_dim_stride_equals_1_dense``)."""
    if not len(c.q_shape) == len(c.k_shape) == len(c.v_shape) == 4:
        return "inputs are not 4-D"
    if c.q_shape[2] == 0 or c.k_shape[2] == 0:
        return "a sequence length is 0"
    if any(s != 1 for s in c.last_dim_strides):
        return "a last dimension has a stride other than 1"
    return None if low <= t.capability <= high else "the architecture is outside the kernel's range"


def cudnn_refusal(c: Call, t: Target) -> str | None:
    """``can_use_cudnn_attention`` (torch 2.11): low-precision dtypes, architecture sm80..sm121, dropout not on cuDNN
    9.11-9.13, grouped-query heads allowed (K and V may differ), ``check_cudnn_tensor_shapes``: head dims at most 128
    (256 on compute capability 9.0 from cuDNN 9.10.0) and multiples of 8, key length not 1."""
    if c.dtype not in ("bfloat16", "float16"):
        return f"cuDNN attention takes bf16 or fp16, not {c.dtype}"
    if c.dropout_p > 0 and 91100 < t.cudnn < 91400:
        return "cuDNN 9.11-9.13 run no dropout in SDPA"
    why = _common(c, t, (8, 0), (12, 1)) or _heads_ok(c, gqa_supported=True, same_kv_heads=False)
    if why:
        return why
    limit = 256 if (t.capability == (9, 0) and t.cudnn >= 91000) else 128
    d_qk, d_v = c.q_shape[3], c.v_shape[3]
    if d_qk > limit or d_v > limit:
        return f"head dim over {limit}"
    if d_qk % 8 or d_v % 8:
        return "head dim not a multiple of 8"
    return "key/value length 1" if c.k_shape[2] == 1 else None


def flash_refusal(c: Call, t: Target) -> str | None:
    """``can_use_flash_attention``: no mask, equal head dims up to 256, sm80..sm121 (training with head dim over 192
    refused on sm86-89 and sm120-121), causal only with equal query and key lengths, bf16/fp16, grouped-query heads
    allowed (K and V equal)."""
    why = _common(c, t, (8, 0), (12, 1))
    if why:
        return why
    if c.has_mask:
        return "flash takes no attention mask"
    if not (c.q_shape[3] == c.k_shape[3] == c.v_shape[3] <= 256):
        return "head dims differ or exceed 256"
    if c.is_causal and c.q_shape[2] != c.k_shape[2]:
        return "causal with unequal query and key lengths"
    if c.dtype not in ("bfloat16", "float16"):
        return f"flash takes bf16 or fp16, not {c.dtype}"
    major, minor = t.capability
    if c.requires_grad and ((8, 6) <= (major, minor) <= (8, 9) or (12, 0) <= (major, minor) <= (12, 1)):
        d = c.q_shape[3]
        if not (d <= 192 or (c.dropout_p == 0 and d > 224)):
            return "training with this head dim on sm86-89/sm120-121"
    return _heads_ok(c, gqa_supported=True, same_kv_heads=True)


def efficient_refusal(c: Call, t: Target) -> str | None:
    """``can_use_mem_efficient_attention``: sm50..sm121, q and k head dims equal, head dims multiples of the GEMM
    alignment (8 for 16-bit dtypes from sm80, 4 for fp32: ``minimum_gemm_alignment``), equal heads: its dense
    constraints run ``check_batch_size_and_num_heads_dense<false /*supports_grouped_query_attention=*/>``, so a
    grouped-query call falls to math."""
    why = _common(c, t, (5, 0), (12, 1))
    if why:
        return why
    align = 8 if c.dtype in ("bfloat16", "float16") else 4
    if c.q_shape[3] != c.k_shape[3] or c.q_shape[3] % align or c.v_shape[3] % align:
        return "head dims not aligned"
    return _heads_ok(c, gqa_supported=False, same_kv_heads=True)


REFUSALS = {"cudnn": cudnn_refusal, "flash": flash_refusal, "efficient": efficient_refusal}


def choose(c: Call, t: Target) -> str:
    """``select_sdp_backend``: the first backend in ``priority`` order whose filters pass (math always does)."""
    for backend in priority(t):
        if backend == "math" or REFUSALS[backend](c, t) is None:
            return backend
    return "math"


# ---------------------------------------------------------------------------------------------- the call

def pad_last_dim_8(x):
    """attention.cpp ``pad_last_dim<8, false>``: the last dim zero-padded to a multiple of 8 (unchanged if it is)."""
    d = x.shape[-1]
    return x if d % 8 == 0 else F.pad(x, (0, 8 - d % 8))


def cuda_sdpa(target: Target, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False, original=None, autocast=None):
    """``at::native::scaled_dot_product_attention`` on CUDA (attention.cpp): the backend ``choose`` picks, called as
    that function calls it. Under CUDA autocast (``autocast``: the tracer's ``autocast.Autocast``) the inputs are first
    cast as autocast's ``scaled_dot_product_attention`` kernel casts them (lower_precision_fp: ``cached_cast`` of every
    tensor argument to the autocast dtype, ATen/autocast_mode.h), since this routing runs above that dispatch key."""
    if torch.is_autocast_enabled("cuda") and any(t is not None and t.dtype == torch.float32 for t in (q, k, v, attn_mask)):
        if autocast is None:
            raise SdpaUnsupported("scaled_dot_product_attention of fp32 inputs under autocast is not traced yet")
        to_type, before = torch.get_autocast_dtype("cuda"), autocast.operator
        autocast.operator = "scaled_dot_product_attention"
        try:
            q, k, v = (autocast.cached_cast(to_type, t) for t in (q, k, v))
            attn_mask = autocast.cached_cast(to_type, attn_mask) if attn_mask is not None else None
        finally:
            autocast.operator = before
    c = Call.of(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa)
    backend = choose(c, target)
    if backend == "math":
        return original(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                        enable_gqa=enable_gqa)
    if attn_mask is not None:
        attn_mask = additive_mask(attn_mask, q.dtype)
        if backend == "efficient":
            attn_mask = preprocess_mask(attn_mask, q, k)
    if backend == "cudnn":
        return torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, attn_mask, c.requires_grad, dropout_p,
                                                                  is_causal, False, scale=scale)[0]
    if backend == "flash":
        d = q.shape[-1]
        og_scale = scale if scale is not None else 1.0 / math.sqrt(d)       # sdp::calculate_scale of the original dim
        out = torch.ops.aten._scaled_dot_product_flash_attention(pad_last_dim_8(q), pad_last_dim_8(k), pad_last_dim_8(v),
                                                                 dropout_p, is_causal, False, scale=og_scale)[0]
        return out if d % 8 == 0 else out[..., :d]
    # efficient: attention.cpp ``case SDPBackend::efficient_attention`` (compute_logsumexp: should_compute_logsumexp)
    return torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, attn_mask, c.requires_grad, dropout_p,
                                                                  is_causal, scale=scale)[0]


def additive_mask(mask, dtype):
    """attention.cpp ``convert_boolean_attn_mask``: a bool mask becomes ``at::where(mask, 0.0, at::scalar_tensor(-inf,
    dtype))``, a new [.., S_q, S_k] tensor of q's dtype (and the 0-dim scalar on the device); another passes through."""
    if mask.dtype != torch.bool:
        return mask
    return torch.ops.aten.where.ScalarSelf(mask, 0.0, torch.scalar_tensor(float("-inf"), dtype=dtype,
                                                                           device=mask.device))


MEM_EFF_ALIGNMENT = 8       # attention.cpp ``preprocess_mask``: ``constexpr int mem_eff_alignment = 8``


def preprocess_mask(mask, q, k):
    """attention.cpp ``preprocess_mask`` for the memory-efficient kernel: unless every stride but the last is a
    multiple of 8 and the last is 1 (``aligned_tensor<8>``), ``pad_bias<8>``: the last dim zero-padded by
    ``8 - S_k % 8`` (a new tensor) and sliced back; then expanded to [B, H, S_q, S_k] (a view)."""
    aligned = all(st % MEM_EFF_ALIGNMENT == 0 for st in mask.stride()[:-1]) and mask.stride(-1) == 1
    if not aligned:
        last = mask.shape[-1]
        mask = F.pad(mask, (0, MEM_EFF_ALIGNMENT - last % MEM_EFF_ALIGNMENT))[..., :last]
    return mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])


def cuda_sdpa_mode(target: Target, autocast=None):
    """A function mode under which ``torch.nn.functional.scaled_dot_product_attention`` of meta tensors is
    ``cuda_sdpa`` (other calls unchanged); ``autocast``: the tracer's CUDA autocast, whose casts it makes."""
    sdpa = torch.nn.functional.scaled_dot_product_attention

    class CudaSdpa(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is sdpa and args and getattr(args[0], "device", None) is not None and args[0].device.type == "meta":
                return cuda_sdpa(target, *args, original=sdpa, autocast=autocast, **kwargs)
            return func(*args, **kwargs)
    return CudaSdpa()


# ---------------------------------------------------------------------------------------------- the kernels

def round_multiple(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def cudnn_forward(func, args, kwargs) -> tuple[list, object]:
    """``_cudnn_attention_forward`` + ``run_cudnn_SDP_fprop``: (allocations in order, the op's result). The meta kernel
    makes the same tensors (output in q's layout, stats [B, H, S_q, 1] fp32, seed and offset int64 scalars); the GPU
    allocates seed and offset first."""
    out = func(*args, **kwargs)
    attention, lse, seed, offset = out[0], out[1], out[6], out[7]
    return [seed, offset, attention, lse], out


def cudnn_backward(func, args, kwargs) -> tuple[list, object]:
    """``_cudnn_attention_backward``: dq, dk, dv (``empty_like``), then in ``run_cudnn_SDP_bprop`` a copy of grad_out
    in the output's layout when its innermost stride is not 1 (freed when the call returns)."""
    grad_out, out_ = args[0], args[4]
    grads = func(*args, **kwargs)
    made = list(grads)
    if grad_out.stride(-1) != 1:
        order = sorted(range(out_.dim()), key=lambda i: -out_.stride(i))
        made.append(torch.empty([grad_out.shape[i] for i in order], dtype=grad_out.dtype, device="meta"))
    return made, grads


def flash_forward(func, args, kwargs) -> tuple[list, object]:
    """``_scaled_dot_product_flash_attention``: output, logsumexp [B, H, S_q] fp32, the rng state and offset, the
    (empty) debug mask, as torch's meta registration makes them."""
    out = func(*args, **kwargs)
    return [out[0], out[1], out[6], out[7], out[8]], out


def flash_backward(func, args, kwargs) -> tuple[list, object]:
    """``_flash_attention_backward`` + ``mha_bwd`` (flash_api.cpp): ``grad_out.contiguous()`` and ``out.contiguous()``
    of the [B, S, H, D] views when not contiguous, dq/dk/dv, ``softmax_d`` [B, H, round128(S_q)] fp32,
    ``dq_accum`` [B, round128(S_q), H, round32(D)] fp32 (D <= 192; else 256), GQA's ``dk_expanded``/``dv_expanded``
    [B, S_k, H_q, D]; all but dq/dk/dv freed when the call returns."""
    grad_out, q, k, out_ = args[0], args[1], args[2], args[4]
    b, h, s_q, d = q.shape
    s_k, h_k = k.shape[2], k.shape[1]
    made = [torch.empty(t.transpose(1, 2).shape, dtype=t.dtype, device="meta")
            for t in (grad_out, out_) if not t.transpose(1, 2).is_contiguous()]
    grads = func(*args, **kwargs)
    made += list(grads)
    d_rounded = round_multiple(d, 32) if d <= 192 else 256
    made.append(torch.empty((b, h, round_multiple(s_q, 128)), dtype=torch.float32, device="meta"))
    made.append(torch.empty((b, round_multiple(s_q, 128), h, d_rounded), dtype=torch.float32, device="meta"))
    if h_k != h:
        made += [torch.empty((b, s_k, h, d), dtype=q.dtype, device="meta") for _ in range(2)]
    return made, grads


SIXTEEN_BIT = ("torch.bfloat16", "torch.float16")


def efficient_forward(func, args, kwargs) -> tuple[list, object]:
    """``_efficient_attention_forward`` (attention.cu ``launchKernel``): ``res`` [B, S_q, H, D_v] (returned as its
    [B, H, S_q, D_v] transpose), ``logsumexp`` [B, H, ceil(S_q/32)*32] fp32 (torch's meta registration makes both), then
    for a 16-bit call with max(D_qk, D_v) > 128 the kernel of kMaxK 65536 (32 queries x 128 keys per block: not a
    single value iteration) and its fp32 ``output_accum`` [B, S_q, H, D_v], freed on return. An empty logsumexp (no
    grad) allocates nothing; seed and offset are host tensors without dropout."""
    q, v = args[0], args[2]
    out = func(*args, **kwargs)
    made = [out[0]] + ([out[1]] if out[1].numel() else [])
    b, h, s_q, _ = q.shape
    if str(q.dtype) in SIXTEEN_BIT and max(q.shape[-1], v.shape[-1]) > 128:
        made.append(torch.empty((b, s_q, h, v.shape[-1]), dtype=torch.float32, device="meta"))
    return made, out


def efficient_backward(func, args, kwargs) -> tuple[list, object]:
    """``_scaled_dot_product_efficient_attention_backward_cuda`` + ``_efficient_attention_backward``
    (attention_backward.cu): ``grad_out.contiguous()`` of the [B, S_q, H, D_v] view when it is not, dq, dk, dv, then
    ``delta`` [B, H, S_q] fp32 for a 16-bit call (``kKernelComputesDelta``), or for fp32 ``grad_out * out``
    [B, S_q, H, D_v], its ``.sum(-1)`` [B, S_q, H] and the ``.transpose(-2, -1).contiguous()`` [B, H, S_q]; all but
    dq, dk, dv freed when the call returns."""
    grad_out, q, out_ = args[0], args[1], args[5]
    b, h, s_q, _ = q.shape
    d_v = out_.shape[-1]
    made = []
    if not grad_out.transpose(1, 2).is_contiguous():
        made.append(torch.empty((b, s_q, h, d_v), dtype=grad_out.dtype, device="meta"))
    grads = func(*args, **kwargs)
    made += [g for g in grads if g is not None]
    if str(q.dtype) in SIXTEEN_BIT:
        made.append(torch.empty((b, h, s_q), dtype=torch.float32, device="meta"))
    else:
        made += [torch.empty((b, s_q, h, d_v), dtype=torch.float32, device="meta"),
                 torch.empty((b, s_q, h), dtype=torch.float32, device="meta"),
                 torch.empty((b, h, s_q), dtype=torch.float32, device="meta")]
    return made, grads


CUDNN_WORKSPACE = ("cuDNN's SDPA graph workspace (cudnn/MHA.cpp get_workspace_size), sized by its execution plan on "
                   "the GPU")
EFFICIENT_WORKSPACE = ("the memory-efficient backward's CUTLASS workspace (attention_backward.cu p.workspace_size(): "
                       "fp32 dq/dk/dv accumulators per key split), sized by the kernel dispatch_cutlassB picks for the "
                       "GPU's shared memory and by its split-keys heuristic")

# op -> (emulation, the workspace allocated and freed inside the call that the GPU alone sizes; "" none)
KERNELS = {
    "aten._scaled_dot_product_cudnn_attention.default": (cudnn_forward, CUDNN_WORKSPACE),
    "aten._scaled_dot_product_cudnn_attention_backward.default": (cudnn_backward, CUDNN_WORKSPACE),
    "aten._scaled_dot_product_flash_attention.default": (flash_forward, ""),
    "aten._scaled_dot_product_flash_attention_backward.default": (flash_backward, ""),
    "aten._scaled_dot_product_efficient_attention.default": (efficient_forward, ""),
    "aten._scaled_dot_product_efficient_attention_backward.default": (efficient_backward, EFFICIENT_WORKSPACE),
}

"""The tracer's SDPA: the kernel torch 2.11's CUDA build picks (sdp_utils.cpp ``select_sdp_backend``) and the buffers
that kernel allocates, on meta tensors (``livebytes.tracer.sdpa``)."""
import pytest
import torch
import torch.nn.functional as F

from livebytes.tracer.recorder import Recorder
from livebytes.tracer.sdpa import Call, Target, choose, cuda_sdpa_mode, prefers_cudnn

H200 = Target((9, 0), 91900)          # torch 2.11.0's wheel pins cuDNN 9.19.0


def call(d=128, hq=4, hk=2, dtype="bfloat16", gqa=True, **kw):
    return Call((1, hq, 1030, d), (1, hk, 1030, d), (1, hk, 1030, d), dtype, enable_gqa=gqa, is_causal=True, **kw)


@pytest.mark.parametrize("target,prefers", [
    (H200, True),                          # 91900 > 91500, sm90
    (Target((10, 0), 91900), True),        # B200
    (Target((10, 3), 91900), True),        # B300
    (Target((9, 0), 91500), False),        # not above 9.15.0
    (Target((8, 6), 91900), False),        # sm86 is not preferred
])
def test_cudnn_goes_first_above_cudnn_9_15_on_sm90_and_sm100(target, prefers):
    assert prefers_cudnn(target) is prefers


@pytest.mark.parametrize("c,target,backend", [
    (call(), H200, "cudnn"),                                  # transformers' GQA call, head dim 128
    (call(d=256), H200, "cudnn"),                             # sm90 from cuDNN 9.10: head dims up to 256
    (call(d=256), Target((10, 0), 91900), "flash"),           # sm100: cuDNN's limit is 128, flash takes 256
    (call(d=100), H200, "flash"),                             # 100 % 8 = 4: cuDNN refuses, flash pads to 104
    (call(d=264, hk=4), H200, "efficient"),                   # over 256: cuDNN and flash refuse; 264 % 8 == 0
    (call(d=264), H200, "math"),                              # ... but 4 vs 2 heads: efficient takes no GQA
    (call(dtype="float32", hk=4), H200, "efficient"),         # fp32: no cuDNN or flash; 128 % 4 == 0
    (call(dtype="float32"), H200, "math"),                    # fp32 GQA: neither efficient
    # Kimi-Linear's MLA: q/k 192, v 128. A100 (sm80, cuDNN not preferred): flash refuses unequal dims -> efficient;
    # H100/H200 (sm90): cuDNN takes up to 256; B200 (sm100): cuDNN's limit is 128, flash unequal -> efficient
    (Call((1, 32, 1030, 192), (1, 32, 1030, 192), (1, 32, 1030, 128), "bfloat16", is_causal=True),
     Target((8, 0), 91900), "efficient"),
    (Call((1, 32, 1030, 192), (1, 32, 1030, 192), (1, 32, 1030, 128), "bfloat16", is_causal=True), H200, "cudnn"),
    (Call((1, 32, 1030, 192), (1, 32, 1030, 192), (1, 32, 1030, 128), "bfloat16", is_causal=True),
     Target((10, 0), 91900), "efficient"),
    # Qwen3-Next's gated attention: 16 q heads, 2 kv heads, head dim 256. A100: flash (sm80 trains 256);
    # H200: cuDNN; B200: cuDNN's 128 limit -> flash
    (call(d=256, hq=16), Target((8, 0), 91900), "flash"),
    (call(d=256, hq=16), H200, "cudnn"),
    (call(d=256, hq=16), Target((10, 0), 91900), "flash"),
    (call(gqa=False), H200, "math"),                          # 4 vs 2 heads without enable_gqa: no fused kernel
    (call(), Target((9, 0), 91000), "flash"),                 # cuDNN 9.10: the default order, flash first
    (Call((1, 4, 1030), (1, 4, 1030), (1, 4, 1030), "bfloat16"), H200, "math"),    # 3-D: no fused kernel
])
def test_the_backend_is_torch_2_11s_choice(c, target, backend):
    assert choose(c, target) == backend


def traced(target=H200, d=128, hq=4, hk=2, s=1030, expanded_grad=False, dv=None, dtype=torch.bfloat16):
    """The allocations (op, bytes) of one causal GQA SDPA forward and backward, traced; the output's gradient dense
    (a layer's), or ``expanded_grad``: ``out.sum()``'s (stride 0)."""
    q = torch.empty(1, hq, s, d, dtype=dtype, device="meta", requires_grad=True)
    k = torch.empty(1, hk, s, d, dtype=dtype, device="meta", requires_grad=True)
    v = torch.empty(1, hk, s, dv or d, dtype=dtype, device="meta", requires_grad=True)
    rec = Recorder()
    with cuda_sdpa_mode(target), rec.mode():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hq != hk)
        out.sum().backward() if expanded_grad else out.backward(torch.empty_like(out))
    return [(e["op"].split(".")[1], e["bytes"]) for e in rec.events if e["e"] == "alloc" and "attention" in e["op"]], \
        [e for e in rec.events if e["e"] == "scratch_op"]


def test_cudnn_allocates_seed_offset_output_stats_then_grads():
    allocs, scratch = traced()
    assert allocs == [
        ("_scaled_dot_product_cudnn_attention", 8),                  # philox seed, int64 scalar on the device
        ("_scaled_dot_product_cudnn_attention", 8),                  # offset
        ("_scaled_dot_product_cudnn_attention", 1_054_720),          # out 4 heads * 1030 * 128 * 2 B
        ("_scaled_dot_product_cudnn_attention", 16_480),             # stats 4 * 1030 * 4 B fp32
        ("_scaled_dot_product_cudnn_attention_backward", 1_054_720),  # dq as q
        ("_scaled_dot_product_cudnn_attention_backward", 527_360),   # dk 2 heads * 1030 * 128 * 2 B
        ("_scaled_dot_product_cudnn_attention_backward", 527_360),   # dv
    ]
    assert [e["op"] for e in scratch] == ["aten._scaled_dot_product_cudnn_attention.default",
                                          "aten._scaled_dot_product_cudnn_attention_backward.default"]
    assert all("workspace" in e["what"] for e in scratch)


def test_cudnn_backward_copies_a_gradient_whose_innermost_stride_is_not_1():
    """run_cudnn_SDP_bprop's ``permute_to_matching_layout``: ``out.sum()``'s gradient is an expanded [1, 4, 1030, 128]
    (stride 0), copied in the output's layout: 4 * 1030 * 128 * 2 B after dq, dk, dv."""
    allocs, _ = traced(expanded_grad=True)
    assert [b for op, b in allocs if op.endswith("backward")] == [1_054_720, 527_360, 527_360, 1_054_720]


def test_flash_backward_allocates_mha_bwd_temporaries():
    allocs, scratch = traced(Target((9, 0), 91000))
    bwd = [b for op, b in allocs if op.endswith("backward")]
    assert bwd == [1_054_720, 1_054_720,             # grad_out and out as [B, S, H, D] .contiguous(): both BHSD
                   1_054_720, 527_360, 527_360,      # dq, dk, dv
                   18_432,                           # softmax_d [1, 4, round128(1030) = 1152] fp32: 4 * 1152 * 4
                   2_359_296,                        # dq_accum [1, 1152, 4, 128] fp32: 1152 * 4 * 128 * 4
                   1_054_720, 1_054_720]             # dk/dv_expanded [1, 1030, 4, 128] bf16 (GQA 4 vs 2 heads)
    fwd = [b for op, b in allocs if not op.endswith("backward")]
    assert fwd == [1_054_720, 16_480, 16, 8, 0]      # out, lse [1, 4, 1030] fp32, rng state (2 x uint64), offset, mask
    assert scratch == []


A100 = Target((8, 0), 91900)


def test_memory_efficient_allocates_output_logsumexp_and_the_wide_kernels_accumulator():
    """Kimi's MLA shape on A100 (sm80 runs the efficient kernel): q/k head dim 192, v 128, 4 heads, S 1030, bf16.
    Forward: out [1, 1030, 4, 128] bf16 = 1030 * 4 * 128 * 2 = 1,054,720 B; logsumexp [1, 4, ceil(1030/32)*32 = 1056]
    fp32 = 4 * 1056 * 4 = 16,896 B; max(192, 128) > 128 takes the kMaxK 65536 kernel, whose fp32 output_accum is
    1030 * 4 * 128 * 4 = 2,109,440 B. Backward: dq, dk [.., 192] bf16 = 1030 * 4 * 192 * 2 = 1,582,080 B each, dv
    1,054,720 B, delta [1, 4, 1030] fp32 = 16,480 B; the CUTLASS workspace named, not sized."""
    allocs, scratch = traced(A100, d=192, dv=128, hq=4, hk=4)
    assert allocs == [
        ("_scaled_dot_product_efficient_attention", 1_054_720),
        ("_scaled_dot_product_efficient_attention", 16_896),
        ("_scaled_dot_product_efficient_attention", 2_109_440),
        ("_scaled_dot_product_efficient_attention_backward", 1_582_080),
        ("_scaled_dot_product_efficient_attention_backward", 1_582_080),
        ("_scaled_dot_product_efficient_attention_backward", 1_054_720),
        ("_scaled_dot_product_efficient_attention_backward", 16_480),
    ]
    assert [e["op"] for e in scratch] == ["aten._scaled_dot_product_efficient_attention_backward.default"]
    assert "CUTLASS workspace" in scratch[0]["what"]


def test_the_accumulator_is_16_bit_over_head_dim_128_only():
    """B200, q/k 136, v 128 bf16 (flash: unequal dims; cuDNN on sm100: over 128): max 136 > 128 takes kMaxK 65536, so
    out 1030 * 4 * 128 * 2 = 1,054,720 B, logsumexp 16,896 B and output_accum 1030 * 4 * 128 * 4 = 2,109,440 B.
    fp32 on A100: output_accum_t is the output type, no accumulator: out 1030 * 4 * 128 * 4 = 2,109,440 B and
    logsumexp only."""
    allocs, _ = traced(Target((10, 0), 91900), d=136, dv=128, hq=4, hk=4)     # 136: flash unequal, cuDNN 128 limit
    fwd = [b for op, b in allocs if not op.endswith("backward")]
    assert fwd == [1_054_720, 16_896, 2_109_440]          # max(136, 128) = 136 > 128: the accumulator again
    allocs, _ = traced(A100, d=128, hq=4, hk=4, dtype=torch.float32)
    fwd = [b for op, b in allocs if not op.endswith("backward")]
    assert fwd == [2_109_440, 16_896]                      # fp32: out 1030 * 4 * 128 * 4; accum is the output type


def test_memory_efficient_fp32_backward_computes_delta_with_temporaries():
    """fp32 (kKernelComputesDelta is 16-bit only): after dq, dk, dv (1030 * 4 * 128 * 4 = 2,109,440 B each),
    grad_out * out [1, 1030, 4, 128] fp32 2,109,440 B, its sum [1, 1030, 4] 16,480 B and the transposed copy
    [1, 4, 1030] 16,480 B."""
    allocs, _ = traced(A100, d=128, hq=4, hk=4, dtype=torch.float32)
    assert [b for op, b in allocs if op.endswith("backward")] == [2_109_440] * 4 + [16_480, 16_480]


def masked(target, s=1030):
    """The allocations (op, bytes) of one SDPA forward of Kimi's MLA shape (4 heads, q/k 192, v 128) with a
    [1, 1, S, S] bool mask."""
    q, k = (torch.empty(1, 4, s, 192, dtype=torch.bfloat16, device="meta", requires_grad=True) for _ in range(2))
    v = torch.empty(1, 4, s, 128, dtype=torch.bfloat16, device="meta", requires_grad=True)
    mask = torch.empty(1, 1, s, s, dtype=torch.bool, device="meta")
    rec = Recorder()
    with cuda_sdpa_mode(target), rec.mode():
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return [(e["op"].split(".")[1], e["bytes"]) for e in rec.events if e["e"] == "alloc"]


def test_a_bool_mask_becomes_additive_and_the_efficient_kernel_pads_it():
    """attention.cpp convert_boolean_attn_mask: where(mask, 0.0, scalar_tensor(-inf, bf16)): the scalar (2 B) and
    [1, 1, 1030, 1030] bf16 = 1030 * 1030 * 2 = 2,121,800 B. A100 (efficient): preprocess_mask pads 1030 to
    1030 + (8 - 1030 % 8) = 1032: 1030 * 1032 * 2 = 2,125,920 B, then the kernel's out, logsumexp and accumulator.
    H200 (cuDNN): the additive mask goes in as it is."""
    a100 = masked(A100)
    assert a100[:4] == [("scalar_tensor", 2), ("scalar_tensor", 2), ("where", 2_121_800),
                        ("constant_pad_nd", 2_125_920)]
    assert [b for op, b in a100[4:]] == [1_054_720, 16_896, 2_109_440]
    h200 = masked(H200)
    assert [op for op, _ in h200[:3]] == ["scalar_tensor", "scalar_tensor", "where"] and "constant_pad_nd" not in [
        op for op, _ in h200]
    assert [op for op, _ in masked(A100, s=1024)].count("constant_pad_nd") == 0     # 1024 % 8 == 0: aligned

"""The modules around FLA's chunk kernels in a layer (flash-linear-attention 0.6.0 with fla-core 0.6.0), as
buffer records: ``nn.Linear`` (what autograd saves, the weight and input gradients), FLA's ``ShortConvolution``
(``modules/causal_conv1d/ops.py``: its Triton kernels, what they save and allocate) and ``FusedRMSNormGated``
(``modules/norm/fused_norm_gate.py``). One declaration for the KDA and GDN layers.

``nn.Linear`` is PyTorch's: torch 2.13 ``F.linear`` on a 3-D bf16 input folds it to ``[T, in]`` and runs
``mm`` (``addmm`` with a bias); autograd saves the input and the weight (already alive: no new bytes); the
backward (``mm`` / ``addmm``'s formulas in ``tools/autograd/derivatives.yaml``, cited at ``Linear.forward``'s line of the
installed torch 2.13 ``nn/modules/linear.py``) allocates the input gradient
``[T, in]`` and the weight gradient ``[out, in]`` in the input's dtype, and the bias gradient ``[out]`` as the
sum of the output gradient over tokens. ``AccumulateGrad`` keeps the weight gradient as ``.grad`` (the first
backward of a step: no copy). PyTorch's C++ sources are not in the wheel: the two cuBLAS workspace sizes cite the
lines of pytorch/pytorch's ``CublasHandlePool.cpp`` before its Blackwell change (PR #175344, Feb 2026), and the
cuBLAS size's rule is checked against torch 2.11.0's own binary (``cublas_workspace_bytes``).

Every thread that runs a GEMM gets its own cuBLAS handle, and PyTorch gives each (handle, stream) a workspace from
the caching allocator, kept for the process (``aten/src/ATen/cuda/CublasHandlePool.cpp``: ``setWorkspaceForHandle``,
``getChosenWorkspaceSize``: unless ``CUBLAS_WORKSPACE_CONFIG``, 4096 KiB x 8 = 32 MiB on compute capability 9.0 and
``:4096:2:16:8`` = 8 MiB + 128 KiB on any other: ``cublas_workspace_bytes``), and a separate cuBLASLt
workspace per (handle, stream) where a GEMM takes the Lt path (``getCUDABlasLtWorkspace``: 1,024 KiB unless
``CUBLASLT_WORKSPACE_SIZE``, separate unless ``TORCH_CUBLASLT_UNIFIED_WORKSPACE=1``): ``addmm`` with a 1-D bias, as
a biased ``nn.Linear`` runs. The forward runs on the caller's thread, the backward (and checkpoint's recompute) on
autograd's device thread: two cuBLAS workspaces, and one Lt workspace per thread whose GEMMs include a biased Linear
(``blas_workspace``). Measured on the H200: 65 MiB over the model without them in every KimiDeltaAttention
record, 66 MiB with checkpointing (the recompute's biased Linear runs on the backward thread).

Parameters are bf16 (the layer cast with ``.to(torch.bfloat16)``, as FLA's benchmarks train it), except where
a layer says otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from livebytes.estimator.buffers import Group, Source
from livebytes.estimator.declare import Declaration, source_root
from livebytes.estimator.symbols import T, cdiv, chunks_per_batch
from livebytes.lifetimes.aten_reduce import leading_sum_scratch

fla = source_root("fla")
torch_src = source_root("torch")
CONV = "modules/causal_conv1d/ops.py"
NORM = "modules/norm/fused_norm_gate.py"
NT_CONV = chunks_per_batch(64)     # causal_conv1d's NT = len(chunk_indices), chunk_size 64 (ops.py:621)
LINEAR_FWD = torch_src("nn/modules/linear.py", "Linear.forward", 134, "return F.linear(input, self.weight, self.bias)")
# The backward's buffers are allocated by autograd for the op Linear.forward calls; the formulas are torch's
# tools/autograd/derivatives.yaml (mm: mm_mat1_backward / mm_mat2_backward; addmm: the bias's grad summed to its shape)
MM_BWD = torch_src("nn/modules/linear.py", "Linear.forward, backward of its mm (derivatives.yaml: mm)", 134,
                   "return F.linear(input, self.weight, self.bias)")
ADDMM_BWD = torch_src("nn/modules/linear.py", "Linear.forward, backward of its addmm (derivatives.yaml: addmm)", 134,
                      "return F.linear(input, self.weight, self.bias)")


@dataclass(frozen=True)
class Linear:
    """One ``nn.Linear`` of a layer: its name, features and whether it has a bias, and where it is declared."""

    name: str
    in_features: object
    out_features: object
    init: Source                   # the nn.Linear(...) line in the layer's __init__
    bias: bool = False


def parameter(d: Declaration, name: str, shape: tuple, source: Source, dtype: str = "bf16", note: str = "") -> None:
    """A parameter: allocated when the module is built, before the step (the harness's inputs step)."""
    d.buffer(name, Group.PARAMETERS, shape, dtype, source, note=note)


def linear_parameters(d: Declaration, lin: Linear) -> None:
    parameter(d, f"{lin.name}.weight", (lin.out_features, lin.in_features), lin.init)          # [out, in] bf16
    if lin.bias:
        parameter(d, f"{lin.name}.bias", (lin.out_features,), lin.init)                         # [out] bf16


BLAS_POOL = "aten/src/ATen/cuda/CublasHandlePool.cpp"
CUBLAS_SM90_BYTES = 4096 * 8 * 1024                    # :4096:8 = 33,554,432 B (32 MiB)
CUBLAS_DEFAULT_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8  # :4096:2:16:8 = 8,388,608 + 131,072 = 8,519,680 B
CUBLASLT_WORKSPACE_BYTES = 1024 * 1024       # parseCUDABlasLtWorkspaceSize's default, 1,024 KiB
THREADS = ("forward", "backward")            # the caller's thread; autograd's device thread
FORWARD_WORKSPACES = ("cublas.workspace.forward", "cublaslt.workspace.forward")
# lines of pytorch/pytorch's file before PR #175344 (which made 10.x and 12.x 32 MiB too, after torch 2.11.0):
# :149 ``const bool sm90 = properties != nullptr && properties->major == 9 && properties->minor == 0;``
CUBLAS_SIZE = torch_src(BLAS_POOL, "parseChosenWorkspaceSize", 150,
                        "const size_t default_size = sm90 ? 4096 * 8 * 1024 : 4096 * 1024 * 2 + 16 * 1024 * 8;")
CUBLASLT_SIZE = torch_src(BLAS_POOL, "parseCUDABlasLtWorkspaceSize", 186,
                          "size_t workspace_size = 1024; /* default size in KiB according to #73328 */")


def cublas_workspace_bytes(capability: tuple[int, int]) -> int:
    """A cuBLAS handle's workspace on a GPU of compute ``capability`` (major, minor), CUBLAS_WORKSPACE_CONFIG unset:
    torch 2.11.0's ``parseChosenWorkspaceSize`` (CublasHandlePool.cpp:149-150) gives 32 MiB on 9.0 exactly and
    8 MiB + 128 KiB on every other capability, Blackwell's 10.x included. Checked in the 2.11.0+cu130 wheel's
    libtorch_cuda.so (git 70d99e99): ``cmpq $0x9, 0x168(%rax)`` compares the 8 bytes of cudaDeviceProp's major
    (offset 0x168) and minor (0x16c) with (9, 0), then picks 0x2000000 or 0x820000. pytorch/pytorch's main after
    PR #175344 gives 32 MiB on major 9, 10 and 12: a later torch needs its own rule."""
    return CUBLAS_SM90_BYTES if tuple(capability) == (9, 0) else CUBLAS_DEFAULT_BYTES


def blas_workspace(d: Declaration, thread: str, lt: bool, capability: tuple[int, int]) -> None:
    """The cuBLAS workspace of ``thread``'s handle (``cublas_workspace_bytes`` of the device's ``capability``), and
    its cuBLASLt workspace when ``lt`` (a biased Linear), at the current step if that thread has none yet: the GEMM's
    output comes first, then the handle's workspace; kept for the process (a cache keyed by nothing that changes
    between calls)."""
    assert thread in THREADS, thread
    for name, nbytes, source, wanted in ((f"cublas.workspace.{thread}", cublas_workspace_bytes(capability),
                                          CUBLAS_SIZE, True),
                                         (f"cublaslt.workspace.{thread}", CUBLASLT_WORKSPACE_BYTES, CUBLASLT_SIZE, lt)):
        if wanted and not any(b.name == name or b.name.endswith("." + name) for b in d.buffers):   # prefixed: included
            d.buffer(name, Group.WORKSPACE, (nbytes,), "uint8", source,                         # [bytes] uint8
                     note=f"the {thread} thread's handle: kept for the process", cached=True, cache_key=())


def linear_forward(d: Declaration, lin: Linear, call: Source, kept_until: str | None, group: Group = Group.ACTIVATIONS,
                   thread: str = "forward", *, capability: tuple[int, int]) -> str:
    """``y = lin(x)`` at ``call``: the output ``[T, out]`` bf16 (autograd saves x and the weight: no new bytes);
    ``kept_until``: where its last reference dies; ``thread``: where it runs (checkpoint's recompute: the backward's);
    ``capability``: the device's, for the cuBLAS workspace. Returns the output's buffer name."""
    d.step(f"fwd.{lin.name}", "forward", call)
    out = f"{lin.name}.out"
    d.buffer(out, group, (T, lin.out_features), "bf16", LINEAR_FWD, kept_until)                 # [T, out] bf16
    blas_workspace(d, thread, lin.bias, capability)
    return out


def linear_backward(d: Declaration, lin: Linear, input_grad_until: str | None, input_grad: bool = True,
                    sms: int | None = None, *, capability: tuple[int, int], threads_per_sm: int | None = None) -> str:
    """``lin``'s backward: the weight gradient (and bias gradient) kept as ``.grad``, and the input gradient
    ``[T, in]`` bf16 until ``input_grad_until`` (where the next node consumes it). A bias's gradient is the output
    gradient summed over its T rows (``sum_to``, after the node's two GEMMs), whose global reduce on ``sms`` SMs of
    ``threads_per_sm`` resident threads stages through the allocator (``aten_reduce``); ``capability``: the device's,
    for the cuBLAS workspace. Returns the input gradient's name."""
    if lin.bias and None in (sms, threads_per_sm):
        raise ValueError(f"{lin.name}: a biased Linear's backward needs the device's SM count and resident threads per SM "
                         "(its bias-gradient sum)")
    d.step(f"bwd.{lin.name}", "backward", ADDMM_BWD if lin.bias else MM_BWD)
    d.buffer(f"{lin.name}.weight.grad", Group.PARAM_GRADS, (lin.out_features, lin.in_features), "bf16", MM_BWD,
             note="mat2's gradient, kept by AccumulateGrad as .grad")                          # [out, in] bf16
    if lin.bias:
        d.buffer(f"{lin.name}.bias.grad", Group.PARAM_GRADS, (lin.out_features,), "bf16", ADDMM_BWD)   # [out] bf16
    name = f"{lin.name}.dinput"
    if input_grad:
        d.buffer(name, Group.ACTIVATION_GRADS, (T, lin.in_features), "bf16", MM_BWD, input_grad_until,
                 note="mat1's gradient: grad @ weight")                                         # [T, in] bf16
    if lin.bias:
        leading_sum_scratch(d, f"{lin.name}.bias.grad", T, lin.out_features, sms, "bf16",   # sum of the [T, out] gradient
                            threads_per_sm=threads_per_sm)
    blas_workspace(d, "backward", False, capability)      # the bias's gradient is a sum: the backward's GEMMs are plain mm
    return name


# ---------------------------------------------------------------- ShortConvolution (Triton backend, varlen)

def conv_key(channels) -> tuple:
    """causal_conv1d_fwd_kernel / _bwd_kernel's autotune key ['D', 'W'] (ops.py:47, 163); W is filled in by the caller."""
    return (channels,)


def conv_parameters(d: Declaration, name: str, channels, width: int, init: Source) -> None:
    parameter(d, f"{name}.weight", (channels, 1, width), init,                                  # [D, 1, W] bf16
              note="nn.Conv1d(groups=D) weight (ShortConvolution, ops.py:1151)")


def conv_chunk_indices(d: Declaration) -> None:
    """CausalConv1dFunction.forward calls prepare_chunk_indices(cu_seqlens, 64, cu_seqlens_cpu=...): one tensor_cache
    entry shared by the three convs; another argument form than chunk_kda's keyword call (a second entry), the same as
    chunk_gated_delta_rule's (the kernel hits it: the GDN layer's ``hits``)."""
    d.buffer("conv.chunk_indices", Group.SCRATCH, (NT_CONV, 2), "int64",                       # [NT, 2] int64
             fla(CONV, "CausalConv1dFunction.forward", 951,
                 "chunk_indices = prepare_chunk_indices(cu_seqlens, chunk_size, cu_seqlens_cpu=cu_seqlens_cpu)"),
             note="tensor_cache keeps it (utils/decorators.py: a hit needs the same positional count and keywords), in "
                  "prepare_chunk_indices' one queue: KDA's kernel adds its own (keywords), GDN's hits this one",
             cached=True, cache_fn="prepare_chunk_indices")


def conv_forward(d: Declaration, name: str, channels, width: int, call: Source, kept_until: str | None) -> str:
    """``y, _ = conv(x=proj(x), cu_seqlens=...)``: saves its input (ops.py:957) and returns ``y`` ``[T, D]`` bf16."""
    d.step(f"fwd.{name}", "forward", call)
    d.autotune("causal_conv1d_fwd_kernel", conv_key(channels) + (width,),
               fla(CONV, "causal_conv1d_fwd", 639, "causal_conv1d_fwd_kernel[grid]("),
               note="key=['D', 'W'] (ops.py:47)")
    out = f"{name}.out"
    d.buffer(out, Group.ACTIVATIONS, (T, channels), "bf16",                                     # [T, D] bf16
             fla(CONV, "causal_conv1d_fwd", 634, "y = torch.empty_like(x, memory_format=torch.contiguous_format)"),
             kept_until)
    return out


def conv_backward(d: Declaration, name: str, channels, width: int, dx_until: str, sms: int, threads_per_sm: int) -> str:
    """CausalConv1dFunction.backward -> causal_conv1d_bwd (ops.py:713): the pre-activation output recomputed
    (activation silu), dx, the per-chunk weight-gradient partials and their sum (its global reduce on ``sms`` SMs of
    ``threads_per_sm`` resident threads stages through the allocator: ``aten_reduce``). Returns dx's name."""
    bwd = "causal_conv1d_bwd"
    d.step(f"bwd.{name}", "backward", fla(CONV, "CausalConv1dFunction.backward", 978, "dx, dw, db, dr, dh0 = causal_conv1d_bwd("))
    d.autotune("causal_conv1d_fwd_kernel", conv_key(channels) + (width,),
               fla(CONV, "causal_conv1d_fwd", 639, "causal_conv1d_fwd_kernel[grid]("),
               note="key=['D', 'W'] (ops.py:47): ACTIVATION is no key, so the forward's entry serves (tuned by the forward)")
    d.autotune("causal_conv1d_bwd_kernel", conv_key(channels) + (width,),
               fla(CONV, bwd, 767, "causal_conv1d_bwd_kernel[grid]("), note="key=['D', 'W'] (ops.py:163)")
    step = f"bwd.{name}"
    d.buffer(f"{name}.y_recompute", Group.ACTIVATIONS, (T, channels), "bf16",                   # [T, D] bf16
             fla(CONV, "causal_conv1d_fwd", 634, "y = torch.empty_like(x, memory_format=torch.contiguous_format)"), step,
             note="causal_conv1d_bwd recomputes the pre-silu output (ops.py:744)")
    dx = f"{name}.dx"
    d.buffer(dx, Group.ACTIVATION_GRADS, (T, channels), "bf16", fla(CONV, bwd, 757, "dx = torch.empty_like(x)"), dx_until)
    d.buffer(f"{name}.dw_partial", Group.SCRATCH, (NT_CONV, channels, width), "fp32",           # [B*NT, D, W] fp32
             fla(CONV, bwd, 758, "dw = weight.new_empty(B*NT, *weight.shape, dtype=torch.float) if weight is not None else None"),
             step)
    d.buffer(f"{name}.dw_sum", Group.SCRATCH, (channels, width), "fp32",                        # [D, W] fp32
             fla(CONV, bwd, 797, "dw = dw.sum(0).to(weight)"), step, note="the fp32 sum before .to(weight)")
    leading_sum_scratch(d, f"{name}.dw_sum", NT_CONV, channels * width, sms, "fp32",   # the [NT, D*W] partials' sum
                        threads_per_sm=threads_per_sm)
    d.buffer(f"{name}.weight.grad", Group.PARAM_GRADS, (channels, width), "bf16",               # [D, W] bf16
             fla(CONV, bwd, 797, "dw = dw.sum(0).to(weight)"), note="viewed as [D, 1, W], kept as .grad")
    return dx


# ---------------------------------------------------------------- FusedRMSNormGated (D <= 512: the blocked kernels)

def norm_key(rows, dim, backward: bool) -> tuple:
    """layer_norm_gated_{fwd,bwd}_kernel's key (fused_norm_gate.py:32, 200): D, NB = cdiv(T, 2048 * 32) over the
    rows, IS_RMS_NORM 1, then STORE_RESIDUAL_OUT 0, HAS_RESIDUAL 0 (fwd) or HAS_DRESIDUAL 0 (bwd), HAS_WEIGHT 1."""
    nb = cdiv(rows, 2048 * 32)
    return (dim, nb, 1, 0, 1) if backward else (dim, nb, 1, 0, 0, 1)


def norm_parameters(d: Declaration, name: str, dim, init: Source) -> None:
    parameter(d, f"{name}.weight", (dim,), init, note="FusedRMSNormGated weight (fused_norm_gate.py:989)")


def norm_forward(d: Declaration, name: str, rows, dim, call: Source, y_until: str, rstd_until: str) -> str:
    """``o = norm(o, g)``: y ``[rows, D]`` bf16 and the saved rstd ``[rows]`` fp32 (x, g and weight saved: alive)."""
    fwd = "layer_norm_gated_fwd"
    d.step(f"fwd.{name}", "forward", call)
    d.autotune("layer_norm_gated_fwd_kernel", norm_key(rows, dim, False), fla(NORM, fwd, 489, "layer_norm_gated_fwd_kernel[grid]("),
               note="key=['D', 'NB', 'IS_RMS_NORM', 'STORE_RESIDUAL_OUT', 'HAS_RESIDUAL', 'HAS_WEIGHT'] (fused_norm_gate.py:32)")
    y = f"{name}.y"
    d.buffer(y, Group.ACTIVATIONS, (rows, dim), "bf16",                                         # [T*HV, V] bf16
             fla(NORM, fwd, 470, "y = torch.empty_like(x, dtype=x.dtype if out_dtype is None else out_dtype)"), y_until)
    d.buffer(f"{name}.rstd", Group.ACTIVATIONS, (rows,), "fp32",                                # [T*HV] fp32
             fla(NORM, fwd, 476, "rstd = torch.empty((T,), dtype=torch.float, device=x.device)"), rstd_until)
    return y


def norm_backward(d: Declaration, name: str, rows, dim, sms: int, dx_until: str, dg_until: str) -> tuple[str, str]:
    """layer_norm_gated_bwd (fused_norm_gate.py:529): dx and dg in x's dtype, the weight-gradient partials ``[NS, D]``
    fp32 with NS = min(SM count, rows), and their sum. Returns (dx, dg) names."""
    bwd = "layer_norm_gated_bwd"
    d.step(f"bwd.{name}", "backward", fla(NORM, "LayerNormGatedFunction.backward", 691, "dx, dg, dw, db, dres_in = layer_norm_gated_bwd("))
    d.autotune("layer_norm_gated_bwd_kernel", norm_key(rows, dim, True), fla(NORM, bwd, 575, "layer_norm_gated_bwd_kernel[grid]("),
               note="key=['D', 'NB', 'IS_RMS_NORM', 'HAS_DRESIDUAL', 'HAS_WEIGHT'] (fused_norm_gate.py:200)")
    step = f"bwd.{name}"
    dx, dg = f"{name}.dx", f"{name}.dg"
    d.buffer(dx, Group.ACTIVATION_GRADS, (rows, dim), "bf16",                                   # [T*HV, V] bf16
             fla(NORM, bwd, 554, "dx = torch.empty_like(x) if x_dtype is None else torch.empty(T, D, dtype=x_dtype, ...)"), dx_until)
    d.buffer(dg, Group.ACTIVATION_GRADS, (rows, dim), "bf16",                                   # [T*HV, V] bf16
             fla(NORM, bwd, 555, "dg = torch.empty_like(g) if x_dtype is None else torch.empty(T, D, dtype=x_dtype, ...)"), dg_until)
    d.buffer(f"{name}.dw_partial", Group.SCRATCH, (sp.Min(sms, rows), dim), "fp32",              # [NS, V] fp32
             fla(NORM, bwd, 567, "dw = torch.empty((NS, D), dtype=torch.float, device=weight.device)"), step,
             note=f"NS = min(get_multiprocessor_count(), T) (fused_norm_gate.py:564): {sms} SMs")
    d.buffer(f"{name}.dw_sum", Group.SCRATCH, (dim,), "fp32", fla(NORM, bwd, 623, "dw = dw.sum(0).to(weight.dtype)"), step)
    d.buffer(f"{name}.weight.grad", Group.PARAM_GRADS, (dim,), "bf16", fla(NORM, bwd, 623, "dw = dw.sum(0).to(weight.dtype)"))
    return dx, dg


def norm_gate_refusal(shape) -> str | None:
    """A value head dim above 512: FusedRMSNormGated then runs its row kernels (fused_norm_gate.py:482
    ``if D <= 512``), which the layer models do not cover."""
    if shape.dv > 512:
        return f"this model covers value head dims <= 512 (FusedRMSNormGated's blocked kernels), got {shape.dv}"
    return None

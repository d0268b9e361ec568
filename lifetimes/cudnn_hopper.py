"""cuDNN frontend's Hopper KDA engines (nvidia-cudnn-frontend 1.32.0, 1.31.0 and 1.30.0), as buffer records.

- ``kda_hopper_cuda`` (``hopper/cuda_engine.py``, NVRTC CUDA): forward and backward. The forward
  writes ``o`` in place and needs no workspace; the backward carves one workspace
  (``hopper/cuda_bwd_host.py _layout``: chunk tables, the UT factors, six [T, H, 128] bf16 arrays
  and three [chunks, H, 128, 128] bf16 state arrays). Both plans cache fp32 state scratch for the
  absent initial / final state and its gradient; plans are cached per graph, and the graph caches
  (``ops/kda.py`` ``fprop_cache`` / ``bprop_cache``) are keyed by (total, N, H, HK, HV, K, V, dtypes).
- ``kda_hopper`` (``hopper/kda_engine.py`` + ``hopper/kernel/kda_prefill_sm90.py``, CuTeDSL):
  forward only. Its module-level ``_WS`` cache keeps scratch buffers per (chunks, H, N, segments)
  for the life of the process; the segment count comes from the device's SM count (``_pick_nseg``),
  which makes this model device-dependent.

Versions (``VERSIONS``, data read by these builders, ``cudnn_common.CudnnVersion``): 1.31.0's
``graph_workspace`` keeps each graph's workspace on the graph object, so both plans' workspaces (the
backward's carved arena above all) are held by the graph caches between calls, once per cache key; and its
``_pick_nseg`` plans for 132 SMs whatever the device. Line numbers are 1.32.0's, shifted to 1.31.0's by the
entry's ``line_shifts``; the Hopper engine files are the same in both wheels. 1.30.0 allocates as 1.31.0 and ships no
CUDA kernel sources, so only its ``kda_hopper`` is a model.

Contract (both): pre-normalised bf16 q/k, bf16 v/dO, fp32 log-space g, fp32 post-sigmoid beta,
int32 cu_seqlens, D = 128, equal heads; no in-kernel l2norm / sigmoid / safe gate.
"""
from __future__ import annotations

import sympy as sp

from livebytes.estimator.buffers import Group, LifetimeModel
from livebytes.estimator.declare import Declaration, ceil_to, vectorised
from livebytes.estimator.symbols import DK, DV, H, MBS, T, cdiv

from .cudnn_common import (
    CUDNN_1_30_0,
    CUDNN_1_31_0,
    CUDNN_1_32_0,
    HO,
    PLAIN,
    PLAN_CACHE_KEY,
    CudnnVersion,
    backward_gradients,
    cite,
    forward_output,
    graph_workspace,
    src,
)

ARENA_ALIGN = 256             # cuda_bwd_host._ALIGN
BT = 64                       # cuda_bwd_host.BT
VERSIONS: tuple[CudnnVersion, ...] = (CUDNN_1_32_0, CUDNN_1_31_0, CUDNN_1_30_0)


def pick_nseg_value(tokens: int, seqs: int, heads: int, num_sm: int) -> int:
    """kda_prefill_sm90._pick_nseg (line 1106), restated: the segment count of the CuTeDSL forward."""
    length = tokens // max(seqs, 1)
    ncs = (length + 15) // 16
    pmax = min(num_sm // max(seqs * heads, 1), max(ncs // 2, 1))
    best, best_cost = 1, (9.5 + ncs * 1.215) * 0.93
    for p in range(2, pmax + 1):
        sl = (ncs + p - 1) // p
        cost = (6.2 + sl * 1.009) + (9.5 + sl * 1.215) + (1.5 + p * 1.35)
        if cost < best_cost:
            best_cost, best = cost, p
    return best


def refuse_device(device) -> str | None:
    if device.capability != (9, 0):
        return f"the Hopper KDA engines run only on sm90; {device.name} is {device.arch}"
    return None


def refuse(shape, device) -> str | None:
    reason = refuse_device(device)
    if reason:
        return reason
    if shape.dim != 128:
        return f"kda_hopper engines support head dim 128 only (HEAD_DIM = 128), got {shape.dim}"
    if shape.dv != 128:         # no value-dim axis: K and V are both HEAD_DIM
        return ("kda_hopper engines take value head dim 128 only (hopper/cuda_engine.py and hopper/kda_engine.py "
                f"check_support: 'head dims must be 128 (HEAD_DIM), got K=.. V=..'), got head_v_dim {shape.dv}")
    if shape.hv != shape.heads:
        return ("the engines refuse grouped value heads: 'the backward kernel needs equal head counts' "
                "(hopper/cuda_engine.py) and 'grouped heads are unsupported; q/k/v head counts must match' "
                "(hopper/kda_engine.py), check_support")
    return None


def _state(d: Declaration, name: str, shape: tuple, source, note: str = "") -> None:
    """An fp32 state-sized buffer a cached plan allocates on its first call and keeps."""
    d.buffer(name, Group.SCRATCH, shape, "fp32", source, note=note, cached=True, cache_key=PLAN_CACHE_KEY)


def _cuda_forward_state(d: Declaration) -> None:
    """KdaHopperCudaPlan.execute: scratch for the dropped final state and the zero seed."""
    f, fn = "hopper/cuda_engine.py", "KdaHopperCudaPlan.execute"
    _state(d, "fwd_final_state_scratch", (MBS, HO, DV, DK), src(f, fn, 174, "self._scratch_state = torch.empty("),
           "final state dropped")                                                                  # [N, HO, V, K] fp32
    _state(d, "fwd_zero_state", (MBS, HO, DV, DK), src(f, fn, 194, "self._zero_state = torch.empty("),
           "zero seed, re-zeroed every call")                                                      # [N, HO, V, K] fp32


def _cuda_backward_workspace(d: Declaration, held: bool) -> None:
    """cuda_bwd_host._layout: one arena (graph_workspace's), every take() rounded up to 256 bytes; ``held``: kept on
    the cached graph between calls."""
    d.step("bwd.kernel", "backward", src("hopper/cuda_bwd_host.py", "launch", 321, "def launch("),
           note="k_meta, k_prep, k_scan_t, k_bwd over one carved workspace")
    ncs = cdiv(T, BT) + MBS - 1                      # _chunk_slots: (total + 63) // 64 + n_seqs - 1
    keep = {"cached": held, "cache_key": PLAN_CACHE_KEY if held else None}

    def region(name, group, line, nbytes, quote):
        d.region("bwd_workspace", name, group, ceil_to(nbytes, ARENA_ALIGN), src("hopper/cuda_bwd_host.py", "_layout", line, quote),
                 **keep)

    d.region("bwd_workspace", "chunk_tables", Group.SCRATCH,
             2 * ceil_to(ncs * 4, ARENA_ALIGN) + 2 * ceil_to((MBS + 1) * 4, ARENA_ALIGN),           # int32 [ncs] x2, [N+1] x2
             src("hopper/cuda_bwd_host.py", "_layout", 277, "cs_t0, cs_len = a.take(ncs, _I32); seq_c0, seq_nc = a.take(n_seqs + 1, _I32)"),
             note="graph_workspace's arena, held on the graph between calls" if held else "", **keep)
    region("gn2", Group.SCRATCH, 281, ncs * H * 128 * 4, "gn2 = a.take(ncs * n_heads * DH, _F32)")          # fp32 [ncs, H, 128]
    region("amat", Group.MATRIX_GRAD, 282, ncs * H * 64 * 64 * 2, "amat = a.take(ncs * n_heads * 64 * 64, _BF16)")  # bf16 [ncs, H, 64, 64]
    for line, name in enumerate(("wneg", "uu", "kg", "dvl", "vnew", "dv2"), start=283):
        region(name, Group.RECOMPUTE, line, T * H * 128 * 2, f"{name} = a.take(total_tokens * n_heads * DH, _BF16)")  # bf16 [T, H, 128]
    for line, name in enumerate(("hst", "dhst", "pmat"), start=289):
        region(name, Group.STATE, line, ncs * H * 128 * 128 * 2, f"{name} = a.take(ncs * n_heads * DH * DH, _BF16)")  # bf16 [ncs, H, 128, 128]


def _cuda_backward_state(d: Declaration) -> None:
    """KdaHopperCudaBwdPlan: zero seeds for the absent initial state and d_final_state, scratch for d_initial_state."""
    f = "hopper/cuda_engine.py"
    zero = src(f, "KdaHopperCudaBwdPlan._zero", 281, "buf = torch.empty(*shape, dtype=torch.float32, device=self._device)")
    _state(d, "bwd_zero_s0", (MBS, HO, DK, DK), zero, "_zero('s0', state_shape) (execute, line 311)")       # [N, HO, K, K] fp32
    _state(d, "bwd_zero_dfs", (MBS, HO, DK, DK), zero, "_zero('dfs', state_shape) (execute, line 312)")     # [N, HO, K, K] fp32
    _state(d, "bwd_d_initial_scratch", (MBS, HO, DK, DK), src(f, "KdaHopperCudaBwdPlan.execute", 321,
           "self._scratch_dis = torch.empty(*state_shape, dtype=torch.float32, device=self._device)"))


def build_cuda(version: CudnnVersion = CUDNN_1_32_0, device=None) -> LifetimeModel:
    d = Declaration()
    d.inputs(PLAIN, backward=True, note="inputs and dO exist before the step")
    forward_output(d)
    graph_workspace(d, "fwd_workspace", version, "the forward plan declares no workspace")
    _cuda_forward_state(d)
    backward_gradients(d, PLAIN)
    _cuda_backward_workspace(d, version.workspace_held_on_graph)
    _cuda_backward_state(d)
    cite(d, version)
    return d.freeze(
        key=f"cudnn-kda-hopper-cuda@{version.version}", implementation="cuDNN frontend kda_hopper_cuda (NVRTC CUDA, Hopper)",
        version=version.version, summary=f"forward + backward, plain contract, read from {version.origin}",
        device=device.name if device else "", notes=version.notes,
        not_modelled=("padded (non-contiguous) inputs, which marshal.resolve_inputs repacks into copies",
                      "initial / final state inputs and d_initial_state outputs (the contract has none)"),
    )


def _module_scratch(d: Declaration, num_sm: int) -> None:
    """kda_prefill_sm90._ws (lines 1129-1162): twelve scratch tensors per (nch, H, N, nseg), kept in ``_WS``."""
    pick_nseg = vectorised("pick_nseg", lambda t, n, h: pick_nseg_value(t, n, h, num_sm))
    nch = sp.floor(T / 16) + MBS + 1                              # run_cute: nch = T // 16 + N + 1
    nseg = pick_nseg(T, MBS, H)
    key = (nch, H, MBS, nseg)                                     # key = (nch, H, N, nseg, str(device))
    c = nch * H
    nop = MBS * H * nseg                                          # max(N * H * nseg, 1)
    k = "hopper/kernel/kda_prefill_sm90.py"

    def ws(name, shape, dtype, line, quote):
        d.buffer(f"ws_{name}", Group.SCRATCH, shape, dtype, src(k, "_ws", line, quote), note="_WS keeps it", cached=True, cache_key=key)

    ws("buf0", (c * 16, 128), "bf16", 1148, "torch.empty((c * 16, 128), dtype=torch.bfloat16, device=device)")   # [nch*H*16, 128] bf16
    ws("buf1", (c * 16, 128), "bf16", 1149, "torch.empty((c * 16, 128), dtype=torch.bfloat16, device=device)")
    ws("kg", (c * 16, 128), "bf16", 1143, "kg = torch.empty((c * 16, 128), dtype=torch.bfloat16, device=device)")
    ws("ut", (c * 16, 128), "bf16", 1144, "ut = torch.empty((c * 16, 128), dtype=torch.bfloat16, device=device)")
    ws("diag", (c * 16, 16), "bf16", 1152, "torch.empty((c * 16, 16), dtype=torch.bfloat16, device=device)")     # [nch*H*16, 16] bf16
    ws("norm", (c, 128), "fp32", 1153, "torch.empty((c, 128), dtype=torch.float32, device=device)")             # [nch*H, 128] fp32
    ws("mt", (nop, 128, 128), "bf16", 1146, "mt = torch.empty((nop, 128, 128), dtype=torch.bfloat16, device=device)")
    ws("op_a", (nop, 128, 128), "fp32", 1156, "torch.empty((nop, 128, 128), dtype=torch.float32, device=device)")  # [N*H*nseg, 128, 128]
    ws("op_b", (nop, 128, 128), "fp32", 1159, "torch.empty((nop, 128, 128), dtype=torch.float32, device=device)")


def build_cute_forward(version: CudnnVersion = CUDNN_1_32_0, device=None) -> LifetimeModel:
    num_sm = version.pick_nseg_sms or (device.sm_count if device else 132)
    d = Declaration()
    d.inputs(PLAIN, backward=False)
    forward_output(d)
    graph_workspace(d, "fwd_workspace", version)
    f, fn = "hopper/kda_engine.py", "KdaHopperPlan.execute"
    _state(d, "fwd_final_state_scratch", (MBS, HO, DV, DK), src(f, fn, 122, "self._scratch_state = torch.empty("))   # [N, HO, V, K] fp32
    _state(d, "fwd_zero_state", (MBS, HO, DV, DK), src(f, fn, 138, "self._zero_state = torch.zeros("))             # [N, HO, V, K] fp32
    _module_scratch(d, num_sm)
    cite(d, version)
    return d.freeze(
        key=f"cudnn-kda-hopper@{version.version}", implementation="cuDNN frontend kda_hopper (CuTeDSL, Hopper)",
        version=version.version, summary=f"forward only (inference_mode), plain contract; segment count from {num_sm} SMs",
        options=(("num_sm", num_sm),), device=device.name if device else "", notes=version.notes,
        not_modelled=("backward: the engine has none", "padded inputs (the engine raises on them)",
                      "the order of _ws's allocations (kg, ut, mt are created before the tuple's others; "
                      "the records listing order is kept)"),
    )


# ---------------------------------------------------------------- registration: every VERSIONS entry is two models
# (one where its wheel lacks the CUDA engine's kernel sources: cuda_kernels_shipped)

from livebytes.estimator.registry import ModelSpec, register  # noqa: E402  (the registration block closes the file)

OPTIONS = {"contract": ("plain",)}
CUDA_REFUSES_REPORT = {("contract", "report"): (
    "the engine refuses the report contract: 'KdaHopperCudaEngine: the kernel takes log-space g directly; "
    "safe_gate/a_log/dt_bias are unsupported' and 'the backward kernel takes pre-normalized q/k and post-sigmoid beta' "
    "(cudnn/linear_attention/hopper/cuda_engine.py, check_support); the plain contract is supported")}
CUTE_REFUSES_REPORT = {("contract", "report"): (
    "the engine refuses the report contract: 'KdaHopperEngine: the kernel takes log-space g directly; "
    "safe_gate/a_log/dt_bias are unsupported', 'use_beta_sigmoid_in_kernel is unsupported', "
    "'use_qk_l2norm_in_kernel is unsupported' (cudnn/linear_attention/hopper/kda_engine.py, check_support); "
    "the plain contract is supported")}


def _register(v: CudnnVersion) -> None:
    if v.cuda_kernels_shipped:
        _register_cuda(v)
    _register_cute(v)


def _register_cuda(v: CudnnVersion) -> None:
    register(ModelSpec(
        key=f"cudnn-kda-hopper-cuda@{v.version}", implementation="cuDNN frontend kda_hopper_cuda (NVRTC CUDA)",
        version=v.version, covers=f"{v.origin} Hopper CUDA engine, forward + backward, plain contract, D=128",
        builder=lambda device, contract="plain", v=v: build_cuda(v, device), refuse=refuse, refuse_device=refuse_device,
        options=OPTIONS, refusals=CUDA_REFUSES_REPORT, default_device="H200",
    ))


def _register_cute(v: CudnnVersion) -> None:
    register(ModelSpec(
        key=f"cudnn-kda-hopper@{v.version}", implementation="cuDNN frontend kda_hopper (CuTeDSL)",
        version=v.version, covers=f"{v.origin} Hopper CuTeDSL engine, forward only (inference), plain contract, D=128",
        builder=lambda device, contract="plain", v=v: build_cute_forward(v, device), refuse=refuse,
        refuse_device=refuse_device, options=OPTIONS, refusals=CUTE_REFUSES_REPORT, default_device="H200", phase="fwd",
    ))


for _v in VERSIONS:
    _register(_v)

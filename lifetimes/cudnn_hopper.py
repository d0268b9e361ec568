"""cuDNN frontend's Hopper KDA engines (nvidia-cudnn-frontend 1.32.0), as buffer records.

- ``kda_hopper_cuda`` (``cudnn/linear_attention/hopper/cuda_engine.py``, NVRTC CUDA): forward and
  backward. The forward writes ``o`` in place and needs no workspace; the backward carves one
  workspace (``hopper/cuda_bwd_host.py _layout``: chunk tables, the UT factors, six [T, H, 128]
  bf16 arrays and three [chunks, H, 128, 128] bf16 state arrays). Both plans cache fp32 state
  scratch for the absent initial / final state and its gradient, per compiled graph.
- ``kda_hopper`` (``hopper/kda_engine.py`` + ``hopper/kernel/kda_prefill_sm90.py``, CuTeDSL):
  forward only. Its module-level ``_WS`` cache keeps twelve scratch buffers per
  (chunks, H, N, segments) alive for the life of the process; the segment count comes from the
  device's SM count (``_pick_nseg``), which makes this model device-dependent.

Contract (both): pre-normalised bf16 q/k, bf16 v/dO, fp32 log-space g, fp32 post-sigmoid beta,
int32 cu_seqlens, D = 128, equal heads; no in-kernel l2norm / sigmoid / safe gate.

Graph caches are keyed by shape, so the validator's warmup shape (MBS 1 x 1024 tokens, same H and
D) leaves its own cached scratch alive while the target shape is measured; those buffers are in the
``warmup leftovers`` group, apart from what the implementation needs at the target shape.
"""
from __future__ import annotations

import sympy as sp
from sympy.utilities.lambdify import implemented_function

from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source, Step
from livebytes.estimator.symbols import DK, DV, H, MBS, T, cdiv

WARMUP_TOKENS = 1024          # livebytes.validate.runner: warmup at MBS 1 x 1024 tokens
ARENA_ALIGN = 256             # cuda_bwd_host._ALIGN
BT = 64                       # cuda_bwd_host.BT


def _src(file: str, function: str, detail: str = "") -> Source:
    return Source(f"cudnn/linear_attention/{file}", function, detail)


def _arena(nbytes: sp.Expr) -> sp.Expr:
    """cuda_bwd_host._Arena.take: every region rounded up to 256 bytes."""
    return sp.ceiling(sp.Integer(1) * nbytes / ARENA_ALIGN) * ARENA_ALIGN


def pick_nseg_value(tokens: int, seqs: int, heads: int, num_sm: int) -> int:
    """kda_prefill_sm90._pick_nseg, restated: the segment count of the CuTeDSL forward."""
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


def refuse(shape, device) -> str | None:
    if device.arch != "sm90":
        return f"the Hopper KDA engines run only on sm90; {device.name} is {device.arch}"
    if shape.dim != 128:
        return f"kda_hopper engines support head dim 128 only (HEAD_DIM = 128), got {shape.dim}"
    if shape.hv != shape.heads:
        return ("the engines refuse grouped value heads: 'the backward kernel needs equal head counts' "
                "(hopper/cuda_engine.py) and 'grouped heads are unsupported; q/k/v head counts must match' "
                "(hopper/kda_engine.py), check_support")
    return None


def _harness(add, with_do: bool) -> None:
    src = Source("livebytes/validate/runner.py", "cudnn_inputs")
    add("q", Group.INPUTS, (T, H, DK), "bf16", src, "harness.inputs")                     # [T, H, K] bf16
    add("k", Group.INPUTS, (T, H, DK), "bf16", src, "harness.inputs")                     # [T, H, K] bf16
    add("v", Group.INPUTS, (T, H, DV), "bf16", src, "harness.inputs")                     # [T, H, V] bf16
    add("g", Group.INPUTS, (T, H, DK), "fp32", src, "harness.inputs", note="log-space")  # [T, H, K] fp32
    add("beta", Group.INPUTS, (T, H), "fp32", src, "harness.inputs")                      # [T, H] fp32
    add("cu_seqlens", Group.INPUTS, (MBS + 1,), "int32", src, "harness.inputs")           # [N+1] int32
    if with_do:
        add("dO", Group.INPUTS, (T, H, DV), "bf16", src, "harness.inputs")               # [T, H, V] bf16


def _state_scratch(add, prefix: str, seqs, group: Group, at: str, plans: tuple[str, ...], cached: bool) -> None:
    """The fp32 [N, H, 128, 128] buffers each cached plan keeps for absent states (allocated by its first call)."""
    def add(*args, _add=add):
        _add(*args, cached=cached)
    for plan in plans:
        if plan == "fwd_cuda":
            f = "hopper/cuda_engine.py"
            add(f"{prefix}fwd_final_state_scratch", group, (seqs, H, DV, DK), "fp32",
                _src(f, "KdaHopperCudaFwdPlan.execute", "_scratch_state (final state dropped)"), at)
            add(f"{prefix}fwd_zero_state", group, (seqs, H, DV, DK), "fp32",
                _src(f, "KdaHopperCudaFwdPlan.execute", "_zero_state (zero seed)"), at)
        elif plan == "bwd_cuda":
            f = "hopper/cuda_engine.py"
            for name, detail in (("bwd_zero_s0", "_zero('s0')"), ("bwd_zero_dfs", "_zero('dfs')"),
                                 ("bwd_d_initial_scratch", "_scratch_dis")):
                add(f"{prefix}{name}", group, (seqs, H, DK, DK), "fp32", _src(f, "KdaHopperCudaBwdPlan.execute", detail), at)
        elif plan == "fwd_cute":
            f = "hopper/kda_engine.py"
            add(f"{prefix}fwd_final_state_scratch", group, (seqs, H, DV, DK), "fp32",
                _src(f, "KdaHopperPlan.execute", "_scratch_state"), at)
            add(f"{prefix}fwd_zero_state", group, (seqs, H, DV, DK), "fp32", _src(f, "KdaHopperPlan.execute", "_zero_state"), at)


def build_cuda(version: str = "1.32.0", device=None) -> LifetimeModel:
    steps = [Step("harness.warmup", "harness", note="what the warmup shape's calls left cached"),
             Step("harness.inputs", "harness", note="inputs and dO exist before the step")]
    buffers: list[Buffer] = []

    def add(name, group, shape, dtype, src, at, freed=None, carved=None, note="", cached=False):
        buffers.append(Buffer(name, group, shape, dtype, src, at, freed, carved, note, cached))

    _state_scratch(add, "warmup_", 1, Group.WARMUP, "harness.warmup", ("fwd_cuda", "bwd_cuda"), cached=False)
    _harness(add, with_do=True)

    ops = "ops/kda.py"
    steps.append(Step("fwd.kernel", "forward", _src(ops, "run_kda_fwd")))
    add("o", Group.INPUTS, (T, H, DV), "bf16", _src(ops, "run_kda_fwd", "o = torch.empty(total, HO, V)"), "fwd.kernel",
        note="returned; the caller holds it")                                              # [T, H, V] bf16
    add("fwd_workspace", Group.SCRATCH, (1,), "uint8", _src("ops/common.py", "graph_workspace", "torch.empty(max(0, 1))"),
        "fwd.kernel", "fwd.kernel", note="the forward plan declares no workspace")
    _state_scratch(add, "", MBS, Group.SCRATCH, "fwd.kernel", ("fwd_cuda",), cached=True)

    steps.append(Step("bwd.alloc_grads", "backward", _src(ops, "kda_bwd")))
    add("dq", Group.OUTPUT_GRAD, (T, H, DK), "bf16", _src(ops, "kda_bwd", "torch.empty(total, H, K, dtype=q.dtype)"), "bwd.alloc_grads")
    add("dk", Group.OUTPUT_GRAD, (T, H, DK), "bf16", _src(ops, "kda_bwd", "torch.empty(total, HK, K, dtype=q.dtype)"), "bwd.alloc_grads")
    add("dv", Group.DV, (T, H, DV), "bf16", _src(ops, "kda_bwd", "torch.empty(total, HV, V, dtype=q.dtype)"), "bwd.alloc_grads")
    add("dg", Group.OUTPUT_GRAD, (T, H, DK), "fp32", _src(ops, "kda_bwd", "torch.empty(total, HO, K, dtype=g.dtype): fp32 g"),
        "bwd.alloc_grads")                                                                  # [T, H, K] fp32
    add("dbeta", Group.BETA_REDUCTION, (T, H), "fp32", _src(ops, "kda_bwd", "torch.empty(total, HO, dtype=beta.dtype)"), "bwd.alloc_grads")

    steps.append(Step("bwd.kernel", "backward", _src("hopper/cuda_bwd_host.py", "launch"),
                      note="k_meta, k_prep, k_scan_t, k_bwd over one carved workspace"))
    host = "hopper/cuda_bwd_host.py"
    ncs = cdiv(T, BT) + MBS - 1                      # _chunk_slots: cdiv(total, 64) + n_seqs - 1
    ws = "bwd_workspace"

    def region(name, group, nbytes, detail, note=""):
        add(name, group, (_arena(nbytes),), "uint8", _src(host, "_layout", detail), "bwd.kernel", "bwd.kernel", ws, note)

    add("chunk_tables", Group.SCRATCH, (2 * _arena(ncs * 4) + 2 * _arena((MBS + 1) * 4),), "uint8",
        _src(host, "_layout", "cs_t0, cs_len int32[ncs]; seq_c0, seq_nc int32[N+1]"), "bwd.kernel", "bwd.kernel", ws)
    region("gn2", Group.SCRATCH, ncs * H * 128 * 4, "gn2 fp32 [ncs, H, 128]")
    region("amat", Group.MATRIX_GRAD, ncs * H * 64 * 64 * 2, "amat bf16 [ncs, H, 64, 64]: chunk UT factors")
    for name in ("wneg", "uu", "kg", "dvl", "vnew", "dv2"):
        region(name, Group.RECOMPUTE, T * H * 128 * 2, f"{name} bf16 [T, H, 128]")         # [T, H, 128] bf16
    for name, what in (("hst", "chunk states"), ("dhst", "state gradients"), ("pmat", "chunk transition products")):
        region(name, Group.STATE, ncs * H * 128 * 128 * 2, f"{name} bf16 [ncs, H, 128, 128]: {what}")
    _state_scratch(add, "", MBS, Group.SCRATCH, "bwd.kernel", ("bwd_cuda",), cached=True)

    return LifetimeModel(
        key=f"cudnn-kda-hopper-cuda@{version}", implementation="cuDNN frontend kda_hopper_cuda (NVRTC CUDA, Hopper)",
        version=version, summary="forward + backward, plain contract, read from nvidia-cudnn-frontend 1.32.0",
        steps=tuple(steps), buffers=tuple(buffers), device=device.name if device else "",
        not_modelled=("padded (non-contiguous) inputs, which marshal.resolve_inputs repacks into copies",
                      "initial / final state inputs and d_initial_state outputs (the contract has none)"),
    )


def build_cute_forward(version: str = "1.32.0", device=None) -> LifetimeModel:
    num_sm = device.sm_count if device else 132
    def _pick(t, n, h):
        try:
            return pick_nseg_value(int(t), int(n), int(h), num_sm)
        except TypeError:  # numpy arrays from a vectorised sweep
            import numpy as np
            return np.vectorize(lambda a, b, c: pick_nseg_value(int(a), int(b), int(c), num_sm))(t, n, h)

    pick_nseg = implemented_function(sp.Function("pick_nseg"), _pick)
    steps = [Step("harness.warmup", "harness", note="what the warmup shape's calls left cached"),
             Step("harness.inputs", "harness", note="inputs exist before the step")]
    buffers: list[Buffer] = []

    def add(name, group, shape, dtype, src, at, freed=None, carved=None, note="", cached=False):
        buffers.append(Buffer(name, group, shape, dtype, src, at, freed, carved, note, cached))

    kern = "hopper/kernel/kda_prefill_sm90.py"

    def module_scratch(prefix, group, tokens, seqs, at, cached):
        nch = sp.floor(tokens / 16) + seqs + 1                       # run_cute: nch = T // 16 + N + 1
        c = nch * H
        nop = seqs * H * pick_nseg(tokens, seqs, H)                  # max(N * H * nseg, 1)
        src = lambda d: _src(kern, "_ws", d)  # noqa: E731
        for name in ("buf0", "buf1", "kg", "ut"):
            add(f"{prefix}ws_{name}", group, (c * 16, 128), "bf16", src(f"{name} bf16 [nch*H*16, 128]"), at, cached=cached)
        add(f"{prefix}ws_diag", group, (c * 16, 16), "bf16", src("bf16 [nch*H*16, 16]"), at, cached=cached)
        add(f"{prefix}ws_norm", group, (c, 128), "fp32", src("fp32 [nch*H, 128]"), at, cached=cached)
        add(f"{prefix}ws_mt", group, (nop, 128, 128), "bf16", src("mt bf16 [N*H*nseg, 128, 128]"), at, cached=cached)
        add(f"{prefix}ws_op_a", group, (nop, 128, 128), "fp32", src("fp32 [N*H*nseg, 128, 128]"), at, cached=cached)
        add(f"{prefix}ws_op_b", group, (nop, 128, 128), "fp32", src("fp32 [N*H*nseg, 128, 128]"), at, cached=cached)

    module_scratch("warmup_", Group.WARMUP, WARMUP_TOKENS, 1, "harness.warmup", False)
    _state_scratch(add, "warmup_", 1, Group.WARMUP, "harness.warmup", ("fwd_cute",), cached=False)
    _harness(add, with_do=False)
    ops = "ops/kda.py"
    steps.append(Step("fwd.kernel", "forward", _src(ops, "run_kda_fwd")))
    add("o", Group.INPUTS, (T, H, DV), "bf16", _src(ops, "run_kda_fwd", "o = torch.empty(total, HO, V)"), "fwd.kernel",
        note="returned; the caller holds it")
    add("fwd_workspace", Group.SCRATCH, (1,), "uint8", _src("ops/common.py", "graph_workspace", "torch.empty(max(0, 1))"),
        "fwd.kernel", "fwd.kernel")
    _state_scratch(add, "", MBS, Group.SCRATCH, "fwd.kernel", ("fwd_cute",), cached=True)
    module_scratch("", Group.SCRATCH, T, MBS, "fwd.kernel", True)
    return LifetimeModel(
        key=f"cudnn-kda-hopper@{version}", implementation="cuDNN frontend kda_hopper (CuTeDSL, Hopper)", version=version,
        summary=f"forward only (inference_mode), plain contract; segment count from {num_sm} SMs",
        steps=tuple(steps), buffers=tuple(buffers), options=(("num_sm", num_sm),), device=device.name if device else "",
        not_modelled=("backward: the engine has none", "padded inputs (the engine raises on them)"),
    )

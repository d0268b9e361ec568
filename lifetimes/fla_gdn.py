"""FLA's Gated DeltaNet (``fla.ops.gated_delta_rule.chunk_gated_delta_rule``), fla-core 0.6.0, as buffer records.

Called as Qwen3-Next trains with it: q, k ``[1, T, H, K]`` bf16 (raw: the kernel L2-normalises them);
v ``[1, T, HV, V]`` bf16 (grouped value heads when HV > H); g ``[1, T, HV]`` fp32 log-space decay; beta
``[1, T, HV]`` bf16 after the sigmoid; ``use_qk_l2norm_in_kernel=True``; packed ``cu_seqlens``; no initial
or final state; chunk size 64. The Triton path: the FlashQLA backend (``ops/gated_delta_rule/backends/
flash_qla.py``) is dispatched only when the ``flash_qla`` package is installed; it is not modelled.

Read from the PyPI wheel ``fla_core-0.6.0-py3-none-any.whl``; line numbers are that wheel's.

What the library keeps across calls: as for KDA, ``tensor_cache`` keeps ``prepare_chunk_indices``,
``prepare_lens`` and ``prepare_chunk_offsets`` results by argument identity (``cached``; ``cu_seqlens``
is ``retained``).

The device: one size depends on it. ``chunk_bwd_dqkwg`` (``ops/common/chunk_o.py``) allocates ``dg`` as
``[NK, B, T, HV]`` fp32 with ``NK = cdiv(K, BK)``, ``BK = min(max(next_power_of_2(K), 16), CONST_TILING)``
and ``CONST_TILING`` from the shared-memory class (``check_shared_mem``): 128 from Hopper's 232448 bytes
per block up, and on Ampere's class when every tensor the kernel loads is 16-bit (as here); 64 on Ada's
class; 32 below. Either way ``NK = cdiv(K, CONST_TILING)``.

Measured on the H200: the forward with Triton 3.6.0; forward + backward with Triton 3.9.0: fla-core 0.6.0 raises in
``chunk_bwd_dqkwg`` on Hopper with Triton >= 3.4.0 and < 3.7.1 (#640), and the H200 image has 3.6.0. The records
(H16/HV32 D128: 1 x 8K, 1 x 32K, 2 x 8K, one cold process; H32 D128: 1 x 8K, 1 x 32K; H16/HV32 D64: 1 x 8K, 2 x 8K)
replay allocated, requested and reserved to the byte; traces at seven shapes match the records below; plan's H16/HV32
D128 boundary, cold, held once dhu's failing config was declared (``GDN_0_6_0.notes``; validate/data/records/). Not
measured: head dims other than 64 and 128 on the GPU.
"""
from __future__ import annotations

import sympy as sp

from livebytes.estimator.compiler import equal_head_dims
from livebytes.estimator.buffers import Group, LifetimeModel
from livebytes.estimator.declare import Contract, Declaration, Input, pow2_tile, source_root
from livebytes.estimator.devices import get_device
from livebytes.lifetimes.aten_reduce import ONE_OUTPUT_NOT_MODELLED, accumulation_scratch, leading_sum_scratch
from livebytes.lifetimes.fla_l2norm import l2norm_backward, l2norm_forward
from livebytes.estimator.symbols import DK, DV, H, HV, MBS, T, cdiv, chunks_per_batch

BT = 64                        # chunk_size (chunk_gated_delta_rule default)
NT = chunks_per_batch(BT)      # len(prepare_chunk_indices(cu_seqlens, 64))

# Autotune keys: each decorator's key=[...] values at this call (flags as numbers: IS_VARLEN 1 with cu_seqlens,
# USE_G 1 (g passed), USE_G_GAMMA 0, USE_DW 1, STATE_V_FIRST 0). Only l2norm's depends on T.
KKT_SOLVE_KEY = (H, HV, DK, 16)                       # chunk_gated_delta_rule_fwd_kkt_solve_kernel: H, HV, K, BC
W_U_KEY = (H, HV, DK, DV, BT, 64, 64, 1)              # recompute_w_u_fwd_kernel: H, HV, K, V, BT, BK, BV, IS_VARLEN
FWD_H_KEY = (H, HV, DK, DV, BT, 0)                    # ..._fwd_kernel_h_blockdim64: H, HV, K, V, BT, STATE_V_FIRST
FWD_O_KEY = (H, HV, DK, DV, BT, 0)                    # chunk_fwd_kernel_o: H, HV, K, V, BT, STATE_V_FIRST
DHU_KEY = (H, HV, DK, DV, BT, 1, 0)                   # ..._bwd_kernel_dhu_blockdim64: H, HV, K, V, BT, USE_G, STATE_V_FIRST


def cumsum_scalar_key(reverse: int) -> tuple:
    """chunk_local_cumsum_scalar_kernel's key B, H, BT, IS_VARLEN, REVERSE (cumsum.py:30) for g [1, T, HV]."""
    return (1, HV, BT, 1, reverse)


def wy_bwd_const_tiling(smem: int) -> int:
    """prepare_wy_repr_bwd's CONST_TILING (ops/gated_delta_rule/wy_fast.py:314) on a device of ``smem`` bytes of shared
    memory per block (``Device.shared_memory_per_block_optin``): 64 if check_shared_mem() (the 102400-byte default
    class), else 32."""
    return 64 if smem >= SMEM_DEFAULT else 32

# fla/utils/hardware.py Backend: the shared-memory thresholds check_shared_mem compares against (a device's own
# figure is the Device's: estimator/data/devices.json)
SMEM_HOPPER, SMEM_AMPERE, SMEM_ADA, SMEM_DEFAULT = 232448, 166912, 101376, 102400
DEFAULT_DEVICE = "H200"      # the device a model built without one describes (the registry's default_device)

src = source_root("fla")
CHUNK = "ops/gated_delta_rule/chunk.py"
CALL = src(CHUNK, "chunk_gated_delta_rule", 397, "def chunk_gated_delta_rule(q, k, v, g, beta, ..., cu_seqlens)")

QWEN3_NEXT = Contract("qwen3-next", CALL, (
    Input("q", (T, H, DK), "bf16", note="raw: L2-normalised in kernel"),       # [T, H, K] bf16
    Input("k", (T, H, DK), "bf16", note="raw: L2-normalised in kernel"),       # [T, H, K] bf16
    Input("v", (T, HV, DV), "bf16"),                                            # [T, HV, V] bf16
    Input("g", (T, HV), "fp32", note="log-space decay"),                       # [T, HV] fp32
    Input("beta", (T, HV), "bf16", note="after sigmoid"),                      # [T, HV] bf16
    Input("cu_seqlens", (MBS + 1,), "int64", note="tensor_cache keeps it referenced", retained=True),  # [N+1] int64
    Input("dO", (T, HV, DV), "bf16", backward_only=True),                       # [T, HV, V] bf16
))


# The call of flash-linear-attention 0.6.0's GatedDeltaNet layer (layers/gated_deltanet.py:302-318): raw a_proj and b_proj
# outputs, use_gate_in_kernel with the layer's fp32 A_log and dt_bias, use_beta_sigmoid_in_kernel. Not registered as a
# kernel model: the layer model (lifetimes/fla_gdn_layer.py) includes it (``build(layer_call=True)``).
LAYER_CALL = Contract("layer", CALL, tuple(
    Input("g", (T, HV), "bf16", note="raw a_proj output: the gate runs in kernel") if i.name == "g" else
    Input("beta", (T, HV), "bf16", note="raw b_proj output: the sigmoid runs in kernel") if i.name == "beta" else i
    for i in QWEN3_NEXT.inputs if i.name != "dO") + (
    Input("A_log", (HV,), "fp32"),                                              # [HV] fp32
    Input("dt_bias", (HV,), "fp32"),                                            # [HV] fp32
    Input("dO", (T, HV, DV), "bf16", backward_only=True),                       # [T, HV, V] bf16
))
GATE = "ops/gated_delta_rule/gate.py"


def dqkwg_const_tiling(smem: int) -> int:
    """CONST_TILING of chunk_bwd_dqkwg (ops/common/chunk_o.py:741-749) on a device of ``smem`` bytes of shared memory
    per block (``Device.shared_memory_per_block_optin``); the Ampere branch gives 128 because q, k, v, do, h, dh, w,
    dv are all bf16 in this configuration."""
    if smem >= SMEM_AMPERE:     # the Hopper class, and the Ampere class with 16-bit inputs
        return 128
    return 64 if smem >= SMEM_ADA else 32


def refuse(shape, device) -> str | None:
    if shape.dim > 256:
        return ("FLA chunk_gated_delta_rule supports key head dim <= 256 (ops/common/chunk_delta_h.py:716: "
                f"'current kernel does not support head dimension larger than 256'), got {shape.dim}")
    return None


def build(forward_only: bool = False, device=None, gva: bool = False, version: "GdnVersion | None" = None,
          layer_call: bool = False, sms: int | None = None, threads_per_sm: int | None = None) -> LifetimeModel:
    """``gva``: HV > H; the backward then sums dq, dk and the WY dk over each group of HV/H value heads;
    ``version``: an entry of ``VERSIONS`` (default fla-core 0.6.0); ``layer_call``: as the GatedDeltaNet layer calls it
    (in-kernel gate and beta sigmoid, ``LAYER_CALL``), whose gate-gradient sums need the device's SM count ``sms``
    and resident threads per SM ``threads_per_sm`` (default: the device's)."""
    v = version or GDN_0_6_0
    sms = sms if sms is not None else getattr(device, "sm_count", None)
    threads_per_sm = threads_per_sm if threads_per_sm is not None else getattr(device, "max_threads_per_sm", None)
    if layer_call and not forward_only and None in (sms, threads_per_sm):
        raise ValueError("the layer call's backward needs the device's SM count and resident threads per SM "
                         "(its gate gradients' sums: aten_reduce)")
    facts = device or get_device(DEFAULT_DEVICE)      # shared memory and architecture; the SM count only as given
    arch, const_tiling = facts.arch, dqkwg_const_tiling(facts.shared_memory_per_block_optin)
    saved_until = "fwd.output" if forward_only else "bwd.return"
    d = Declaration()
    d.inputs(LAYER_CALL if layer_call else QWEN3_NEXT, backward=not forward_only,
             note="inputs, dO and the packed boundaries exist before the step")
    _forward(d, saved_until, layer_call)
    if not forward_only:
        _backward(d, gva, const_tiling, wy_bwd_const_tiling(facts.shared_memory_per_block_optin), layer_call,
                  (sms, threads_per_sm), sm90=facts.capability == (9, 0))
    return d.freeze(
        key=f"fla-gdn{'-fwd' if forward_only else ''}@{v.version}", implementation="FLA chunk_gated_delta_rule (Triton)",
        version=v.version, device=getattr(device, "name", ""),
        summary=("forward only, no grad" if forward_only else
                 "forward + backward (backward measured on the H200 with Triton 3.9.0 at D128 and D64: H16/HV32 and H32 at D128, H16/HV32 at D64)")
        + ("; the GatedDeltaNet layer's call (in-kernel q/k L2 norm, gate and beta sigmoid)" if layer_call else
           "; Qwen3-Next call (in-kernel q/k L2 norm, log-space fp32 g, bf16 post-sigmoid beta)") + f"; {v.origin}; "
        + f"chunk_bwd_dqkwg CONST_TILING {const_tiling} on {arch}",
        options=(("forward_only", forward_only), ("gva", gva)),
        not_modelled=("temporaries of the first call only (tensor_cache misses)",
                      "initial state, final state and their gradients (the configuration has none)",
                      "the FlashQLA (TileLang) backend, dispatched instead of Triton when flash_qla is installed",
                      *((f"HV = 1: {ONE_OUTPUT_NOT_MODELLED} (the gate gradients' dA.sum(0) and dbias.sum(0), gate.py:229-230)",)
                        if layer_call else ("in-kernel gate (use_gate_in_kernel, A_log, dt_bias) and in-kernel beta sigmoid",)),
                      "context parallelism",
                      *(() if forward_only else ("off Hopper, or below K = 128: which dhu configs fail to launch (none "
                                                 "assumed); at K > 128 or V != 128 the K = V = 128 failure is assumed",))),
        notes=v.notes_forward if forward_only else v.notes,
    )


def _forward(d: Declaration, saved_until: str, layer_call: bool = False) -> None:
    """ChunkGatedDeltaRuleFunction.forward (chunk.py:258) -> chunk_gated_delta_rule_fwd (chunk.py:33)."""
    fwd = "ChunkGatedDeltaRuleFunction.forward"
    for x in ("q", "k"):
        l2norm_forward(d, x, src(CHUNK, fwd, 283 if x == "q" else 284, f"{x}, {x}_rstd = l2norm_fwd({x})"), saved_until)
    d.step("fwd.chunk_indices", "forward", src(CHUNK, fwd, 291, "chunk_indices = prepare_chunk_indices(cu_seqlens, ...)"))
    d.buffer("chunk_indices", Group.SCRATCH, (NT, 2), "int64",                                    # [NT, 2] int64
             src("ops/utils/index.py", "prepare_chunk_indices", 164, "return torch.stack([seg_id, intra_chunk_idx], 1).to(cu_seqlens)"),
             note="tensor_cache keeps it", cached=True, cache_fn="prepare_chunk_indices")
    d.buffer("seq_lens", Group.SCRATCH, (MBS,), "int64",                                          # [N] int64
             src("ops/utils/index.py", "prepare_lens", 42, "return torch.diff(cu_seqlens)"), note="tensor_cache keeps it", cached=True)
    if layer_call:
        _beta_sigmoid_forward(d, saved_until)
        cumsum = src(GATE, "gdn_gate_chunk_cumsum", 183, "o = torch.empty_like(g, dtype=output_dtype or g.dtype)")
        d.step("fwd.g_cumsum", "forward", src(CHUNK, "chunk_gated_delta_rule_fwd", 53, "g = gdn_gate_chunk_cumsum("),
               note="output_dtype=torch.float (gate.py:175): fp32 from the raw bf16 gate")
        d.autotune("gdn_gate_chunk_cumsum_scalar_kernel", (HV, BT, 1, 0), src(GATE, "gdn_gate_chunk_cumsum", 184,
                   "gdn_gate_chunk_cumsum_scalar_kernel[(NT, B * H)]("), note="key=['H', 'BT', 'IS_VARLEN', 'REVERSE'] (gate.py:59)")
    else:
        cumsum = src("ops/utils/cumsum.py", "chunk_local_cumsum_scalar", 278, "o = torch.empty_like(g, dtype=output_dtype or g.dtype)")
        d.step("fwd.g_cumsum", "forward", src(CHUNK, "chunk_gated_delta_rule_fwd", 63, "g = chunk_local_cumsum(g, ..., scale=RCP_LN2)"))
        d.autotune("chunk_local_cumsum_scalar_kernel", cumsum_scalar_key(0), CUMSUM_SCALAR_LAUNCH,
                   note="key=['B', 'H', 'BT', 'IS_VARLEN', 'REVERSE'] (cumsum.py:30), REVERSE=False")
    d.buffer("g_cumsum", Group.SAVED, (T, HV), "fp32", cumsum, saved_until, note="saved for backward")  # [T, HV] fp32
    d.step("fwd.intra", "forward", src(CHUNK, "chunk_gated_delta_rule_fwd", 72, "w, u, A = chunk_gated_delta_rule_fwd_intra("),
           note="fused kkt + solve_tril (BT == 64)")
    d.autotune("chunk_gated_delta_rule_fwd_kkt_solve_kernel", KKT_SOLVE_KEY,
               src("ops/gated_delta_rule/chunk_fwd.py", "chunk_gated_delta_rule_fwd_intra", 386,
                   "chunk_gated_delta_rule_fwd_kkt_solve_kernel[(NT, B * HV)]("), note="key=['H', 'HV', 'K', 'BC'] (chunk_fwd.py:36), BC = 16")
    d.buffer("A", Group.SAVED, (T, HV, BT), "bf16", src("ops/gated_delta_rule/chunk_fwd.py", "chunk_gated_delta_rule_fwd_intra", 385,
             "A = torch.zeros(B, T, HV, BT, device=k.device, dtype=k.dtype)"), saved_until)         # [T, HV, 64] bf16
    _w_u(d, "fwd", "_fwd", Group.FORWARD, "fwd.output")
    _delta_h(d, "fwd", "_fwd", Group.FORWARD, "fwd.output")
    d.buffer("chunk_offsets", Group.SCRATCH, (MBS + 1,), "int64",                                  # [N+1] int64
             src("ops/utils/index.py", "prepare_chunk_offsets", 172,
                 "return F.pad(triton.cdiv(prepare_lens(cu_seqlens), chunk_size), (1, 0), value=0).cumsum(-1)"),
             note="tensor_cache keeps it", cached=True)
    d.step("fwd.output", "forward", src(CHUNK, "chunk_gated_delta_rule_fwd", 111, "o = chunk_fwd_o("),
           note="w, u, h, v_new die when chunk_gated_delta_rule_fwd returns")
    d.autotune("chunk_fwd_kernel_o", FWD_O_KEY, src("ops/common/chunk_o.py", "chunk_fwd_o", 567, "chunk_fwd_kernel_o[grid]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'STATE_V_FIRST'] (chunk_o.py:56)")
    d.buffer("o", Group.INPUTS, (T, HV, DV), "bf16", src("ops/common/chunk_o.py", "chunk_fwd_o", 565, "o = torch.empty_like(v)"),
             note="returned; o.to(q.dtype) is a no-op")                                           # [T, HV, V] bf16


CUMSUM_SCALAR_LAUNCH = src("ops/utils/cumsum.py", "chunk_local_cumsum_scalar", 280, "chunk_local_cumsum_scalar_kernel[grid](")


def _w_u(d: Declaration, phase: str, suffix: str, group: Group, freed: str) -> None:
    """recompute_w_u_fwd (ops/gated_delta_rule/wy_fast.py): w and u."""
    wy = "ops/gated_delta_rule/wy_fast.py"
    call = (src("ops/gated_delta_rule/chunk_fwd.py", "chunk_gated_delta_rule_fwd_intra", 419, "w, u = recompute_w_u_fwd(")
            if phase == "fwd" else src(CHUNK, "chunk_gated_delta_rule_bwd", 147, "w, u = recompute_w_u_fwd("))
    d.step(f"{phase}.w_u", "forward" if phase == "fwd" else "backward", call)
    d.autotune("recompute_w_u_fwd_kernel", W_U_KEY, src(wy, "recompute_w_u_fwd", 275, "recompute_w_u_fwd_kernel[(NT, B*HV)]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'BK', 'BV', 'IS_VARLEN'] (wy_fast.py:39), BK = BV = 64 (wy_fast.py:266); "
                    "the backward's recompute passes the same tensors: tuned by the forward")
    d.buffer(f"w{suffix}", group, (T, HV, DK), "bf16", src(wy, "recompute_w_u_fwd", 273, "w = k.new_empty(B, T, HV, K)"), freed)
    d.buffer(f"u{suffix}", group, (T, HV, DV), "bf16", src(wy, "recompute_w_u_fwd", 274, "u = torch.empty_like(v)"), freed)


def _delta_h(d: Declaration, phase: str, suffix: str, group: Group, freed: str) -> None:
    """chunk_gated_delta_rule_fwd_h (ops/common/chunk_delta_h.py): the chunk states h and v_new."""
    fh = "ops/common/chunk_delta_h.py"
    line = 95 if phase == "fwd" else 160
    d.step(f"{phase}.delta_h", "forward" if phase == "fwd" else "backward",
           src(CHUNK, "chunk_gated_delta_rule_fwd" if phase == "fwd" else "chunk_gated_delta_rule_bwd", line,
               "h, v_new, ... = chunk_gated_delta_rule_fwd_h("))
    d.autotune("chunk_gated_delta_rule_fwd_kernel_h_blockdim64", FWD_H_KEY, src(fh, "chunk_gated_delta_rule_fwd_h", 727,
               "chunk_gated_delta_rule_fwd_kernel_h_blockdim64[grid]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'STATE_V_FIRST'] (chunk_delta_h.py:55); the backward's recompute "
                    "passes the same tensors: tuned by the forward")
    d.buffer(f"h{suffix}", Group.STATE if phase == "bwd" else group, (NT, HV, DK, DV), "bf16",
             src(fh, "chunk_gated_delta_rule_fwd_h", 722, "h = k.new_empty(B, NT, HV, K, V)"), freed)   # [NT, HV, K, V] bf16
    d.buffer(f"v_new{suffix}", group, (T, HV, DV), "bf16",
             src(fh, "chunk_gated_delta_rule_fwd_h", 725, "v_new = torch.empty_like(u) if save_new_value else None"), freed)


def _beta_sigmoid_forward(d: Declaration, saved_until: str) -> None:
    """The layer call: ``beta = fused_beta_sigmoid(beta_raw, ...)`` (chunk.py:288), fp32, saved for backward."""
    d.step("fwd.beta_sigmoid", "forward", src(CHUNK, "ChunkGatedDeltaRuleFunction.forward", 288,
                                              "beta = fused_beta_sigmoid(beta_raw, scale=2.0 if allow_neg_eigval else 1.0)"))
    d.buffer("beta_sigmoid", Group.SAVED, (T, HV), "fp32", src("ops/common/gate.py", "fused_beta_sigmoid_fwd", 59,
             "y = torch.empty_like(x, dtype=torch.float32)"), saved_until)                          # [T, HV] fp32


GATE_END = "bwd.gate_dbias_sum"     # gdn_gate_bwd's last step: it returns, chunk_gated_delta_rule_bwd's locals die


def _gate_backward(d: Declaration, sms: int, threads_per_sm: int) -> None:
    """The layer call: ``dg, dA_log, ddt_bias = gdn_gate_bwd(g=g_input, ...)`` (chunk.py:249): the kernel, then each
    partial's ``sum(0)`` over its ``[cdiv(T, 32), HV]`` rows, whose global reduce on ``sms`` SMs of ``threads_per_sm``
    resident threads stages through the
    allocator (``aten_reduce``) after the sum's output; each partial dies when its name is rebound to the sum."""
    gb = "gdn_gate_bwd"
    d.step("bwd.gate_bwd", "backward", src(CHUNK, "chunk_gated_delta_rule_bwd", 249,
                                           "dg, dA_log, ddt_bias = gdn_gate_bwd(g=g_input, A_log=A_log, dt_bias=dt_bias, dyg=dg)"),
           note="the kernel; the fp32 dg dies when gdn_gate_bwd returns (after the two sums)")
    d.autotune("gdn_gate_bwd_kernel", (HV, 32), src(GATE, gb, 216, "gdn_gate_bwd_kernel[(NT, H)]("),
               note="key=['H', 'BT'] (gate.py:117), BT = 32")
    d.buffer("dg_gate", Group.OUTPUT_GRAD, (T, HV), "bf16", src(GATE, gb, 212, "dg = torch.empty_like(g)"),
             note="the raw gate's gradient")                                                      # [T, HV] bf16
    d.buffer("dA_log_part", Group.SCRATCH, (cdiv(T, 32), HV), "fp32", src(GATE, gb, 213,
             "dA = A_log.new_empty(NT, H, dtype=torch.float32)"), "bwd.gate_dA_sum")              # [cdiv(T, 32), HV] fp32
    d.buffer("dt_bias_part", Group.SCRATCH, (cdiv(T, 32), HV), "fp32", src(GATE, gb, 214,       # [cdiv(T, 32), HV] fp32
             "dbias = g.new_empty(NT, H, dtype=torch.float32) if dt_bias is not None else None"), GATE_END)
    sum_a = src(GATE, gb, 229, "dA = dA.sum(0).view_as(A_log).type_as(A_log)")
    d.step("bwd.gate_dA_sum", "backward", sum_a, note="type_as(A_log) is a no-op (fp32)")
    d.buffer("dA_log", Group.OUTPUT_GRAD, (HV,), "fp32", sum_a)                                   # [HV] fp32
    leading_sum_scratch(d, "dA_log", cdiv(T, 32), HV, sms, "fp32", threads_per_sm=threads_per_sm)  # [cdiv(T, 32), HV]'s sum
    sum_b = src(GATE, gb, 230, "dbias = dbias.sum(0).to(dt_bias) if dt_bias is not None else None")
    d.step(GATE_END, "backward", sum_b, note=".to(dt_bias) is a no-op (fp32)")
    d.buffer("ddt_bias", Group.OUTPUT_GRAD, (HV,), "fp32", sum_b)                                 # [HV] fp32
    leading_sum_scratch(d, "ddt_bias", cdiv(T, 32), HV, sms, "fp32", threads_per_sm=threads_per_sm)  # the same shape


def _backward(d: Declaration, gva: bool, const_tiling: int, wy_tiling: int, layer_call: bool = False,
              sms: tuple[int, int] | None = None, *, sm90: bool) -> None:
    """ChunkGatedDeltaRuleFunction.backward -> chunk_gated_delta_rule_bwd (chunk.py:126), in launch order.
    What that function holds in locals dies when it returns, after the reverse cumsum (``local_end``; the layer
    call: after the gate's backward and its two sums on ``sms``: the device's SM count and resident threads per SM).
    ``sm90``: Hopper, where dhu has a config
    that fails to launch at K = V = 128 (assumed at every K >= 128 and any V)."""
    bwd = "chunk_gated_delta_rule_bwd"
    local_end = GATE_END if layer_call else "bwd.dg_cumsum"
    _w_u(d, "bwd", "", Group.RECOMPUTE, local_end)
    _delta_h(d, "bwd", "", Group.RECOMPUTE, local_end)
    co = "ops/common/chunk_o.py"
    d.step("bwd.dv_local", "backward", src(CHUNK, bwd, 172, "dv = chunk_bwd_dv_local("))
    d.autotune("chunk_bwd_kernel_dv_local", (H, HV, DK, DV, BT, pow2_tile(DK, const_tiling), pow2_tile(DV, const_tiling), 1),
               src(co, "chunk_bwd_dv_local", 686, "chunk_bwd_kernel_dv_local[grid]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'BK', 'BV', 'USE_G'] (chunk_o.py:462); BK = min(max(next_power_of_2(K), "
                    "16), CONST_TILING) with chunk_bwd_dqkwg's CONST_TILING rule (chunk_o.py:671-681; q, k, do are bf16)")
    d.buffer("dv_local", Group.DV, (T, HV, DV), "bf16", src(co, "chunk_bwd_dv_local", 684, "dv = torch.empty_like(do)"),
             "bwd.dhu", note="rebound to dhu's dv2")                                              # [T, HV, V] bf16
    fh = "ops/common/chunk_delta_h.py"
    d.step("bwd.dhu", "backward", src(CHUNK, bwd, 202, "dh, dh0, dv = chunk_gated_delta_rule_bwd_dhu("))
    d.autotune("chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64", DHU_KEY, src(fh, "chunk_gated_delta_rule_bwd_dhu", 799,
               "chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64[grid]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'BV', 'USE_G', 'STATE_V_FIRST'] (chunk_delta_h.py:366); BV is a config "
                    "parameter, not an argument: Triton leaves it out of the key. On the H200 under Triton 3.9.0 at K = V = "
                    "128 its config num_warps 4, num_stages 4, BV 64 compiles but never loads (OutOfResources: run 20's "
                    "cold kernel list, validate/data/records/runs/run20/kernels_20.tgz), so dv_local, which the step drops, lives "
                    "until the next compile's garbage collection, as in KDA's variant (run 21c's boundary probe: the free "
                    "7.01 GiB block it leaves at chunk_bwd_dqkwg takes dq's sum); at K = V = 64 all 12 load (run 22e's "
                    "cold list, kernels_22.tgz); other K below 128 assumed to fit, at K > 128 and any V assumed to fail as "
                    "at K = V = 128 (not measured)",
               held_until_gc=("dv_local",) if sm90 else (), held_when=sp.Ge(DK, 128),
               # the cold kernel lists: one config never loads at K = V = 128, all load at 64
               held_measured=equal_head_dims(64, 128) if sm90 and not layer_call else sp.false)
    d.buffer("dh", Group.STATE, (NT, HV, DK, DV), "bf16",
             src(fh, "chunk_gated_delta_rule_bwd_dhu", 794, "dh = q.new_empty(B, NT, HV, K, V)"), local_end)  # [NT, HV, K, V] bf16
    d.buffer("dv_dhu", Group.DV, (T, HV, DV), "bf16", src(fh, "chunk_gated_delta_rule_bwd_dhu", 796, "dv2 = torch.empty_like(dv)"),
             "bwd.wy_sum_k" if gva else "bwd.wy", note="rebound to prepare_wy_repr_bwd's dv")    # [T, HV, V] bf16
    _dqkwg(d, gva, const_tiling, local_end)
    _wy_bwd(d, gva, local_end, wy_tiling, layer_call)
    d.step("bwd.dg_cumsum", "backward", src(CHUNK, bwd, 246, "dg = chunk_local_cumsum(dg, ..., reverse=True, ...)"))
    d.autotune("chunk_local_cumsum_scalar_kernel", cumsum_scalar_key(1), CUMSUM_SCALAR_LAUNCH,
               note="key=['B', 'H', 'BT', 'IS_VARLEN', 'REVERSE'] (cumsum.py:30), REVERSE=True")
    d.buffer("dg", Group.OUTPUT_GRAD, (T, HV), "fp32", src("ops/utils/cumsum.py", "chunk_local_cumsum_scalar", 278,
             "o = torch.empty_like(g, dtype=output_dtype or g.dtype)"), GATE_END if layer_call else None,
             note="the gate's input gradient" if layer_call else "the g gradient; dg.to(g) is a no-op")  # [T, HV] fp32
    if layer_call:
        _gate_backward(d, *sms)
    for x in ("q", "k"):
        l2norm_backward(d, x, src(CHUNK, "ChunkGatedDeltaRuleFunction.backward", 384 if x == "q" else 385,
                                  f"d{x} = l2norm_bwd({x}, {x}_rstd, d{x})"))
    if layer_call:
        d.step("bwd.beta_sigmoid", "backward", src(CHUNK, "ChunkGatedDeltaRuleFunction.backward", 387,
                                                   "db = fused_beta_sigmoid_bwd(beta_raw, db, ...)"))
        d.buffer("dbeta", Group.OUTPUT_GRAD, (T, HV), "bf16", src("ops/common/gate.py", "fused_beta_sigmoid_bwd", 75,
                 "dx = torch.empty_like(x)"), note="the raw beta's gradient")                      # [T, HV] bf16
    d.step("bwd.return", "backward", src(CHUNK, "ChunkGatedDeltaRuleFunction.backward", 388, "return (dq.to(q), dk.to(k), ...)"),
           note="the casts are no-ops; autograd frees the saved tensors after this node")


def _dqkwg(d: Declaration, gva: bool, const_tiling: int, local_end: str) -> None:
    """chunk_bwd_dqkwg (ops/common/chunk_o.py:710): dq, dk over value heads, dg per K tile, dw; then the sums."""
    co, f = "ops/common/chunk_o.py", "chunk_bwd_dqkwg"
    nk = cdiv(DK, const_tiling)   # NK = cdiv(K, BK), BK = min(max(next_pow2(K), 16), CONST_TILING)
    d.step("bwd.dqkwg", "backward", src(CHUNK, "chunk_gated_delta_rule_bwd", 217, "dq, dk, dw, dg = chunk_bwd_dqkwg("))
    d.autotune("chunk_bwd_kernel_dqkwg", (H, HV, DK, DV, BT, pow2_tile(DK, const_tiling), pow2_tile(DV, const_tiling), 1, 0, 1, 0),
               src(co, f, 759, "chunk_bwd_kernel_dqkwg[grid]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'BK', 'BV', 'USE_G', 'USE_G_GAMMA', 'USE_DW', 'STATE_V_FIRST'] "
                    "(chunk_o.py:170); BK, BV as chunk_o.py:750-751")
    q_end, k_end = ("bwd.dqkwg_sum_q", "bwd.dqkwg_sum_k") if gva else ("bwd.l2norm_q", "bwd.l2norm_k")
    d.buffer("dq_full" if gva else "dq_pre", Group.OUTPUT_GRAD, (T, HV, DK), "bf16",
             src(co, f, 753, "dq = q.new_empty(B, T, HV, K)"), q_end)                             # [T, HV, K] bf16
    d.buffer("dk_full" if gva else "dk_pre", Group.OUTPUT_GRAD, (T, HV, DK), "bf16",
             src(co, f, 754, "dk = k.new_empty(B, T, HV, K)"), k_end, note="dk.add_(dk2) in place")  # [T, HV, K] bf16
    d.buffer("dg_tiles", Group.STAGE, (nk, T, HV), "fp32",                                        # [NK, T, HV] fp32
             src(co, f, 755, "dg = torch.empty(NK, *g.shape, dtype=torch.float32, device=g.device)"), "bwd.dqkwg_sum_g",
             note=f"device-dependent: NK = cdiv(K, CONST_TILING), CONST_TILING {const_tiling} on this device")
    d.buffer("dw", Group.STAGE, (T, HV, DK), "bf16", src(co, f, 756, "dw = torch.empty_like(w)"), local_end)
    if gva:
        for x, end, line in (("q", "bwd.l2norm_q", 789), ("k", "bwd.l2norm_k", 790)):
            d.step(f"bwd.dqkwg_sum_{x}", "backward", src(co, f, line, f"d{x} = d{x}.view(B, T, H, HV // H, K).sum(3)"))
            d.buffer(f"d{x}_pre", Group.OUTPUT_GRAD, (T, H, DK), "bf16",
                     src(co, f, line, f"d{x} = d{x}.view(B, T, H, HV // H, K).sum(3)"), end)       # [T, H, K] bf16
            accumulation_scratch(d, f"d{x}_pre", T * HV * DK, T * H * DK, "bf16")   # fp32 [T, H, K] above 2**31 B
    d.step("bwd.dqkwg_sum_g", "backward", src(co, f, 792, "dg = dg.sum(0)"))
    d.buffer("dg_sum", Group.STAGE, (T, HV), "fp32", src(co, f, 792, "dg = dg.sum(0)"), "bwd.dg_cumsum",
             note="dg.add_(dg2) in place; rebound to the reverse cumsum")                         # [T, HV] fp32


def _wy_bwd(d: Declaration, gva: bool, local_end: str, wy_tiling: int, layer_call: bool = False) -> None:
    """prepare_wy_repr_bwd (ops/gated_delta_rule/wy_fast.py:298): dk2, the final dv, dg2, db."""
    wy, f = "ops/gated_delta_rule/wy_fast.py", "prepare_wy_repr_bwd"
    d.step("bwd.wy", "backward", src(CHUNK, "chunk_gated_delta_rule_bwd", 233, "dk2, dv, db, dg2 = prepare_wy_repr_bwd("))
    d.autotune("prepare_wy_repr_bwd_kernel", (H, HV, DK, DV, BT, pow2_tile(DK, wy_tiling), pow2_tile(DV, wy_tiling), 1),
               src(wy, f, 322, "prepare_wy_repr_bwd_kernel[(NT, B * HV)]("),
               note=f"key=['H', 'HV', 'K', 'V', 'BT', 'BK', 'BV', 'IS_VARLEN'] (wy_fast.py:119); BK = min(max(next_power_of_2(K), "
                    f"16), CONST_TILING), CONST_TILING {wy_tiling} on this device (wy_fast.py:314-316)")
    d.buffer("dk2_full" if gva else "dk2", Group.OUTPUT_GRAD, (T, HV, DK), "bf16", src(wy, f, 318, "dk = k.new_empty(B, T, HV, K)"),
             "bwd.wy_sum_k" if gva else local_end)                                                # [T, HV, K] bf16
    d.buffer("dv", Group.OUTPUT_GRAD, (T, HV, DV), "bf16", src(wy, f, 319, "dv = torch.empty_like(v)"),
             note="the V gradient")                                                               # [T, HV, V] bf16
    d.buffer("dg2", Group.BETA_REDUCTION, (T, HV), "fp32", src(wy, f, 320, "dg = torch.empty_like(g) if g is not None else None"),
             local_end)                                                                           # [T, HV] fp32
    d.buffer("db", Group.OUTPUT_GRAD, (T, HV), "fp32" if layer_call else "bf16", src(wy, f, 321, "db = torch.empty_like(beta)"),
             "bwd.beta_sigmoid" if layer_call else None,
             note="beta is the in-kernel sigmoid's fp32" if layer_call else "the beta gradient; db.to(beta_raw) is a no-op")
    if gva:
        d.step("bwd.wy_sum_k", "backward", src(wy, f, 346, "dk = dk.view(B, T, H, HV // H, K).sum(3)"))
        d.buffer("dk2", Group.OUTPUT_GRAD, (T, H, DK), "bf16", src(wy, f, 346, "dk = dk.view(B, T, H, HV // H, K).sum(3)"),
                 local_end)                                                                       # [T, H, K] bf16
        accumulation_scratch(d, "dk2", T * HV * DK, T * H * DK, "bf16")     # fp32 [T, H, K] above 2**31 B of input


# ---------------------------------------------------------------- versions and registration

from dataclasses import dataclass, replace  # noqa: E402  (the version table and registration close the file)

from livebytes.estimator.registry import ModelSpec, register  # noqa: E402


@dataclass(frozen=True)
class GdnVersion:
    """What one fla-core version of this code path is; a new version overrides fields of another (``derive``)."""

    version: str
    origin: str                    # where the code was read
    covers: str                    # forward + backward
    covers_forward: str            # forward only
    notes: tuple[str, ...] = ()    # forward + backward
    notes_forward: tuple[str, ...] = ()

    def derive(self, **overrides) -> "GdnVersion":
        return replace(self, **overrides)


GDN_0_6_0 = GdnVersion(
    version="0.6.0", origin="fla-core 0.6.0 (PyPI)",
    covers="fla-core 0.6.0 Gated DeltaNet forward + backward as Qwen3-Next calls it; measured on the H200 with Triton 3.9.0 "
           "at D128 (H16/HV32 and H32) and D64 (H16/HV32), not at other head dims",
    covers_forward="fla-core 0.6.0 Gated DeltaNet forward only under torch.no_grad (inference peak)",
    notes=("fla-core 0.6.0 refuses the gated chunk_bwd_dqkwg on Hopper with Triton >= 3.4.0 and < 3.7.1 "
           "(ops/common/chunk_o.py:727, #640): the backward needs Triton >= 3.7.1 or tilelang there",
           "measured on the H200 with Triton 3.9.0 (run 20): forward + backward at H16/HV32 D128, MBS 1 x 8K, 1 x 32K and "
           "2 x 8K in one cold process, allocated, requested and reserved peaks to the byte; its process memory cold and "
           "warm at T 4,096; traces at seven shapes (D64 and D128, H1-2, HV2-4) with no difference from these records",
           "measured on the H200 with Triton 3.9.0 (run 21): equal heads H32 D128 at 1 x 8K and 1 x 32K, each a fresh cold "
           "process, to the byte; plan's boundary at H16/HV32 D128, cold: 895,488 fitted all three calls, 904,443 ran out "
           "of memory in the first (run 21c's 918,912 failure found dhu's held dv_local)",
           "measured on the H200 with Triton 3.9.0 (run 22): H16/HV32 D64 at 1 x 8K and 2 x 8K in one cold process, to "
           "the byte (the record run 21 lost in transfer); its process memory cold (678,232,064 B, stack limit 1,120 B "
           "as the frames predict) and warm (650,969,088 B) at T 4,096, alone on the GPU (its modules: this process's)",
           "not measured: head dims other than 64 and 128 on the GPU (D256 and D32 take the known cases' frames as a bound)"),
    notes_forward=("measured on the H200 with Triton 3.6.0 (runs 6 and 6b): H16/HV32 D128 records and traces at seven "
                   "shapes, to the byte; the out-of-memory boundary at H16/HV32 D128, cold (run 13b)",),
)

VERSIONS: tuple[GdnVersion, ...] = (GDN_0_6_0,)
OPTIONS = {"gva": (False, True)}


def _register(v: GdnVersion) -> None:
    for forward_only in (False, True):
        register(ModelSpec(
            key=f"fla-gdn{'-fwd' if forward_only else ''}@{v.version}", implementation="FLA chunk_gated_delta_rule (Triton)",
            version=v.version, covers=v.covers_forward if forward_only else v.covers,
            builder=lambda device, gva=False, f=forward_only, v=v: build(forward_only=f, device=device, gva=gva, version=v),
            refuse=refuse, options=OPTIONS, default_device=DEFAULT_DEVICE, phase="fwd" if forward_only else "fwd+bwd",
        ))


for _v in VERSIONS:
    _register(_v)

"""FLA's native Triton KDA (``fla.ops.kda.chunk_kda``), forward and backward, as buffer records.

Read from fla-core 0.6.0 (PyPI wheel ``fla_core-0.6.0-py3-none-any.whl``); line numbers are that
wheel's. The report's snapshot 07b80f27 is not public, so its model is the 0.6.0 code path with the
two dtypes the report's storage table shows differently (its ``FlaVersion`` entry below names them
and the evidence). A version is data: an entry in ``VERSIONS`` that overrides fields of another.

Configurations (``contract``):
- ``report``: the KDA memory report's seed configuration: in-kernel Q/K L2 norm, beta sigmoid,
  gate activation with safe gate (lower bound -5), raw bf16 gate, fp32 A_log / dt_bias, all seven
  inputs differentiated, native [K, V] state layout, no initial or final state.
- ``plain``: the contract of the cuDNN Hopper engines: pre-normalised bf16 q/k, fp32 log-space g,
  fp32 post-sigmoid beta, no in-kernel transforms, no safe gate, no A_log / dt_bias.

What the library keeps across calls: ``tensor_cache`` (utils/decorators.py) keeps the last four
(arguments, result) pairs of ``prepare_chunk_indices``, ``prepare_lens`` and ``prepare_chunk_offsets``
by argument identity, so each call with a new ``cu_seqlens`` leaves that tensor and three small
results allocated (``cached``, keyed by identity; ``cu_seqlens`` is ``retained``).

The device: ``check_shared_mem`` and ``IS_NVIDIA_HOPPER`` choose Triton tile sizes and autotune
candidates; no buffer that the host code allocates takes its size from them (``chunk_kda_bwd_intra``
fixes ``BK = min(32, next_power_of_2(K))``, ``recompute_w_u_fwd`` fixes ``BK = BV = 64``). The model
therefore takes the device for the record and is the same on H200 and B300.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from livebytes.estimator.compiler import equal_head_dims
from livebytes.estimator.buffers import Group, LifetimeModel
from livebytes.estimator.declare import Contract, Declaration, Input, next_power_of_2, pow2_tile, source_root
from livebytes.estimator.devices import get_device
from livebytes.lifetimes.aten_reduce import ONE_OUTPUT_NOT_MODELLED, accumulation_scratch, leading_sum_scratch
from livebytes.lifetimes.fla_l2norm import l2norm_backward, l2norm_forward
from livebytes.estimator.symbols import DK, DV, H, HV, MBS, T, cdiv, chunks_per_batch

BT = 64                      # chunk_size (chunk_kda default; the report uses it)
BC = 16                      # sub-chunk of chunk_kda_fwd_intra
NT = chunks_per_batch(BT)    # chunks over the packed batch: len(prepare_chunk_indices(cu_seqlens, 64))
NK_INTRA = cdiv(DK, 32)      # chunk_kda_bwd_intra: NK = cdiv(K, BK), BK = min(32, next_pow2(K)) (exact for K >= 32)
NT_GATE = cdiv(T, 32)        # kda_gate_bwd: NT = cdiv(T, BT) with BT = 32 over the packed tokens

# Autotune keys: the values of each decorator's key=[...] at our call (flags as numbers: IS_VARLEN 1 with
# cu_seqlens, REVERSE, STATE_V_FIRST 0, USE_G 0 because KDA passes gk). None depends on T but l2norm's.
GATE_CUMSUM_KEY = (HV, DK, BT, 1, 0)                  # kda_gate_chunk_cumsum_vector_kernel: H, S, BT, IS_VARLEN, REVERSE
SUB_CHUNK_KEY = (BT, BC, HV)                          # chunk_kda_fwd_kernel_intra_sub_chunk: BT, BC, HV
TOKEN_PARALLEL_KEY = (DK, H, HV)                      # chunk_kda_fwd_kernel_intra_token_parallel: K, H, HV
INTER_SOLVE_KEY = (H, HV, DK, BT, BC, BT // BC)       # chunk_kda_fwd_kernel_inter_solve_fused: H, HV, K, BT, BC, NC
W_U_KEY = (H, HV, DK, DV, BT, 64, 64, 1)              # recompute_w_u_fwd_kda_kernel: H, HV, K, V, BT, BK, BV, IS_VARLEN
FWD_H_KEY = (HV, HV, DK, DV, BT, 0)                   # ..._fwd_kernel_h_blockdim64: H, HV, K, V, BT, STATE_V_FIRST; H from kg: HV
GLA_O_KEY = (BT, HV, 0, DK, DV)                       # chunk_gla_fwd_kernel_o: BT, HV, STATE_V_FIRST, K, V
DAV_KEY = (H, HV, DK, DV, BT, pow2_tile(DK, 128), pow2_tile(DV, 128))   # chunk_kda_bwd_kernel_dAv: ..., BK, BV (CONST_TILING 128)
DHU_KEY = (HV, HV, DK, DV, BT, 0, 0)                  # ..._bwd_kernel_dhu_blockdim64: H, HV, K, V, BT, USE_G, STATE_V_FIRST; H from qg: HV
WY_DQKG_KEY = (BT, HV, 0, DK, DV)                     # chunk_kda_bwd_kernel_wy_dqkg_fused: BT, HV, STATE_V_FIRST, K, V
BWD_INTRA_KEY = (sp.Min(32, next_power_of_2(DK)), BT // BC, BT, HV)   # chunk_kda_bwd_kernel_intra: BK, NC, BT, HV
GATE_BWD_KEY = (HV, DK)                               # kda_gate_bwd_kernel: H, D (g is [T, HV, K])


def cumsum_vector_key(reverse: int) -> tuple:
    """chunk_local_cumsum_vector_kernel's key B, H, S, BT, IS_VARLEN, REVERSE (cumsum.py:86) for g [1, T, HV, K]."""
    return (1, HV, DK, BT, 1, reverse)

src = source_root("fla")


@dataclass(frozen=True)
class FlaVersion:
    """What one FLA version allocates differently; a new version overrides fields of another (``derive``)."""

    version: str
    origin: str                    # where the code was read
    intra_grad_dtype: str | None   # dtype of dq2/dk2 in chunk_kda_bwd_intra; None = that of the fp32 stage dq
    beta_sigmoid_dtype: str        # output of fused_beta_sigmoid_fwd
    evidence: str
    covers: str
    default_device: str = "H200"
    forward_model: bool = True     # also register fla-kda-fwd@VERSION (forward only, no grad)

    def derive(self, **overrides) -> "FlaVersion":
        return replace(self, **overrides)


FLA_0_6_0 = FlaVersion(
    version="0.6.0", origin="fla-core 0.6.0 (PyPI)", intra_grad_dtype=None, beta_sigmoid_dtype="fp32",
    evidence="ops/kda/chunk_intra.py:981 chunk_kda_bwd_intra: dq2 = torch.empty_like(dq) with dq the fp32 stage buffer; "
             "ops/common/gate.py:59 fused_beta_sigmoid_fwd: y = torch.empty_like(x, dtype=torch.float32)",
    covers="fla-core 0.6.0 forward + backward, report or plain contract, recompute on or off",
)

VERSIONS: tuple[FlaVersion, ...] = (
    FLA_0_6_0,
    FLA_0_6_0.derive(
        version="07b80f27", origin="FLA snapshot 07b80f2715cf (not public): the 0.6.0 code path with the report's dtypes",
        intra_grad_dtype="bf16", beta_sigmoid_dtype="bf16", default_device="B300", forward_model=False,
        evidence="KDA memory report, storage table: 'FLA BF16 dq2/dk2 and FP32 dg2' (16.000 GiB at H128/128K) and "
                 "forward-saved activations 12.156 GiB = normalised Q/K 8 + Aqk/Akk 4 + rstd 0.125 + a 2-byte beta 0.031",
        covers="the KDA memory report's FLA snapshot; fla-core 0.6.0 code path with the report's bf16 dq2/dk2 and bf16 sigmoid beta",
    ),
)

CHUNK_KDA = src("ops/kda/chunk.py", "chunk_kda", 216, "def chunk_kda(q, k, v, g, beta, ..., cu_seqlens)")
TENSOR_CACHE = src("utils/decorators.py", "tensor_cache", 77, "cached.append((args, kwargs, result))")

# The caller's tensors, FLA's varlen layout [1, T, H, D]; report: raw gate and beta, fp32 A_log / dt_bias.
REPORT = Contract("report", CHUNK_KDA, (
    Input("q", (T, H, DK), "bf16"),                                # [T, H, K] bf16
    Input("k", (T, H, DK), "bf16"),                                # [T, H, K] bf16
    Input("v", (T, HV, DV), "bf16"),                               # [T, HV, V] bf16
    Input("g", (T, HV, DK), "bf16", note="raw gate logits"),       # [T, HV, K] bf16
    Input("beta", (T, HV), "bf16"),                                # [T, HV] bf16
    Input("A_log", (HV,), "fp32"),                                 # [HV] fp32
    Input("dt_bias", (HV * DK,), "fp32"),                          # [HV*K] fp32
    Input("cu_seqlens", (MBS + 1,), "int64", note="tensor_cache keeps it referenced", retained=True),  # [N+1] int64
    Input("dO", (T, HV, DV), "bf16", backward_only=True),          # [T, HV, V] bf16
))
PLAIN = Contract("plain", CHUNK_KDA, tuple(
    i if i.name not in ("g", "beta") else Input(i.name, i.shape, "fp32", "log-space decay" if i.name == "g" else "")
    for i in REPORT.inputs if i.name not in ("A_log", "dt_bias")))
CONTRACTS = {c.name: c for c in (REPORT, PLAIN)}


@dataclass(frozen=True)
class Config:
    v: FlaVersion
    report: bool
    recompute: bool
    forward_only: bool
    gva: bool
    sm90: bool = True        # compute capability 9.0 (the H200, where dhu's failing configs were measured, and the H100)
    safe_gate: bool | None = None   # None: the contract's (report: on, plain: off); picks the forward intra kernel
    state_v_first: int = 0          # the state layout flag in four kernels' autotune keys (no buffer changes size)
    sms: int = 0                    # the device's SM count: ATen's global reduce of the gate's sums (aten_reduce)
    threads_per_sm: int = 0         # the device's resident threads per SM: the same reduce's target grid

    @property
    def safe(self) -> bool:
        return self.report if self.safe_gate is None else self.safe_gate

    def svf(self, key: tuple, at: int) -> tuple:
        """``key`` with its STATE_V_FIRST entry (index ``at``) set to this call's flag."""
        return key[:at] + (self.state_v_first,) + key[at + 1:]

    @property
    def intra_dtype(self) -> str:
        return self.v.intra_grad_dtype or "fp32"

    @property
    def saved_until(self) -> str:
        return "fwd.output" if self.forward_only else "bwd.return"


def fails_as_measured(device: str) -> bool:
    """Whether dhu's configs fail to launch on ``device`` (a preset name) as measured on the H200: a device of compute
    capability 9.0 runs the same sm90 code against the same 227 KiB of shared memory per block. A model built without
    a device (``device`` empty) claims none."""
    return bool(device) and get_device(device).capability == (9, 0)


def refuse(shape, device) -> str | None:
    """What chunk_kda itself refuses (its asserts and ValueErrors), or what this model does not cover."""
    if shape.dim > 256:
        return f"FLA chunk_kda supports key head dim <= 256 (chunk.py: 'Currently we only support key headdim <=256'), got {shape.dim}"
    if shape.dim < 32:
        return f"this model covers key head dim >= 32 (chunk_kda_bwd_intra's BK = 32), got {shape.dim}"
    return None


def build(version: FlaVersion = FLA_0_6_0, contract: str = "report", recompute: bool = True,
          forward_only: bool = False, device: str = "", gva: bool = False, safe_gate: bool | None = None,
          state_v_first: bool = False, sms: int | None = None, threads_per_sm: int | None = None) -> LifetimeModel:
    """``gva``: value heads HV are a multiple G > 1 of the q/k heads H (grouped value attention); the
    backward then sums dq and dk over each group of G value heads into new [T, H, K] tensors. ``safe_gate`` and
    ``state_v_first`` (a caller's other flags: FLA's KimiDeltaAttention layer passes safe_gate=False,
    state_v_first=True) change which kernels autotune and their keys, no buffer."""
    if contract not in CONTRACTS:
        raise ValueError(f"contract must be one of {tuple(CONTRACTS)}")
    facts = get_device(device or version.default_device)
    c = Config(version, contract == "report", recompute, forward_only, gva, fails_as_measured(device), safe_gate,
               int(state_v_first), sms or facts.sm_count, threads_per_sm or facts.max_threads_per_sm)
    d = Declaration()
    d.inputs(CONTRACTS[contract], backward=not forward_only, note="inputs, dO and the packed boundaries exist before the step")
    _chunk_indices(d)
    if c.report:
        _forward_transforms(d, c)
    _forward(d, c)
    if not forward_only:
        _backward_recompute(d, c)
        _backward_chunk(d, c)
        _backward_intra(d, c)
        (_backward_report_tail if c.report else _backward_plain_tail)(d, c)
    v = c.v
    return d.freeze(
        key=f"fla-kda{'-fwd' if forward_only else ''}@{v.version}", implementation="FLA chunk_kda (Triton)",
        version=v.version, device=device, notes=(v.evidence,),
        summary=("forward only, no grad" if forward_only else "forward + backward") +
                f"; {contract} contract; recompute {'on' if recompute else 'off (disable_recompute=True)'}; {v.origin}",
        options=(("contract", contract), ("recompute", recompute), ("forward_only", forward_only), ("gva", gva)),
        not_modelled=("temporaries of the first call only (tensor_cache misses)",
                      "initial state, final state and their gradients (the configuration has none)",
                      "context parallelism and CUDA-graph static buffers (use_graph)",
                      "off sm90 (H100/H200): which autotune configs fail to launch, so which arguments a cold first "
                      "call keeps until the next garbage collection (measured on the H200 only)",
                      *((f"HV = 1: {ONE_OUTPUT_NOT_MODELLED} (kda_gate_bwd's dA.sum(0), gate.py:319)",)
                        if c.report and not forward_only else ())),
    )


def _chunk_indices(d: Declaration) -> None:
    """ChunkKDAFunction.forward: prepare_chunk_indices (and prepare_lens inside it), kept by tensor_cache."""
    d.step("fwd.chunk_indices", "forward", src("ops/kda/chunk.py", "ChunkKDAFunction.forward", 82,
                                               "chunk_indices = prepare_chunk_indices("))
    d.buffer("chunk_indices", Group.SCRATCH, (NT, 2), "int64",                                   # [NT, 2] int64
             src("ops/utils/index.py", "prepare_chunk_indices", 164, "return torch.stack([seg_id, intra_chunk_idx], 1).to(cu_seqlens)"),
             note="tensor_cache keeps it", cached=True, cache_fn="prepare_chunk_indices")
    d.buffer("seq_lens", Group.SCRATCH, (MBS,), "int64",                                         # [N] int64
             src("ops/utils/index.py", "prepare_lens", 42, "return torch.diff(cu_seqlens)"),
             note="tensor_cache keeps it", cached=True)


def _forward_transforms(d: Declaration, c: Config) -> None:
    """Report contract: in-kernel l2norm of q and k and the beta sigmoid, saved for backward."""
    for x in ("q", "k"):
        l2norm_forward(d, x, src("ops/kda/chunk.py", "ChunkKDAFunction.forward", 58 if x == "q" else 59,
                                 f"{x}, {x}_rstd = l2norm_fwd({x})"), c.saved_until)
    d.step("fwd.beta_sigmoid", "forward", src("ops/kda/chunk.py", "ChunkKDAFunction.forward", 63,
                                              "beta = fused_beta_sigmoid(x=beta_raw, ...)"))
    fp32 = c.v.beta_sigmoid_dtype == "fp32"
    d.buffer("beta_sigmoid", Group.SAVED, (T, HV), c.v.beta_sigmoid_dtype,                        # [T, HV]
             src("ops/common/gate.py", "fused_beta_sigmoid_fwd", 59,
                 "y = torch.empty_like(x, dtype=torch.float32)" if fp32 else "y = torch.empty_like(x)"),
             c.saved_until, note="" if fp32 else "the input dtype (the report's saved-activation total)")


def _forward(d: Declaration, c: Config) -> None:
    """chunk_kda_fwd (ops/kda/chunk_fwd.py), in launch order."""
    g_kept = not c.report or not c.recompute          # chunk_fwd.py:141 drops g when the gate runs in kernel
    cumsum = (src("ops/kda/gate.py", "kda_gate_chunk_cumsum", 502, "o = torch.empty_like(g, dtype=output_dtype or g.dtype)")
              if c.report else
              src("ops/utils/cumsum.py", "chunk_local_cumsum_vector", 322, "o = torch.empty_like(g, dtype=output_dtype or g.dtype)"))
    d.step("fwd.gate_cumsum", "forward", cumsum)
    _tune_gate_cumsum(d, c)
    d.buffer("g_cumsum_fwd", Group.SAVED if g_kept else Group.FORWARD, (T, HV, DK), "fp32", cumsum,   # [T, HV, K] fp32
             c.saved_until if g_kept else "fwd.output",
             note="saved for backward" if g_kept else "chunk_fwd.py:141 drops it before returning (use_gate_in_kernel)")
    intra = "ops/kda/chunk_intra.py"
    d.step("fwd.intra", "forward", src("ops/kda/chunk_fwd.py", "chunk_kda_fwd", 71, "... = chunk_kda_fwd_intra("))
    _tune_fwd_intra(d, c)
    d.buffer("Aqk", Group.SAVED, (T, HV, BT), "bf16", src(intra, "chunk_kda_fwd_intra", 863,
             "Aqk = torch.empty(B, T, HV, BT, device=k.device, dtype=k.dtype)"), c.saved_until)      # [T, HV, 64] bf16
    d.buffer("Akk", Group.SAVED, (T, HV, BT), "bf16", src(intra, "chunk_kda_fwd_intra", 865,
             "Akk = torch.zeros(B, T, HV, BT, device=k.device, dtype=k.dtype)"), c.saved_until)      # [T, HV, 64] bf16
    d.buffer("Akkd", Group.FORWARD, (T, HV, BC), "fp32", src(intra, "chunk_kda_fwd_intra", 867,
             "Akkd = torch.empty(B, T, HV, BC, device=k.device, dtype=torch.float32)"), "fwd.w_u")   # [T, HV, 16] fp32
    kept = not c.recompute and not c.forward_only
    _w_u(d, "fwd", "_fwd", Group.SAVED if kept else Group.FORWARD, c.saved_until if kept else "fwd.output", with_qg=kept)
    _delta_h(d, "fwd", "_fwd", Group.STATE if kept else Group.FORWARD, Group.SAVED if kept else Group.FORWARD,
             c.saved_until if kept else "fwd.output", c.svf(FWD_H_KEY, 5))
    d.buffer("chunk_offsets", Group.SCRATCH, (MBS + 1,), "int64",                                  # [N+1] int64
             src("ops/utils/index.py", "prepare_chunk_offsets", 172,
                 "return F.pad(triton.cdiv(prepare_lens(cu_seqlens), chunk_size), (1, 0), value=0).cumsum(-1)"),
             note="tensor_cache keeps it", cached=True)
    d.step("fwd.output", "forward", src("ops/kda/chunk_fwd.py", "chunk_kda_fwd", 122, "o = chunk_gla_fwd_o_gk("))
    d.autotune("chunk_gla_fwd_kernel_o", c.svf(GLA_O_KEY, 2), src("ops/gla/chunk.py", "chunk_gla_fwd_o_gk", 1013,
               "chunk_gla_fwd_kernel_o[grid]("), note="key=['BT', 'HV', 'STATE_V_FIRST', 'K', 'V'] (gla/chunk.py:359)")
    d.buffer("o", Group.INPUTS, (T, HV, DV), "bf16", src("ops/gla/chunk.py", "chunk_gla_fwd_o_gk", 1011,
             "o = torch.zeros_like(v)"), note="returned; the caller holds it")                      # [T, HV, V] bf16


CUMSUM_VECTOR_LAUNCH = src("ops/utils/cumsum.py", "chunk_local_cumsum_vector", 330, "chunk_local_cumsum_vector_kernel[grid](")


def _tune_gate_cumsum(d: Declaration, c: Config) -> None:
    """The forward gate cumsum's autotuned kernel: the fused gate (report) or the plain vector cumsum."""
    if c.report:
        d.autotune("kda_gate_chunk_cumsum_vector_kernel", GATE_CUMSUM_KEY, src("ops/kda/gate.py", "kda_gate_chunk_cumsum", 507,
                   "kda_gate_chunk_cumsum_vector_kernel[grid]("),
                   note="key=['H', 'S', 'BT', 'IS_VARLEN', 'REVERSE'] (gate.py:407), H = HV, S = K, REVERSE=False")
    else:
        d.autotune("chunk_local_cumsum_vector_kernel", cumsum_vector_key(0), CUMSUM_VECTOR_LAUNCH,
                   note="key=['B', 'H', 'S', 'BT', 'IS_VARLEN', 'REVERSE'] (cumsum.py:86), REVERSE=False")


def _tune_fwd_intra(d: Declaration, c: Config) -> None:
    """chunk_kda_fwd_intra (chunk_intra.py:869-930): the diagonal blocks (safe_gate: sub-chunk kernel, else the
    token-parallel one), then the fused inter-block + solve_tril kernel."""
    ci = "ops/kda/chunk_intra.py"
    if c.safe:     # safe_gate=True (the report contract's)
        d.autotune("chunk_kda_fwd_kernel_intra_sub_chunk", SUB_CHUNK_KEY, src(ci, "chunk_kda_fwd_intra", 872,
                   "chunk_kda_fwd_kernel_intra_sub_chunk[grid]("), note="key=['BT', 'BC', 'HV'] (chunk_intra.py:691)")
    else:
        d.autotune("chunk_kda_fwd_kernel_intra_token_parallel", TOKEN_PARALLEL_KEY,
                   src("ops/kda/chunk_intra_token_parallel.py", "chunk_kda_fwd_intra_token_parallel", 169,
                       "chunk_kda_fwd_kernel_intra_token_parallel[grid]("),
                   note="key=['K', 'H', 'HV'] (chunk_intra_token_parallel.py:29)")
    d.autotune("chunk_kda_fwd_kernel_inter_solve_fused", INTER_SOLVE_KEY, src(ci, "chunk_kda_fwd_intra", 910,
               "chunk_kda_fwd_kernel_inter_solve_fused[grid]("),
               note="key=['H', 'HV', 'K', 'BT', 'BC', 'NC'] (chunk_intra.py:43), NC = cdiv(BT, BC) = 4")


def _w_u(d: Declaration, phase: str, suffix: str, group: Group, freed: str, with_qg: bool) -> None:
    """recompute_w_u_fwd (ops/kda/wy_fast.py): w, u, qg (only when q is passed), kg."""
    d.step(f"{phase}.w_u", "forward" if phase == "fwd" else "backward",
           src("ops/kda/wy_fast.py", "recompute_w_u_fwd", 272, "def recompute_w_u_fwd("))
    wy = "ops/kda/wy_fast.py"
    d.autotune("recompute_w_u_fwd_kda_kernel", W_U_KEY, src(wy, "recompute_w_u_fwd", 297,
               "recompute_w_u_fwd_kda_kernel[(NT, B*HV)]("), signature="q, qg" if with_qg else "q=None, qg=None",
               note="key=['H', 'HV', 'K', 'V', 'BT', 'BK', 'BV', 'IS_VARLEN'] (wy_fast.py:30); BK = BV = 64 (wy_fast.py:286); "
                    "q and qg are None unless q is passed: fewer tensor dtypes in Triton's key, a key of its own")
    d.buffer(f"w{suffix}", group, (T, HV, DK), "bf16", src(wy, "recompute_w_u_fwd", 293,
             "w = torch.empty(B, T, HV, K, device=k.device, dtype=k.dtype)"), freed)              # [T, HV, K] bf16
    d.buffer(f"u{suffix}", group, (T, HV, DV), "bf16", src(wy, "recompute_w_u_fwd", 294, "u = torch.empty_like(v)"), freed)
    if with_qg:
        d.buffer(f"qg{suffix}", group, (T, HV, DK), "bf16", src(wy, "recompute_w_u_fwd", 295,
                 "qg = torch.empty(B, T, HV, K, device=k.device, dtype=k.dtype) if q is not None else None"), freed)
    d.buffer(f"kg{suffix}", group, (T, HV, DK), "bf16", src(wy, "recompute_w_u_fwd", 296,
             "kg = torch.empty(B, T, HV, K, device=k.device, dtype=k.dtype)"), freed)             # [T, HV, K] bf16


def _delta_h(d: Declaration, phase: str, suffix: str, h_group: Group, v_group: Group, freed: str, key: tuple = FWD_H_KEY) -> None:
    """chunk_gated_delta_rule_fwd_h (ops/common/chunk_delta_h.py): the chunk states h and v_new."""
    fh = "ops/common/chunk_delta_h.py"
    d.step(f"{phase}.delta_h", "forward" if phase == "fwd" else "backward",
           src(fh, "chunk_gated_delta_rule_fwd_h", 688, "def chunk_gated_delta_rule_fwd_h("))
    d.autotune("chunk_gated_delta_rule_fwd_kernel_h_blockdim64", key, src(fh, "chunk_gated_delta_rule_fwd_h", 727,
               "chunk_gated_delta_rule_fwd_kernel_h_blockdim64[grid]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'STATE_V_FIRST'] (chunk_delta_h.py:55), H = kg.shape[2] = HV "
                    "(chunk_delta_h.py:704); the backward's recompute "
                    "passes the same tensors: tuned by the forward")
    d.buffer(f"h{suffix}", h_group, (NT, HV, DK, DV), "bf16",
             src(fh, "chunk_gated_delta_rule_fwd_h", 722, "h = k.new_empty(B, NT, HV, K, V)"), freed)   # [NT, HV, K, V] bf16
    d.buffer(f"v_new{suffix}", v_group, (T, HV, DV), "bf16",
             src(fh, "chunk_gated_delta_rule_fwd_h", 725, "v_new = torch.empty_like(u) if save_new_value else None"), freed)


def _local_end(c: Config) -> str:
    """Everything chunk_kda_bwd holds in its locals dies when it returns, after the gate backward."""
    return "bwd.gate_reduce_bias" if c.report else "bwd.dg_cumsum"


def _backward_recompute(d: Declaration, c: Config) -> None:
    """chunk_kda_bwd (ops/kda/chunk_bwd.py:492-531): with recompute, the gate cumsum, w/u and h again."""
    if not c.recompute:
        return
    end = _local_end(c)
    if c.report:
        d.step("bwd.gate_cumsum", "backward", src("ops/kda/chunk_bwd.py", "chunk_kda_bwd", 494, "g = kda_gate_chunk_cumsum("))
        _tune_gate_cumsum(d, c)
        d.buffer("g_cumsum", Group.RECOMPUTE, (T, HV, DK), "fp32", src("ops/kda/gate.py", "kda_gate_chunk_cumsum", 502,
                 "o = torch.empty_like(g, dtype=output_dtype or g.dtype)"), end)                  # [T, HV, K] fp32
    _w_u(d, "bwd", "", Group.RECOMPUTE, end, with_qg=True)       # chunk_kda_bwd passes q
    _delta_h(d, "bwd", "", Group.STATE, Group.RECOMPUTE, end, c.svf(FWD_H_KEY, 5))


def _backward_chunk(d: Declaration, c: Config) -> None:
    """chunk_kda_bwd_dAv, chunk_gated_delta_rule_bwd_dhu, chunk_kda_bwd_wy_dqkg_fused."""
    bwd, end = "ops/kda/chunk_bwd.py", _local_end(c)
    d.step("bwd.dAv", "backward", src(bwd, "chunk_kda_bwd", 542, "dAqk, dv = chunk_kda_bwd_dAv("))
    d.autotune("chunk_kda_bwd_kernel_dAv", DAV_KEY, src(bwd, "chunk_kda_bwd_dAv", 358, "chunk_kda_bwd_kernel_dAv[grid]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'BK', 'BV'] (chunk_bwd.py:40); BK = min(max(next_power_of_2(K), 16), "
                    "CONST_TILING), CONST_TILING 128 from Hopper's shared memory up (chunk_bwd.py:341-348)")
    d.buffer("dAqk", Group.MATRIX_GRAD, (T, HV, BT), "fp32", src(bwd, "chunk_kda_bwd_dAv", 355,
             "dA = v.new_empty(B, T, HV, BT, dtype=torch.float)"), end)                           # [T, HV, 64] fp32
    d.buffer("dv_dAv", Group.DV, (T, HV, DV), "bf16", src(bwd, "chunk_kda_bwd_dAv", 356, "dv = torch.empty_like(do)"), "bwd.dhu")
    dhu = "ops/common/chunk_delta_h.py"
    d.step("bwd.dhu", "backward", src(bwd, "chunk_kda_bwd", 575, "dh, dh0, dv = chunk_gated_delta_rule_bwd_dhu("))
    d.autotune("chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64", c.svf(DHU_KEY, 6), src(dhu, "chunk_gated_delta_rule_bwd_dhu", 799,
               "chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64[grid]("),
               note="key=['H', 'HV', 'K', 'V', 'BT', 'BV', 'USE_G', 'STATE_V_FIRST'] (chunk_delta_h.py:366), H = qg.shape[2] = "
                    "HV (chunk_delta_h.py:769); BV is a "
                    "config parameter, not an argument: Triton leaves it out of the key. 2 of its 12 configs fail to launch "
                    "on the H200 at K = V = 128 (OutOfResources: their timings are inf in the committed capture, "
                    "validate/data/autotune_configs/), so dv, which the step drops, lives until the next compile's garbage "
                    "collection (run 7b's trace: freed inside chunk_kda_bwd_wy_dqkg_fused's JIT parse); below K = 128 "
                    "assumed to fit (not measured)",
               held_until_gc=("dv_dAv",) if c.sm90 else (), held_when=sp.Ge(DK, 128),
               # the cold kernel lists (chunk_kda, validate/data/records/): 2 of 12 never load at K = V = 128, 8 at 256,
               # none at 32 or 64; the layer's call (state_v_first) at 128 in the cold first-call boundary probes
               held_measured=(equal_head_dims(128) if c.state_v_first else equal_head_dims(32, 64, 128, 256)) if c.sm90
               else sp.false)
    d.buffer("dh", Group.STATE, (NT, HV, DK, DV), "bf16", src(dhu, "chunk_gated_delta_rule_bwd_dhu", 794,
             "dh = q.new_empty(B, NT, HV, K, V)"), end)                                           # [NT, HV, K, V] bf16
    d.buffer("dv_dhu", Group.DV, (T, HV, DV), "bf16", src(dhu, "chunk_gated_delta_rule_bwd_dhu", 796,
             "dv2 = torch.empty_like(dv)"), "bwd.wy_dqkg")
    d.step("bwd.wy_dqkg", "backward", src(bwd, "chunk_kda_bwd", 592, "dq, dk, dv, db, dg, dAkk = chunk_kda_bwd_wy_dqkg_fused("))
    d.autotune("chunk_kda_bwd_kernel_wy_dqkg_fused", c.svf(WY_DQKG_KEY, 2), src(bwd, "chunk_kda_bwd_wy_dqkg_fused", 427,
               "chunk_kda_bwd_kernel_wy_dqkg_fused[grid]("), note="key=['BT', 'HV', 'STATE_V_FIRST', 'K', 'V'] (chunk_bwd.py:135)")
    wy, stage_end = "chunk_kda_bwd_wy_dqkg_fused", "bwd.intra_db_sum"   # rebound when chunk_kda_bwd_intra returns
    d.buffer("dq_stage", Group.STAGE, (T, HV, DK), "fp32", src(bwd, wy, 419, "dq = g.new_empty(B, T, HV, K, dtype=torch.float)"), stage_end)
    d.buffer("dk_stage", Group.STAGE, (T, HV, DK), "fp32", src(bwd, wy, 420, "dk = g.new_empty(B, T, HV, K, dtype=torch.float)"), stage_end)
    d.buffer("dv", Group.DV, (T, HV, DV), "bf16", src(bwd, wy, 421, "dv2 = torch.empty_like(v)"), note="the V gradient")
    d.buffer("dg_stage", Group.STAGE, (T, HV, DK), "fp32", src(bwd, wy, 422, "dg = torch.empty_like(g, dtype=torch.float)"), stage_end)
    d.buffer("db_stage", Group.BETA_REDUCTION, (T, HV), "fp32", src(bwd, wy, 423, "db = torch.empty_like(beta, dtype=torch.float)"),
             stage_end)
    d.buffer("dAkk", Group.MATRIX_GRAD, (T, HV, BT), "fp32", src(bwd, wy, 424, "dA = torch.empty_like(A, dtype=torch.float)"), end)


def _backward_intra(d: Declaration, c: Config) -> None:
    """chunk_kda_bwd_intra, the db2 reduction inside it, the GVA head sums and the reverse dg cumsum."""
    ci, bwd = "ops/kda/chunk_intra.py", "ops/kda/chunk_bwd.py"
    # dq2/dk2 live until ChunkKDAFunction.backward replaces them (l2norm_bwd or .to(q)), or, under GVA,
    # until chunk_kda_bwd rebinds dq/dk to their sums over each group of value heads
    cast = c.intra_dtype != "bf16"
    q_end = "bwd.l2norm_q" if c.report else ("bwd.return" if cast else None)
    k_end = "bwd.l2norm_k" if c.report else ("bwd.return" if cast else None)
    d.step("bwd.intra", "backward", src(bwd, "chunk_kda_bwd", 613, "dq, dk, db, dg = chunk_kda_bwd_intra("))
    d.autotune("chunk_kda_bwd_kernel_intra", BWD_INTRA_KEY, src(ci, "chunk_kda_bwd_intra", 986, "chunk_kda_bwd_kernel_intra[grid]("),
               note="key=['BK', 'NC', 'BT', 'HV'] (chunk_intra.py:399); BK = min(32, next_power_of_2(K)) (chunk_intra.py:967)")
    d.buffer("dq2", Group.OUTPUT_GRAD, (T, HV, DK), c.intra_dtype, src(ci, "chunk_kda_bwd_intra", 981, "dq2 = torch.empty_like(dq)"),
             "bwd.gva_reduce_q" if c.gva else q_end)
    d.buffer("dk2", Group.OUTPUT_GRAD, (T, HV, DK), c.intra_dtype, src(ci, "chunk_kda_bwd_intra", 982, "dk2 = torch.empty_like(dk)"),
             "bwd.gva_reduce_k" if c.gva else k_end)
    d.buffer("db2", Group.BETA_REDUCTION, (NK_INTRA, T, HV), "fp32", src(ci, "chunk_kda_bwd_intra", 983,
             "db2 = beta.new_empty(NK, *beta.shape, dtype=torch.float)"), "bwd.intra_db_sum")     # [NK, T, HV] fp32
    d.buffer("dg2", Group.OUTPUT_GRAD, (T, HV, DK), "fp32", src(ci, "chunk_kda_bwd_intra", 984,
             "dg2 = torch.empty_like(dg, dtype=torch.float)"), "bwd.dg_cumsum")
    d.step("bwd.intra_db_sum", "backward", src(ci, "chunk_kda_bwd_intra", 1018, "db = db2.sum(0).add_(db)"),
           note="while every stage buffer is still referenced")
    d.buffer("db_sum", Group.BETA_REDUCTION, (T, HV), "fp32", src(ci, "chunk_kda_bwd_intra", 1018, "db = db2.sum(0).add_(db)"),
             "bwd.beta_sigmoid" if c.report else None)
    if c.gva:
        for x, line, end in (("q", 633, q_end), ("k", 634, k_end)):
            quote = f"d{x} = d{x}.view(*d{x}.shape[:2], H, G, d{x}.shape[-1]).sum(dim=3)"
            d.step(f"bwd.gva_reduce_{x}", "backward", src(bwd, "chunk_kda_bwd", line, quote),
                   note=f"d{x} summed over each group of value heads")
            d.buffer(f"d{x}_heads", Group.OUTPUT_GRAD, (T, H, DK), c.intra_dtype, src(bwd, "chunk_kda_bwd", line, quote), end)  # [T, H, K]
            if c.intra_dtype == "bf16":     # the report snapshot's: 0.6.0 sums fp32 stage buffers in place
                accumulation_scratch(d, f"d{x}_heads", T * HV * DK, T * H * DK, "bf16")   # fp32 [T, H, K] over 2**31 B
    d.step("bwd.dg_cumsum", "backward", src(bwd, "chunk_kda_bwd", 637, "dg = chunk_local_cumsum("), note="reverse cumsum of dg")
    d.autotune("chunk_local_cumsum_vector_kernel", cumsum_vector_key(1), CUMSUM_VECTOR_LAUNCH,
               note="key=['B', 'H', 'S', 'BT', 'IS_VARLEN', 'REVERSE'] (cumsum.py:86), REVERSE=True")
    d.buffer("dg_cumsum", Group.OUTPUT_GRAD, (T, HV, DK), "fp32", src("ops/utils/cumsum.py", "chunk_local_cumsum_vector", 322,
             "o = torch.empty_like(g, dtype=output_dtype or g.dtype)"),
             _local_end(c) if c.report else None, note="" if c.report else "the gate gradient")


def _backward_report_tail(d: Declaration, c: Config) -> None:
    """Report contract: kda_gate_bwd and its two reductions, then l2norm_bwd and the beta sigmoid backward."""
    gate, gb = "ops/kda/gate.py", "kda_gate_bwd"
    d.step("bwd.gate_bwd", "backward", src("ops/kda/chunk_bwd.py", "chunk_kda_bwd", 646, "dg, dA, dbias = kda_gate_bwd("))
    d.autotune("kda_gate_bwd_kernel", GATE_BWD_KEY, src(gate, gb, 300, "kda_gate_bwd_kernel[(NT, H)]("),
               note="key=['H', 'D'] (gate.py:171), H = g.shape[-2] = HV")
    d.buffer("dg", Group.OUTPUT_GRAD, (T, HV, DK), "bf16", src(gate, gb, 296, "dg = torch.empty_like(g)"), note="the gate gradient")
    d.buffer("dA_log_part", Group.SCRATCH, (NT_GATE, HV), "fp32",                                  # [cdiv(T, 32), HV] fp32
             src(gate, gb, 297, "dA = g.new_empty(NT, H, dtype=torch.float32) if A_log is not None else None"), "bwd.gate_reduce_a")
    d.buffer("dt_bias_part", Group.SCRATCH, (NT_GATE, HV * DK), "fp32",                            # [cdiv(T, 32), HV*K] fp32
             src(gate, gb, 298, "dbias = g.new_empty(NT, H * K, dtype=torch.float32) if dt_bias is not None else None"),
             "bwd.gate_reduce_bias")
    reduce_a = src(gate, gb, 319, "dA = dA.sum(0).view_as(A_log).type_as(A_log) if A_log is not None else None")
    d.step("bwd.gate_reduce_a", "backward", reduce_a, note="rebinding dA frees the [NT, H] partials")
    d.buffer("dA_log", Group.OUTPUT_GRAD, (HV,), "fp32", reduce_a)
    leading_sum_scratch(d, "dA_log", NT_GATE, HV, c.sms, "fp32", threads_per_sm=c.threads_per_sm)      # the [NT, HV] partials' sum
    reduce_bias = src(gate, gb, 320, "dbias = dbias.sum(0).to(dt_bias) if dt_bias is not None else None")
    d.step("bwd.gate_reduce_bias", "backward", reduce_bias)
    d.buffer("ddt_bias", Group.OUTPUT_GRAD, (HV * DK,), "fp32", reduce_bias)
    leading_sum_scratch(d, "ddt_bias", NT_GATE, HV * DK, c.sms, "fp32", threads_per_sm=c.threads_per_sm)  # [NT, HV*K]'s sum
    for x, line in (("q", 204), ("k", 205)):
        l2norm_backward(d, x, src("ops/kda/chunk.py", "ChunkKDAFunction.backward", line, f"d{x} = l2norm_bwd({x}, {x}_rstd, d{x})"))
    d.step("bwd.beta_sigmoid", "backward", src("ops/kda/chunk.py", "ChunkKDAFunction.backward", 207,
                                               "db = fused_beta_sigmoid_bwd(x=beta_raw, dy=db, ...)"))
    d.buffer("dbeta", Group.OUTPUT_GRAD, (T, HV), "bf16", src("ops/common/gate.py", "fused_beta_sigmoid_bwd", 75,
             "dx = torch.empty_like(x)"), note="the beta gradient")
    d.step("bwd.return", "backward", src("ops/kda/chunk.py", "ChunkKDAFunction.backward", 209, "return (dq.to(q), dk.to(k), ..."),
           note="dq.to(q) etc. are no-ops: the dtypes already match")


def _backward_plain_tail(d: Declaration, c: Config) -> None:
    """Plain contract: ChunkKDAFunction.backward casts the fp32 dq2 / dk2 to the inputs' bf16."""
    ret = src("ops/kda/chunk.py", "ChunkKDAFunction.backward", 209, "return (dq.to(q), dk.to(k), dv.to(v), dg.to(g_input), ...")
    cast = c.intra_dtype != "bf16"
    d.step("bwd.return", "backward", ret, note="dq.to(q), dk.to(k) cast fp32 -> bf16 while the fp32 tensors are alive" if cast else "")
    if cast:
        d.buffer("dq", Group.OUTPUT_GRAD, (T, H, DK), "bf16", ret)                                # [T, H, K] bf16
        d.buffer("dk", Group.OUTPUT_GRAD, (T, H, DK), "bf16", ret)                                # [T, H, K] bf16


# ---------------------------------------------------------------- registration: every VERSIONS entry is a model

from livebytes.estimator.registry import ModelSpec, register  # noqa: E402  (the registration block closes the file)

OPTIONS = {"contract": ("report", "plain"), "recompute": (True, False), "gva": (False, True)}
FORWARD_OPTIONS = {"contract": ("report", "plain"), "gva": (False, True)}


def _builder(version: FlaVersion, forward_only: bool):
    def build_for(device, contract="report", recompute=True, gva=False):
        return build(version=version, contract=contract, recompute=recompute, forward_only=forward_only,
                     device=device.name, gva=gva, sms=device.sm_count, threads_per_sm=device.max_threads_per_sm)
    return build_for


def _register(v: FlaVersion) -> None:
    register(ModelSpec(
        key=f"fla-kda@{v.version}", implementation="FLA chunk_kda (Triton)", version=v.version, covers=v.covers,
        builder=_builder(v, False), refuse=refuse, options=OPTIONS, default_device=v.default_device,
    ))
    if v.forward_model:
        register(ModelSpec(
            key=f"fla-kda-fwd@{v.version}", implementation="FLA chunk_kda (Triton)", version=v.version,
            covers=f"{v.origin} forward only under torch.no_grad (inference peak)",
            builder=_builder(v, True), refuse=refuse, options=FORWARD_OPTIONS, default_device=v.default_device, phase="fwd",
        ))


for _v in VERSIONS:
    _register(_v)

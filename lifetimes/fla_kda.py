"""FLA's native Triton KDA (``fla.ops.kda.chunk_kda``), forward and backward, as buffer records.

Read from fla-core 0.6.0 (PyPI wheel ``fla_core-0.6.0-py3-none-any.whl``); the report's snapshot
07b80f27 is not public, so its model is the 0.6.0 code path with the two allocations the report's
storage table shows differently (``SNAPSHOT_07B80F27`` below names them and the evidence).

Configurations (``contract``):
- ``report``: the KDA memory report's seed configuration: in-kernel Q/K L2 norm, beta sigmoid,
  gate activation with safe gate (lower bound -5), raw bf16 gate, fp32 A_log / dt_bias, all seven
  inputs differentiated, native [K, V] state layout, no initial or final state.
- ``plain``: the contract of the cuDNN Hopper engines: pre-normalised bf16 q/k, fp32 log-space g,
  fp32 post-sigmoid beta, no in-kernel transforms, no safe gate, no A_log / dt_bias.

The device: ``check_shared_mem`` and ``IS_NVIDIA_HOPPER`` in these files choose Triton tile sizes
(``BK_LIST``, ``BV_LIST``, ``CONST_TILING``, ``NUM_WARPS``) and autotune candidates; no buffer
that the host code allocates takes its size from them (``chunk_kda_bwd_intra`` fixes
``BK = min(32, next_power_of_2(K))``, ``recompute_w_u_fwd`` fixes ``BK = BV = 64``). The model
therefore takes the device for the record and is the same on H200 and B300.
"""
from __future__ import annotations

from dataclasses import dataclass


from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source, Step
from livebytes.estimator.symbols import DK, DV, H, HV, MBS, T, cdiv, chunks_per_batch

BT = 64                      # chunk_size (chunk_kda default; the report uses it)
BC = 16                      # sub-chunk of chunk_kda_fwd_intra
NT = chunks_per_batch(BT)    # chunks over the packed batch: len(prepare_chunk_indices(cu_seqlens, 64))
NK_INTRA = cdiv(DK, 32)      # chunk_kda_bwd_intra: NK = cdiv(K, BK), BK = min(32, next_pow2(K)) (exact for K >= 32)
WARMUP_TOKENS = 1024         # livebytes.validate.runner: warmup at MBS 1 x 1024 tokens of the same (H, D)
NT_GATE = cdiv(T, 32)        # kda_gate_bwd: NT = cdiv(T, BT) with BT = 32 over the packed tokens


@dataclass(frozen=True)
class FlaVersion:
    version: str
    origin: str                  # where the code was read
    intra_grad_dtype: str | None  # dtype of dq2/dk2 in chunk_kda_bwd_intra; None = that of the fp32 stage dq
    beta_sigmoid_dtype: str      # output of fused_beta_sigmoid
    evidence: str


FLA_0_6_0 = FlaVersion(
    version="0.6.0",
    origin="fla-core 0.6.0 (PyPI)",
    intra_grad_dtype=None,
    beta_sigmoid_dtype="fp32",
    evidence="chunk_intra.py chunk_kda_bwd_intra: dq2 = torch.empty_like(dq) with dq the fp32 stage buffer; "
             "ops/common/gate.py fused_beta_sigmoid_fwd: torch.empty_like(x, dtype=torch.float32)",
)

SNAPSHOT_07B80F27 = FlaVersion(
    version="07b80f27",
    origin="FLA snapshot 07b80f2715cf (not public): the 0.6.0 code path with the report's dtypes",
    intra_grad_dtype="bf16",
    beta_sigmoid_dtype="bf16",
    evidence="KDA memory report, storage table: 'FLA BF16 dq2/dk2 and FP32 dg2' (16.000 GiB at H128/128K) and "
             "forward-saved activations 12.156 GiB = normalised Q/K 8 + Aqk/Akk 4 + rstd 0.125 + a 2-byte beta 0.031",
)

VERSIONS = {v.version: v for v in (FLA_0_6_0, SNAPSHOT_07B80F27)}

CONTRACTS = ("report", "plain")


def _src(file: str, function: str, detail: str = "") -> Source:
    return Source(f"fla/{file}", function, detail)


def refuse(shape) -> str | None:
    """What chunk_kda itself refuses (its asserts and ValueErrors), or what this model does not cover."""
    if shape.dim > 256:
        return f"FLA chunk_kda supports key head dim <= 256 (chunk.py: 'Currently we only support key headdim <=256'), got {shape.dim}"
    if shape.dim < 32:
        return f"this model covers key head dim >= 32 (chunk_kda_bwd_intra's BK = 32), got {shape.dim}"
    return None


def build(version: str = "0.6.0", contract: str = "report", recompute: bool = True,
          forward_only: bool = False, device: str = "", gva: bool = False) -> LifetimeModel:
    """``gva``: value heads HV are a multiple G > 1 of the q/k heads H (grouped value attention); the
    backward then sums dq and dk over each group of G value heads into new [T, H, K] tensors."""
    v = VERSIONS[version]
    if contract not in CONTRACTS:
        raise ValueError(f"contract must be one of {CONTRACTS}")
    report = contract == "report"
    intra_dtype = v.intra_grad_dtype or "fp32"
    beta_dtype = "bf16" if report else "fp32"          # raw logits vs post-sigmoid fp32
    gate_dtype = "bf16" if report else "fp32"          # raw gate vs log-space fp32

    steps: list[Step] = []
    buffers: list[Buffer] = []

    def step(name, phase, file=None, function=None, note=""):
        steps.append(Step(name, phase, _src(file, function) if file else None, note))

    def add(name, group, shape, dtype, src, at, freed=None, note="", cached=False):
        buffers.append(Buffer(name, group, shape, dtype, src, at, freed, note=note, cached=cached))

    # ---- what the harness owns for the whole measured step
    step("harness.warmup", "harness", note="what the warmup shape's calls left cached")
    step("harness.inputs", "harness", note="inputs, dO and the packed boundaries exist before the step")
    harness = Source("livebytes/validate/runner.py", "fla_inputs")
    add("q", Group.INPUTS, (T, H, DK), "bf16", harness, "harness.inputs")                    # [T, H, K] bf16
    add("k", Group.INPUTS, (T, H, DK), "bf16", harness, "harness.inputs")                    # [T, H, K] bf16
    add("v", Group.INPUTS, (T, HV, DV), "bf16", harness, "harness.inputs")                   # [T, HV, V] bf16
    add("g", Group.INPUTS, (T, HV, DK), gate_dtype, harness, "harness.inputs",
        note="raw gate logits" if report else "log-space decay")                              # [T, HV, K]
    add("beta", Group.INPUTS, (T, HV), beta_dtype, harness, "harness.inputs")                # [T, HV]
    if report:
        add("A_log", Group.INPUTS, (HV,), "fp32", harness, "harness.inputs")                 # [HV] fp32
        add("dt_bias", Group.INPUTS, (HV * DK,), "fp32", harness, "harness.inputs")          # [HV*K] fp32
    add("cu_seqlens", Group.INPUTS, (MBS + 1,), "int64", harness, "harness.inputs")          # [N+1] int64
    if not forward_only:
        add("dO", Group.INPUTS, (T, HV, DV), "bf16", harness, "harness.inputs")              # [T, HV, V] bf16

    # tensor_cache keeps the last results alive across calls (fla/utils/decorators.py tensor_cache)
    step("fwd.chunk_indices", "forward", "ops/utils/index.py", "prepare_chunk_indices")
    add("chunk_indices", Group.SCRATCH, (NT, 2), "int64",
        _src("ops/utils/index.py", "prepare_chunk_indices", "torch.stack(...).to(cu_seqlens); tensor_cache keeps it"),
        "fwd.chunk_indices", note="cached across steps", cached=True)                       # [NT, 2] int64
    add("seq_lens", Group.SCRATCH, (MBS,), "int64",
        _src("ops/utils/index.py", "prepare_lens", "torch.diff(cu_seqlens); tensor_cache keeps it"),
        "fwd.chunk_indices", note="cached across steps", cached=True)                       # [N] int64

    # The validator warms up at MBS 1 x 1024 tokens first; tensor_cache keeps that call's arguments and
    # results (cu_seqlens and what was derived from it), so they stay allocated while the target is measured.
    cache = _src("utils/decorators.py", "tensor_cache", "keeps the last FLA_TENSOR_CACHE_SIZE=4 (args, result) pairs")
    for name, shape in (("warmup_cu_seqlens", (2,)), ("warmup_chunk_indices", (WARMUP_TOKENS // BT, 2)),
                        ("warmup_seq_lens", (1,)), ("warmup_chunk_offsets", (2,))):
        add(name, Group.WARMUP, shape, "int64", cache, "harness.warmup")                    # 512-byte blocks

    last_fwd = "fwd.output"
    saved_until = None if forward_only else "bwd.return"
    if forward_only:
        saved_until = last_fwd

    # ---- forward (ChunkKDAFunction.forward -> chunk_kda_fwd)
    if report:
        step("fwd.l2norm_q", "forward", "modules/norm/l2norm.py", "l2norm_fwd")
        add("q_normed", Group.SAVED, (T, H, DK), "bf16", _src("modules/norm/l2norm.py", "l2norm_fwd", "y = torch.empty_like(x)"),
            "fwd.l2norm_q", saved_until)                                                     # [T, H, K] bf16
        add("q_rstd", Group.SAVED, (T * H,), "fp32", _src("modules/norm/l2norm.py", "l2norm_fwd", "rstd = torch.empty((T,), fp32)"),
            "fwd.l2norm_q", saved_until)                                                     # [T*H] fp32
        step("fwd.l2norm_k", "forward", "modules/norm/l2norm.py", "l2norm_fwd")
        add("k_normed", Group.SAVED, (T, H, DK), "bf16", _src("modules/norm/l2norm.py", "l2norm_fwd", "y = torch.empty_like(x)"),
            "fwd.l2norm_k", saved_until)                                                     # [T, H, K] bf16
        add("k_rstd", Group.SAVED, (T * H,), "fp32", _src("modules/norm/l2norm.py", "l2norm_fwd", "rstd = torch.empty((T,), fp32)"),
            "fwd.l2norm_k", saved_until)                                                     # [T*H] fp32
        step("fwd.beta_sigmoid", "forward", "ops/common/gate.py", "fused_beta_sigmoid_fwd")
        add("beta_sigmoid", Group.SAVED, (T, HV), v.beta_sigmoid_dtype,
            _src("ops/common/gate.py", "fused_beta_sigmoid_fwd", "y = torch.empty_like(x, dtype=torch.float32)"
                 if v.beta_sigmoid_dtype == "fp32" else "output in the input dtype (report's saved-activation total)"),
            "fwd.beta_sigmoid", saved_until)                                                 # [T, HV]

    # gate cumsum: saved in the plain contract, dropped by forward when the gate runs in kernel
    step("fwd.gate_cumsum", "forward", "ops/kda/gate.py" if report else "ops/utils/cumsum.py",
         "kda_gate_chunk_cumsum" if report else "chunk_local_cumsum_vector")
    g_cum_kept = (not report) or (not recompute)
    add("g_cumsum_fwd", Group.SAVED if g_cum_kept else Group.FORWARD, (T, HV, DK), "fp32",
        _src("ops/kda/gate.py", "kda_gate_chunk_cumsum", "o = torch.empty_like(g, dtype=output_dtype=float)") if report else
        _src("ops/utils/cumsum.py", "chunk_local_cumsum_vector", "o = torch.empty_like(g, dtype=torch.float)"),
        "fwd.gate_cumsum", saved_until if g_cum_kept else last_fwd,
        note="chunk_fwd.py drops it before returning (use_gate_in_kernel)" if not g_cum_kept else "saved for backward")  # [T, HV, K] fp32

    step("fwd.intra", "forward", "ops/kda/chunk_intra.py", "chunk_kda_fwd_intra")
    intra = "chunk_kda_fwd_intra"
    add("Aqk", Group.SAVED, (T, HV, BT), "bf16", _src("ops/kda/chunk_intra.py", intra, "torch.empty(B, T, HV, BT, dtype=k.dtype)"),
        "fwd.intra", saved_until)                                                            # [T, HV, 64] bf16
    add("Akk", Group.SAVED, (T, HV, BT), "bf16", _src("ops/kda/chunk_intra.py", intra, "torch.zeros(B, T, HV, BT, dtype=k.dtype)"),
        "fwd.intra", saved_until)                                                            # [T, HV, 64] bf16
    add("Akkd", Group.FORWARD, (T, HV, BC), "fp32", _src("ops/kda/chunk_intra.py", intra, "fp32 diagonal 16x16 blocks"),
        "fwd.intra", "fwd.w_u")                                                              # [T, HV, 16] fp32

    step("fwd.w_u", "forward", "ops/kda/wy_fast.py", "recompute_w_u_fwd")
    fwd_kept = not recompute and not forward_only
    keep = saved_until if fwd_kept else last_fwd
    grp = Group.SAVED if fwd_kept else Group.FORWARD
    wy = "recompute_w_u_fwd"
    add("w_fwd", grp, (T, HV, DK), "bf16", _src("ops/kda/wy_fast.py", wy, "w = torch.empty(B, T, HV, K, dtype=k.dtype)"), "fwd.w_u", keep)
    add("u_fwd", grp, (T, HV, DV), "bf16", _src("ops/kda/wy_fast.py", wy, "u = torch.empty_like(v)"), "fwd.w_u", keep)
    if fwd_kept:  # q is passed only when disable_recompute=True
        add("qg_fwd", grp, (T, HV, DK), "bf16", _src("ops/kda/wy_fast.py", wy, "qg allocated when q is given"), "fwd.w_u", keep)
    add("kg_fwd", grp, (T, HV, DK), "bf16", _src("ops/kda/wy_fast.py", wy, "kg = torch.empty(B, T, HV, K, dtype=k.dtype)"), "fwd.w_u", keep)

    step("fwd.delta_h", "forward", "ops/common/chunk_delta_h.py", "chunk_gated_delta_rule_fwd_h")
    fh = "chunk_gated_delta_rule_fwd_h"
    add("h_fwd", Group.STATE if fwd_kept else Group.FORWARD, (NT, HV, DK, DV), "bf16",
        _src("ops/common/chunk_delta_h.py", fh, "h = k.new_empty(B, NT, HV, K, V)"), "fwd.delta_h", keep)       # [NT, HV, K, V] bf16
    add("v_new_fwd", grp, (T, HV, DV), "bf16", _src("ops/common/chunk_delta_h.py", fh, "v_new = torch.empty_like(u)"), "fwd.delta_h", keep)
    add("chunk_offsets", Group.SCRATCH, (MBS + 1,), "int64",
        _src("ops/utils/index.py", "prepare_chunk_offsets", "tensor_cache keeps it"), "fwd.delta_h", note="cached across steps", cached=True)

    step("fwd.output", "forward", "ops/gla/chunk.py", "chunk_gla_fwd_o_gk")
    add("o", Group.INPUTS, (T, HV, DV), "bf16", _src("ops/gla/chunk.py", "chunk_gla_fwd_o_gk", "o = torch.zeros_like(v)"),
        "fwd.output", note="returned; the caller holds it")                                  # [T, HV, V] bf16

    if not forward_only:
        _backward(add, step, v, report, recompute, intra_dtype, gva)

    options = (("contract", contract), ("recompute", recompute), ("forward_only", forward_only), ("gva", gva))
    key = f"fla-kda{'-fwd' if forward_only else ''}@{v.version}"
    not_modelled = (
        "temporaries of the first call only (tensor_cache misses, Triton autotune restore copies)",
        "initial state, final state and their gradients (the configuration has none)",
        "context parallelism and CUDA-graph static buffers (use_graph)",
    )
    return LifetimeModel(
        key=key, implementation="FLA chunk_kda (Triton)", version=v.version,
        summary=("forward only, no grad" if forward_only else "forward + backward") +
                f"; {contract} contract; recompute {'on' if recompute else 'off (disable_recompute=True)'}; {v.origin}",
        steps=tuple(steps), buffers=tuple(buffers), options=options, not_modelled=not_modelled, device=device,
        notes=(v.evidence,),
    )


def _backward(add, step, v: FlaVersion, report: bool, recompute: bool, intra_dtype: str, gva: bool) -> None:
    """ChunkKDAFunction.backward -> chunk_kda_bwd, in launch order."""
    bwd = "ops/kda/chunk_bwd.py"
    # everything chunk_kda_bwd holds in its locals dies when it returns, after the gate backward
    local_end = "bwd.gate_reduce" if report else "bwd.dg_cumsum"
    if report and recompute:
        step("bwd.gate_cumsum", "backward", "ops/kda/gate.py", "kda_gate_chunk_cumsum")
        add("g_cumsum", Group.RECOMPUTE, (T, HV, DK), "fp32",
            _src("ops/kda/gate.py", "kda_gate_chunk_cumsum", "recomputed in chunk_kda_bwd"), "bwd.gate_cumsum", local_end)
    if recompute:
        step("bwd.w_u", "backward", "ops/kda/wy_fast.py", "recompute_w_u_fwd")
        wy = "recompute_w_u_fwd"
        add("w", Group.RECOMPUTE, (T, HV, DK), "bf16", _src("ops/kda/wy_fast.py", wy, "w = torch.empty(B, T, HV, K)"), "bwd.w_u", local_end)
        add("u", Group.RECOMPUTE, (T, HV, DV), "bf16", _src("ops/kda/wy_fast.py", wy, "u = torch.empty_like(v)"), "bwd.w_u", local_end)
        add("qg", Group.RECOMPUTE, (T, HV, DK), "bf16", _src("ops/kda/wy_fast.py", wy, "qg: chunk_kda_bwd passes q"), "bwd.w_u", local_end)
        add("kg", Group.RECOMPUTE, (T, HV, DK), "bf16", _src("ops/kda/wy_fast.py", wy, "kg = torch.empty(B, T, HV, K)"), "bwd.w_u", local_end)
        step("bwd.delta_h", "backward", "ops/common/chunk_delta_h.py", "chunk_gated_delta_rule_fwd_h")
        fh = "chunk_gated_delta_rule_fwd_h"
        add("h", Group.STATE, (NT, HV, DK, DV), "bf16", _src("ops/common/chunk_delta_h.py", fh, "h = k.new_empty(B, NT, HV, K, V)"),
            "bwd.delta_h", local_end)                                                        # [NT, HV, K, V] bf16
        add("v_new", Group.RECOMPUTE, (T, HV, DV), "bf16", _src("ops/common/chunk_delta_h.py", fh, "v_new = torch.empty_like(u)"),
            "bwd.delta_h", local_end)

    step("bwd.dAv", "backward", bwd, "chunk_kda_bwd_dAv")
    add("dAqk", Group.MATRIX_GRAD, (T, HV, BT), "fp32", _src(bwd, "chunk_kda_bwd_dAv", "dA = v.new_empty(B, T, HV, BT, dtype=torch.float)"),
        "bwd.dAv", local_end)                                                                # [T, HV, 64] fp32
    add("dv_dAv", Group.DV, (T, HV, DV), "bf16", _src(bwd, "chunk_kda_bwd_dAv", "dv = torch.empty_like(do)"), "bwd.dAv", "bwd.dhu")

    step("bwd.dhu", "backward", "ops/common/chunk_delta_h.py", "chunk_gated_delta_rule_bwd_dhu")
    dhu = "chunk_gated_delta_rule_bwd_dhu"
    add("dh", Group.STATE, (NT, HV, DK, DV), "bf16", _src("ops/common/chunk_delta_h.py", dhu, "dh = q.new_empty(B, NT, HV, K, V)"),
        "bwd.dhu", local_end)                                                                # [NT, HV, K, V] bf16
    add("dv_dhu", Group.DV, (T, HV, DV), "bf16", _src("ops/common/chunk_delta_h.py", dhu, "dv2 = torch.empty_like(dv)"),
        "bwd.dhu", "bwd.wy_dqkg")

    step("bwd.wy_dqkg", "backward", bwd, "chunk_kda_bwd_wy_dqkg_fused")
    wy = "chunk_kda_bwd_wy_dqkg_fused"
    stage_end = "bwd.intra_db_sum"   # the caller's names are rebound when chunk_kda_bwd_intra returns
    add("dq_stage", Group.STAGE, (T, HV, DK), "fp32", _src(bwd, wy, "dq = g.new_empty(B, T, HV, K, dtype=torch.float)"), "bwd.wy_dqkg", stage_end)
    add("dk_stage", Group.STAGE, (T, HV, DK), "fp32", _src(bwd, wy, "dk = g.new_empty(B, T, HV, K, dtype=torch.float)"), "bwd.wy_dqkg", stage_end)
    add("dv", Group.DV, (T, HV, DV), "bf16", _src(bwd, wy, "dv2 = torch.empty_like(v); returned as dv"), "bwd.wy_dqkg",
        note="the V gradient")                                                               # [T, HV, V] bf16
    add("dg_stage", Group.STAGE, (T, HV, DK), "fp32", _src(bwd, wy, "dg = torch.empty_like(g, dtype=torch.float)"), "bwd.wy_dqkg", stage_end)
    add("db_stage", Group.BETA_REDUCTION, (T, HV), "fp32", _src(bwd, wy, "db = torch.empty_like(beta, dtype=torch.float)"), "bwd.wy_dqkg", stage_end)
    add("dAkk", Group.MATRIX_GRAD, (T, HV, BT), "fp32", _src(bwd, wy, "dA = torch.empty_like(A, dtype=torch.float)"), "bwd.wy_dqkg", local_end)

    step("bwd.intra", "backward", "ops/kda/chunk_intra.py", "chunk_kda_bwd_intra")
    ci = "chunk_kda_bwd_intra"
    like = "torch.empty_like(dq): fp32 like the stage buffer" if v.intra_grad_dtype is None else "bf16 (report)"
    # dq2/dk2 live until ChunkKDAFunction.backward replaces them (l2norm_bwd or .to(q)), or, under GVA,
    # until chunk_kda_bwd rebinds dq/dk to their sums over each group of value heads
    q_end = "bwd.l2norm_q" if report else ("bwd.return" if intra_dtype != "bf16" else None)
    k_end = "bwd.l2norm_k" if report else ("bwd.return" if intra_dtype != "bf16" else None)
    dq2_end, dk2_end = ("bwd.gva_reduce_q", "bwd.gva_reduce_k") if gva else (q_end, k_end)
    add("dq2", Group.OUTPUT_GRAD, (T, HV, DK), intra_dtype, _src("ops/kda/chunk_intra.py", ci, "dq2 = " + like), "bwd.intra", dq2_end)
    add("dk2", Group.OUTPUT_GRAD, (T, HV, DK), intra_dtype, _src("ops/kda/chunk_intra.py", ci, "dk2 = " + like), "bwd.intra", dk2_end)
    add("db2", Group.BETA_REDUCTION, (NK_INTRA, T, HV), "fp32",
        _src("ops/kda/chunk_intra.py", ci, "db2 = beta.new_empty(NK, *beta.shape, dtype=torch.float)"), "bwd.intra", "bwd.intra_db_sum")
    add("dg2", Group.OUTPUT_GRAD, (T, HV, DK), "fp32", _src("ops/kda/chunk_intra.py", ci, "dg2 = torch.empty_like(dg, dtype=torch.float)"),
        "bwd.intra", "bwd.dg_cumsum")

    step("bwd.intra_db_sum", "backward", "ops/kda/chunk_intra.py", "chunk_kda_bwd_intra",
         note="db = db2.sum(0).add_(db) while every stage buffer is still referenced")
    db_end = "bwd.beta_sigmoid" if report else None
    add("db_sum", Group.BETA_REDUCTION, (T, HV), "fp32", _src("ops/kda/chunk_intra.py", ci, "db2.sum(0)"), "bwd.intra_db_sum", db_end)

    if gva:  # chunk_kda_bwd: if HV > H: dq = dq.view(*dq.shape[:2], H, G, K).sum(dim=3), then the same for dk
        for name, end in (("q", q_end), ("k", k_end)):
            step(f"bwd.gva_reduce_{name}", "backward", bwd, "chunk_kda_bwd", note=f"d{name} summed over each group of value heads")
            add(f"d{name}_heads", Group.OUTPUT_GRAD, (T, H, DK), intra_dtype,                   # [T, H, K]
                _src(bwd, "chunk_kda_bwd", f"d{name}.view(B, T, H, G, K).sum(dim=3)"), f"bwd.gva_reduce_{name}", end)

    step("bwd.dg_cumsum", "backward", "ops/utils/cumsum.py", "chunk_local_cumsum_vector", note="reverse cumsum of dg")
    add("dg_cumsum", Group.OUTPUT_GRAD, (T, HV, DK), "fp32",
        _src("ops/utils/cumsum.py", "chunk_local_cumsum_vector", "o = torch.empty_like(g, dtype=torch.float)"),
        "bwd.dg_cumsum", local_end if report else None, note="" if report else "the gate gradient")

    if report:
        step("bwd.gate_bwd", "backward", "ops/kda/gate.py", "kda_gate_bwd")
        gb = "kda_gate_bwd"
        add("dg", Group.OUTPUT_GRAD, (T, HV, DK), "bf16", _src("ops/kda/gate.py", gb, "dg = torch.empty_like(g) (raw bf16 gate)"),
            "bwd.gate_bwd", note="the gate gradient")
        add("dA_log_part", Group.SCRATCH, (NT_GATE, HV), "fp32", _src("ops/kda/gate.py", gb, "dA = g.new_empty(NT, H, fp32)"),
            "bwd.gate_bwd", "bwd.gate_reduce")
        add("dt_bias_part", Group.SCRATCH, (NT_GATE, HV * DK), "fp32", _src("ops/kda/gate.py", gb, "dbias = g.new_empty(NT, H*K, fp32)"),
            "bwd.gate_bwd", "bwd.gate_reduce")
        step("bwd.gate_reduce", "backward", "ops/kda/gate.py", "kda_gate_bwd", note="dA.sum(0), dbias.sum(0)")
        add("dA_log", Group.OUTPUT_GRAD, (HV,), "fp32", _src("ops/kda/gate.py", gb, "dA.sum(0)"), "bwd.gate_reduce")
        add("ddt_bias", Group.OUTPUT_GRAD, (HV * DK,), "fp32", _src("ops/kda/gate.py", gb, "dbias.sum(0)"), "bwd.gate_reduce")

        step("bwd.l2norm_q", "backward", "modules/norm/l2norm.py", "l2norm_bwd")
        add("dq", Group.OUTPUT_GRAD, (T, H, DK), "bf16", _src("modules/norm/l2norm.py", "l2norm_bwd", "dx = torch.empty_like(y)"),
            "bwd.l2norm_q", note="the Q gradient")
        step("bwd.l2norm_k", "backward", "modules/norm/l2norm.py", "l2norm_bwd")
        add("dk", Group.OUTPUT_GRAD, (T, H, DK), "bf16", _src("modules/norm/l2norm.py", "l2norm_bwd", "dx = torch.empty_like(y)"),
            "bwd.l2norm_k", note="the K gradient")
        step("bwd.beta_sigmoid", "backward", "ops/common/gate.py", "fused_beta_sigmoid_bwd")
        add("dbeta", Group.OUTPUT_GRAD, (T, HV), "bf16", _src("ops/common/gate.py", "fused_beta_sigmoid_bwd", "dx = torch.empty_like(x)"),
            "bwd.beta_sigmoid", note="the beta gradient")
        step("bwd.return", "backward", "ops/kda/chunk.py", "ChunkKDAFunction.backward",
             note="dq.to(q) etc. are no-ops: the dtypes already match")
    else:
        step("bwd.return", "backward", "ops/kda/chunk.py", "ChunkKDAFunction.backward",
             note="dq.to(q), dk.to(k) cast fp32 -> bf16 while the fp32 tensors are alive" if intra_dtype != "bf16" else "")
        if intra_dtype != "bf16":
            add("dq", Group.OUTPUT_GRAD, (T, H, DK), "bf16", _src("ops/kda/chunk.py", "ChunkKDAFunction.backward", "dq.to(q)"), "bwd.return")
            add("dk", Group.OUTPUT_GRAD, (T, H, DK), "bf16", _src("ops/kda/chunk.py", "ChunkKDAFunction.backward", "dk.to(k)"), "bwd.return")

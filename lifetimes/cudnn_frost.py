"""cuDNN frontend ``kda_frost`` (CuTeDSL, Blackwell), forward + backward, as buffer records.

Read from nvidia-cudnn-frontend 1.32.0 (``cudnn/linear_attention/ops/kda.py`` and
``cudnn/linear_attention/frost/kda_engine.py``). The report pins e0b4ce98, which this project
could not read (it is not in the public index we searched); that model is the 1.32.0 code path and
is checked against the report's published table.

Configuration: the report's — safe gate with fp32 ``a_log`` / ``dt_bias``, in-kernel Q/K L2 norm
and beta sigmoid, raw bf16 gate and beta, ``checkpoint_every_n_tokens=0`` (no saved series: the
backward recomputes a dense bf16 state series into its workspace), no initial / final state, equal
q/k/v heads (HO = H).

The device enters through the SM count: ``choose_pieces`` (frost/common/piece_chain.py) turns the
backward into a ``chain`` plan when one wave of (sequence, head) tiles leaves at least two pieces'
worth of SMs idle; the chain adds fp32 per-piece states to the workspace. The plan choice is kept
symbolic (floor / Min / Piecewise in MBS, H, S), so one model answers every shape.
"""
from __future__ import annotations

import sympy as sp
from sympy.utilities.lambdify import implemented_function

from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source, Step
from livebytes.estimator.symbols import DK, DV, H, MBS, T, cdiv

B_T = 16                    # kda_bprop_config.CFG.B_T: the dense state series cadence
WORKSPACE_ALIGN = 128       # frost/workspace.py DEFAULT_ALIGN
TENSOR_MAP_BYTES = 128      # common/host.py TENSOR_MAP_QWORDS * 8
WORK_ITEM_BYTES = 10 * 4    # common/split_k.py WORK_ITEM_FIELDS int32
GATE_BWD_BLOCKS = 128       # common/gate_bwd.py
CHAIN_MIN_PIECES_REVERSE = 2
CHAIN_MAX_PIECES = 16
CHAIN_MIN_UNITS_PER_PIECE = 4
CHAIN_MIN_TOKENS_REVERSE = 192   # piece_chain.chain_min_tokens(reverse=True)

HO = H  # equal heads in the modelled configuration: gates, output and state heads


def align(nbytes: sp.Expr, to: int = WORKSPACE_ALIGN) -> sp.Expr:
    """WorkspaceLayout.add pads every region to its alignment (frost/workspace.py)."""
    return sp.ceiling(sp.Integer(1) * nbytes / to) * to


def tensormap_bytes(arrays: int, batch: sp.Expr) -> sp.Expr:
    """common/host.py tensormap_workspace_bytes: 128-byte descriptors per array and batch, plus 128 slack."""
    return TENSOR_MAP_BYTES * arrays * batch + 128


def piece_budget_value(tokens: int, seqs: int, heads: int, num_sm: int) -> int:
    """piece_chain.piece_budget with cadence 0 and expand_num 1: min(num_sm // tiles, 16, chunks // (N * 4))."""
    seqs = max(1, int(seqs))
    total_chunks = -(-int(tokens) // B_T)
    return min(int(num_sm) // (seqs * max(1, int(heads))), CHAIN_MAX_PIECES,
               total_chunks // (seqs * CHAIN_MIN_UNITS_PER_PIECE))


def backward_pieces(num_sm: int) -> tuple[sp.Expr, sp.Expr]:
    """(chain indicator 0/1, pieces per sequence) of the backward plan, from choose_pieces(reverse=True).

    The budget is an implemented function rather than sympy's Min: sympy 1.14 folds
    Min(floor(160/(H*MBS)), 16) to 16 under positive-integer assumptions whenever an expression is rebuilt.
    """
    def _budget(t, n, h):
        try:
            return piece_budget_value(t, n, h, num_sm)
        except TypeError:  # numpy arrays from a vectorised sweep
            import numpy as np
            return np.vectorize(lambda a, b, c: piece_budget_value(a, b, c, num_sm))(t, n, h)

    budget = implemented_function(sp.Function("frost_piece_budget"), _budget)(T, MBS, HO)
    chain = sp.Piecewise((1, sp.And(budget >= CHAIN_MIN_PIECES_REVERSE, T >= CHAIN_MIN_TOKENS_REVERSE)), (0, True))
    return chain, budget


def _src(file: str, function: str, detail: str = "") -> Source:
    return Source(f"cudnn/linear_attention/{file}", function, detail)


def refuse(shape) -> str | None:
    if shape.hv != shape.heads:
        return "this FROST model covers equal q/k/v heads (the report's configuration); GVA folds are not modelled"
    if shape.dim != 128:
        return f"FROST KDA kernels are built for head dim 128 (kda_bprop_config), got {shape.dim}"
    return None


def build(version: str = "1.32.0", num_sm: int = 148, device: str = "") -> LifetimeModel:
    steps: list[Step] = []
    buffers: list[Buffer] = []

    def add(name, group, shape, dtype, src, at, freed=None, carved=None, note=""):
        buffers.append(Buffer(name, group, shape, dtype, src, at, freed, carved, note))

    harness = Source("livebytes/validate/runner.py", "cudnn_inputs (report contract: raw gate and beta, safe gate)")
    steps.append(Step("harness.inputs", "harness", note="inputs, dO and the packed boundaries exist before the step"))
    add("q", Group.INPUTS, (T, H, DK), "bf16", harness, "harness.inputs")                    # [T, H, K] bf16
    add("k", Group.INPUTS, (T, H, DK), "bf16", harness, "harness.inputs")                    # [T, H, K] bf16
    add("v", Group.INPUTS, (T, H, DV), "bf16", harness, "harness.inputs")                    # [T, H, V] bf16
    add("g", Group.INPUTS, (T, HO, DK), "bf16", harness, "harness.inputs", note="raw gate")  # [T, HO, K] bf16
    add("beta", Group.INPUTS, (T, HO), "bf16", harness, "harness.inputs", note="raw beta")  # [T, HO] bf16
    add("a_log", Group.INPUTS, (HO,), "fp32", harness, "harness.inputs")                     # [HO] fp32
    add("dt_bias", Group.INPUTS, (HO, DK), "fp32", harness, "harness.inputs")                # [HO, K] fp32
    add("cu_seqlens", Group.INPUTS, (MBS + 1,), "int32", harness, "harness.inputs")          # [N+1] int32
    add("dO", Group.INPUTS, (T, HO, DV), "bf16", harness, "harness.inputs")                  # [T, HO, V] bf16

    # ---- forward: run_kda_fwd, uncut plan regions (frost/kda_engine.py forward plan __init__)
    steps.append(Step("fwd.kernel", "forward", _src("ops/kda.py", "run_kda_fwd")))
    add("o", Group.INPUTS, (T, HO, DV), "bf16", _src("ops/kda.py", "run_kda_fwd", "o = torch.empty(total, HO, V)"),
        "fwd.kernel", note="returned; the caller holds it")                                  # [T, HO, V] bf16
    fws = "fwd_workspace"
    eng = "frost/kda_engine.py"
    add("fwd_scheduler", Group.SCRATCH, (align(8),), "uint8", _src(eng, "forward plan", "scheduler int32[2]"), "fwd.kernel", "fwd.kernel", fws)
    add("fwd_work_items", Group.SCRATCH, (align(MBS * HO * WORK_ITEM_BYTES),), "uint8",
        _src(eng, "forward plan", "work_items int32[n_tiles, 10]"), "fwd.kernel", "fwd.kernel", fws)
    add("fwd_work_count", Group.SCRATCH, (align(4),), "uint8", _src(eng, "forward plan", "work_count"), "fwd.kernel", "fwd.kernel", fws)
    add("fwd_tensormaps", Group.SCRATCH, (align(tensormap_bytes(6, MBS)),), "uint8",
        _src(eng, "forward plan", "tensormap_workspace_bytes(kda_prefill, B)"), "fwd.kernel", "fwd.kernel", fws)

    # ---- backward: kda_bwd allocates the gradients, then the plan's workspace, then executes
    chain, pieces = backward_pieces(num_sm)
    uncut = 1 - chain
    num_pieces = MBS * (chain * pieces + (1 - chain))      # B * pieces when chained, else B
    bwd = "ops/kda.py"
    steps.append(Step("bwd.alloc_grads", "backward", _src(bwd, "kda_bwd")))
    add("dq", Group.OUTPUT_GRAD, (T, H, DK), "bf16", _src(bwd, "kda_bwd", "torch.empty(total, H, K, dtype=q.dtype)"), "bwd.alloc_grads")
    add("dk", Group.OUTPUT_GRAD, (T, H, DK), "bf16", _src(bwd, "kda_bwd", "torch.empty(total, HK, K, dtype=q.dtype)"), "bwd.alloc_grads")
    add("dv", Group.DV, (T, H, DV), "bf16", _src(bwd, "kda_bwd", "torch.empty(total, HV, V, dtype=q.dtype)"), "bwd.alloc_grads")
    add("dg", Group.OUTPUT_GRAD, (T, HO, DK), "bf16", _src(bwd, "kda_bwd", "torch.empty(total, HO, K, dtype=g.dtype)"), "bwd.alloc_grads")
    add("dbeta", Group.BETA_REDUCTION, (T, HO), "bf16", _src(bwd, "kda_bwd", "torch.empty(total, HO, dtype=beta.dtype)"), "bwd.alloc_grads")
    add("d_a_log", Group.OUTPUT_GRAD, (HO,), "fp32", _src(bwd, "kda_bwd", "torch.empty_like(a_log)"), "bwd.alloc_grads")
    add("d_dt_bias", Group.OUTPUT_GRAD, (HO, DK), "fp32", _src(bwd, "kda_bwd", "torch.empty_like(dt_bias)"), "bwd.alloc_grads")

    steps.append(Step("bwd.kernel", "backward", _src("ops/common.py", "graph_workspace"),
                      note="one torch.empty(workspace_size, uint8); regions carved by the plan"))
    ws = "bwd_workspace"
    plan = "backward plan __init__"

    def region(name, group, nbytes, detail, note=""):
        add(name, group, (nbytes,), "uint8", _src(eng, plan, detail), "bwd.kernel", "bwd.kernel", ws, note)

    region("scheduler", Group.SCRATCH, align(16 + 24 * chain), "scheduler int32 (16 B uncut, 40 B chain)")
    region("fused_tensormaps", Group.SCRATCH, chain * align(tensormap_bytes(3, num_pieces)), "chain: kda_summary tensormaps")
    region("summary_tensormaps", Group.SCRATCH, chain * align(tensormap_bytes(4, num_pieces)), "chain: kda_bprop_summary tensormaps")
    region("work_items", Group.SCRATCH, align(num_pieces * HO * WORK_ITEM_BYTES), "work_items int32[num_pieces*HO, 10]")
    region("work_count", Group.SCRATCH, align(4), "work_count int32[1]")
    rows = sp.floor(T / B_T) + num_pieces     # max(total // b_t + num_pieces, 1)
    region("state_series", Group.STATE, align(rows * HO * DK * DV * 2),
           "state_checkpoints bf16 [total // 16 + num_pieces, HO, V, K] (needs_recompute)",
           note="dense C16 series plus one boundary row per piece")                          # [T/16 + pieces, HO, V, K] bf16
    region("recompute_tensormaps", Group.SCRATCH, (uncut + 2 * chain) * align(tensormap_bytes(4, num_pieces)),
           "kda_recompute tensormaps (one set uncut, m + series sets chain)")
    region("gate_part_a", Group.SCRATCH, align(GATE_BWD_BLOCKS * HO * DK * 4), "safe gate a_log partials fp32 [128*HO*K]")
    region("gate_part_dt", Group.SCRATCH, align(GATE_BWD_BLOCKS * HO * DK * 4), "safe gate dt_bias partials fp32 [128*HO*K]")
    rows_bytes = 16 * cdiv(4 * (MBS + 1), 16)
    cu_bytes = 16 * cdiv(4 * (num_pieces + 1), 16)
    region("piece_table", Group.SCRATCH, chain * align(2 * rows_bytes + cu_bytes, 256), "chain: piece_table_layout (256-aligned)")
    region("work_items_summary", Group.SCRATCH, chain * align(num_pieces * HO * WORK_ITEM_BYTES), "chain: summary work items")
    region("chain_state_m", Group.STATE, chain * align(num_pieces * HO * DK * DK * 4), "chain: state_m fp32 [pieces, HO, K, K]")
    region("chain_states_vk", Group.STATE, chain * 4 * align(num_pieces * HO * DV * DK * 4),
           "chain: state_g, state_dx_end, state_h, state_x fp32 [pieces, HO, V, K]")
    region("bwd_tensormaps", Group.SCRATCH, align(tensormap_bytes(10, num_pieces)), "kda_bprop tensormaps")

    not_modelled = (
        "forward workspace of the chain and d_v-split/prep forward plans (uncut regions only; the forward never holds the fwd+bwd peak)",
        "a 128-byte gap the 256-byte piece-table alignment can leave in a chain workspace",
        "GVA/GQA fold scratch (dq_ho, dk_ho, dv_ho) and head reductions",
        "cuDNN handle and NVRTC/CuTeDSL module memory outside the PyTorch allocator",
    )
    return LifetimeModel(
        key=f"cudnn-kda-frost@{version}", implementation="cuDNN frontend kda_frost (CuTeDSL, Blackwell)", version=version,
        summary=f"forward + backward; checkpoint_every_n_tokens=0 (recompute); plan uncut or chain from {num_sm} SMs; "
                "read from nvidia-cudnn-frontend 1.32.0",
        steps=tuple(steps), buffers=tuple(buffers), options=(("num_sm", num_sm),), not_modelled=not_modelled, device=device,
        notes=("e0b4ce98 itself was not readable here; its model is the 1.32.0 code path" if version != "1.32.0" else "",),
    )

"""cuDNN frontend ``kda_frost`` (CuTeDSL, Blackwell), forward + backward, as buffer records.

Read from nvidia-cudnn-frontend 1.32.0 (``cudnn/linear_attention/ops/kda.py`` and
``cudnn/linear_attention/frost/kda_engine.py``: ``CompiledKda.__init__`` and ``CompiledKdaBwd.__init__``
lay out the workspaces). The report pins e0b4ce98, which this project
could not read (it is not in the public index we searched); that model is the 1.32.0 code path and
is checked against the report's published table. 1.31.0 (its wheel read) lays the workspaces out as
1.32.0 does; its ``graph_workspace`` holds them on the cached graphs between calls and its backward has no
192-token floor for the chain plan (``CudnnVersion`` data; no Blackwell measurement of it).

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

from livebytes.estimator.buffers import Group, LifetimeModel
from livebytes.estimator.declare import Contract, Declaration, Input, ceil_to, vectorised
from livebytes.estimator.devices import DEVICES, get_device
from livebytes.estimator.symbols import DK, DV, H, MBS, T, cdiv

from .cudnn_common import (
    CUDNN_1_31_0,
    CUDNN_1_32_0,
    HO,
    KIMI_DELTA_ATTENTION,
    PLAN_CACHE_KEY,
    CudnnVersion,
    backward_gradients,
    cite,
    forward_output,
    src,
)

B_T = 16                    # kda_bprop_config.CFG.B_T: the dense state series cadence
WORKSPACE_ALIGN = 128       # frost/workspace.py DEFAULT_ALIGN
TENSOR_MAP_BYTES = 128      # common/host.py TENSOR_MAP_QWORDS * 8
WORK_ITEM_BYTES = 10 * 4    # common/split_k.py WORK_ITEM_FIELDS int32
GATE_BWD_BLOCKS = 128       # common/gate_bwd.py
CHAIN_MIN_PIECES_REVERSE = 2
CHAIN_MAX_PIECES = 16
CHAIN_MIN_UNITS_PER_PIECE = 4

VERSIONS: tuple[CudnnVersion, ...] = (
    CUDNN_1_32_0,
    CUDNN_1_31_0,
    CUDNN_1_32_0.derive(version="e0b4ce98", origin="the KDA memory report's FROST revision e0b4ce98 (not readable here)",
                        read_from=CUDNN_1_32_0,
                        notes=("e0b4ce98 itself was not readable here; its model is the 1.32.0 code path",)),
)

# The report's configuration: raw bf16 gate and beta, safe gate with fp32 a_log / dt_bias, THD layout.
REPORT = Contract("report", KIMI_DELTA_ATTENTION, (
    Input("q", (T, H, DK), "bf16"),                               # [T, H, K] bf16
    Input("k", (T, H, DK), "bf16"),                               # [T, H, K] bf16
    Input("v", (T, H, DV), "bf16"),                               # [T, H, V] bf16
    Input("g", (T, HO, DK), "bf16", note="raw gate"),             # [T, HO, K] bf16
    Input("beta", (T, HO), "bf16", note="raw beta"),              # [T, HO] bf16
    Input("a_log", (HO,), "fp32"),                                # [HO] fp32
    Input("dt_bias", (HO, DK), "fp32"),                           # [HO, K] fp32
    Input("cu_seqlens", (MBS + 1,), "int32"),                     # [N+1] int32
    Input("dO", (T, HO, DV), "bf16", backward_only=True),         # [T, HO, V] bf16
))


def align(nbytes: sp.Expr, to: int = WORKSPACE_ALIGN) -> sp.Expr:
    """WorkspaceLayout.add pads every region to its alignment (frost/workspace.py)."""
    return ceil_to(nbytes, to)


def tensormap_bytes(arrays: int, batch: sp.Expr) -> sp.Expr:
    """common/host.py tensormap_workspace_bytes: 128-byte descriptors per array and batch, plus 128 slack."""
    return TENSOR_MAP_BYTES * arrays * batch + 128


def piece_budget_value(tokens: int, seqs: int, heads: int, num_sm: int) -> int:
    """piece_chain.piece_budget with cadence 0 and expand_num 1: min(num_sm // tiles, 16, chunks // (N * 4))."""
    seqs = max(1, int(seqs))
    total_chunks = -(-int(tokens) // B_T)
    return min(int(num_sm) // (seqs * max(1, int(heads))), CHAIN_MAX_PIECES,
               total_chunks // (seqs * CHAIN_MIN_UNITS_PER_PIECE))


def backward_pieces(num_sm: int, min_tokens: int = 192) -> tuple[sp.Expr, sp.Expr]:
    """(chain indicator 0/1, pieces per sequence) of the backward plan, from choose_pieces(reverse=True).

    The budget is an implemented function rather than sympy's Min: sympy 1.14 folds
    Min(floor(160/(H*MBS)), 16) to 16 under positive-integer assumptions whenever an expression is rebuilt.
    """
    budget = vectorised("frost_piece_budget", lambda t, n, h: piece_budget_value(t, n, h, num_sm))(T, MBS, HO)
    chain = sp.Piecewise((1, sp.And(budget >= CHAIN_MIN_PIECES_REVERSE, T >= min_tokens)), (0, True))   # min_tokens: the version's
    return chain, budget


DEFAULT_DEVICE = "B300"      # the device a model built without one describes (the registry's default_device)
# the presets it runs on, as its refusal names them (a text: refuse_device is kept in the disk cache's spec index)
BLACKWELL_PRESETS = ", ".join(d.name for d in DEVICES.values() if d.blackwell)


def refuse_device(device) -> str | None:
    if not device.blackwell:
        return (f"kda_frost is Blackwell-only (tcgen05/TMEM, sm100-103 and sm107); {device.name} is {device.arch}: "
                f"choose a Blackwell device ({BLACKWELL_PRESETS})")
    return None


def refuse(shape, device) -> str | None:
    reason = refuse_device(device)
    if reason:
        return reason
    if shape.hv != shape.heads:
        return "this FROST model covers equal q/k/v heads (the report's configuration); GVA folds are not modelled"
    if shape.dim != 128:
        return f"FROST KDA kernels are built for head dim 128 (kda_bprop_config), got {shape.dim}"
    if shape.dv != 128:         # no value-dim axis: the recurrent state is 128 x 128
        return ("FROST KDA kernels take value head dim 128 only (frost/kda_engine.py _check_common: 'head dims must be "
                f"128 (the recurrent state is 128x128)'), got head_v_dim {shape.dv}")
    return None


def _held(version: CudnnVersion) -> dict:
    """A workspace graph_workspace keeps on the cached graph is a cached allocation, once per graph-cache key."""
    return {"cached": True, "cache_key": PLAN_CACHE_KEY} if version.workspace_held_on_graph else {}


def _forward_workspace(d: Declaration, version: CudnnVersion) -> None:
    """CompiledKda.__init__, uncut scheme: scheduler, work items, work count, tensormaps."""
    fn = "CompiledKda.__init__"

    def region(name, nbytes, line, quote):
        d.region("fwd_workspace", name, Group.SCRATCH, nbytes, src("frost/kda_engine.py", fn, line, quote), **_held(version))

    region("fwd_scheduler", align(8), 243, 'regions.append(("scheduler", layout.add(8), "int32", (2,)))')
    region("fwd_work_items", align(MBS * HO * WORK_ITEM_BYTES), 246,
           'regions.append(("work_items", layout.add(self.work_item_rows * WORK_ITEM_FIELDS * 4), ...))')   # int32 [B*HO, 10]
    region("fwd_work_count", align(4), 247, 'regions.append(("work_count", layout.add(4), "int32", (1,)))')
    region("fwd_tensormaps", align(tensormap_bytes(6, MBS)), 266,
           'regions.append(("tensormaps", layout.add(self.tensormap_bytes, align=128), ...))')


def _backward_workspace(d: Declaration, num_sm: int, version: CudnnVersion) -> None:
    """CompiledKdaBwd.__init__: one workspace, its regions in layout order; chain-only regions are 0 bytes uncut."""
    chain, pieces = backward_pieces(num_sm, version.chain_min_tokens_reverse)
    uncut = 1 - chain
    num_pieces = MBS * (chain * pieces + (1 - chain))      # self.num_pieces = B * self.pieces if self.chain else B
    fn = "CompiledKdaBwd.__init__"

    def region(name, group, nbytes, line, quote, note=""):
        d.region("bwd_workspace", name, group, nbytes, src("frost/kda_engine.py", fn, line, quote), note, **_held(version))

    region("scheduler", Group.SCRATCH, align(16 + 24 * chain), 547, "off_scheduler = layout.add(40 if self.chain else 16)")
    region("fused_tensormaps", Group.SCRATCH, chain * align(tensormap_bytes(3, num_pieces)), 556,
           'regions.append(("fused_tensormaps", layout.add(fused_tensormap_bytes, align=128), ...))')
    region("summary_tensormaps", Group.SCRATCH, chain * align(tensormap_bytes(4, num_pieces)), 566,
           '("summary_tensormaps", layout.add(summary_tensormap_bytes, align=128), ...)')
    region("work_items", Group.SCRATCH, align(num_pieces * HO * WORK_ITEM_BYTES), 572,
           'regions.append(("work_items", layout.add(self.work_item_rows * WORK_ITEM_FIELDS * 4), ...))')  # int32 [pieces*HO, 10]
    region("work_count", Group.SCRATCH, align(4), 573, 'regions.append(("work_count", layout.add(4), "int32", (1,)))')
    rows = sp.floor(T / B_T) + num_pieces     # state_checkpoints_rows = max(total // self.b_t + self.num_pieces, 1)
    region("state_series", Group.STATE, align(rows * HO * DK * DV * 2), 577,          # bf16 [T/16 + pieces, HO, V, K]
           '("state_checkpoints", layout.add(self.state_checkpoints_rows * HO * K * V * 2), self.io_name, ...)',
           note="dense C16 series plus one boundary row per piece")
    region("recompute_tensormaps", Group.SCRATCH, (uncut + 2 * chain) * align(tensormap_bytes(4, num_pieces)), 581,
           "recompute_tensormaps (one set uncut; _m and _series sets, lines 583 and 586, chain)")
    region("gate_part_a", Group.SCRATCH, align(GATE_BWD_BLOCKS * HO * DK * 4), 610,      # fp32 [128*HO*K]
           'regions.append(("gate_part_a", layout.add(self.gate_bwd_blocks * HO * K * 4), "float32", ...))')
    region("gate_part_dt", Group.SCRATCH, align(GATE_BWD_BLOCKS * HO * DK * 4), 612,     # fp32 [128*HO*K]
           'regions.append(("gate_part_dt", layout.add(self.gate_bwd_blocks * HO * K * 4), "float32", ...))')
    rows_bytes = 16 * cdiv(4 * (MBS + 1), 16)
    cu_bytes = 16 * cdiv(4 * (num_pieces + 1), 16)
    region("piece_table", Group.SCRATCH, chain * align(2 * rows_bytes + cu_bytes, 256), 615,
           "off_piece_table = layout.add(table.nbytes, align=256)")
    region("work_items_summary", Group.SCRATCH, chain * align(num_pieces * HO * WORK_ITEM_BYTES), 623,
           '("work_items_summary", layout.add(table.item_rows * WORK_ITEM_FIELDS * 4), "int32", ...)')
    region("chain_state_m", Group.STATE, chain * align(num_pieces * HO * DK * DK * 4), 624,   # fp32 [pieces, HO, K, K]
           '("state_m", layout.add(self.num_pieces * HO * K * K * 4), "float32", ...)')
    region("chain_states_vk", Group.STATE, chain * 4 * align(num_pieces * HO * DV * DK * 4), 625,  # fp32 4 x [pieces, HO, V, K]
           "state_g, state_dx_end (lines 625-626), state_h, state_x (lines 629-630): layout.add(self.num_pieces * HO * V * K * 4)")
    region("bwd_tensormaps", Group.SCRATCH, align(tensormap_bytes(10, num_pieces)), 632,
           'regions.append(("bwd_tensormaps", layout.add(self.bwd_tensormap_bytes, align=128), ...))')


def build(version: CudnnVersion = CUDNN_1_32_0, num_sm: int | None = None, device: str = "") -> LifetimeModel:
    """``num_sm``: the device's SM count (default: the default device's)."""
    num_sm = num_sm or get_device(DEFAULT_DEVICE).sm_count
    d = Declaration()
    d.inputs(REPORT, backward=True, note="inputs, dO and the packed boundaries exist before the step")
    forward_output(d)
    _forward_workspace(d, version)
    backward_gradients(d, REPORT)
    d.step("bwd.kernel", "backward", version.graph_workspace,
           note="one workspace; regions carved by the plan" + ("; held on the graph between calls" if version.workspace_held_on_graph else ""))
    _backward_workspace(d, num_sm, version)
    cite(d, version)
    return d.freeze(
        key=f"cudnn-kda-frost@{version.version}", implementation="cuDNN frontend kda_frost (CuTeDSL, Blackwell)",
        version=version.version, options=(("num_sm", num_sm),), device=device, notes=version.notes,
        summary=f"forward + backward; checkpoint_every_n_tokens=0 (recompute); plan uncut or chain from {num_sm} SMs; "
                f"read from {(version.read_from or version).origin}",
        not_modelled=(
            "forward workspace of the chain and d_v-split/prep forward plans (uncut regions only; the forward never holds the fwd+bwd peak)",
            "a 128-byte gap the 256-byte piece-table alignment can leave in a chain workspace",
            "GVA/GQA fold scratch (dq_ho, dk_ho, dv_ho) and head reductions",
            "cuDNN handle and NVRTC/CuTeDSL module memory outside the PyTorch allocator",
        ),
    )


# ---------------------------------------------------------------- registration: every VERSIONS entry is a model

from livebytes.estimator.registry import ModelSpec, register  # noqa: E402  (the registration block closes the file)


def _covers(v: CudnnVersion) -> str:
    if v.read_from:
        return f"{v.origin}; modelled from the {v.read_from.version} sources, checked against the report"
    return f"nvidia-cudnn-frontend {v.version} kda_frost, report configuration, uncut or chain backward plan by SM count"


def _register(v: CudnnVersion) -> None:
    register(ModelSpec(
        key=f"cudnn-kda-frost@{v.version}", implementation="cuDNN frontend kda_frost (CuTeDSL)", version=v.version,
        covers=_covers(v), builder=lambda device, v=v: build(version=v, num_sm=device.sm_count, device=device.name),
        refuse=refuse, refuse_device=refuse_device, default_device=DEFAULT_DEVICE,
    ))


for _v in VERSIONS:
    _register(_v)

"""One rank of FLA's context parallelism (``fla/ops/cp``) for ``chunk_kda`` and ``chunk_gated_delta_rule``, fla-core 0.6.0.

Read from the PyPI wheel ``fla_core-0.6.0-py3-none-any.whl``; line numbers are that wheel's. The caller builds
``cp_context = build_cp_context(cu_seqlens, group, layout=...)`` (``ops/cp/context.py:277``) from the global
boundaries of ONE sequence of S tokens and passes it; each rank holds its own slice of every input and calls the
kernel on it. Per rank:

- the local chunk computation is the single-GPU model (``fla_kda.build`` / ``fla_gdn.build``, reused, never
  copied) at the rank's local tokens: S/W in one local sequence (contiguous), or two local sequences of S/(2W)
  (zigzag: rank r holds chain slots r and 2W-1-r, ``context.py:230-274``). ``chunk_kda`` / ``chunk_gated_delta_rule``
  take ``cp_context.cu_seqlens``, int32 (``context.py:153``), so the ``tensor_cache``'d chunk indices are int32, and
  with ``cu_seqlens_cpu`` given ``prepare_lens`` runs on the host until ``prepare_chunk_offsets`` asks it of the
  device's boundaries;
- before the forward's state pass, ``chunk_gated_delta_rule_fwd_h_pre_process`` (``ops/cp/chunk_delta_h.py:25``)
  summarises the rank's last local sequence as ``hm`` [HV, K, V+K] fp32 (``[h_local | M]``), all-gathers it from
  every rank into ``ag_hm`` [W, HV, K, V+K] fp32 (``ops/cp/comm.py:19``) and merges the preceding ranks' summaries
  into ``initial_state`` [N, HV, K, V] fp32, which ``ChunkKDAFunction`` / ``ChunkGatedDeltaRuleFunction`` save for
  the backward (``compress_h0`` returns it unchanged for one or two local sequences);
- the backward mirrors it before the state-gradient pass: ``chunk_gated_delta_rule_bwd_dhu_pre_process``
  (``chunk_delta_h.py:139``) writes ``dhm``, gathers ``ag_dhm`` [W, HV, K, V+K] and merges the following ranks' into
  ``dht`` [N, HV, K, V] fp32, which the state-gradient kernel reads;
- zigzag doubles the per-rank summaries (``hm``, ``dhm``: [2, HV, K, V+K]; ``ag_hm``: [W, 2, HV, K, V+K]) and
  chains them in slot order with ``torch.cat([ag_hm[:, 0], ag_hm[:, 1].flip(0)])``: the flip is a copy
  [W, HV, K, V+K] and the chain [2W, HV, K, V+K].

Every one of these allocations is made on every rank (only the kernels are skipped: the last rank has no summary to
export, the first none to merge); which autotuned CP kernels a rank launches, and so benchmarks on a cold first
call, depends on its place (``cp_rank``: first, middle or last; zigzag ranks all launch every CP kernel).

Not modelled: NCCL's own memory (communicators, channel buffers: outside PyTorch's allocator, named as an
assumption of the process memory, not a figure); ``use_graph`` (CUDA graphs); several packed sequences (MBS > 1:
the local boundaries then depend on where each rank's interval falls); a freed communication tensor's reuse being
deferred by the NCCL stream (``recordStream``): synchronous collectives are assumed not to defer it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import sympy as sp

from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source
from livebytes.estimator.declare import Declaration, source_root
from livebytes.estimator.errors import RefusedShapeError
from livebytes.estimator.symbols import DK, DV, H, HV, MBS, S
from livebytes.lifetimes import fla_gdn, fla_kda

src = source_root("fla")
CPH = "ops/cp/chunk_delta_h.py"
LAYOUTS = ("contiguous", "zigzag")
RANKS = ("first", "middle", "last")
BT = 64


@dataclass(frozen=True)
class Cp:
    """One rank's place: world size W, layout and position (first: rank 0; last: rank W-1; middle: neither)."""

    world: int
    layout: str
    rank: str

    @property
    def zigzag(self) -> bool:
        return self.layout == "zigzag"

    @property
    def parts(self) -> int:
        """Chain intervals per rank: context.py:200 num_parts = world_size (contiguous) or 2 * world_size (zigzag)."""
        return 2 if self.zigzag else 1

    @property
    def local_seqs(self) -> int:
        """Local sequences of one global sequence: one interval, or zigzag's [front; back] (context.py:260)."""
        return self.parts

    @property
    def is_first(self) -> bool:
        return self.rank == "first" or (self.rank == "last" and self.world == 1)

    @property
    def is_last(self) -> bool:
        return self.rank == "last" or (self.rank == "first" and self.world == 1)

    def local(self) -> dict:
        """The single-GPU model's symbols at one rank: MBS local sequences of S / (W * parts) tokens each."""
        return {S: S / (self.world * self.parts), MBS: self.local_seqs}


@dataclass(frozen=True)
class Target:
    """What one kernel's CP path passes: where it calls the pre-processing, the q/k heads its ``k`` carries (KDA
    passes ``kg`` [T, HV, K], GDN ``k`` [T, H, K]), its gate flags, and where its backward's locals die."""

    name: str
    fwd_call: Source
    bwd_call: Source
    k_heads: sp.Expr
    use_g: int                    # scalar gate g (GDN)
    use_gk: int                   # per-key gate gk (KDA)
    local_end: object             # options -> the step where the backward's locals (dht) die


KDA = Target(
    "kda", src("ops/kda/chunk_fwd.py", "chunk_kda_fwd", 87, "initial_state = chunk_gated_delta_rule_fwd_h_pre_process("),
    src("ops/kda/chunk_bwd.py", "chunk_kda_bwd", 558, "dht, initial_state = chunk_gated_delta_rule_bwd_dhu_pre_process("),
    HV, 0, 1, lambda o: "bwd.gate_reduce_bias" if o.get("contract", "report") == "report" else "bwd.dg_cumsum")
GDN = Target(
    "gdn", src("ops/gated_delta_rule/chunk.py", "chunk_gated_delta_rule_fwd", 83,
                     "initial_state = chunk_gated_delta_rule_fwd_h_pre_process("),
    src("ops/gated_delta_rule/chunk.py", "chunk_gated_delta_rule_bwd", 186,
        "dht, initial_state = chunk_gated_delta_rule_bwd_dhu_pre_process("),
    H, 1, 0, lambda o: "bwd.dg_cumsum")


def fwd_h_key(t: Target) -> tuple:
    """chunk_cp_fwd_kernel_h key H, HV, K, V, BT, USE_G, USE_GK, USE_BG, IS_VARLEN, MULTI_SEQS (ops/cp/chunk_fwd.py:30)."""
    return (t.k_heads, HV, DK, DV, BT, t.use_g, t.use_gk, 0, 1, 0)


def bwd_dh_key(t: Target) -> tuple:
    """chunk_cp_bwd_kernel_dh key H, HV, K, V, BT, USE_G, USE_GK, USE_BG, IS_VARLEN (ops/cp/chunk_bwd.py:29); H from qg/q."""
    return (t.k_heads, HV, DK, DV, BT, t.use_g, t.use_gk, 0, 1)


MERGE_KEY = (HV, DK, DV, 0, 0)    # chunk_cp_fwd_bwd_kernel_merge: HV, K, V, STATE_V_FIRST, IS_INTRACARD (chunk_merge.py:82)
SUMMARY = (HV, DK, DV + DK)       # one [h_local | M] per value head


# ---------------------------------------------------------------- the CP buffers, forward and backward mirror


def _summarise(d: Declaration, cp: Cp, t: Target, phase: str) -> None:
    """pre_process up to its gather: the rank's summary and the state it will merge into (zeros)."""
    fwd = phase == "fwd"
    z = cp.zigzag
    line_hm, line_state = ((56, 60) if z else (98, 102)) if fwd else ((173, 177) if z else (217, 221))
    summary, state = ("hm", "initial_state") if fwd else ("dhm", "dht")
    new = "k.new_zeros" if fwd else "q.new_zeros"
    d.step(f"{phase}.cp_summary", "forward" if fwd else "backward", t.fwd_call if fwd else t.bwd_call,
           note="every rank allocates; the chain's " + ("last rank exports no summary" if fwd else "first rank exports none"))
    lead = (2,) if z else ()
    d.buffer(summary, Group.COMMUNICATION, (*lead, *SUMMARY), "fp32",                     # [(2,) HV, K, V+K] fp32
             src(CPH, f"chunk_gated_delta_rule_{'fwd_h' if fwd else 'bwd_dhu'}_pre_process", line_hm,
                 f"{summary} = {new}({'2, ' if z else ''}HV, K, V + K, dtype=torch.float32)"), f"{phase}.cp_merge")
    d.buffer(state, Group.SAVED if fwd else Group.STATE, (cp.local_seqs, HV, DK, DV), "fp32",   # [N, HV, K, V] fp32
             src(CPH, f"chunk_gated_delta_rule_{'fwd_h' if fwd else 'bwd_dhu'}_pre_process", line_state,
                 f"{state} = {new}(N, HV, K, V, dtype=torch.float32)"),
             "bwd.return" if fwd else t.local_end(d.options),
             note="saved for backward (compress_h0 returns it unchanged)" if fwd else "read by the state-gradient pass")
    exports = (not cp.is_last) if fwd else (not cp.is_first)
    if z or exports:    # zigzag: the front part exports (fwd) / the back part exports (bwd) on every rank
        if fwd:
            d.autotune("chunk_cp_fwd_kernel_h", fwd_h_key(t), src("ops/cp/chunk_fwd.py", "chunk_cp_fwd_h", 316,
                       "chunk_cp_fwd_kernel_h[grid]("), note="key=['H', 'HV', 'K', 'V', 'BT', 'USE_G', 'USE_GK', 'USE_BG', "
                       "'IS_VARLEN', 'MULTI_SEQS'] (ops/cp/chunk_fwd.py:30)")
        else:
            d.autotune("chunk_cp_bwd_kernel_dh", bwd_dh_key(t), src("ops/cp/chunk_bwd.py", "chunk_cp_bwd_dh", 304,
                       "chunk_cp_bwd_kernel_dh[grid]("), note="key=['H', 'HV', 'K', 'V', 'BT', 'USE_G', 'USE_GK', 'USE_BG', "
                       "'IS_VARLEN'] (ops/cp/chunk_bwd.py:29)")


def _gather(d: Declaration, cp: Cp, phase: str) -> None:
    """all_gather_into_tensor: every rank's summaries, W of them (zigzag: W x 2), then zigzag's chain."""
    fwd = phase == "fwd"
    z = cp.zigzag
    summary, gathered, chain = ("hm", "ag_hm", "hm_chain") if fwd else ("dhm", "ag_dhm", "dhm_chain")
    d.step(f"{phase}.cp_all_gather", "forward" if fwd else "backward",
           src(CPH, f"chunk_gated_delta_rule_{'fwd_h' if fwd else 'bwd_dhu'}_pre_process",
               (79 if z else 123) if fwd else (198 if z else 240), f"{gathered}, _ = all_gather_into_tensor({summary}, group=context.group)"),
           note="NCCL all-gather; NCCL's own buffers are outside PyTorch's allocator")
    lead = (cp.world, 2) if z else (cp.world,)
    d.buffer(gathered, Group.COMMUNICATION, (*lead, *SUMMARY), "fp32",                     # [W, (2,) HV, K, V+K] fp32
             src("ops/cp/comm.py", "all_gather_into_tensor", 39,
                 "out = torch.empty(world_size, *inp.shape, device=inp.device, dtype=inp.dtype)"), f"{phase}.cp_merge")
    if not z:
        return
    line = 81 if fwd else 200
    cat = f"{chain} = torch.cat([{gathered}[:, 0], {gathered}[:, 1].flip(0)])"
    d.step(f"{phase}.cp_chain", "forward" if fwd else "backward",
           src(CPH, f"chunk_gated_delta_rule_{'fwd_h' if fwd else 'bwd_dhu'}_pre_process", line, cat),
           note="chain order: rank fronts ascending, then rank backs descending")
    d.buffer(f"{gathered}_back_flipped", Group.COMMUNICATION, (cp.world, *SUMMARY), "fp32",   # [W, HV, K, V+K] fp32
             src(CPH, f"chunk_gated_delta_rule_{'fwd_h' if fwd else 'bwd_dhu'}_pre_process", line, cat),
             f"{phase}.cp_chain", note="flip copies; freed when the statement ends")
    d.buffer(chain, Group.COMMUNICATION, (2 * cp.world, *SUMMARY), "fp32",                 # [2W, HV, K, V+K] fp32
             src(CPH, f"chunk_gated_delta_rule_{'fwd_h' if fwd else 'bwd_dhu'}_pre_process", line, cat), f"{phase}.cp_merge")


def _merge(d: Declaration, cp: Cp, phase: str) -> None:
    """chunk_cp_merge of the preceding (fwd) / following (bwd) ranks' summaries; pre_process returns after it,
    dropping the summaries and the gather."""
    fwd = phase == "fwd"
    z = cp.zigzag
    d.step(f"{phase}.cp_merge", "forward" if fwd else "backward",
           src(CPH, f"chunk_gated_delta_rule_{'fwd_h' if fwd else 'bwd_dhu'}_pre_process",
               (86 if z else 126) if fwd else (205 if z else 252), "chunk_cp_merge("),
           note="the summaries and the gather die when pre_process returns")
    merges = (not cp.is_first) if fwd else (not cp.is_last)
    if z or merges:     # zigzag: the back part merges (fwd) / the front part (bwd) on every rank
        d.autotune("chunk_cp_fwd_bwd_kernel_merge", MERGE_KEY, src("ops/cp/chunk_merge.py", "chunk_cp_merge", 239,
                   "chunk_cp_fwd_bwd_kernel_merge[grid]("),
                   note="key=['HV', 'K', 'V', 'STATE_V_FIRST', 'IS_INTRACARD'] (chunk_merge.py:82); FORWARD is not in "
                        "the key: the backward's merge reuses the forward's tuning")


def _cp_steps(d: Declaration, cp: Cp, t: Target, phase: str) -> None:
    _summarise(d, cp, t, phase)
    _gather(d, cp, phase)
    _merge(d, cp, phase)


# ---------------------------------------------------------------- the single-GPU model at the local tokens


CONTEXT = "ops/cp/context.py"
LOCAL_BOUNDARIES = {   # the device copy of _interval_cp_meta's int32 boundaries (context.py:153), per layout
    "contiguous": src(CONTEXT, "get_cp_cu_seqlens", 220, "cu_seqlens=cu_seqlens_local.to(device=cu_seqlens.device, non_blocking=True),"),
    "zigzag": src(CONTEXT, "get_cp_cu_seqlens", 263, "cu_seqlens=cu_seqlens_local.to(device=cu_seqlens.device, non_blocking=True),"),
}
# the CP path's own autotune argument sets: a tensor h0 / dht where the single-GPU call passes None
CP_SIGNATURES = {"chunk_gated_delta_rule_fwd_kernel_h_blockdim64": "initial_state from the CP merge",
                 "chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64": "dht from the CP merge"}


def _local_buffer(b: Buffer, subs: dict, layout: str) -> Buffer:
    """A single-GPU buffer at the rank's local tokens; the boundaries CP passes are int32 (context.py:153)."""
    shape = tuple(sp.sympify(x).subs(subs, simultaneous=True) for x in b.shape)
    key = None if b.cache_key is None else tuple(sp.sympify(x).subs(subs, simultaneous=True) for x in b.cache_key)
    if b.name == "cu_seqlens":
        return replace(b, shape=shape, dtype="int32", source=LOCAL_BOUNDARIES[layout],
                       note="cp_context.cu_seqlens (the local boundaries; tensor_cache keeps it referenced)")
    if b.name in ("chunk_indices", "seq_lens"):      # .to(cu_seqlens) / torch.diff of int32 boundaries
        return replace(b, shape=shape, dtype="int32", cache_key=key)
    return replace(b, shape=shape, cache_key=key)


def _global_boundaries(d: Declaration, t: Target) -> None:
    d.buffer("cu_seqlens_global", Group.INPUTS, (2,), "int64",                          # [2] int64: [0, S]
             src(CONTEXT, "build_cp_context", 277, "def build_cp_context(cu_seqlens, group, ..., layout='contiguous')"),
             note="the caller's global boundaries; get_cp_cu_seqlens's tensor_cache keeps them", retained=True)


class _CpDeclaration(Declaration):
    """A Declaration that carries the build's options (the backward's local end depends on the contract)."""

    def __init__(self, options: dict) -> None:
        super().__init__()
        self.options = options


def _splice(inner: LifetimeModel, cp: Cp, t: Target, options: dict) -> Declaration:
    """The single-GPU model's steps, buffers and autotuned launches at the local tokens, with the CP steps before
    each state pass (fwd.delta_h, bwd.dhu), and the device's ``seq_lens`` moved to where it is first made on the
    device: ``prepare_chunk_offsets`` (with ``cu_seqlens_cpu``, ``prepare_chunk_indices`` diffs the host copy)."""
    subs = cp.local()
    d = _CpDeclaration(options)
    moved = [b for b in inner.buffers if b.name == "seq_lens"]
    for step in inner.steps:
        if step.name == "fwd.delta_h":
            _cp_steps(d, cp, t, "fwd")
        if step.name == "bwd.dhu":
            _cp_steps(d, cp, t, "bwd")
        d.steps.append(step)
        for b in inner.buffers:
            if b.allocated_at != step.name or b in moved:
                continue
            if b.name == "chunk_offsets":
                d.buffers += [_local_buffer(replace(m, allocated_at=step.name), subs, cp.layout) for m in moved]
            if b.name == "cu_seqlens":        # the caller's global boundaries, then build_cp_context's local ones
                _global_boundaries(d, t)
            d.buffers.append(_local_buffer(b, subs, cp.layout))
        d.autotuned += [replace(a, key=tuple(sp.sympify(k).subs(subs, simultaneous=True) for k in a.key),
                                held_when=sp.sympify(a.held_when).subs(subs, simultaneous=True),
                                signature=CP_SIGNATURES.get(a.kernel, a.signature),
                                held_measured=None if a.held_measured is None else sp.false)   # never measured cold under CP
                        for a in inner.autotuned if a.step == step.name]
    return d


def build(target: Target, inner: LifetimeModel, cp: Cp, options: dict, device: str) -> LifetimeModel:
    if cp.rank == "middle" and cp.world < 3:
        raise RefusedShapeError(f"cp_rank middle needs a world size of 3 or more (got {cp.world}): ranks 0 and W-1 are the ends")
    d = _splice(inner, cp, target, options)
    comm = (f"W={cp.world} {cp.layout}, {cp.rank} rank" + (" (zigzag: every rank launches every CP kernel)" if cp.zigzag else ""))
    return d.freeze(
        key=f"fla-{target.name}-cp@{inner.version}", implementation=inner.implementation + " under fla.ops.cp context parallelism",
        version=inner.version, device=device,
        summary=f"one rank of {comm}; total sequence S over W ranks, S/W local tokens; local computation: {inner.summary}",
        options=tuple(sorted({**dict(inner.options), "cp": cp.world, "cp_layout": cp.layout, "cp_rank": cp.rank}.items())),
        notes=inner.notes + (
            "the local chunk computation is the single-GPU model at the local tokens: "
            + ("one sequence of S/W" if not cp.zigzag else "two sequences of S/(2W) (zigzag's front and back parts)"),),
        not_modelled=inner.not_modelled[:2] + (
            "NCCL's own memory (communicators, channel and proxy buffers): outside PyTorch's allocator, not a figure here",
            "a freed communication tensor's reuse deferred by the NCCL stream (recordStream): assumed not deferred "
            "(a synchronous all-gather)",
            "several packed sequences (MBS > 1) and CUDA graphs (use_graph)",
            "the local kernel's failing autotune configs (dhu's held dv, a cold first call's) as measured without CP: "
            "assumed the same under CP"),
    )


# ---------------------------------------------------------------- registration

from livebytes.estimator.registry import ModelSpec, register  # noqa: E402  (the registration block closes the file)

WORLD_SIZES = (2, 1, 4, 8, 16, 32, 64, 128, 256, 512, 1024)   # powers of two; 2 first: the default (the size validated on two GPUs)
CP_OPTIONS = {"cp": WORLD_SIZES, "cp_layout": LAYOUTS, "cp_rank": RANKS}


def seq_multiple(options: dict) -> tuple[int, str]:
    """The total tokens FLA splits: a multiple of W (contiguous) or 2W (zigzag), and why."""
    parts = options["cp"] * (2 if options["cp_layout"] == "zigzag" else 1)
    return parts, (f"FLA's get_cp_cu_seqlens needs the total tokens divisible by {'2 * world_size' if parts != options['cp'] else 'world_size'} "
                   f"({parts}) (ops/cp/context.py:204)")


def refuse_packed(shape, device) -> str | None:
    if shape.mbs != 1:
        return (f"this model covers one sequence split across the ranks (batch_size 1), got batch_size {shape.mbs}: with "
                "several packed sequences each rank's local boundaries depend on where its interval falls")
    return None


kda_refuse, gdn_refuse = fla_kda.refuse, fla_gdn.refuse   # module-level names: the spec index stores the functions


def refuse_kda(shape, device) -> str | None:
    """chunk_kda's own refusals (fla_kda.refuse), then one sequence over the ranks."""
    return kda_refuse(shape, device) or refuse_packed(shape, device)


def refuse_gdn(shape, device) -> str | None:
    return gdn_refuse(shape, device) or refuse_packed(shape, device)


def _kda_inner(kernel_version, device, contract="report", recompute=True, gva=False) -> LifetimeModel:
    return fla_kda.build(version=kernel_version, contract=contract, recompute=recompute, forward_only=False,
                         device=device.name, gva=gva)


def _gdn_inner(kernel_version, device, gva=False) -> LifetimeModel:
    return fla_gdn.build(forward_only=False, device=device, gva=gva, version=kernel_version)


@dataclass(frozen=True)
class CpVersion:
    """One registered CP model: a kernel's CP path (``Target``) at one entry of its kernel model's ``VERSIONS``, which
    names the version (CP's lines are the same fla-core wheel's). A new fla-core version is an entry derived from the
    one it differs from (``derive``): its kernel version entry, and a ``Target`` with the cited lines that moved."""

    target: Target
    kernel_version: object         # fla_kda.FlaVersion / fla_gdn.GdnVersion: the single-GPU model at the local tokens
    implementation: str
    covers: str                    # "{version}": the kernel version's
    inner: Callable                # (kernel_version, device, **kernel options) -> the single-GPU model
    kernel_options: dict           # the kernel model's options (the CP options are added)
    refuse: Callable               # module-level: the spec index stores it

    def derive(self, **overrides) -> "CpVersion":
        return replace(self, **overrides)

    @property
    def version(self) -> str:
        return self.kernel_version.version

    @property
    def key(self) -> str:
        return f"fla-{self.target.name}-cp@{self.version}"


def _builder(v: CpVersion):
    def build_for(device, cp=2, cp_layout="contiguous", cp_rank="first", **kernel_options):
        inner = v.inner(v.kernel_version, device, **kernel_options)
        return build(v.target, inner, Cp(cp, cp_layout, cp_rank), kernel_options, device.name)
    return build_for


VERSIONS: tuple[CpVersion, ...] = (
    CpVersion(KDA, fla_kda.FLA_0_6_0, "FLA chunk_kda (Triton) under fla.ops.cp",
              "fla-core {version} chunk_kda forward + backward, one rank of context parallelism (contiguous or zigzag), "
              "report or plain contract, recompute on or off; the shape's S is the total sequence over W ranks",
              _kda_inner, fla_kda.OPTIONS, refuse_kda),
    CpVersion(GDN, fla_gdn.GDN_0_6_0, "FLA chunk_gated_delta_rule (Triton) under fla.ops.cp",
              "fla-core {version} Gated DeltaNet forward + backward as Qwen3-Next calls it, one rank of context parallelism "
              "(contiguous or zigzag); the shape's S is the total sequence over W ranks; not measured under context "
              "parallelism (the single-GPU backward is, on the H200 with Triton 3.9.0)",
              _gdn_inner, fla_gdn.OPTIONS, refuse_gdn),
)


def _register(v: CpVersion) -> None:
    register(ModelSpec(
        key=v.key, implementation=v.implementation, version=v.version, covers=v.covers.format(version=v.version),
        builder=_builder(v), refuse=v.refuse, options={**v.kernel_options, **CP_OPTIONS}, default_device="H200",
        seq_multiple=seq_multiple,
    ))


for _v in VERSIONS:
    _register(_v)

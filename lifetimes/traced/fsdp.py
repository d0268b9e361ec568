"""FSDP2 (``torch.distributed.fsdp.fully_shard`` of torch 2.11.0, one call per decoder block ``model.layers.N`` then
one on the root) on a traced training step: the per-rank memory of ``world`` ranks, rank 0 (``torch.chunk`` gives it
the largest shard), as named rules with their source lines.

Every rule cites torch 2.11.0's ``torch/distributed/fsdp/_fully_shard/`` (the H200 image's torch), ``FILE:LINE``:

- ``shard_rows`` / ``padded_shard_numel``: dim 0 of each parameter chunked over W, rank 0's chunk padded to the
  largest (_fsdp_param.py:381-390, _fsdp_common.py:114-120): each parameter is its own ``new_zeros`` allocation;
- sharded gradients: one flat reduce-scatter output per unit (block or root), the sum of its padded shards in the
  parameters' dtype (no MixedPrecisionPolicy: reduce_dtype None, _fsdp_collectives.py:537), the gradients views into it
  (:611) until ``zero_grad``;
- optimizer states and temporaries: made by the optimizer on the shards (``zeros_like`` of the local tensor), so each
  per-parameter buffer of the traced optimizer is scaled from the parameter's elements to its shard's (``scaled``);
- the all-gather (``unshard``): W > 1: a flat output of W x the unit's padded shards (_fsdp_collectives.py:263, on the
  copy-in stream; the input is a view into it, :182), then one unsharded parameter of W x its padded shard per
  parameter (_fsdp_param.py:477 / :931), freed at reshard (:936). W = 1: no collective, the unsharded parameters are
  copies of the shards (_fsdp_param_group.py:368-391). Forward: the flat output is kept until the next unit's copy-out
  (_fsdp_param_group.py:363, :415), the last one until the root's post-forward (_fsdp_state.py:292); a block reshards
  after its forward (``reshard_after_forward`` None -> True, _fully_shard.py:198-202), the root does not
  (_fsdp_state.py:196). Backward: each unit's pre-backward prefetches the unit before it in post-forward order, one
  deep (_fsdp_param_group.py:634-647; the root's prefetches the last block), the flat output freed after the copy-out
  (:421);
- the reduce-scatter (``post_backward``, after the unit's backward): reshard (:529), the previous reduce-scatter input
  freed (:541), the input W x the padded shards allocated (_fsdp_collectives.py:522), the unsharded gradients freed
  (:531), the output allocated (:537); the root's runs in the final callback, which frees the last input
  (_fsdp_state.py:337).

What is not modelled is listed in ``NOT_MODELLED``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from collections import Counter

from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source, Step
from livebytes.estimator.errors import LivebytesError

MAX_WORLD = 1 << 16          # --fsdp: ranks of one mesh dimension; beyond any machine built
TORCH = "torch 2.11.0"
FSDP = "torch/distributed/fsdp/_fully_shard/"
ROOT = "root"
BLOCK = re.compile(r"^(.*?\blayers\.\d+)(?:\.|$)")

NOT_MODELLED = (
    "FSDP2: NCCL's own buffers (communicators, channels, proxy and registered memory) outside PyTorch's allocator",
    "FSDP2: the caching allocator's per-stream pools (CUDACachingAllocator.cpp: a free block is reused only by its own "
    "stream): the flat all-gather outputs (copy-in stream) and the reduce-scatter outputs (reduce-scatter stream) are "
    "replayed in one pool with the default stream's blocks, so the reserved peak may be short by the segments those "
    "pools hold; the allocated peak does not depend on it",
    "FSDP2: fully_shard's copy at wrap time (each block's parameters live beside their new shards until the call returns, "
    "_fsdp_param.py:390): the harness allocates the shards alone",
    "FSDP2: HSDP, CPU offload, explicit prefetching, reshard_after_forward other than the default, and mixed-precision "
    "policies other than none (param_dtype, reduce_dtype)",
    "FSDP2: ranks other than 0 (their shards are the same or smaller: torch.chunk gives rank 0 ceil(d0 / W) rows)",
    "FSDP2: the optimizer on DTensor parameters is not traced: assumed to allocate what it does on the traced plain "
    "tensors, scaled to the shards (DTensor runs the foreach ops on the local tensors)",
)


@dataclass(frozen=True)
class Param:
    """One parameter as the harness made it: its name, shape and bytes per element."""
    fqn: str
    shape: tuple
    itemsize: int
    world: int = 0              # the ranks this parameter is sharded over where not the mesh's (experts under EP: W / EP)
    trainable: bool = True      # requires grad (LoRA's frozen base does not: no gradient to reduce-scatter)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def shard_rows(rows: int, world: int) -> int:
    """Rows of rank 0's chunk: ``torch.chunk(param, W, dim=0)`` makes chunks of ceil(rows / W) rows, and FSDP pads every
    rank's shard to chunk 0's size ("0th always padded", _fsdp_param.py:387; _fsdp_common.py:117)."""
    return -(-rows // world)


def padded_shard_numel(p: Param, world: int) -> int:
    """Elements of one rank's padded shard (``padded_sharded_param_size``): a 0-dim parameter is one row."""
    rows, rest = (p.shape[0], math.prod(p.shape[1:])) if p.shape else (1, 1)
    return shard_rows(rows, p.world or world) * rest


def gathered_bytes(params: list[Param], world: int) -> int:
    """A unit's all-gather output (or reduce-scatter input) in bytes: each parameter's padded shard times the ranks it
    is sharded over (the mesh's W, or its own: an expert's W / EP)."""
    return sum((p.world or world) * padded_shard_numel(p, world) * p.itemsize for p in params)


def shard_bytes(params: list[Param], world: int) -> int:
    """A unit's padded shards in bytes: its sharded parameters, its gradient shard (the reduce-scatter output) and one
    rank's part of its all-gather."""
    return sum(padded_shard_numel(p, world) * p.itemsize for p in params)


def unit_of(path: str) -> str:
    """The fully_shard unit a module path belongs to: its decoder block ``...layers.N``, else the root."""
    m = BLOCK.match(path or "")
    return m.group(1) if m else ROOT


def _src(file: str, line: int, function: str, quote: str) -> Source:
    return Source(FSDP + file, function, line, quote)


SHARD_SRC = _src("_fsdp_param.py", 390, "_init_sharded_param",
                 "padded_sharded_param = param_data.new_zeros(padded_sharded_size)")
AG_OUT_SRC = _src("_fsdp_collectives.py", 263, "foreach_all_gather",
                  "all_gather_output = all_gather_comm.allocate((all_gather_input_numel * world_size,), ...)")
UNSHARDED_SRC = _src("_fsdp_param.py", 931, "alloc_storage",
                     "storage.resize_(size)  # all_gather_outputs: numel * world_size (_fsdp_param.py:477)")
RS_IN_SRC = _src("_fsdp_collectives.py", 522, "foreach_reduce",
                 "reduce_scatter_input = reduce_scatter_comm.allocate((reduce_scatter_input_numel,), ...)")
RS_OUT_SRC = _src("_fsdp_collectives.py", 537, "foreach_reduce",
                  "reduce_output = reduce_scatter_comm.allocate((reduce_scatter_output_numel,), ...)")


def shard_of(tensor: str) -> str:
    """A sharded buffer's tensor in words: the whole parameter's shape is not the shard's (``Buffer.tensor``)."""
    return f"rank 0's shard of {tensor}" if tensor else ""


def scaled(b: Buffer, p: Param, world: int) -> Buffer:
    """A per-parameter buffer of the optimizer (a state or a temporary) made on the shard: its bytes per element of the
    parameter kept, the elements rank 0's shard's (unpadded: ``zeros_like`` of the local tensor, which for rank 0 is
    the padded size). A buffer not a whole multiple of the parameter's elements (a step counter) is kept."""
    nbytes = b.nbytes
    if not nbytes.is_Integer or int(nbytes) % p.numel:
        return b
    return replace(b, shape=(int(nbytes) // p.numel * padded_shard_numel(p, world),),
                   note=f"{b.note}; FSDP2 rank 0's shard of {p.fqn}", tensor=shard_of(b.tensor))


# ------------------------------------------------------------------------------------------------ the per-rank step

class _Plan:
    """FSDP2's steps placed before or after the traced steps (by position), its buffers and the traced buffers whose
    free it moves (buffer name -> step name)."""

    def __init__(self, steps: list[tuple[str, str, str]]):
        self.steps = steps                      # (name, phase, module) of the traced steps, in order
        self.before: dict[int, list[Step]] = {}
        self.after: dict[int, list[Step]] = {}
        self.made: list[dict] = []
        self.frees: dict[str, str] = {}

    def step(self, where: str, i: int, name: str, phase: str, note: str) -> str:
        table = self.before if where == "before" else self.after
        table.setdefault(i, []).append(Step(name, phase, note=note))
        return name

    def add(self, name: str, group: Group, nbytes: int, source: Source, at: str, note: str, unit: str,
            freed: str | None = None) -> str:
        self.made.append(dict(name=name, group=group, shape=(nbytes,), dtype="uint8", source=source, allocated_at=at,
                              note=note, module=unit if unit != ROOT else ""))
        if freed is not None:
            self.frees[name] = freed
        return name

    def name(self, i: int) -> str:
        return self.steps[i][0]

    def timeline(self, original: tuple[Step, ...]) -> tuple[Step, ...]:
        """The model's steps (the harness first, then the traced ones, ``self.steps``) with FSDP2's in place."""
        out = [original[0]]
        for i, step in enumerate(original[1:]):
            out += self.before.get(i, []) + [step] + self.after.get(i, [])
        return tuple(out)

    def buffers(self) -> list[Buffer]:
        return [Buffer(**kw, freed_after=self.frees.get(kw["name"])) for kw in self.made]


def _spans(steps: list[tuple[str, str, str]], phase: str) -> dict[str, tuple[int, int]]:
    """Unit -> (first, last) position of its steps in ``phase``; ``""``: every step of the phase."""
    out: dict[str, tuple[int, int]] = {}
    for i, (_, ph, module) in enumerate(steps):
        if ph == phase:
            for u in (unit_of(module), ""):
                out[u] = (out.get(u, (i, i))[0], i)
    return out


def _gather(plan: _Plan, u: str, i: int, pass_: str, params: list[Param], world: int) -> str | None:
    """A unit's all-gather issued before traced step ``i``: the flat output (W > 1 only), named; None at W = 1, where
    ``unshard`` allocates nothing (_fsdp_param_group.py:324)."""
    if world == 1:
        return None
    at = plan.step("before", i, f"{pass_[:3]}.fsdp.{u}.all_gather", pass_,
                   f"{pass_}: FSDP2 all-gather of {u} (copy-in stream)")
    n = gathered_bytes(params, world)
    return plan.add(f"fsdp.{u}.{pass_[:3]}.all_gather_output", Group.FSDP_GATHER, n, AG_OUT_SRC, at,
                    f"{world} x {shard_bytes(params, world):,} B: the unit's padded shards, gathered"
                    if n == world * shard_bytes(params, world) else
                    f"{n:,} B: the unit's padded shards gathered (experts over their own W / EP ranks)", u)


def _copy_out(plan: _Plan, u: str, i: int, pass_: str, params: list[Param], world: int, freed: str) -> str:
    """The unit's unsharded parameters before traced step ``i``: one W x padded shard per parameter, freed at reshard."""
    at = plan.step("before", i, f"{pass_[:3]}.fsdp.{u}.copy_out", pass_, f"{pass_}: FSDP2 unsharded parameters of {u}")
    for p in params:
        w = p.world or world
        plan.add(f"fsdp.{pass_[:3]}.unsharded.{p.fqn}", Group.FSDP_GATHER,
                 w * padded_shard_numel(p, world) * p.itemsize, UNSHARDED_SRC, at,
                 f"{p.fqn} {list(p.shape)}, {w} x {padded_shard_numel(p, world):,} elements", u, freed)
    return at


def _forward(plan: _Plan, units: list[str], params: dict, world: int) -> None:
    """Root then each block: all-gather, copy-out (the previous flat output freed between them), blocks resharded after
    their forward, the root kept unsharded (freed at its post-backward, ``_backward``)."""
    fwd = _spans(plan.steps, "forward")
    last_bwd = _spans(plan.steps, "backward")[""][1]
    prev = None
    for u in units:
        i = fwd[""][0] if u == ROOT else fwd[u][0]
        flat = _gather(plan, u, i, "forward", params[u], world)
        if prev is not None:
            plan.frees[prev] = f"for.fsdp.{u}.all_gather"        # _fsdp_param_group.py:363
        prev = flat
        _copy_out(plan, u, i, "forward", params[u], world, plan.name(last_bwd if u == ROOT else fwd[u][1]))
    if prev is not None:
        plan.frees[prev] = plan.name(fwd[""][1])                    # the root's post-forward, _fsdp_state.py:292


def _reduce_scatter(plan: _Plan, u: str, i: int, prev_input: str | None, params: list[Param], grads: list[str],
                    world: int, zero_grad: str) -> str | None:
    """A unit's post-backward after traced step ``i``: the previous input freed, the input allocated, the unsharded
    gradients freed, the output (the sharded gradients) allocated and kept to zero_grad; the input's name (the
    previous one's where the unit has no parameter with a gradient: ``post_backward`` reduces only
    ``fsdp_params_with_grad`` and returns, when there are none, before the previous input is freed (:541))."""
    params = [p for p in params if p.trainable]
    if not params:
        return prev_input
    if prev_input is not None:
        plan.frees[prev_input] = plan.name(i)                       # _fsdp_param_group.py:541
    n = shard_bytes(params, world)
    at = plan.step("after", i, f"bac.fsdp.{u}.reduce_scatter_input", "backward",
                   f"backward: FSDP2 post-backward of {u}: the reduce-scatter's input")
    rs_in = plan.add(f"fsdp.{u}.reduce_scatter_input", Group.FSDP_REDUCE, gathered_bytes(params, world), RS_IN_SRC, at,
                     f"{world} x {n:,} B: the unit's gradients padded on dim 0 to a multiple of {world}", u)
    for g in grads:
        plan.frees[g] = at                                          # _fsdp_collectives.py:531
    out = plan.step("after", i, f"bac.fsdp.{u}.reduce_scatter_output", "backward",
                    f"backward: FSDP2 post-backward of {u}: the sharded gradients (reduce-scatter stream)")
    plan.add(f"fsdp.{u}.sharded_grads", Group.PARAM_GRADS, n, RS_OUT_SRC, out,
             f"{n:,} B: the unit's padded gradient shards, each parameter's .grad a view", u, zero_grad)
    return rs_in


def _backward(plan: _Plan, blocks: list[str], params: dict, grads: dict, world: int, zero_grad: str) -> None:
    """Blocks in reverse: each one's pre-backward copy-out, the prefetch of the block before it (the root's pre-backward
    prefetches the last), its post-backward's reduce-scatter; then the root's in the final callback."""
    bwd = _spans(plan.steps, "backward")
    first, last = bwd[""]
    # the root's pre-backward hook runs when the engine reaches the loss's node, after backward() made the seed gradient
    # (torch.ones_like(loss), torch 2.11 autograd/__init__.py:374 _make_grads): the prefetch goes after that step
    hook = first + 1 if plan.name(first).endswith(".ones_like") and first + 1 <= last else first
    pending = _gather(plan, blocks[-1], hook, "backward", params[blocks[-1]], world) if blocks else None
    rs_in = None
    for k in range(len(blocks) - 1, -1, -1):
        u = blocks[k]
        lo, hi = bwd[u]
        at = _copy_out(plan, u, lo, "backward", params[u], world, plan.name(hi))
        if pending is not None:
            plan.frees[pending] = at                                # _fsdp_param_group.py:421
        pending = _gather(plan, blocks[k - 1], lo, "backward", params[blocks[k - 1]], world) if k else None
        rs_in = _reduce_scatter(plan, u, hi, rs_in, params[u], grads.get(u, []), world, zero_grad)
    rs_in = _reduce_scatter(plan, ROOT, last, rs_in, params[ROOT], grads.get(ROOT, []), world, zero_grad)
    if rs_in is not None:               # the final callback frees the last input, after every post-backward
        plan.frees[rs_in] = (plan.after.get(last) or [Step(plan.name(last), "backward")])[-1].name   # _fsdp_state.py:337


def units_of(params: dict[str, Param], steps: list[tuple[str, str, str]]) -> tuple[list[str], dict]:
    """The blocks in forward order and each unit's parameters; refused in one line where the traced step does not
    run each block's forward and backward as one run of steps each, in order (FSDP2's hooks fire at their ends)."""
    by_unit: dict[str, list[Param]] = {ROOT: []}
    for p in params.values():
        by_unit.setdefault(unit_of(p.fqn), []).append(p)
    fwd, bwd = _spans(steps, "forward"), _spans(steps, "backward")
    blocks = sorted((u for u in by_unit if u != ROOT), key=lambda u: fwd.get(u, (-1,))[0])
    missing = [u for u in blocks if u not in fwd or u not in bwd]
    if missing or "" not in bwd:
        raise LivebytesError(f"--fsdp: the traced step has no forward or backward of {', '.join(missing) or 'the model'}")
    for a, b in zip(blocks, blocks[1:]):
        if fwd[a][1] >= fwd[b][0] or bwd[b][1] >= bwd[a][0]:
            raise LivebytesError(f"--fsdp: the traced steps of {a} and {b} interleave; FSDP2's per-block hooks cannot "
                                 "be placed")
    return blocks, by_unit


def _kept_to_zero_grad(model: LifetimeModel, phases: dict[str, str]) -> tuple[str, dict[str, list[str]]]:
    """The step the parameters' gradients are freed after (zero_grad's), and by unit the buffers of the forward and
    backward kept to it: the unsharded gradients (the fused loss's precomputed weight gradient among them)."""
    ends = Counter(b.freed_after for b in model.buffers if b.group is Group.PARAM_GRADS and b.freed_after)
    if not ends:
        raise LivebytesError("--fsdp: the traced step keeps no parameter gradients")
    zero_grad = ends.most_common(1)[0][0]
    grads: dict[str, list[str]] = {}
    for b in model.buffers:
        if b.freed_after == zero_grad and not b.cached and phases.get(b.allocated_at) in ("forward", "backward"):
            grads.setdefault(unit_of(b.module), []).append(b.name)
    return zero_grad, grads


def _param_of(name: str, by_fqn: dict[str, Param]) -> Param | None:
    """The parameter an optimizer buffer ``opt.<fqn>.<op>`` belongs to (the longest name that matches)."""
    rest = name[len("opt."):] if name.startswith("opt.") else ""
    best = max((f for f in by_fqn if rest.startswith(f + ".")), key=len, default=None)
    return by_fqn.get(best) if best else None


def shard_model(model: LifetimeModel, params: dict[str, Param], steps: list[tuple[str, str, str]],
                world: int) -> LifetimeModel:
    """Rank 0's step under FSDP2 at ``world`` ranks: ``model`` (a traced step, its steps after the harness ``steps``:
    name, traced phase, module) with its parameters (harness buffer name -> ``Param``) sharded, its optimizer's
    per-parameter buffers on the shards, its gradients freed at each unit's post-backward, and FSDP2's collective
    buffers and steps in the order it issues them."""
    blocks, by_unit = units_of(params, steps)
    phases = {name: phase for name, phase, _ in steps}
    zero_grad, grads = _kept_to_zero_grad(model, phases)
    plan = _Plan(steps)
    _forward(plan, [ROOT] + blocks, by_unit, world)
    _backward(plan, blocks, by_unit, grads, world, zero_grad)
    by_fqn = {p.fqn: p for p in params.values()}
    out = []
    for b in model.buffers:
        if b.name in params and b.group is Group.PARAMETERS:
            p = params[b.name]
            b = replace(b, shape=(padded_shard_numel(p, world) * p.itemsize,), source=SHARD_SRC, tensor=shard_of(b.tensor),
                        note=f"{b.note}; FSDP2 rank 0's padded shard: {shard_rows(p.shape[0] if p.shape else 1, p.world or world)} "
                             f"row(s) of {world}")
        elif b.group in (Group.OPTIMIZER_STATES, Group.OPTIMIZER_WORK) and (p := _param_of(b.name, by_fqn)):
            if not p.trainable:      # the trace and the frozen set disagree: no placement is right, say so
                raise LivebytesError(f"--fsdp: the traced optimizer keeps {b.name} for {p.fqn}, a parameter taken "
                                     "as frozen")
            b = scaled(b, p, world)
        if b.name in plan.frees:
            b = replace(b, freed_after=plan.frees[b.name])
        out.append(b)
    note = (f"FSDP2 at {world} rank{'s' if world > 1 else ''} ({TORCH}'s fully_shard per block, then the root; "
            f"rank 0)")
    return replace(model, steps=plan.timeline(model.steps), buffers=tuple(out + plan.buffers()),
                   options=tuple(model.options) + (("fsdp", world),), summary=f"{model.summary}; {note}",
                   not_modelled=tuple(model.not_modelled) + NOT_MODELLED, notes=tuple(model.notes) + (note,))

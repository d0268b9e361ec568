"""Expert parallelism (``--ep E``) and context parallelism (``--cp C``) on a traced training step: rank 0's memory, as
per-rank arithmetic on the traced (world size 1) step, beside FSDP2 (``traced.fsdp``).

The mesh follows torchtitan (``parallelize``: EP and CP borrow ranks of the FSDP mesh, ``dp_shard_cp``): with ``--fsdp
W`` the GPUs are W, C and E each divide W, the dense parameters are sharded over all W ranks and the experts' over W / E
after EP; without ``--fsdp`` the GPUs are max(C, E) and only the experts are sharded (the rest replicated, as DDP).

What is arithmetic and what is traced -- the traced step is the model's own code at world size 1; nothing of
``torch.distributed`` is traced here:

- EP, the expert states (``shard_experts``): every buffer of the routed experts' parameters, gradients and optimizer
  states (their tensors ``[E, ...]``, E = ``num_experts``) holds E / EP experts on a rank. Shape-only: the grouped_mm
  experts keep one tensor per projection whose dim 0 is the expert, and AdamW's states are ``zeros_like`` of it;
  ``tests/test_cp_ep.py`` checks it against ``torch.distributed.tensor.distribute_tensor(..., Shard(0))`` on a fake
  process group at world size 2.
- EP, the token exchange (``all_to_all_buffers``): torchtitan's ``ExpertParallel`` (``_token_dispatch``: one
  ``all_to_all_single`` of the routed tokens, ``_token_combine``: one back) on each pass through a layer's experts
  (forward, a checkpointed recompute, backward), each output [T x top_k, hidden] in the activations' dtype under
  balanced routing (each rank receives what it sends); the dispatch output alive over the pass, the combine output at
  its end. Arithmetic. ``--routing worst`` with EP > 1 is refused (the receiving rank's rows depend on it).
- CP (``shard_sequence``): each rank holds S / C tokens of every sequence: every traced buffer's formula at S / C
  (the model's code on a rank's tokens is the traced code at that length). Arithmetic.
- CP, the linear-attention layers: flash-linear-attention 0.6.0's ``fla/ops/cp`` (``chunk_delta_h.py``:
  ``chunk_gated_delta_rule_fwd_h_pre_process``, contiguous layout): per layer and pass, ``hm`` [HV, K, V + K] fp32,
  its all-gather [C, HV, K, V + K] fp32 and the initial state [N, HV, K, V] fp32; the backward's ``dhm``, its gather and
  ``dht`` the same. Arithmetic.
- CP, the softmax-attention layers: torch's ``context_parallel`` (``_context_parallel/_attention.py``, the scheme
  torchtitan runs), its default ``_RotateMethod.ALL_GATHER``: forward, the local K and V concatenated (``next_kv``)
  and all-gathered once (C x), the merger's fp32 output [MBS, H, S/C, Dv]; backward, fp32 ``grad_query``,
  ``grad_key``, ``grad_value``, the KV gathered again and the fp32 KV gradients passed by all-to-all (sent and
  received). Arithmetic.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import sympy as sp
import warnings

from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.symbols import MBS, S
from .families import BY_TYPE

MAX_CP = 1 << 16
MAX_EP = 1 << 16
SOLVER_CP = (1, 2, 4, 8)         # plan --solve gpus: the CP degrees users run (within one node)

NOT_MODELLED = (
    "EP/CP: the whole per-rank step is arithmetic on the traced world-size-1 step (lifetimes/traced/parallel.py); "
    "torch.distributed's own code and NCCL's buffers are not traced",
    "EP: unbalanced routing (each rank assumed to receive the T x top_k rows it sends); the padding torchtitan's "
    "permute adds per expert to its alignment",
    "CP: the load-balanced (zigzag) layout, the ring (all-to-all) rotation and FLA CP's conv1d tails (each [N, D, "
    "conv - 1]: bytes)",
)

_EXPERTS = re.compile(r"layers\.(\d+)\.mlp\.experts(?:\.|$)")


@dataclass(frozen=True)
class Mesh:
    """The ranks one answer is for: FSDP2's world (0: no FSDP2), CP and EP degrees, and the GPUs they make."""
    fsdp: int = 0
    cp: int = 1
    ep: int = 1

    @property
    def gpus(self) -> int:
        return self.fsdp or max(self.cp, self.ep)

    @property
    def parallel(self) -> bool:
        return self.cp > 1 or self.ep > 1


def power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def check_mesh(mesh: Mesh, num_experts: int | None, routing: str = "balanced") -> Mesh:
    """The mesh, or one line saying why not: each degree a power of two, C and E dividing --fsdp's W, E dividing the
    experts (and none without experts), worst-case routing refused with EP."""
    for flag, n in (("--cp", mesh.cp), ("--ep", mesh.ep)):
        if not power_of_two(n):
            raise LivebytesError(f"{flag} {n}: a degree is a power of two (1, 2, 4, 8, ...)")
    if mesh.fsdp and not power_of_two(mesh.fsdp) and mesh.parallel:
        raise LivebytesError(f"--fsdp {mesh.fsdp} with --cp/--ep: the mesh's world is a power of two")
    for flag, n in (("--cp", mesh.cp), ("--ep", mesh.ep)):
        if mesh.fsdp and mesh.fsdp % n:
            raise LivebytesError(f"{flag} {n} does not divide --fsdp {mesh.fsdp} (CP and EP borrow the FSDP2 mesh's "
                                 "ranks, as torchtitan's)")
    if mesh.ep > 1:
        if not num_experts:
            raise LivebytesError(f"--ep {mesh.ep}: the model has no routed experts")
        if num_experts % mesh.ep:
            raise LivebytesError(f"--ep {mesh.ep} does not divide the {num_experts} experts")
        if routing != "balanced":
            raise LivebytesError(f"--ep {mesh.ep} with --routing {routing}: the rows a rank receives depend on the "
                                 "routing; answered for balanced routing only")
    return mesh


def check_seq(seq: int, cp: int) -> str | None:
    """A sequence CP cannot split: its length not a multiple of C (each rank holds S / C tokens)."""
    if cp > 1 and seq % cp:
        return f"--cp {cp}: the sequence of {seq:,} tokens does not split into {cp} equal parts"
    return None


# ----------------------------------------------------------------------------------------------- expert parallelism

EP_SRC = Source("torchtitan/distributed/expert_parallel.py", "ExpertParallel._token_dispatch",
                0, "routed_input = all_to_all_single_autograd(routed_input, output_splits, input_splits, device_mesh)")
EP_COMBINE_SRC = Source("torchtitan/distributed/expert_parallel.py", "ExpertParallel._token_combine",
                        0, "routed_output = all_to_all_single_autograd(routed_output, input_splits, output_splits, ...)")
EXPERT_GROUPS = (Group.PARAMETERS, Group.PARAM_GRADS, Group.OPTIMIZER_STATES, Group.OPTIMIZER_WORK)


def is_expert_state(b: Buffer, num_experts: int) -> bool:
    """A routed expert's parameter, gradient or optimizer buffer: its tensor ``[E, ...]`` in an ``experts`` module (not
    ``shared_experts``)."""
    where = f"{b.module}.{b.name}"
    return (b.group in EXPERT_GROUPS and bool(_EXPERTS.search(where) or ".experts." in f".{where}.")
            and b.tensor.startswith(f"[{num_experts}, "))


def expert_bytes(nbytes, num_experts: int, ep: int):
    """Bytes of E / EP experts of a buffer holding E: an integer where the buffer's is."""
    return sp.Integer(int(nbytes)) // ep if sp.sympify(nbytes).is_Integer else sp.sympify(nbytes) / ep


def shard_experts(model: LifetimeModel, num_experts: int, ep: int) -> LifetimeModel:
    """The routed experts' parameters, gradients and optimizer buffers at E / EP experts each."""
    out = []
    for b in model.buffers:
        if ep > 1 and is_expert_state(b, num_experts):
            b = replace(b, shape=(expert_bytes(b.shape[0], num_experts, ep),),
                        tensor=b.tensor.replace(f"[{num_experts}, ", f"[{num_experts // ep}, ", 1),
                        note=f"{b.note}; EP rank 0's {num_experts // ep} of {num_experts} experts")
        out.append(b)
    return replace(model, buffers=tuple(out))


def expert_runs(steps: list[str]) -> list[tuple[str, int, int]]:
    """(layer, first, last) positions of each maximal run of steps in one layer's routed experts."""
    runs: list[tuple[str, int, int]] = []
    for i, name in enumerate(steps):
        m = _EXPERTS.search(name)
        if not m:
            continue
        if runs and runs[-1][0] == m.group(1) and runs[-1][2] == i - 1:
            runs[-1] = (m.group(1), runs[-1][1], i)
        else:
            runs.append((m.group(1), i, i))
    return runs


def all_to_all_buffers(model: LifetimeModel, hidden: int, top_k: int, itemsize: int) -> list[Buffer]:
    """torchtitan's dispatch and combine outputs on each pass through a layer's experts: [T x top_k, hidden] each."""
    names = [s.name for s in model.steps]
    rows = MBS * S * top_k
    out = []
    for layer, lo, hi in expert_runs(names):
        where = f"model.layers.{layer}.mlp.experts"
        tensor = f"[{top_k}*T, {hidden}] {'bf16' if itemsize == 2 else 'fp32'}"
        out.append(Buffer(f"ep.{names[lo]}.dispatch", Group.EP_ALL_TO_ALL, (rows * hidden * itemsize,), "uint8", EP_SRC,
                          names[lo], names[hi], note="EP dispatch: the tokens routed to rank 0's experts",
                          module=where, tensor=tensor))
        out.append(Buffer(f"ep.{names[hi]}.combine", Group.EP_ALL_TO_ALL, (rows * hidden * itemsize,), "uint8",
                          EP_COMBINE_SRC, names[hi], names[hi], note="EP combine: the experts' outputs sent back",
                          module=where, tensor=tensor))
    return out


def expert_parallel(model: LifetimeModel, num_experts: int, top_k: int, hidden: int, ep: int,
                    itemsize: int = 2) -> LifetimeModel:
    """Rank 0's step under EP at ``ep`` ranks: E / EP experts' states, the all-to-all buffers of every experts pass."""
    if ep <= 1:
        return model
    model = shard_experts(model, num_experts, ep)
    note = (f"EP at {ep} ranks (torchtitan's ExpertParallel: {num_experts // ep} of {num_experts} experts a rank, the "
            f"tokens by all-to-all; balanced routing; arithmetic on the traced step)")
    return replace(model, buffers=model.buffers + tuple(all_to_all_buffers(model, hidden, top_k, itemsize)),
                   notes=tuple(model.notes) + (note,), summary=f"{model.summary}; {note}")


# ---------------------------------------------------------------------------------------------- context parallelism

FLA_CP_SRC = Source("fla/ops/cp/chunk_delta_h.py", "chunk_gated_delta_rule_fwd_h_pre_process", 98,
                    "hm = k.new_zeros(HV, K, V + K, dtype=torch.float32)")
FLA_AG_SRC = Source("fla/ops/cp/comm.py", "all_gather_into_tensor", 39,
                    "out = torch.empty(world_size, *inp.shape, device=inp.device, dtype=inp.dtype)")
TORCH_CP_SRC = Source("torch/distributed/tensor/experimental/_context_parallel/_attention.py", "_AllGatherRotater."
                      "exchange_buffers", 289, "self._aggregated_buffer = ft_c.all_gather_single(curr_buffer...)")


@dataclass(frozen=True)
class Layers:
    """The CP-relevant layers of a config: linear-attention ones (module paths, HV, K, V) and softmax-attention ones
    (module paths, query heads, K/V heads, qk and v head dims)."""
    linear: tuple = ()
    linear_dims: tuple = (0, 0, 0)
    attention: tuple = ()
    attention_dims: tuple = (0, 0, 0, 0)


def sequence_formula(expr, cp: int):
    """A buffer's bytes on a rank holding S / C tokens of each sequence."""
    e = sp.sympify(expr)
    return e.xreplace({S: S / cp}) if e.has(S) else e


def shard_sequence(model: LifetimeModel, cp: int) -> LifetimeModel:
    """Every traced buffer at S / C: the rank's tokens."""
    memo: dict = {}

    def at(x):
        if x not in memo:
            memo[x] = sequence_formula(x, cp)
        return memo[x]
    out = []
    for b in model.buffers:
        shape = tuple(at(x) for x in b.shape)
        if shape != tuple(b.shape):
            b = replace(b, shape=shape, cache_key=None if b.cache_key is None else tuple(at(x) for x in b.cache_key))
        out.append(b)
    return replace(model, buffers=tuple(out))


def _passes(names: list[str], module: str) -> list[tuple[int, int]]:
    """(first, last) positions of each maximal run of steps in ``module`` (its own steps, not a sub-module's name
    prefix)."""
    runs: list[tuple[int, int]] = []
    pat = re.compile(re.escape(module) + r"(?:\.|$)")
    for i, name in enumerate(names):
        if pat.search(name):
            if runs and runs[-1][1] == i - 1:
                runs[-1] = (runs[-1][0], i)
            else:
                runs.append((i, i))
    return runs


def cp_buffers(model: LifetimeModel, layers: Layers, cp: int, itemsize: int = 2) -> list[Buffer]:
    """What the CP kernels exchange, per pass through each layer (``Layers``), at rank 0."""
    names = [s.name for s in model.steps]
    phase = {s.name: s.phase for s in model.steps}
    out: list[Buffer] = []
    hv, k, v = layers.linear_dims
    for module in layers.linear:
        for lo, hi in _passes(names, module):
            tag = f"cp.{names[lo]}"
            hm = hv * k * (v + k) * 4
            state = MBS * hv * k * v * 4
            for name, nbytes, src, note in (("hm", hm, FLA_CP_SRC, "FLA CP: this rank's state summary [HV, K, V+K] fp32"),
                                            ("ag_hm", cp * hm, FLA_AG_SRC, f"FLA CP: the summaries gathered, {cp} x"),
                                            ("initial_state", state, FLA_CP_SRC,
                                             "FLA CP: the merged incoming state [N, HV, K, V] fp32")):
                out.append(Buffer(f"{tag}.{name}", Group.COMMUNICATION, (sp.sympify(nbytes),), "uint8", src, names[lo],
                                  names[hi], note=note, module=module))
    hq, hkv, dqk, dv = layers.attention_dims
    for module in layers.attention:
        for lo, hi in _passes(names, module):
            tag = f"cp.{names[lo]}"
            local_kv = MBS * (S / cp) * hkv * (dqk + dv) * itemsize
            items = [("next_kv", local_kv, "torch CP: local K and V concatenated"),
                     ("gathered_kv", cp * local_kv, f"torch CP: K and V all-gathered, {cp} x")]
            if phase[names[lo]] == "forward":
                items.append(("out_fp32", MBS * (S / cp) * hq * dv * 4, "torch CP: the merger's fp32 output"))
            else:
                items += [("grad_qkv_fp32", MBS * (S / cp) * (hq * dqk + hkv * (dqk + dv)) * 4,
                           "torch CP: fp32 grad_query, grad_key, grad_value"),
                          ("dkv_all_to_all", 2 * MBS * (S / cp) * hkv * (dqk + dv) * 4,
                           "torch CP: the fp32 KV gradients sent and received")]
            for name, nbytes, note in items:
                out.append(Buffer(f"{tag}.{name}", Group.COMMUNICATION, (sp.sympify(nbytes),), "uint8", TORCH_CP_SRC,
                                  names[lo], names[hi], note=note, module=module))
    return out


def context_parallel(model: LifetimeModel, layers: Layers, cp: int, itemsize: int = 2) -> LifetimeModel:
    """Rank 0's step under CP at ``cp`` ranks: the traced buffers at S / C, what the CP kernels exchange."""
    if cp <= 1:
        return model
    extra = cp_buffers(model, layers, cp, itemsize)
    model = shard_sequence(model, cp)
    note = (f"CP at {cp} ranks (S / {cp} tokens a rank: FLA's fla/ops/cp for the {len(layers.linear)} linear-attention "
            f"layers, torch's context_parallel all-gather KV for the {len(layers.attention)} softmax-attention layers; "
            "arithmetic on the traced step)")
    return replace(model, buffers=model.buffers + tuple(extra), notes=tuple(model.notes) + (note,),
                   summary=f"{model.summary}; {note}")


# ----------------------------------------------------------------------------------------------- configs

def resolved_config(config: dict):
    """The config as its class reads it (transformers' ``AutoConfig.for_model``; flash-linear-attention's import
    registers its model types): the published Kimi-Linear's ``linear_attn_config`` and ``num_experts`` become
    ``layer_types`` and ``num_local_experts``, defaults filled in."""
    warnings.filterwarnings("ignore")
    from transformers import AutoConfig  # deferred: transformers is not in the core install (model/validate extras)

    row = BY_TYPE.get(config.get("model_type")) if isinstance(config.get("model_type"), str) else None
    if row is None or row.dist != "transformers":
        # deferred: fla is not in the core install (model/validate extras)
        import fla  # noqa: F401     (its model types, some over transformers' own: ~5 s a transformers family skips)
    from transformers.utils import logging  # deferred: transformers is not in the core install (model/validate extras)
    drop = ("architectures", "auto_map", "dtype", "torch_dtype", "transformers_version", "_name_or_path")
    level = logging.get_verbosity()
    logging.set_verbosity_error()           # a small test config's token ids outside its vocabulary: not ours to say
    try:
        return AutoConfig.for_model(**{k: v for k, v in config.items() if k not in drop})
    finally:
        logging.set_verbosity(level)


def layer_kinds(c) -> Layers:
    """The linear- and softmax-attention layers of a resolved config (``resolved_config``) of the four families, with
    their head sizes: Kimi-Linear's KDA and MLA ``self_attn``, Qwen3-Next's ``linear_attn`` (GatedDeltaNet) and
    ``self_attn``, flash-linear-attention's KDA and GatedDeltaNet causal LMs' ``attn``."""
    t, n = c.model_type, int(c.num_hidden_layers)
    kinds = list(getattr(c, "layer_types", None) or [])[:n]
    if t == "kimi_linear":
        heads = int(c.num_attention_heads)
        return Layers(tuple(f"model.layers.{i}.self_attn" for i, k in enumerate(kinds) if k == "linear_attention"),
                      (int(c.linear_num_heads), int(c.linear_head_dim), int(c.linear_head_dim)),
                      tuple(f"model.layers.{i}.self_attn" for i, k in enumerate(kinds) if k == "full_attention"),
                      (heads, int(c.num_key_value_heads or heads), int(c.qk_nope_head_dim) + int(c.qk_rope_head_dim),
                       int(c.v_head_dim)))
    if t == "qwen3_next":
        return Layers(tuple(f"model.layers.{i}.linear_attn" for i, k in enumerate(kinds) if k == "linear_attention"),
                      (int(c.linear_num_value_heads), int(c.linear_key_head_dim), int(c.linear_value_head_dim)),
                      tuple(f"model.layers.{i}.self_attn" for i, k in enumerate(kinds) if k == "full_attention"),
                      (int(c.num_attention_heads), int(c.num_key_value_heads), int(c.head_dim), int(c.head_dim)))
    heads = int(c.num_heads)
    dk = int(c.head_dim)
    return Layers(tuple(f"model.layers.{i}.attn" for i in range(n)),
                  (int(getattr(c, "num_v_heads", None) or heads), dk, int(dk * float(getattr(c, "expand_v", 1)))))


def experts_of(c) -> tuple[int, int]:
    """(routed experts, experts per token) of a resolved config; (0, 0) without experts."""
    e = int(getattr(c, "num_local_experts", None) or getattr(c, "num_experts", None) or 0)
    return e, int(getattr(c, "num_experts_per_tok", None) or 0) if e else 0


@dataclass(frozen=True)
class Plan:
    """EP and CP of one config, as the build places them (``build.traced_model``): rank 0's experts and tokens."""
    mesh: Mesh
    num_experts: int = 0
    top_k: int = 0
    hidden: int = 0
    layers: Layers = Layers()
    itemsize: int = 2

    @classmethod
    def of(cls, config: dict, mesh: Mesh, routing: str = "balanced", precision: str = "bf16") -> "Plan | None":
        """The plan of a config (its family's defaults under it), checked; None where the mesh has neither."""
        if not mesh.parallel:
            return None
        c = resolved_config(config)
        e, k = experts_of(c)
        check_mesh(mesh, e, routing)
        return cls(mesh, e, k, int(c.hidden_size), layer_kinds(c), 2)

    def apply(self, model: LifetimeModel) -> LifetimeModel:
        model = expert_parallel(model, self.num_experts, self.top_k, self.hidden, self.mesh.ep, self.itemsize)
        model = context_parallel(model, self.layers, self.mesh.cp, self.itemsize)
        return replace(model, options=tuple(model.options) + (("cp", self.mesh.cp), ("ep", self.mesh.ep)),
                       not_modelled=tuple(model.not_modelled) + NOT_MODELLED)

    def expert_param(self, p, world: int):
        """A parameter as FSDP2 shards it after EP: a routed expert's tensor at E / EP experts over W / EP ranks."""
        if self.mesh.ep <= 1 or not p.shape or p.shape[0] != self.num_experts or "experts" not in p.fqn.split("."):
            return p
        return replace(p, shape=(self.num_experts // self.mesh.ep,) + tuple(p.shape[1:]), world=world // self.mesh.ep)

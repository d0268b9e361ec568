"""A traced call as a ``LifetimeModel``: the harness's allocations, the steps and a buffer record per allocation, each
citing the library line that made it (the innermost library frame of its trace), grouped by what it is.

Groups: parameters and the batch (the harness); what the optimizer keeps from its first step (optimizer states) and
what a library keeps (its caches: metadata); autocast's casts (fp32-amp: ``autocast.<operator>``, the tracer's
``autocast``); the loss's own allocations; forward allocations alive into the backward (activations) or not (forward
intermediates); backward allocations kept to ``zero_grad`` (parameter gradients) or not (activation gradients); the
optimizer's temporaries.
"""
from __future__ import annotations
import json
import math

from livebytes.estimator.buffers import Autotune, Buffer, Group, LifetimeModel, Source, Step
from livebytes.estimator.declare import INPUTS_STEP
from livebytes.estimator.devices import capability_of

from .calls import Alloc, Call
from .gpu_rules import FAILING, Extra, blas_workspaces, held_args, reduce_scratch
from .steps import TracedStep, buffer_names, segment
from .fsdp import Param, shard_model

LOSS_MODULES = ("CrossEntropyLoss", "FusedLinearCrossEntropyLoss", "FusedCrossEntropyLoss", "lm_head")


def source_of(a: Alloc) -> Source:
    """The innermost library frame: file (relative to site-packages), function, line and the line's text."""
    if not a.frames:
        return Source(a.op, "(no library frame)")
    file, line, function, *quote = a.frames[0]
    return Source(file, function, line, quote[0] if quote else "")


def is_loss(module: str) -> bool:
    return any(part in module.split(".")[-1] for part in LOSS_MODULES)


def group_of(a: Alloc, freed_in: str | None) -> Group:
    """What an allocation is, from its phase, module and the phase its free falls in."""
    if a.kind == "harness":
        return Group.PARAMETERS if a.op == "model.to(device)" else Group.INPUTS
    if a.kind == "kept":
        return Group.OPTIMIZER_STATES if a.phase == "optimizer" else Group.SCRATCH
    if a.phase == "optimizer":
        return Group.OPTIMIZER_WORK
    if a.op.startswith("autocast."):
        return Group.AUTOCAST
    if freed_in == "zero_grad" and a.phase == "forward":
        return Group.PARAM_GRADS            # a weight's gradient a fused loss makes in the forward (``gradient_owner``)
    if is_loss(a.module):
        return Group.LOSS
    if a.phase == "forward":
        return Group.ACTIVATIONS if freed_in not in ("forward", None) else Group.FORWARD
    if a.phase == "backward":
        return Group.PARAM_GRADS if freed_in == "zero_grad" else Group.ACTIVATION_GRADS
    return Group.WORKSPACE


def gradient_owner(a: Alloc, harness: list) -> str:
    """The module whose weight gradient ``a`` is, for a gradient made in the forward (a fused linear cross-entropy
    loss computes the LM head's weight gradient with the loss, chunk by chunk, and hands it to autograd, which keeps
    it as the weight's ``.grad`` to ``zero_grad``): the parameter of its dtype and shape, the LM head's
    (``lm_head``, as the four families name it) where the embedding has the same (untied); else its own module."""
    if a.phase != "forward" or (getattr(a, "freed_phase", None) != "zero_grad"):
        return a.module
    same = [h for h in harness if h.op == "model.to(device)" and h.dtype == a.dtype and _shape(h) == _shape(a)]
    owners = [h.param.rsplit(".", 1)[0] for h in same if h.param]
    head = [m for m in owners if m.split(".")[-1] == "lm_head"]
    return head[0] if head else owners[0] if len(owners) == 1 else a.module


def _shape(a) -> str:
    """The tensor's shape: as formulas (a symbolic call) or the traced dims."""
    return getattr(a, "shape_text", None) or str(list(a.shape))


# torch's dtype names as the tables write them (the declared models' ``bf16``, ``fp32``)
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}


def dim_names(config: dict) -> dict[str, str]:
    """A traced dim -> its name in the config, where one field alone holds that number: the vocabulary (``vocab``). A
    number two fields share (a vocab equal to a hidden size) stays a number."""
    values = [v for v in config.values() if isinstance(v, int) and not isinstance(v, bool)]
    vocab = config.get("vocab_size")
    return {str(vocab): "vocab"} if isinstance(vocab, int) and values.count(vocab) == 1 else {}


def tensor_of(a, dims: dict[str, str]) -> str:
    """The tensor as the trace saw it: its shape (``[T, 5632]``: T = MBS x S; ``[MBS, S, vocab]``: a dim the config
    names, ``dim_names``) and its dtype; a loop's chunk (its size a formula in the chunk, not a shape) in words."""
    shape, dtype = _shape(a), DTYPES.get(a.dtype, a.dtype)
    if not shape.startswith("["):
        return f"{dtype}, {shape}"
    inner = shape[1:-1]
    named = [dims.get(d.strip(), d.strip()) for d in inner.split(",")] if inner.strip() else []
    return f"[{', '.join(named)}] {dtype}"


def lifetimes(steps: list[TracedStep]) -> dict[int, TracedStep | None]:
    """id(Alloc) -> the step it is freed after (None: held past the call)."""
    out = {}
    for s in steps:
        for a in s.freed:
            out[id(a)] = s
    return out


def _extras(s: TracedStep, sms: tuple[int, int], threads: set, not_modelled: list, capability: tuple[int, int]) -> list[Extra]:
    """The step's GPU-only buffers (``gpu_rules``), in the order its operators ran; ``sms``: the device's SM count and
    resident threads per SM (ATen's reduce staging)."""
    out = []
    for kind, ev in s.events:
        if kind == "gemm":
            out += blas_workspaces([(kind, ev)], threads, capability)
        elif kind == "reduce":
            scratch, why = reduce_scratch(ev, *sms)
            out += scratch
            if why and why not in not_modelled:
                not_modelled.append(why)
        elif kind == "scratch_op" and ev.get("what"):
            why = f"{ev['what']}: {ev['op']}, allocated and freed inside each call"
            if why not in not_modelled:
                not_modelled.append(why)
    return out


def _step_buffers(s: TracedStep, names: dict, ends: dict, extras: list[Extra], harness: list,
                  dims: dict[str, str]) -> list[Buffer]:
    """The step's allocations, each followed by the GPU-only buffers placed after it."""
    after: dict = {}
    for x in extras:
        after.setdefault(x.after, []).append(x)
    out = [_extra(s, x, None) for x in after.pop(None, [])]
    for a in s.allocs:
        end = ends.get(id(a))
        kept = a.kind == "kept"
        out.append(Buffer(names[id(a)], group_of(a, getattr(a, "freed_phase", None) or (end.phase if end else None)),
                          (a.bytes,), "uint8",
                          source_of(a), s.name, None if kept or end is None else end.name,
                          note=f"{a.dtype} {_shape(a)} {a.op}", cached=kept,
                          first_call=a.kind == "first_call", module=gradient_owner(a, harness),
                          tensor=tensor_of(a, dims)))
        out += [_extra(s, x, out[-1].name if x.scratch else None) for x in after.pop(a.id, [])]
    for rest in after.values():             # an operator whose output was no new storage
        out += [_extra(s, x, None) for x in rest]
    return out


def _extra(s: TracedStep, x: Extra, scratch_of: str | None) -> Buffer:
    name = f"{s.name}.{x.name}" if x.scratch else x.name
    return Buffer(name, Group.WORKSPACE, (x.nbytes,), "uint8", x.source, s.name, s.name if x.scratch else None,
                  note=x.note, cached=not x.scratch, cache_key=None if x.scratch else (), scratch_of=scratch_of,
                  first_call=x.scratch and s.first_call, module=s.module)


def buffers(call: Call, steps: list[TracedStep], sms: tuple[int, int], not_modelled: list, capability: tuple[int, int],
            dims: dict[str, str] | None = None) -> list[Buffer]:
    """Every buffer of the call: the harness's, then each step's; ``dims``: the config's names of traced dims
    (``dim_names``), for each buffer's ``tensor``."""
    names = buffer_names(steps, call.harness)
    ends = lifetimes(steps)
    dims = dims or {}
    out = [Buffer(names[id(a)], group_of(a, None), (a.bytes,), "uint8", source_of(a), INPUTS_STEP,
                  note=f"{a.dtype} {_shape(a)}", module=a.module, tensor=tensor_of(a, dims)) for a in call.harness]
    threads: set = set()
    for s in steps:
        out += _step_buffers(s, names, ends, _extras(s, sms, threads, not_modelled, capability), call.harness, dims)
    return out


def autotuned(steps: list[TracedStep], names: dict, arch: str) -> list[Autotune]:
    """Every launch of a kernel with several configs, keyed by which distinct (kernel, key) it is: the first launch of
    each benchmarks in a cold call (``estimator.autotune``); a kernel whose configs fail to launch holds the arguments
    its step drops (``gpu_rules.FAILING``)."""
    keys: dict = {}
    out = []
    for s in steps:
        for kind, ev in s.events:
            if kind != "launch" or ev["key"] is None:
                continue
            k = keys.setdefault((ev["kernel"], tuple(map(str, ev["key"]))), len(keys))
            held, measured = held_args(ev["kernel"], ev["key"], arch, ev.get("args", []), s.freed)
            out.append(Autotune(ev["kernel"], s.name, (k,), Source(*_frame(ev)), note=f"key {ev['key']}",
                                held_until_gc=tuple(names[id(a)] for a in held),
                                held_measured=measured if held else (False if ev["kernel"] in FAILING else None)))
    return out


def _frame(ev: dict) -> tuple:
    file, line, function, *quote = ev["frame"] if "frame" in ev else ("", 0, "", "")
    return file, function, line, quote[0] if quote else ""


def traced_model(call: Call, sms: int, arch: str = "sm90", fsdp: int = 0, threads_per_sm: int = 2048,
                 dims: dict[str, str] | None = None, parallel=None, trainable=None, **fields) -> LifetimeModel:
    """The LifetimeModel of one traced call at its own shape (sizes as constants), with the GPU's own buffers on a
    device of ``sms`` SMs of ``threads_per_sm`` resident threads (2048: the default sm90's); ``fsdp`` W > 0: rank 0's
    step under FSDP2 at W ranks (``fsdp.shard_model``); ``dims``: the config's names of traced dims (``dim_names``);
    ``trainable``: parameter name -> whether it requires grad (None: every parameter does; LoRA: its adapters)."""
    steps = segment(call)
    timeline = [Step(INPUTS_STEP, "harness", note="parameters and the batch, before the first iteration")]
    timeline += [Step(s.name, "backward" if s.phase == "backward" else "forward",
                      note=f"{s.phase}: {s.module or 'model'}") for s in steps]
    not_modelled: list = []
    bufs = buffers(call, steps, (sms, threads_per_sm), not_modelled, capability_of(arch), dims)
    names = buffer_names(steps, call.harness)
    model = LifetimeModel(steps=tuple(timeline), buffers=tuple(bufs), autotuned=tuple(autotuned(steps, names, arch)),
                          not_modelled=tuple(not_modelled) + tuple(fields.pop("not_modelled", ())), **fields)
    if parallel is not None:
        model = parallel.apply(model)
    return sharded(model, call, steps, names, fsdp, parallel, trainable) if fsdp else model


def sharded(model: LifetimeModel, call: Call, steps: list[TracedStep], names: dict, world: int,
            parallel=None, trainable=None) -> LifetimeModel:
    """``model`` under FSDP2 at ``world`` ranks: the harness's parameters (their traced shapes and dtypes) and the
    steps' modules are what ``fsdp.shard_model`` places its rules by."""

    params = {}
    for a in call.harness:
        if a.op == "model.to(device)":          # a parameter: its dims are constants (a symbolic call's as text)
            dims = tuple(int(d) for d in (a.shape if hasattr(a, "shape") else json.loads(a.shape_text)))
            fqn = a.param or names[id(a)]
            p = Param(fqn, dims, int(a.bytes) // max(1, math.prod(dims)), trainable=trainable is None or trainable(fqn))
            params[names[id(a)]] = parallel.expert_param(p, world) if parallel is not None else p
    return shard_model(model, params, [(s.name, s.phase, s.module) for s in steps], world)

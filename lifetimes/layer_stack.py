"""A stack of L layers around one layer's declaration, with activation checkpointing off or per layer.

What a layer model supplies (``LayerParts``): its parameters, its forward on an input buffer (``mode``: SAVE, DISCARD
or RECOMPUTE; ``filled``: a layer below already filled the library caches this call), its backward (the input
gradient kept until a given step), and its output's name. The stack declares:

- the caller's tensors: the stack's input ``x`` [T, hidden] bf16, ``cu_seqlens``, the output gradient ``dY``, the top
  layer's parameters and, for each of the L - 1 layers below it, its own copy of each (``below{i}.*``);
- the forward of the layers below, bottom first, step by step: each is the layer's own one-layer model (with the same
  checkpointing) included whole (``below{i}.*``), so its transients open and reuse blocks as the process's do. Layer
  1 fills the caches (the caller thread's cuBLAS workspaces, tensor_cache's entries); the layers above it hit them;
- the top layer step by step: without checkpointing its forward saving, then its backward; with checkpointing its
  first forward keeping nothing (named ``ckpt.*``), then in the backward the recompute (a forward that saves) and the
  backward;
- the backward of the layers below, top first, step by step (each included layer's second pass: with checkpointing
  its recompute, then its backward). A layer's output (the next one's input, saved by the next one's projections or
  kept by checkpoint) dies after the next layer's last backward step; its input gradient (the one above's output
  gradient) after the next lower layer's first backward step consumed it; layer 1's is the stack input's ``.grad``.

Why the layers below are included whole: 4 layers at 215,000 tokens on the H200 reserved 1,500 MiB more than the stack
whose layers below were declared only by what they leave alive (their saved sets, allocated at one step): their
transients were missing.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source
from livebytes.estimator.declare import INPUTS_STEP, Declaration
from livebytes.estimator.symbols import MBS, T

SAVE = "save"              # a forward under autograd: each op keeps what it saves; the output is the layer's
DISCARD = "discard"        # checkpoint's first forward: nothing saved, names prefixed "ckpt."; the output is the layer's
RECOMPUTE = "recompute"    # checkpoint's recompute in the backward: saves; its output dies at once


@dataclass(frozen=True)
class LayerParts:
    hidden: int
    call: Source                                   # the layer's forward
    parameters: Callable[[Declaration], None]
    forward: Callable[[Declaration, str, str, bool], None]   # (d, input, mode, filled): SAVE, DISCARD or RECOMPUTE
    backward: Callable[[Declaration, str | None], None]        # (d, input gradient kept until)
    output: str                                    # the output buffer's name (a DISCARD forward prefixes "ckpt.")
    input_grad: str                                # the input gradient's name
    cu_seqlens: Source


def saved_set(model: LifetimeModel, output: str) -> list[Buffer]:
    """Buffers of a one-layer model alive from its last forward step into its first backward step: what each
    layer keeps for its backward (the caller's tensors, parameters, caches and the output excluded)."""
    first = next(i for i, s in enumerate(model.steps) if s.phase == "backward")
    return [b for b in model.buffers
            if b.allocated_at != INPUTS_STEP and not b.cached and b.name != output
            and first - 1 in model.live_range(b) and first in model.live_range(b)]


def per_layer(d: Declaration, name: str, like: Buffer, group: Group, freed: str | None, note: str) -> None:
    """One layer's copy of ``like`` (a layer below the top): the same shape, dtype and source."""
    d.buffer(name, group, like.shape, like.dtype, like.source, freed, note=f"{note} {like.name}")


def _inputs(d: Declaration, parts: LayerParts, layers: int) -> list[str]:
    """The caller's tensors; returns the top layer's parameter names (each layer below has its own copies)."""
    d.step(INPUTS_STEP, "harness", note="the stack's input, the output gradient and every parameter exist before the step")
    d.buffer("x", Group.INPUTS, (T, parts.hidden), "bf16", parts.call, note="the stack's input (requires grad)")  # [T, hidden] bf16
    d.buffer("cu_seqlens", Group.INPUTS, (MBS + 1,), "int64", parts.cu_seqlens, note="tensor_cache keeps it referenced",
             retained=True)                                                                       # [N+1] int64
    d.buffer("dY", Group.INPUTS, (T, parts.hidden), "bf16", parts.call, note="the top layer's output gradient")  # [T, hidden] bf16
    first = len(d.buffers)
    parts.parameters(d)
    params = d.buffers[first:]
    for i in range(1, layers):
        for p in params:
            per_layer(d, f"below{i}.{p.name}", p, Group.PARAMETERS, None, f"layer {i}'s")
    return [p.name for p in params]


def first_pass(model: LifetimeModel, checkpoint: bool) -> frozenset[str]:
    """The steps a one-layer model runs in the stack's forward pass, a prefix of its steps after the inputs: its
    forward, or with checkpointing the first forward, whose names carry ``ckpt.`` (DISCARD). The rest (the recompute,
    the backward) runs in the backward pass; a ``ckpt.`` step or a forward one out of that order is refused."""
    def first(s):
        return s.phase == "forward" and (not checkpoint or "ckpt." in s.name)
    steps = [s for s in model.steps if s.name != INPUTS_STEP]
    n = next((i for i, s in enumerate(steps) if not first(s)), len(steps))
    stray = [s.name for s in steps[n:] if first(s) or (not checkpoint and s.phase == "forward")]
    if stray:
        raise ValueError(f"{model.key}: steps {stray[:3]} belong to the forward pass but follow the backward's first step")
    return frozenset(s.name for s in steps[:n])


def second_pass(model: LifetimeModel, checkpoint: bool) -> frozenset[str]:
    first = first_pass(model, checkpoint)
    return frozenset(s.name for s in model.steps if s.name != INPUTS_STEP and s.name not in first)


def _output(parts: LayerParts, checkpoint: bool) -> str:
    return ("ckpt." if checkpoint else "") + parts.output


def _include_layer(d: Declaration, one_layer: LifetimeModel, i: int, steps: frozenset[str], x: str, grad_above: str,
                   params: list[str], freed: dict[str, str | None], cache_hit: bool) -> None:
    """Layer ``i`` below the top: ``steps`` of the one-layer model, named ``below{i}.*``, on the input ``x`` with the
    output gradient ``grad_above``; its parameters are its own copies. ``cache_hit``: an earlier layer made the
    library's caches (tensor_cache's entries, the threads' cuBLAS workspaces)."""
    inputs = {"x": x, "cu_seqlens": "cu_seqlens", "dY": grad_above} | {p: f"below{i}.{p}" for p in params}
    d.include(one_layer, f"below{i}", "", inputs, freed, cache_hit=cache_hit, steps=steps)


def _as_activations(d: Declaration, names: set[str]) -> None:
    """The lower layers' outputs are the next layers' inputs: activations, not the stack's output. One pass over the
    buffers for all of them (a pass per layer made a stack's declaration quadratic in its layers)."""
    d.buffers = [replace(b, group=Group.ACTIVATIONS) if b.name in names else b for b in d.buffers]


def declare_stack(parts: LayerParts, layers: int, checkpoint: bool, one_layer: LifetimeModel | None) -> Declaration:
    """The stack's declaration; ``one_layer``: the layer's own one-layer model with the same checkpointing (each layer
    below the top is it, included), needed when layers > 1."""
    d = Declaration()
    params = _inputs(d, parts, layers)
    below = range(1, layers)
    out = _output(parts, checkpoint)
    last_bwd = one_layer.steps[-1].name if one_layer is not None else None      # a layer's last backward step
    first_bwd = next((s.name for s in one_layer.steps if s.phase == "backward"), None) if one_layer else None
    fwd, bwd = (first_pass(one_layer, checkpoint), second_pass(one_layer, checkpoint)) if one_layer else ((), ())

    def prefix(i):
        return "" if i == layers else f"below{i}."

    x, inputs, outputs = "x", {}, set()        # layer i's input, for its backward too
    for i in below:
        grad_above = f"{prefix(i + 1)}{parts.input_grad}"
        inputs[i] = x
        _include_layer(d, one_layer, i, fwd, x, grad_above, params, {out: f"{prefix(i + 1)}{last_bwd}"}, i > 1)
        x = f"below{i}.{out}"
        outputs.add(x)
    _as_activations(d, outputs)        # a layer's output is the stack's only at the top
    if checkpoint:
        parts.forward(d, x, DISCARD, layers > 1)
    parts.forward(d, x, RECOMPUTE if checkpoint else SAVE, layers > 1)
    parts.backward(d, None if layers == 1 else f"below{layers - 1}.{first_bwd}")
    for i in reversed(below):
        until = f"below{i - 1}.{first_bwd}" if i > 1 else None      # layer 1's input gradient is x.grad
        _include_layer(d, one_layer, i, bwd, inputs[i], f"{prefix(i + 1)}{parts.input_grad}", params,
                       {parts.input_grad: until}, True)     # the top layer's backward made the backward thread's caches
    return d

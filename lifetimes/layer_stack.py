"""A stack of L layers around one layer's declaration, with activation checkpointing off or per layer.

What a layer model supplies (``LayerParts``): its parameters, its forward on an input buffer (``saving``: autograd
keeps what each op saves; a ``tag`` renames a second forward), its backward (the input gradient kept until a given
step), and its output's name. The stack declares:

- the caller's tensors: the stack's input ``x`` [T, hidden] bf16, ``cu_seqlens``, the output gradient ``dY``, the top
  layer's parameters and, for each of the L - 1 layers below it, its own copy of each (``below{i}.*``);
- ``stack.below_fwd`` (L > 1): what the forward of the layers below leaves alive when the top layer starts: each
  one's output (the next one's input: saved by its projections, or kept by checkpoint) and, without checkpointing,
  each one's saved set: every buffer of the layer alive from its last forward step into its first backward step
  (derived from the layer's own one-layer model, so nothing is listed twice by hand);
- the top layer step by step: without checkpointing its forward saving, then its backward; with checkpointing its
  first forward keeping nothing (named ``ckpt.*``), then in the backward the recompute (a forward that saves) and the
  backward;
- ``stack.below_bwd`` (L > 1): the backward of the layers below, as what it leaves: their saved sets and outputs die,
  their parameter gradients and the stack input's gradient exist.

Not modelled: the steps inside the backward of the layers below the top (each holds one saved set less and one
layer's parameter gradients more than the step above it: the top layer's backward is the highest of them while a
layer's saved set outweighs its parameter gradients; the closing step shows the other end), and the transients of
the layers below the top (their forward's and backward's short-lived buffers). Each layer below has its own records
(``below{i}.*``), in the order the process allocates them (layer by layer, bottom first; their gradients top
first): one merged record per buffer placed its L - 1 blocks as one and missed the measured peak by up to 3 MiB (run 16).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source
from livebytes.estimator.declare import INPUTS_STEP, Declaration
from livebytes.estimator.symbols import MBS, T
from livebytes.lifetimes.fla_modules import FORWARD_WORKSPACES

BELOW_FWD, BELOW_BWD = "stack.below_fwd", "stack.below_bwd"
SAVE = "save"              # a forward under autograd: each op keeps what it saves; the output is the layer's
DISCARD = "discard"        # checkpoint's first forward: nothing saved, names prefixed "ckpt."; the output is the layer's
RECOMPUTE = "recompute"    # checkpoint's recompute in the backward: saves; its output dies at once


@dataclass(frozen=True)
class LayerParts:
    hidden: int
    call: Source                                   # the layer's forward
    parameters: Callable[[Declaration], None]
    forward: Callable[[Declaration, str, str], None]     # (d, input, mode): mode SAVE, DISCARD or RECOMPUTE
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


def _inputs(d: Declaration, parts: LayerParts, layers: int) -> None:
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


def _below_forward(d: Declaration, parts: LayerParts, layers: int, checkpoint: bool, saved: list[Buffer],
                   one_layer: LifetimeModel | None) -> str:
    """The forward of the layers below the top: what stays, layer by layer in the order the process allocates it
    (layer 1 also makes the caller thread's cuBLAS workspaces, where its first GEMMs run). Returns the top layer's
    input."""
    if layers == 1:
        return "x"
    d.step(BELOW_FWD, "forward", parts.call, note=f"layers 1..{layers - 1}: what their forward leaves alive")
    kept = {b.name for b in saved}
    first = [b for b in one_layer.buffers if b.name in kept or (b.cached and b.name.endswith(FORWARD_WORKSPACES))]
    for i in range(1, layers):       # bottom first: what its forward saves, then its output
        for b in first if i == 1 else saved:
            if b.cached:             # a forward-thread workspace, kept for the process
                d.buffer(b.name, b.group, b.shape, b.dtype, b.source, note=b.note, cached=True, cache_key=b.cache_key)
            elif not checkpoint:
                per_layer(d, f"below{i}.{b.name}", b, b.group, BELOW_BWD, f"saved by layer {i}")
        top_input = i == layers - 1
        d.buffer("x_top" if top_input else f"below{i}.output", Group.ACTIVATIONS, (T, parts.hidden), "bf16",  # [T, hidden] bf16
                 parts.call, BELOW_BWD, note=f"layer {i}'s output, the {'top' if top_input else 'next'} layer's input")
    return "x_top"


def _below_backward(d: Declaration, parts: LayerParts, layers: int, grads: list[Buffer]) -> None:
    if layers == 1:
        return
    d.step(BELOW_BWD, "backward", parts.call, note=f"layers {layers - 1}..1: their backward, as what it leaves")
    for i in range(layers - 1, 0, -1):
        for g in grads:
            per_layer(d, f"below{i}.{g.name}", g, Group.PARAM_GRADS, None, f"layer {i}'s")
    d.buffer("x.grad", Group.ACTIVATION_GRADS, (T, parts.hidden), "bf16", parts.call, note="the stack input's gradient")


def declare_stack(parts: LayerParts, layers: int, checkpoint: bool, one_layer: LifetimeModel | None) -> Declaration:
    """The stack's declaration; ``one_layer``: the layer's own one-layer model without checkpointing (its saved set),
    needed when layers > 1."""
    saved = saved_set(one_layer, parts.output) if layers > 1 and one_layer is not None else []
    d = Declaration()
    _inputs(d, parts, layers)
    x = _below_forward(d, parts, layers, checkpoint, saved, one_layer)
    if checkpoint:
        parts.forward(d, x, DISCARD)
    parts.forward(d, x, RECOMPUTE if checkpoint else SAVE)
    first_grad = len(d.buffers)
    parts.backward(d, None if layers == 1 else BELOW_BWD)
    grads = [b for b in d.buffers[first_grad:] if b.freed_after is None and not b.cached and b.name != parts.input_grad]
    _below_backward(d, parts, layers, grads)
    return d

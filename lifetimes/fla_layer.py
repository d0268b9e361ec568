"""One model of flash-linear-attention's chunked delta-rule layers (``KimiDeltaAttention``, ``GatedDeltaNet``), forward +
backward in bf16, and a stack of L of them, driven by a table: a ``FlaLayer`` row says what one layer of one library
version is (its projections, gates, fp32 parameters, the lines it is read from, the kernel model it includes); this
module declares any row with the shared modules (``lifetimes/fla_modules.py``) and stacks it
(``lifetimes/layer_stack.py``). The rows are ``lifetimes/fla_kda_layer.py`` and ``lifetimes/fla_gdn_layer.py``; a new
library version is an entry derived from a row (``FlaLayer.derive``), registered by its module's ``VERSIONS``.

What every row shares (the two layers' common code path, as both call it in training): ``hidden_states [1, T, hidden]``
bf16 with packed ``cu_seqlens``, three short convolutions q, k, v (``ShortConvolution``, Triton backend, apart: packed
inputs), each fed by its projection; gate projections before the kernel (its ``g`` and ``beta``) and after it (the
output gate, read by ``FusedRMSNormGated``); the chunk kernel included whole from its kernel model (``Declaration.include``:
the same buffer records, renamed ``<row.name>.*``; the layer reuses the kernel model, never copies it); ``o_proj``.
Shapes: ``num_heads`` H, ``num_v_heads`` HV, ``head_dim`` K (DK), ``head_v_dim`` V (DV); ``hidden`` and the convolution
width are the shape's layer fields (``Shape.hidden``, ``Shape.conv_size``): concrete integers in the formulas.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Callable

from livebytes.estimator.buffers import Group, LifetimeModel, Source
from livebytes.estimator.declare import Declaration, source_root
from livebytes.estimator.devices import get_device
from livebytes.estimator.symbols import DK, DV, HV, H, T
from livebytes.lifetimes.fla_modules import (Linear, conv_backward, conv_chunk_indices, conv_forward, conv_parameters,
                                             linear_backward, linear_forward, linear_parameters, norm_backward,
                                             norm_forward, norm_parameters, parameter)
from livebytes.lifetimes.layer_stack import DISCARD, RECOMPUTE, LayerParts, declare_stack

src = source_root("fla")
HIDDEN = "hidden"          # a Linear's features in a row: the layer's hidden size, filled in at build (``linears``)
CONVS_AT = "convs"         # in a row's ``parameter_order``: the three convolutions' weights
CONVS = (("q_conv1d", H * DK), ("k_conv1d", H * DK), ("v_conv1d", HV * DV))   # ShortConvolution channels: key_dim, value_dim
# the kernel's caller tensors the layer passes as they are (its A_log and dt_bias, the boundaries, the norm's gradient)
PASSED = {"A_log": "A_log", "dt_bias": "dt_bias", "cu_seqlens": "cu_seqlens", "dO": "o_norm.dx"}


@dataclass(frozen=True)
class Gate:
    """A projection of the layer input other than q, k, v (their convolutions keep them) and o_proj: where the forward
    calls it, where its output dies, where its input gradient dies."""

    name: str
    call: Source
    saved_until: str               # its output's last step when the forward saves (SAVE, RECOMPUTE)
    discarded_at: str              # ... in checkpoint's first forward (DISCARD: names ``ckpt.*``)
    grad_until: str | None = None  # its input gradient's last step; None: it is the layer's input gradient (the stack's)


@dataclass(frozen=True)
class FlaLayer:
    """What one FLA layer of one library version allocates differently from the other (a row of the table)."""

    name: str                      # "kda": key fla-kda-layer@VERSION, the included kernel's prefix "kda.*"
    cls: str                       # the layer's class in the library
    file: str                      # its module, under fla/
    version: str                   # flash-linear-attention's version the row is read from
    kernel_version: object         # the kernel model's version entry (fla_kda.FlaVersion, fla_gdn.GdnVersion)
    kernel_model: str              # the kernel model's name (its key without the version: "fla-kda")
    kernel_call: str               # the kernel function the layer calls
    kernel: Callable               # (row, forward_only, LayerConfig) -> the kernel model the layer includes
    refuse: Callable               # (shape, device) -> reason or None; module-level (the spec index stores it)
    linears: tuple[Linear, ...]    # every nn.Linear, features in HIDDEN where the hidden size goes
    parameter_order: tuple[str, ...]   # the parameters in registration order: Linear names, fp32 ones, CONVS_AT, "o_norm"
    fp32_parameters: dict          # name -> (shape, __init__ source): kept fp32 (the kernel's call takes them so)
    fp32_note: str
    conv_lines: tuple[tuple[int, int], ...]   # q, k, v conv: (__init__ line, forward line)
    before_kernel: tuple[Gate, ...]           # gate projections the kernel reads, in forward order
    after_kernel: tuple[Gate, ...]            # the output gate's projections, read by the norm, in forward order
    kernel_inputs: dict            # the kernel's caller tensor -> the layer's buffer
    kernel_grads: dict             # the kernel's gradient -> the layer step where it dies
    kernel_hits: tuple[str, ...]   # the kernel's cached buffers found in the convolutions' tensor_cache entry
    norm_init: Source
    norm_call: Source
    o_proj_call: Source
    layer_call: Source
    cu_seqlens: Source
    default_hidden: int
    default_conv: int
    covers_measured: str           # what the registry's "covers" says was measured ("" none)
    inside: str                    # the summary's tail: the kernel inside and the measurements ({kernel_key} filled in)
    evidence: str                  # the first note's tail: what was measured
    kernel_notes: tuple[str, ...]  # the kernel version's notes the layer repeats
    not_modelled: tuple[str, ...]
    default_device: str = "H200"   # the device a model built without one describes (the registry's default_device)

    def derive(self, **overrides) -> "FlaLayer":
        return replace(self, **overrides)

    @property
    def key(self) -> str:
        return f"fla-{self.name}-layer@{self.version}"

    @property
    def kernel_key(self) -> str:
        """The included kernel model's registered key (summaries and covers name it)."""
        return f"{self.kernel_model}@{self.kernel_version.version}"

    @property
    def library(self) -> str:
        return f"flash-linear-attention {self.version}"

    @property
    def implementation(self) -> str:
        return f"FLA {self.cls} layer ({self.library})"

    @property
    def covers(self) -> str:
        return (f"{self.library} {self.cls} x L (--num-hidden-layers), forward + backward{self.covers_measured}, "
                f"checkpointing off or per layer (--checkpoint); its {self.kernel_call} is {self.kernel_key}'s model")

    def init(self, line: int, quote: str) -> Source:
        return src(self.file, f"{self.cls}.__init__", line, quote)

    def fwd(self, line: int, quote: str) -> Source:
        return src(self.file, f"{self.cls}.forward", line, quote)


@dataclass(frozen=True)
class LayerConfig:
    hidden: int
    conv_size: int
    device: object           # the Device; None: the row's default device (the model's device field stays empty)
    gva: bool = False        # HV > H: the kernel's grouped-value path
    default_device: str = "H200"

    @property
    def facts(self):
        return self.device or get_device(self.default_device)

    @property
    def capability(self) -> tuple[int, int]:
        """The device's compute capability (the cuBLAS workspace's size)."""
        return self.facts.capability

    @property
    def sms(self) -> int:
        """The device's SM count (FusedRMSNormGated's partials, ATen's global reduces)."""
        return self.facts.sm_count

    @property
    def threads_per_sm(self) -> int:
        """The device's resident threads per SM (ATen's global reduces' target grid)."""
        return self.facts.max_threads_per_sm


def linears(row: FlaLayer, hidden: int) -> dict[str, Linear]:
    """The row's nn.Linear modules at this hidden size."""
    def size(x):
        return hidden if isinstance(x, str) else x
    return {lin.name: replace(lin, in_features=size(lin.in_features), out_features=size(lin.out_features))
            for lin in row.linears}


def _convs(row: FlaLayer):
    """(name, channels, __init__ source, forward call) of the q, k, v convolutions."""
    for (name, channels), (init, call) in zip(CONVS, row.conv_lines):
        yield (name, channels, row.init(init, f"self.{name} = ShortConvolution("),
               row.fwd(call, f"{name[0]}, conv_state_{name[0]} = self.{name}("))


def parameters(row: FlaLayer, d: Declaration, c: LayerConfig) -> None:
    """Every parameter of the layer, allocated when it is built, in the row's registration order."""
    lin = linears(row, c.hidden)
    for name in row.parameter_order:
        if name == CONVS_AT:
            for conv, channels, init, _ in _convs(row):
                conv_parameters(d, conv, channels, c.conv_size, init)
        elif name == "o_norm":
            norm_parameters(d, "o_norm", DV, row.norm_init)
        elif name in row.fp32_parameters:
            shape, init = row.fp32_parameters[name]
            parameter(d, name, shape, init, "fp32", note=row.fp32_note)
        else:
            linear_parameters(d, lin[name])


def forward(row: FlaLayer, d: Declaration, c: LayerConfig, x: str, mode: str, filled: bool = False) -> None:
    """The layer's forward on the input buffer ``x`` (read by every projection: autograd saves it, no new bytes).
    ``mode``: SAVE (each op keeps what it saves), DISCARD (checkpoint's first forward: each buffer dies with its last
    reference; names ``ckpt.*``; the kernel is its forward-only model) or RECOMPUTE."""
    saving = mode != DISCARD
    p = "" if saving else "ckpt."
    lin = {k: replace(v, name=p + v.name) for k, v in linears(row, c.hidden).items()}
    linear = partial(linear_forward, d, thread="backward" if mode == RECOMPUTE else "forward",   # recompute: autograd's
                     capability=c.capability)

    def kept(saved_until: str, last_use: str) -> str:
        return saved_until if saving else f"fwd.{p}{last_use}"
    end = f"fwd.{p}o_proj"     # the forward's locals (q, k, beta, ...) die when it returns
    for name, channels, _, call in _convs(row):
        linear(lin[name.replace("_conv1d", "_proj")], call, kept(f"bwd.{name}", name))   # saved by the conv
        conv_forward(d, p + name, channels, c.conv_size, call,
                     kept(f"{row.name}.bwd.return", "o_proj") if name == "v_conv1d" else end)
        if name == "q_conv1d" and not (mode == RECOMPUTE or filled):    # a hit: the first forward or a layer below filled it
            conv_chunk_indices(d)
    for g in row.before_kernel:
        linear(lin[g.name], g.call, g.saved_until if saving else g.discarded_at)
    inputs = {k: p + v for k, v in row.kernel_inputs.items()} | {k: v for k, v in PASSED.items() if saving or k != "dO"}
    d.include(row.kernel(row, not saving, c), f"{p}{row.name}", "forward", inputs, freed={"o": kept("bwd.o_norm", "o_norm")},
              cache_hit=mode == RECOMPUTE or filled, hits=row.kernel_hits)
    for g in row.after_kernel:
        linear(lin[g.name], g.call, g.saved_until if saving else g.discarded_at)
    norm_forward(d, p + "o_norm", T * HV, DV, row.norm_call, kept("bwd.o_proj", "o_proj"), kept("bwd.o_norm", "o_norm"))
    linear(lin["o_proj"], row.o_proj_call, "fwd.o_proj" if mode == RECOMPUTE else None, Group.INPUTS)


def backward(row: FlaLayer, d: Declaration, c: LayerConfig, input_grad_until: str | None) -> None:
    """Autograd's order (the newest node first): o_proj, o_norm, the output gate's projections (the first to finish is
    the layer input's gradient; the later ones are added into it in place and die at their step), the kernel, the
    kernel's gate projections, then each convolution and its projection, v, k, q."""
    lin = linears(row, c.hidden)
    cap = c.capability
    linear_backward(d, lin["o_proj"], "bwd.o_norm", capability=cap)
    norm_backward(d, "o_norm", T * HV, DV, c.sms, f"{row.name}.bwd.return", f"bwd.{row.after_kernel[-1].name}")
    for g in reversed(row.after_kernel):
        linear_backward(d, lin[g.name], input_grad_until if g.grad_until is None else g.grad_until, sms=c.sms,
                        capability=cap, threads_per_sm=c.threads_per_sm)
    d.include(row.kernel(row, False, c), row.name, "backward", row.kernel_inputs | PASSED, freed=row.kernel_grads)
    for g in reversed(row.before_kernel):
        linear_backward(d, lin[g.name], g.grad_until, sms=c.sms, capability=cap, threads_per_sm=c.threads_per_sm)
    for name, channels, _, _ in reversed(tuple(_convs(row))):
        proj = name.replace("_conv1d", "_proj")
        conv_backward(d, name, channels, c.conv_size, f"bwd.{proj}", c.sms, c.threads_per_sm)
        linear_backward(d, lin[proj], f"bwd.{proj}", capability=cap)


def input_grad(row: FlaLayer) -> str:
    """The layer input's gradient: the first output-gate projection's (the first to arrive in the backward)."""
    return f"{row.after_kernel[0].name}.dinput"


def parts(row: FlaLayer, c: LayerConfig) -> LayerParts:
    return LayerParts(hidden=c.hidden, call=row.layer_call, parameters=lambda d: parameters(row, d, c),
                      forward=lambda d, x, mode, filled: forward(row, d, c, x, mode, filled),
                      backward=lambda d, until: backward(row, d, c, until),
                      output="o_proj.out", input_grad=input_grad(row), cu_seqlens=row.cu_seqlens)


def build(row: FlaLayer, device=None, gva: bool = False, hidden: int | None = None, layers: int = 1,
          checkpoint: bool = False, conv_size: int | None = None) -> LifetimeModel:
    """L layers of ``row`` (default 1), forward + backward, checkpointing off or per layer; ``hidden`` and
    ``conv_size`` default to the layer's own defaults."""
    c = LayerConfig(hidden or row.default_hidden, conv_size or row.default_conv, device, gva, row.default_device)
    one = declare_stack(parts(row, c), 1, checkpoint, None).freeze(**_fields(row, c, 1, checkpoint)) if layers > 1 else None
    return declare_stack(parts(row, c), layers, checkpoint, one).freeze(**_fields(row, c, layers, checkpoint))


def _fields(row: FlaLayer, c: LayerConfig, layers: int, checkpoint: bool) -> dict:
    return dict(
        key=row.key, implementation=row.implementation, version=row.version, device=getattr(c.device, "name", ""),
        summary=f"{layers} {row.cls} layer{'s' if layers > 1 else ''} (hidden {c.hidden}, conv {c.conv_size}), forward + "
                f"backward, checkpointing {'per layer' if checkpoint else 'off'}; "
                + row.inside.format(kernel_key=row.kernel_key),
        options=(("gva", c.gva), ("hidden", c.hidden), ("layers", layers), ("checkpoint", checkpoint), ("conv_size", c.conv_size)),
        not_modelled=row.not_modelled + row.kernel(row, False, c).not_modelled,
        notes=(f"from {row.library} fla/{row.file} and fla-core {row.kernel_version.version}; {row.evidence}",) + row.kernel_notes,
    )


# ---------------------------------------------------------------- registration (each row module registers its VERSIONS)

from livebytes.estimator.registry import ModelSpec, register  # noqa: E402  (the registration block closes the file)
from livebytes.estimator.shapes import LAYER_FIELDS  # noqa: E402


def register_layer(row: FlaLayer) -> None:
    register(ModelSpec(
        key=row.key, implementation=row.implementation, version=row.version, covers=row.covers,
        builder=partial(build, row), refuse=row.refuse, options={"gva": (False, True)}, default_device=row.default_device,
        shape_fields=LAYER_FIELDS, stacked=True,
    ))

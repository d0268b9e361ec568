"""flash-linear-attention 0.6.0's ``KimiDeltaAttention`` layer (``fla/layers/kda.py``), forward + backward in bf16,
and a stack of L of them, as buffer records.

The layer is called as a training step calls it: ``hidden_states [1, T, hidden]`` bf16 with packed ``cu_seqlens``
(``unpad_hidden_states`` and ``repad_hidden_states`` are no-ops then), ``use_short_conv=True``, no cache, mode
``chunk``. Its chunk kernel is ``chunk_kda(..., use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
use_beta_sigmoid_in_kernel=True, state_v_first=True)`` (kda.py:262-280): the KDA kernel model's ``report``
contract, included whole from ``lifetimes/fla_kda.py`` (``Declaration.include``: the same buffer records, renamed
``kda.*``). The layer's defaults (``safe_gate=False``, ``lower_bound=None``) and ``state_v_first=True`` change which
Triton kernels the kernel autotunes and their keys, never a buffer: the included kernel is built with the
layer's kernels and keys (``fla_kda.build(safe_gate=False, state_v_first=True)``: the token-parallel intra kernel,
STATE_V_FIRST 1 in four keys).

Shapes: ``num_heads`` H, ``num_v_heads`` HV, ``head_dim`` K (DK), ``head_v_dim`` V (DV = K * expand_v);
``key_dim = H*K``, ``value_dim = HV*V``, ``gate_dim = HV*K`` (kda.py:118-167); ``hidden`` and the convolution width
are the shape's layer fields (``Shape.hidden``, ``Shape.conv_size``): concrete integers in the formulas.

The stack (``layers`` L, ``checkpoint``): L of these blocks chained output to input, the linear-attention block
alone (no pre-norm, MLP or residual add between them: not modelled). The top layer is declared step by step; each of
the L - 1 layers below it is this one-layer model (with the same checkpointing) included whole, its forward before the
top's and its backward after, step by step (``lifetimes/layer_stack.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from livebytes.estimator.buffers import Group, LifetimeModel
from livebytes.estimator.declare import Declaration, source_root
from livebytes.estimator.devices import get_device
from livebytes.estimator.symbols import DK, DV, H, HV, T
from livebytes.lifetimes import fla_kda
from livebytes.lifetimes.fla_kda import refuse as kernel_refuse
from livebytes.lifetimes.fla_modules import (Linear, conv_backward, conv_chunk_indices, conv_forward, conv_parameters,
                                             linear_backward, linear_forward, linear_parameters, norm_backward,
                                             norm_forward, norm_gate_refusal, norm_parameters, parameter)
from livebytes.lifetimes.layer_stack import DISCARD, RECOMPUTE, LayerParts, declare_stack

src = source_root("fla")
KDA = "layers/kda.py"
FWD = "KimiDeltaAttention.forward"
INIT = "KimiDeltaAttention.__init__"
VERSION = "0.6.0"
DEFAULT_HIDDEN = 2048        # KimiDeltaAttention(hidden_size=2048) (kda.py:85)
DEFAULT_CONV = 4             # conv_size=4 (kda.py:95)
DEFAULT_DEVICE = "H200"      # the device a model built without one describes (the registry's default_device)


@dataclass(frozen=True)
class LayerConfig:
    hidden: int
    conv_size: int
    device: object           # the Device: its SM count sizes FusedRMSNormGated's partials and ATen's global reduces
    gva: bool = False        # HV > H: the kernel's grouped-value path

    @property
    def sms(self) -> int:
        return self.device.sm_count


def linears(hidden: int) -> dict[str, Linear]:
    """The layer's nn.Linear modules (kda.py:142-192)."""
    def at(line, quote):
        return src(KDA, INIT, line, quote)
    return {lin.name: lin for lin in (
        Linear("q_proj", hidden, H * DK, at(142, "self.q_proj = nn.Linear(hidden_size, self.key_dim, bias=False)")),
        Linear("k_proj", hidden, H * DK, at(143, "self.k_proj = nn.Linear(hidden_size, self.key_dim, bias=False)")),
        Linear("v_proj", hidden, HV * DV, at(144, "self.v_proj = nn.Linear(hidden_size, self.value_dim, bias=False)")),
        Linear("f_proj.0", hidden, DV, at(169, "nn.Linear(hidden_size, self.head_v_dim, bias=False)")),
        Linear("f_proj.1", DV, HV * DK, at(170, "nn.Linear(self.head_v_dim, self.gate_dim, bias=False)")),
        Linear("b_proj", hidden, HV, at(172, "self.b_proj = nn.Linear(hidden_size, self.num_v_heads, bias=False)")),
        Linear("g_proj.0", hidden, DV, at(188, "nn.Linear(hidden_size, self.head_v_dim, bias=False)")),
        Linear("g_proj.1", DV, HV * DV, at(189, "nn.Linear(self.head_v_dim, self.value_dim, bias=True)"), bias=True),
        Linear("o_proj", HV * DV, hidden, at(192, "self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False)")),
    )}


CONVS = (("q_conv1d", H * DK, 147, 229), ("k_conv1d", H * DK, 153, 235), ("v_conv1d", HV * DV, 159, 241))
LAYER_CALL = src(KDA, FWD, 194, "def forward(self, hidden_states, attention_mask=None, ..., **kwargs)")
CU_SEQLENS = src(KDA, FWD, 222, 'cu_seqlens = kwargs.get("cu_seqlens")')


def parameters(d: Declaration, c: LayerConfig) -> None:
    """Every parameter of the layer, allocated when it is built (kda.py:142-192)."""
    lin = linears(c.hidden)
    for name in ("q_proj", "k_proj", "v_proj"):
        linear_parameters(d, lin[name])
    for name, channels, line, _ in CONVS:
        conv_parameters(d, name, channels, c.conv_size, src(KDA, INIT, line, f"self.{name} = ShortConvolution("))
    for name in ("f_proj.0", "f_proj.1", "b_proj"):
        linear_parameters(d, lin[name])
    parameter(d, "A_log", (HV,), src(KDA, INIT, 178, "self.A_log = nn.Parameter(torch.log(torch.empty(self.num_v_heads, "
              "dtype=torch.float32).uniform_(1, 16)))"), "fp32", note="kept fp32, as chunk_kda's report contract takes it")
    parameter(d, "dt_bias", (HV * DK,), src(KDA, INIT, 184, "self.dt_bias = nn.Parameter(inv_dt)"), "fp32",
              note="kept fp32, as chunk_kda's report contract takes it")
    for name in ("g_proj.0", "g_proj.1"):
        linear_parameters(d, lin[name])
    norm_parameters(d, "o_norm", DV, src(KDA, INIT, 191, 'self.o_norm = FusedRMSNormGated(self.head_v_dim, activation="sigmoid", eps=norm_eps)'))
    linear_parameters(d, lin["o_proj"])


def kernel(forward_only: bool, c: LayerConfig) -> LifetimeModel:
    """The chunk kernel inside: the KDA kernel model, report contract (the layer's in-kernel transforms), with the
    layer's safe_gate=False and state_v_first=True (kda.py:276-278: its autotuned kernels and keys)."""
    return fla_kda.build(contract="report", forward_only=forward_only, device=c.device.name, gva=c.gva, safe_gate=False,
                         state_v_first=True, sms=c.sms)


# the kernel's caller tensors are these buffers of the layer
KERNEL_INPUTS = {"q": "q_conv1d.out", "k": "k_conv1d.out", "v": "v_conv1d.out", "g": "f_proj.1.out", "beta": "b_proj.out"}
PASSED = {"A_log": "A_log", "dt_bias": "dt_bias", "cu_seqlens": "cu_seqlens", "dO": "o_norm.dx"}


def forward(d: Declaration, c: LayerConfig, x: str, mode: str, filled: bool = False) -> None:
    """KimiDeltaAttention.forward (kda.py:194-316) on the input buffer ``x`` (read by every projection: autograd saves
    it, no new bytes). ``mode``: SAVE (each op keeps what it saves), DISCARD (checkpoint's first forward: each buffer
    dies with its last reference; names ``ckpt.*``; the kernel is its forward-only model) or RECOMPUTE."""
    saving = mode != DISCARD
    p = "" if saving else "ckpt."
    lin = {k: replace(v, name=p + v.name) for k, v in linears(c.hidden).items()}
    linear = partial(linear_forward, d, thread="backward" if mode == RECOMPUTE else "forward")   # recompute: autograd thread

    def kept(saved_until: str, last_use: str) -> str:
        return saved_until if saving else f"fwd.{p}{last_use}"
    end = f"fwd.{p}o_proj"     # KimiDeltaAttention.forward's locals (q, k, v, g, beta) die when it returns
    for name, channels, _, line in CONVS:
        proj = name.replace("_conv1d", "_proj")
        call = src(KDA, FWD, line, f"{name[0]}, conv_state_{name[0]} = self.{name}(")
        linear(lin[proj], call, kept(f"bwd.{name}", name))                            # saved by the conv
        conv_forward(d, p + name, channels, c.conv_size, call, kept("kda.bwd.return", "o_proj") if name == "v_conv1d" else end)
        if name == "q_conv1d" and not (mode == RECOMPUTE or filled):    # a hit: the first forward or a layer below filled it
            conv_chunk_indices(d)
    linear(lin["f_proj.0"], src(KDA, FWD, 252, "g = self.f_proj(hidden_states)"), kept("bwd.f_proj.1", "f_proj.1"))
    linear(lin["f_proj.1"], src(KDA, FWD, 252, "g = self.f_proj(hidden_states)"), kept("kda.bwd.return", "o_proj"))
    linear(lin["b_proj"], src(KDA, FWD, 253, "beta = self.b_proj(hidden_states)"), kept("kda.bwd.return", "o_proj"))
    inputs = {k: p + v for k, v in KERNEL_INPUTS.items()} | {k: v for k, v in PASSED.items() if saving or k != "dO"}
    d.include(kernel(not saving, c), f"{p}kda", "forward", inputs, freed={"o": kept("bwd.o_norm", "o_norm")},
              cache_hit=mode == RECOMPUTE or filled)
    g_call = src(KDA, FWD, 311, 'o = self.o_norm(o, rearrange(self.g_proj(hidden_states), "... (h d) -> ... h d", d=self.head_v_dim))')
    linear(lin["g_proj.0"], g_call, kept("bwd.g_proj.1", "g_proj.1"))
    linear(lin["g_proj.1"], g_call, kept("bwd.o_norm", "o_norm"))               # the gate g, saved by the norm
    norm_forward(d, p + "o_norm", T * HV, DV, g_call, kept("bwd.o_proj", "o_proj"), kept("bwd.o_norm", "o_norm"))
    linear(lin["o_proj"], src(KDA, FWD, 313, "o = self.o_proj(o)"), "fwd.o_proj" if mode == RECOMPUTE else None,
                   Group.INPUTS)


def backward(d: Declaration, c: LayerConfig, input_grad_until: str | None) -> None:
    """The layer's backward in autograd's order (the newest node first): o_proj, o_norm, the g_proj pair, the kernel,
    b_proj, the f_proj pair, then each convolution and its projection, v, k, q. The input's gradient is the first
    projection gradient to arrive (g_proj.0's); the later ones are added into it in place and die at their step."""
    lin = linears(c.hidden)
    linear_backward(d, lin["o_proj"], "bwd.o_norm")
    norm_backward(d, "o_norm", T * HV, DV, c.sms, "kda.bwd.return", "bwd.g_proj.1")
    linear_backward(d, lin["g_proj.1"], "bwd.g_proj.0", sms=c.sms)
    linear_backward(d, lin["g_proj.0"], input_grad_until)
    d.include(kernel(False, c), "kda", "backward", KERNEL_INPUTS | PASSED,
              freed={"dq": "bwd.q_conv1d", "dk": "bwd.k_conv1d", "dv": "bwd.v_conv1d", "dg": "bwd.f_proj.1", "dbeta": "bwd.b_proj"})
    linear_backward(d, lin["b_proj"], "bwd.b_proj")
    linear_backward(d, lin["f_proj.1"], "bwd.f_proj.0")
    linear_backward(d, lin["f_proj.0"], "bwd.f_proj.0")
    for name, channels, _, _ in reversed(CONVS):
        proj = name.replace("_conv1d", "_proj")
        conv_backward(d, name, channels, c.conv_size, f"bwd.{proj}", c.sms)
        linear_backward(d, lin[proj], f"bwd.{proj}")


INPUT_GRAD = "g_proj.0.dinput"


def parts(c: LayerConfig) -> LayerParts:
    return LayerParts(hidden=c.hidden, call=LAYER_CALL, parameters=lambda d: parameters(d, c),
                      forward=lambda d, x, mode, filled: forward(d, c, x, mode, filled), backward=lambda d, until: backward(d, c, until),
                      output="o_proj.out", input_grad=INPUT_GRAD, cu_seqlens=CU_SEQLENS)


NOT_MODELLED = (
    "pre-norm, MLP and residual adds between the layers (the stack chains the linear-attention blocks alone)",
    "autograd's first accumulation into a layer's input gradient is out of place (one [T, hidden] bf16 add, "
    "input_buffer.cpp), the model adds in place; the CPU allocation trace moves no peak with it "
    "(validate/records/runs/cpu_alloc_trace/)",
    "assumed: the dhu kernel's configs that fail to launch on the H200 (a cold first call keeps dv until the next "
    "garbage collection) were measured with STATE_V_FIRST 0; the layer's call has 1",
    "checkpoint's early stop (the recompute runs the layer's whole forward; o_proj's recomputed output dies at once)",
    "A_log and dt_bias in bf16 (a layer cast whole with .to(torch.bfloat16)): kept fp32 as the kernel's contract takes them",
    "temporaries of the first call only (tensor_cache misses); the CUDA backend of ShortConvolution",
)


def build(device=None, gva: bool = False, hidden: int = DEFAULT_HIDDEN, layers: int = 1, checkpoint: bool = False,
          conv_size: int = DEFAULT_CONV) -> LifetimeModel:
    """L KimiDeltaAttention layers (default 1), forward + backward, checkpointing off or per layer."""
    c = LayerConfig(hidden, conv_size, device or get_device(DEFAULT_DEVICE), gva)
    one = declare_stack(parts(c), 1, checkpoint, None).freeze(**_fields(device, gva, hidden, 1, checkpoint, conv_size)) if layers > 1 else None
    d = declare_stack(parts(c), layers, checkpoint, one)
    return d.freeze(**_fields(device, gva, hidden, layers, checkpoint, conv_size))


def _fields(device, gva, hidden, layers, checkpoint, conv_size) -> dict:
    return dict(
        key=f"fla-kda-layer@{VERSION}", implementation="FLA KimiDeltaAttention layer (flash-linear-attention 0.6.0)",
        version=VERSION, device=getattr(device, "name", ""),
        summary=f"{layers} KimiDeltaAttention layer{'s' if layers > 1 else ''} (hidden {hidden}, conv {conv_size}), forward + "
                f"backward, checkpointing {'per layer' if checkpoint else 'off'}; chunk_kda inside: fla-kda@0.6.0, report "
                "contract; measured on the H200 (run 16: seven records; runs 19 and 20: 4 layers at the edge, plan's 232,448 "
                "fitted and 234,773 ran out of memory; every figure to the byte)",
        options=(("gva", gva), ("hidden", hidden), ("layers", layers), ("checkpoint", checkpoint), ("conv_size", conv_size)),
        not_modelled=NOT_MODELLED + fla_kda.build(contract="report").not_modelled,
        notes=("from flash-linear-attention 0.6.0 fla/layers/kda.py and fla-core 0.6.0; run 16's seven H200 records (1 and "
               "4 layers, checkpointing on and off) replay to the byte, and their reserved peaks too but 8K x 4 "
               "layers' (2 MiB: one small-pool segment more)",),
    )


def refuse(shape, device) -> str | None:
    """The kernel's refusals (a portable function: the spec index stores it), then the norm's (``norm_gate_refusal``)."""
    return kernel_refuse(shape, device) or norm_gate_refusal(shape)


# ---------------------------------------------------------------- registration

from livebytes.estimator.registry import ModelSpec, register  # noqa: E402  (the registration block closes the file)
from livebytes.estimator.shapes import LAYER_FIELDS  # noqa: E402

register(ModelSpec(
    key=f"fla-kda-layer@{VERSION}", implementation="FLA KimiDeltaAttention layer (flash-linear-attention 0.6.0)",
    version=VERSION, covers="flash-linear-attention 0.6.0 KimiDeltaAttention x L (--num-hidden-layers), forward + backward, "
                            "checkpointing off or per layer (--checkpoint); its chunk_kda is fla-kda@0.6.0's model",
    builder=build, refuse=refuse, options={"gva": (False, True)}, default_device=DEFAULT_DEVICE, shape_fields=LAYER_FIELDS,
    stacked=True,
))

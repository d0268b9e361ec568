"""flash-linear-attention 0.6.0's ``GatedDeltaNet`` layer (``fla/layers/gated_deltanet.py``), forward + backward in bf16,
and a stack of L of them, as buffer records (the stack: ``lifetimes/layer_stack.py``, as for the KDA layer).

Called as a training step calls it: ``hidden_states [1, T, hidden]`` bf16 with packed ``cu_seqlens`` (so the three
short convolutions run apart: ``_use_fused_qkv_conv`` needs ``cu_seqlens is None``, gated_deltanet.py:202),
``use_gate=True`` (``g_proj`` and ``FusedRMSNormGated``), no cache, mode ``chunk``. Its kernel is
``chunk_gated_delta_rule(..., use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True, use_gate_in_kernel=True,
state_v_first=True)`` (gated_deltanet.py:302-318): the GDN kernel model built for that call (``fla_gdn.build(
layer_call=True)``: the in-kernel gate and beta sigmoid on top of its Qwen3-Next records), included whole (``gdn.*``).

Shapes: ``num_heads`` H, ``num_v_heads`` HV, ``head_dim`` K (DK), ``head_v_dim`` V (DV = K * expand_v); ``key_dim = H*K``,
``value_dim = HV*V`` (gated_deltanet.py:125-128). Measured on the H200 with Triton 3.9.0 (run 22f; fla-core 0.6.0 refuses
the kernel's backward on Hopper with Triton 3.4-3.7.0): two records, 1 x 8K H16/HV32 D128 hidden 2048, 1 layer and 4
layers checkpointed, each a fresh cold process, allocated, requested and reserved to the byte (after they showed the
kernel's chunk_indices to be a tensor_cache hit of the convs' entry). The kernel's Qwen3-Next call is measured as
``fla-gdn@0.6.0``'s notes say; the layer's process memory and its first call (cold) are not.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from livebytes.estimator.buffers import Group, LifetimeModel
from livebytes.estimator.declare import Declaration, source_root
from livebytes.estimator.devices import get_device
from livebytes.estimator.symbols import DK, DV, H, HV, T
from livebytes.lifetimes import fla_gdn
from livebytes.lifetimes.fla_gdn import refuse as kernel_refuse
from livebytes.lifetimes.fla_modules import (Linear, conv_backward, conv_chunk_indices, conv_forward, conv_parameters,
                                             linear_backward, linear_forward, linear_parameters, norm_backward,
                                             norm_forward, norm_gate_refusal, norm_parameters, parameter)
from livebytes.lifetimes.layer_stack import DISCARD, RECOMPUTE, LayerParts, declare_stack

src = source_root("fla")
GDN = "layers/gated_deltanet.py"
FWD = "GatedDeltaNet.forward"
INIT = "GatedDeltaNet.__init__"
VERSION = "0.6.0"
DEFAULT_HIDDEN = 2048        # GatedDeltaNet(hidden_size=2048) (gated_deltanet.py:93)
DEFAULT_CONV = 4             # conv_size=4 (gated_deltanet.py:102)
DEFAULT_DEVICE = "H200"      # the device a model built without one describes (the registry's default_device)


@dataclass(frozen=True)
class LayerConfig:
    hidden: int
    conv_size: int
    device: object           # None: the registry's default device
    gva: bool = False

    @property
    def sms(self) -> int:
        """The device's SM count (FusedRMSNormGated's partials, ATen's global reduces)."""
        return (self.device or get_device(DEFAULT_DEVICE)).sm_count


def linears(hidden: int) -> dict[str, Linear]:
    """The layer's nn.Linear modules (gated_deltanet.py:148-198)."""
    def at(line, quote):
        return src(GDN, INIT, line, quote)
    return {lin.name: lin for lin in (
        Linear("q_proj", hidden, H * DK, at(148, "self.q_proj = nn.Linear(in_features=hidden_size, out_features=self.key_dim, bias=False)")),
        Linear("k_proj", hidden, H * DK, at(149, "self.k_proj = nn.Linear(in_features=hidden_size, out_features=self.key_dim, bias=False)")),
        Linear("v_proj", hidden, HV * DV, at(150, "self.v_proj = nn.Linear(in_features=hidden_size, out_features=self.value_dim, bias=False)")),
        Linear("a_proj", hidden, HV, at(151, "self.a_proj = nn.Linear(in_features=hidden_size, out_features=self.num_v_heads, bias=False)")),
        Linear("b_proj", hidden, HV, at(152, "self.b_proj = nn.Linear(in_features=hidden_size, out_features=self.num_v_heads, bias=False)")),
        Linear("g_proj", hidden, HV * DV, at(194, "self.g_proj = nn.Linear(in_features=hidden_size, out_features=self.value_dim, bias=False)")),
        Linear("o_proj", HV * DV, hidden, at(198, "self.o_proj = nn.Linear(in_features=self.value_dim, out_features=hidden_size, bias=False)")),
    )}


CONVS = (("q_conv1d", H * DK, 170, 272), ("k_conv1d", H * DK, 176, 278), ("v_conv1d", HV * DV, 182, 284))
LAYER_CALL = src(GDN, FWD, 210, "def forward(self, hidden_states, attention_mask=None, ..., **kwargs)")
CU_SEQLENS = src(GDN, FWD, 238, "cu_seqlens = kwargs.get('cu_seqlens')")
KERNEL_CALL = src(GDN, FWD, 302, "o, recurrent_state = chunk_gated_delta_rule(")


def parameters(d: Declaration, c: LayerConfig) -> None:
    lin = linears(c.hidden)
    for name in ("q_proj", "k_proj", "v_proj", "a_proj", "b_proj"):
        linear_parameters(d, lin[name])
    parameter(d, "A_log", (HV,), src(GDN, INIT, 155, "self.A_log = nn.Parameter(torch.log(A))"), "fp32",
              note="kept fp32, as the kernel's layer call takes it")
    parameter(d, "dt_bias", (HV,), src(GDN, INIT, 164, "self.dt_bias = nn.Parameter(inv_dt)"), "fp32",
              note="kept fp32, as the kernel's layer call takes it")
    for name, channels, line, _ in CONVS:
        conv_parameters(d, name, channels, c.conv_size, src(GDN, INIT, line, f"self.{name} = ShortConvolution("))
    linear_parameters(d, lin["g_proj"])
    norm_parameters(d, "o_norm", DV, src(GDN, INIT, 195, "self.o_norm = FusedRMSNormGated(hidden_size=self.head_v_dim, ...)"))
    linear_parameters(d, lin["o_proj"])


def kernel(forward_only: bool, c: LayerConfig) -> LifetimeModel:
    return fla_gdn.build(forward_only=forward_only, device=c.device, gva=c.gva, layer_call=True, sms=c.sms)


KERNEL_INPUTS = {"q": "q_conv1d.out", "k": "k_conv1d.out", "v": "v_conv1d.out", "g": "a_proj.out", "beta": "b_proj.out"}
PASSED = {"A_log": "A_log", "dt_bias": "dt_bias", "cu_seqlens": "cu_seqlens", "dO": "o_norm.dx"}


def forward(d: Declaration, c: LayerConfig, x: str, mode: str, filled: bool = False) -> None:
    """GatedDeltaNet.forward (gated_deltanet.py:210-358) on ``x``; ``mode`` as the KDA layer's (layer_stack)."""
    saving = mode != DISCARD
    p = "" if saving else "ckpt."
    lin = {k: replace(v, name=p + v.name) for k, v in linears(c.hidden).items()}
    linear = partial(linear_forward, d, thread="backward" if mode == RECOMPUTE else "forward")   # recompute: autograd thread

    def kept(saved_until: str, last_use: str) -> str:
        return saved_until if saving else f"fwd.{p}{last_use}"
    end = f"fwd.{p}o_proj"     # the forward's locals (q, k, v, beta) die when it returns
    for name, channels, _, line in CONVS:
        proj = name.replace("_conv1d", "_proj")
        call = src(GDN, FWD, line, f"{name[0]}, conv_state_{name[0]} = self.{name}(")
        linear(lin[proj], call, kept(f"bwd.{name}", name))                            # saved by the conv
        conv_forward(d, p + name, channels, c.conv_size, call, kept("gdn.bwd.return", "o_proj") if name == "v_conv1d" else end)
        if name == "q_conv1d" and not (mode == RECOMPUTE or filled):    # a hit: the first forward or a layer below filled it
            conv_chunk_indices(d)
    linear(lin["b_proj"], src(GDN, FWD, 298, "beta = self.b_proj(hidden_states)"), kept("gdn.bwd.return", "o_proj"))
    linear(lin["a_proj"], src(GDN, FWD, 306, "g=self.a_proj(hidden_states),"), "gdn.bwd.return" if saving else "ckpt.gdn.fwd.output")
    inputs = {k: p + v for k, v in KERNEL_INPUTS.items()} | {k: v for k, v in PASSED.items() if saving or k != "dO"}
    # the kernel's prepare_chunk_indices(cu_seqlens, chunk_size, cu_seqlens_cpu=...) is the convs' call in the same form
    # with the same objects (chunk.py:291, ops.py:951): tensor_cache hits the conv's entry (run 22f's two layer records:
    # a second [NT, 2] int64 entry, and the warmup's second entry it would keep, were 2,560 B too many)
    d.include(kernel(not saving, c), f"{p}gdn", "forward", inputs, freed={"o": kept("bwd.o_norm", "o_norm")},
              cache_hit=mode == RECOMPUTE or filled, hits=("chunk_indices",))
    g_call = src(GDN, FWD, 349, "g = rearrange(self.g_proj(hidden_states), '... (h d) -> ... h d', d=self.head_v_dim)")
    linear(lin["g_proj"], g_call, kept("bwd.o_norm", "o_norm"))
    norm_forward(d, p + "o_norm", T * HV, DV, src(GDN, FWD, 350, "o = self.o_norm(o, g)"), kept("bwd.o_proj", "o_proj"),
                 kept("bwd.o_norm", "o_norm"))
    linear(lin["o_proj"], src(GDN, FWD, 354, "o = self.o_proj(o)"), "fwd.o_proj" if mode == RECOMPUTE else None,
                   Group.INPUTS)


def backward(d: Declaration, c: LayerConfig, input_grad_until: str | None) -> None:
    """Autograd's order (the newest node first): o_proj, o_norm, g_proj (the input gradient's first contribution), the
    kernel, a_proj, b_proj, then each convolution and its projection, v, k, q."""
    lin = linears(c.hidden)
    linear_backward(d, lin["o_proj"], "bwd.o_norm")
    norm_backward(d, "o_norm", T * HV, DV, c.sms, "gdn.bwd.return", "bwd.g_proj")
    linear_backward(d, lin["g_proj"], input_grad_until)
    d.include(kernel(False, c), "gdn", "backward", KERNEL_INPUTS | PASSED,
              freed={"dq": "bwd.q_conv1d", "dk": "bwd.k_conv1d", "dv": "bwd.v_conv1d", "dg_gate": "bwd.a_proj", "dbeta": "bwd.b_proj"})
    linear_backward(d, lin["a_proj"], "bwd.a_proj")
    linear_backward(d, lin["b_proj"], "bwd.b_proj")
    for name, channels, _, _ in reversed(CONVS):
        proj = name.replace("_conv1d", "_proj")
        conv_backward(d, name, channels, c.conv_size, f"bwd.{proj}", c.sms)
        linear_backward(d, lin[proj], f"bwd.{proj}")


def parts(c: LayerConfig) -> LayerParts:
    return LayerParts(hidden=c.hidden, call=LAYER_CALL, parameters=lambda d: parameters(d, c),
                      forward=lambda d, x, mode, filled: forward(d, c, x, mode, filled), backward=lambda d, until: backward(d, c, until),
                      output="o_proj.out", input_grad="g_proj.dinput", cu_seqlens=CU_SEQLENS)


NOT_MODELLED = (
    "pre-norm, MLP and residual adds between the layers (the stack chains the linear-attention blocks alone)",
    "autograd's first accumulation into a layer's input gradient is out of place (one [T, hidden] bf16 add, "
    "input_buffer.cpp), the model adds in place (the KDA layer's CPU allocation trace moves no peak with it)",
    "checkpoint's early stop (the recompute runs the layer's whole forward; o_proj's recomputed output dies at once)",
    "A_log and dt_bias in bf16 (a layer cast whole with .to(torch.bfloat16)): kept fp32",
    "the kernel's autotune keys carry STATE_V_FIRST 0; the layer passes state_v_first=True (other keys, no buffer differs)",
    "assumed: dhu's config that never loads at K = V = 128 (measured in the Qwen3-Next call, STATE_V_FIRST 0) fails with "
    "the layer's state_v_first=True too: gdn.dv_local waits for the next compile in a cold first call",
    "use_gate=False (RMSNorm instead of FusedRMSNormGated), the fused q/k/v convolution of unpacked inputs, the CUDA "
    "convolution backend",
)


def build(device=None, gva: bool = False, hidden: int = DEFAULT_HIDDEN, layers: int = 1, checkpoint: bool = False,
          conv_size: int = DEFAULT_CONV) -> LifetimeModel:
    """L GatedDeltaNet layers (default 1), forward + backward, checkpointing off or per layer."""
    c = LayerConfig(hidden, conv_size, device, gva)
    one = declare_stack(parts(c), 1, checkpoint, None).freeze(**_fields(c, 1, checkpoint)) if layers > 1 else None
    return declare_stack(parts(c), layers, checkpoint, one).freeze(**_fields(c, layers, checkpoint))


def _fields(c: LayerConfig, layers: int, checkpoint: bool) -> dict:
    return dict(
        key=f"fla-gdn-layer@{VERSION}", implementation="FLA GatedDeltaNet layer (flash-linear-attention 0.6.0)",
        version=VERSION, device=getattr(c.device, "name", ""),
        summary=f"{layers} GatedDeltaNet layer{'s' if layers > 1 else ''} (hidden {c.hidden}, conv {c.conv_size}), forward + "
                f"backward, checkpointing {'per layer' if checkpoint else 'off'}; chunk_gated_delta_rule inside: fla-gdn@0.6.0's "
                "records with the layer's in-kernel gate and beta sigmoid; measured with Triton 3.9.0 at 1 x 8K H16/HV32 "
                "D128 hidden 2048, 1 and 4 layers (run 22f)",
        options=(("gva", c.gva), ("hidden", c.hidden), ("layers", layers), ("checkpoint", checkpoint), ("conv_size", c.conv_size)),
        not_modelled=NOT_MODELLED + fla_gdn.build(layer_call=True, sms=c.sms).not_modelled,
        notes=("from flash-linear-attention 0.6.0 fla/layers/gated_deltanet.py and fla-core 0.6.0; measured on the H200 "
               "with Triton 3.9.0 (run 22f): 1 x 8K H16/HV32 D128 hidden 2048, 1 layer and 4 layers checkpointed, each a "
               "fresh cold process, allocated, requested and reserved to the byte; not measured: its process memory, a "
               "cold first call at the edge, other shapes (the kernel's own call: the notes below)",)
        + fla_gdn.GDN_0_6_0.notes,
    )


def refuse(shape, device) -> str | None:
    """The kernel's refusals (a portable function: the spec index stores it), then the norm's (``norm_gate_refusal``)."""
    return kernel_refuse(shape, device) or norm_gate_refusal(shape)


# ---------------------------------------------------------------- registration

from livebytes.estimator.registry import ModelSpec, register  # noqa: E402  (the registration block closes the file)
from livebytes.estimator.shapes import LAYER_FIELDS  # noqa: E402

register(ModelSpec(
    key=f"fla-gdn-layer@{VERSION}", implementation="FLA GatedDeltaNet layer (flash-linear-attention 0.6.0)",
    version=VERSION, covers="flash-linear-attention 0.6.0 GatedDeltaNet x L (--num-hidden-layers), forward + backward (measured at "
                            "1 x 8K H16/HV32 D128, 1 and 4 layers, Triton 3.9.0), "
                            "checkpointing off or per layer (--checkpoint); its chunk_gated_delta_rule is fla-gdn@0.6.0's model",
    builder=build, refuse=refuse, options={"gva": (False, True)}, default_device=DEFAULT_DEVICE, shape_fields=LAYER_FIELDS,
    stacked=True,
))

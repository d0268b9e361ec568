"""flash-linear-attention 0.6.0's ``GatedDeltaNet`` layer (``fla/layers/gated_deltanet.py``), forward + backward in bf16,
and a stack of L of them, as buffer records (the stack: ``lifetimes/layer_stack.py``, as for the KDA layer): ``GDN_0_6_0``,
a row of the FLA layer table (``lifetimes/fla_layer.py`` declares it).

Called as a training step calls it: ``hidden_states [1, T, hidden]`` bf16 with packed ``cu_seqlens`` (so the three
short convolutions run apart: ``_use_fused_qkv_conv`` needs ``cu_seqlens is None``, gated_deltanet.py:202),
``use_gate=True`` (``g_proj`` and ``FusedRMSNormGated``), no cache, mode ``chunk``. Its kernel is
``chunk_gated_delta_rule(..., use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True, use_gate_in_kernel=True,
state_v_first=True)`` (gated_deltanet.py:302-318): the GDN kernel model built for that call (``fla_gdn.build(
layer_call=True)``: the in-kernel gate and beta sigmoid on top of its Qwen3-Next records), included whole (``gdn.*``).

Shapes: ``num_heads`` H, ``num_v_heads`` HV, ``head_dim`` K (DK), ``head_v_dim`` V (DV = K * expand_v); ``key_dim = H*K``,
``value_dim = HV*V`` (gated_deltanet.py:125-128). Measured on the H200 with Triton 3.9.0 (fla-core 0.6.0 refuses
the kernel's backward on Hopper with Triton 3.4-3.7.0): two records, 1 x 8K H16/HV32 D128 hidden 2048, 1 layer and 4
layers checkpointed, each a fresh cold process, allocated, requested and reserved to the byte (after they showed the
kernel's chunk_indices to be a tensor_cache hit of the convs' entry). The kernel's Qwen3-Next call is measured as
``fla-gdn@0.6.0``'s notes say; the layer's process memory and its first call (cold) are not.
"""
from __future__ import annotations

from livebytes.estimator.buffers import LifetimeModel
from livebytes.estimator.symbols import DK, DV, H, HV
from livebytes.lifetimes import fla_gdn
from livebytes.lifetimes.fla_gdn import refuse as kernel_refuse
from livebytes.lifetimes.fla_layer import CONVS_AT, HIDDEN, FlaLayer, Gate, LayerConfig, register_layer, src
from livebytes.lifetimes.fla_layer import build as build_layer
from livebytes.lifetimes.fla_modules import Linear, norm_gate_refusal

GDN = "layers/gated_deltanet.py"
FWD = "GatedDeltaNet.forward"
INIT = "GatedDeltaNet.__init__"


def refuse(shape, device) -> str | None:
    """The kernel's refusals (a portable function: the spec index stores it), then the norm's (``norm_gate_refusal``)."""
    return kernel_refuse(shape, device) or norm_gate_refusal(shape)


def kernel(row: FlaLayer, forward_only: bool, c: LayerConfig) -> LifetimeModel:
    """The GDN kernel model as the layer calls it (in-kernel gate and beta sigmoid)."""
    return fla_gdn.build(forward_only=forward_only, device=c.device, gva=c.gva, version=row.kernel_version,
                         layer_call=True, sms=c.sms, threads_per_sm=c.threads_per_sm)


def _init(line, quote):
    return src(GDN, INIT, line, quote)


def _fwd(line, quote):
    return src(GDN, FWD, line, quote)


GDN_0_6_0 = FlaLayer(
    name="gdn", cls="GatedDeltaNet", file=GDN, version="0.6.0", kernel_version=fla_gdn.GDN_0_6_0,
    kernel_model="fla-gdn", kernel_call="chunk_gated_delta_rule", kernel=kernel, refuse=refuse,
    linears=(   # gated_deltanet.py:148-198
        Linear("q_proj", HIDDEN, H * DK, _init(148, "self.q_proj = nn.Linear(in_features=hidden_size, out_features=self.key_dim, bias=False)")),
        Linear("k_proj", HIDDEN, H * DK, _init(149, "self.k_proj = nn.Linear(in_features=hidden_size, out_features=self.key_dim, bias=False)")),
        Linear("v_proj", HIDDEN, HV * DV, _init(150, "self.v_proj = nn.Linear(in_features=hidden_size, out_features=self.value_dim, bias=False)")),
        Linear("a_proj", HIDDEN, HV, _init(151, "self.a_proj = nn.Linear(in_features=hidden_size, out_features=self.num_v_heads, bias=False)")),
        Linear("b_proj", HIDDEN, HV, _init(152, "self.b_proj = nn.Linear(in_features=hidden_size, out_features=self.num_v_heads, bias=False)")),
        Linear("g_proj", HIDDEN, HV * DV, _init(194, "self.g_proj = nn.Linear(in_features=hidden_size, out_features=self.value_dim, bias=False)")),
        Linear("o_proj", HV * DV, HIDDEN, _init(198, "self.o_proj = nn.Linear(in_features=self.value_dim, out_features=hidden_size, bias=False)")),
    ),
    parameter_order=("q_proj", "k_proj", "v_proj", "a_proj", "b_proj", "A_log", "dt_bias", CONVS_AT, "g_proj", "o_norm",
                     "o_proj"),
    fp32_parameters={
        "A_log": ((HV,), _init(155, "self.A_log = nn.Parameter(torch.log(A))")),
        "dt_bias": ((HV,), _init(164, "self.dt_bias = nn.Parameter(inv_dt)")),
    },
    fp32_note="kept fp32, as the kernel's layer call takes it",
    conv_lines=((170, 272), (176, 278), (182, 284)),
    # the forward's locals (q, k, v, beta) die when it returns; the raw a_proj output is the kernel's g, which its
    # forward-only model frees at its end
    before_kernel=(
        Gate("b_proj", _fwd(298, "beta = self.b_proj(hidden_states)"), "gdn.bwd.return", "fwd.ckpt.o_proj", "bwd.b_proj"),
        Gate("a_proj", _fwd(306, "g=self.a_proj(hidden_states),"), "gdn.bwd.return", "ckpt.gdn.fwd.output", "bwd.a_proj"),
    ),
    after_kernel=(Gate("g_proj", _fwd(349, "g = rearrange(self.g_proj(hidden_states), '... (h d) -> ... h d', "
                                            "d=self.head_v_dim)"), "bwd.o_norm", "fwd.ckpt.o_norm"),),
    kernel_inputs={"q": "q_conv1d.out", "k": "k_conv1d.out", "v": "v_conv1d.out", "g": "a_proj.out", "beta": "b_proj.out"},
    kernel_grads={"dq": "bwd.q_conv1d", "dk": "bwd.k_conv1d", "dv": "bwd.v_conv1d", "dg_gate": "bwd.a_proj",
                  "dbeta": "bwd.b_proj"},
    # the kernel's prepare_chunk_indices(cu_seqlens, chunk_size, cu_seqlens_cpu=...) is the convs' call in the same form
    # with the same objects (chunk.py:291, ops.py:951): tensor_cache hits the conv's entry (in the two layer records,
    # a second [NT, 2] int64 entry, and the warmup's second entry it would keep, were 2,560 B too many)
    kernel_hits=("chunk_indices",),
    norm_init=_init(195, "self.o_norm = FusedRMSNormGated(hidden_size=self.head_v_dim, ...)"),
    norm_call=_fwd(350, "o = self.o_norm(o, g)"), o_proj_call=_fwd(354, "o = self.o_proj(o)"),
    layer_call=_fwd(210, "def forward(self, hidden_states, attention_mask=None, ..., **kwargs)"),
    cu_seqlens=_fwd(238, "cu_seqlens = kwargs.get('cu_seqlens')"),
    default_hidden=2048,        # GatedDeltaNet(hidden_size=2048) (gated_deltanet.py:93)
    default_conv=4,             # conv_size=4 (gated_deltanet.py:102)
    covers_measured=" (measured at 1 x 8K H16/HV32 D128, 1 and 4 layers, Triton 3.9.0)",
    inside="chunk_gated_delta_rule inside: {kernel_key}'s records with the layer's in-kernel gate and beta sigmoid; "
           "measured with Triton 3.9.0 at 1 x 8K H16/HV32 D128 hidden 2048, 1 and 4 layers (run 22f)",
    evidence="measured on the H200 with Triton 3.9.0 (run 22f): 1 x 8K H16/HV32 D128 hidden 2048, 1 layer and 4 layers "
             "checkpointed, each a fresh cold process, allocated, requested and reserved to the byte; not measured: its "
             "process memory, a cold first call at the edge, other shapes (the kernel's own call: the notes below)",
    kernel_notes=fla_gdn.GDN_0_6_0.notes,
    not_modelled=(
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
    ),
)

VERSIONS: tuple[FlaLayer, ...] = (GDN_0_6_0,)     # a new version: an entry derived from the one it differs from
LAYER = GDN_0_6_0


def build(device=None, gva: bool = False, hidden: int = LAYER.default_hidden, layers: int = 1, checkpoint: bool = False,
          conv_size: int = LAYER.default_conv) -> LifetimeModel:
    """L GatedDeltaNet layers (default 1), forward + backward, checkpointing off or per layer."""
    return build_layer(LAYER, device, gva, hidden, layers, checkpoint, conv_size)


for _v in VERSIONS:
    register_layer(_v)

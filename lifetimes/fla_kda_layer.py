"""flash-linear-attention 0.6.0's ``KimiDeltaAttention`` layer (``fla/layers/kda.py``), forward + backward in bf16,
and a stack of L of them, as buffer records: ``KDA_0_6_0``, a row of the FLA layer table (``lifetimes/fla_layer.py``
declares it).

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

from livebytes.estimator.buffers import LifetimeModel
from livebytes.estimator.symbols import DK, DV, H, HV
from livebytes.lifetimes import fla_kda
from livebytes.lifetimes.fla_kda import refuse as kernel_refuse
from livebytes.lifetimes.fla_layer import CONVS_AT, HIDDEN, FlaLayer, Gate, LayerConfig, register_layer, src
from livebytes.lifetimes.fla_layer import build as build_layer
from livebytes.lifetimes.fla_modules import Linear, norm_gate_refusal

KDA = "layers/kda.py"
FWD = "KimiDeltaAttention.forward"
INIT = "KimiDeltaAttention.__init__"


def refuse(shape, device) -> str | None:
    """The kernel's refusals (a portable function: the spec index stores it), then the norm's (``norm_gate_refusal``)."""
    return kernel_refuse(shape, device) or norm_gate_refusal(shape)


def kernel(row: FlaLayer, forward_only: bool, c: LayerConfig) -> LifetimeModel:
    """The chunk kernel inside: the KDA kernel model, report contract (the layer's in-kernel transforms), with the
    layer's safe_gate=False and state_v_first=True (kda.py:276-278: its autotuned kernels and keys)."""
    return fla_kda.build(version=row.kernel_version, contract="report", forward_only=forward_only, device=c.facts.name,
                         gva=c.gva, safe_gate=False, state_v_first=True, sms=c.sms,
                         threads_per_sm=c.threads_per_sm)


def _init(line, quote):
    return src(KDA, INIT, line, quote)


def _fwd(line, quote):
    return src(KDA, FWD, line, quote)


G_CALL = _fwd(311, 'o = self.o_norm(o, rearrange(self.g_proj(hidden_states), "... (h d) -> ... h d", d=self.head_v_dim))')
F_CALL = _fwd(252, "g = self.f_proj(hidden_states)")

KDA_0_6_0 = FlaLayer(
    name="kda", cls="KimiDeltaAttention", file=KDA, version="0.6.0", kernel_version=fla_kda.FLA_0_6_0,
    kernel_model="fla-kda", kernel_call="chunk_kda", kernel=kernel, refuse=refuse,
    linears=(   # kda.py:142-192
        Linear("q_proj", HIDDEN, H * DK, _init(142, "self.q_proj = nn.Linear(hidden_size, self.key_dim, bias=False)")),
        Linear("k_proj", HIDDEN, H * DK, _init(143, "self.k_proj = nn.Linear(hidden_size, self.key_dim, bias=False)")),
        Linear("v_proj", HIDDEN, HV * DV, _init(144, "self.v_proj = nn.Linear(hidden_size, self.value_dim, bias=False)")),
        Linear("f_proj.0", HIDDEN, DV, _init(169, "nn.Linear(hidden_size, self.head_v_dim, bias=False)")),
        Linear("f_proj.1", DV, HV * DK, _init(170, "nn.Linear(self.head_v_dim, self.gate_dim, bias=False)")),
        Linear("b_proj", HIDDEN, HV, _init(172, "self.b_proj = nn.Linear(hidden_size, self.num_v_heads, bias=False)")),
        Linear("g_proj.0", HIDDEN, DV, _init(188, "nn.Linear(hidden_size, self.head_v_dim, bias=False)")),
        Linear("g_proj.1", DV, HV * DV, _init(189, "nn.Linear(self.head_v_dim, self.value_dim, bias=True)"), bias=True),
        Linear("o_proj", HV * DV, HIDDEN, _init(192, "self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False)")),
    ),
    parameter_order=("q_proj", "k_proj", "v_proj", CONVS_AT, "f_proj.0", "f_proj.1", "b_proj", "A_log", "dt_bias",
                     "g_proj.0", "g_proj.1", "o_norm", "o_proj"),
    fp32_parameters={
        "A_log": ((HV,), _init(178, "self.A_log = nn.Parameter(torch.log(torch.empty(self.num_v_heads, "
                                    "dtype=torch.float32).uniform_(1, 16)))")),
        "dt_bias": ((HV * DK,), _init(184, "self.dt_bias = nn.Parameter(inv_dt)")),     # gate_dim = HV*K
    },
    fp32_note="kept fp32, as chunk_kda's report contract takes it",
    conv_lines=((147, 229), (153, 235), (159, 241)),
    # KimiDeltaAttention.forward's locals (q, k, v, g, beta) die when it returns
    before_kernel=(
        Gate("f_proj.0", F_CALL, "bwd.f_proj.1", "fwd.ckpt.f_proj.1", "bwd.f_proj.0"),
        Gate("f_proj.1", F_CALL, "kda.bwd.return", "fwd.ckpt.o_proj", "bwd.f_proj.0"),
        Gate("b_proj", _fwd(253, "beta = self.b_proj(hidden_states)"), "kda.bwd.return", "fwd.ckpt.o_proj", "bwd.b_proj"),
    ),
    after_kernel=(      # the gate g, saved by the norm; g_proj.0's input gradient is the layer input's
        Gate("g_proj.0", G_CALL, "bwd.g_proj.1", "fwd.ckpt.g_proj.1"),
        Gate("g_proj.1", G_CALL, "bwd.o_norm", "fwd.ckpt.o_norm", "bwd.g_proj.0"),
    ),
    kernel_inputs={"q": "q_conv1d.out", "k": "k_conv1d.out", "v": "v_conv1d.out", "g": "f_proj.1.out", "beta": "b_proj.out"},
    kernel_grads={"dq": "bwd.q_conv1d", "dk": "bwd.k_conv1d", "dv": "bwd.v_conv1d", "dg": "bwd.f_proj.1",
                  "dbeta": "bwd.b_proj"},
    kernel_hits=(),     # chunk_kda's keyword call makes its own chunk_indices entry
    norm_init=_init(191, 'self.o_norm = FusedRMSNormGated(self.head_v_dim, activation="sigmoid", eps=norm_eps)'),
    norm_call=G_CALL, o_proj_call=_fwd(313, "o = self.o_proj(o)"),
    layer_call=_fwd(194, "def forward(self, hidden_states, attention_mask=None, ..., **kwargs)"),
    cu_seqlens=_fwd(222, 'cu_seqlens = kwargs.get("cu_seqlens")'),
    default_hidden=2048,        # KimiDeltaAttention(hidden_size=2048) (kda.py:85)
    default_conv=4,             # conv_size=4 (kda.py:95)
    covers_measured="",
    inside="chunk_kda inside: {kernel_key}, report contract; measured on the H200 (run 16: seven records; runs 19 and 20: "
           "4 layers at the edge, plan's 232,448 fitted and 234,773 ran out of memory; every figure to the byte)",
    evidence="run 16's seven H200 records (1 and 4 layers, checkpointing on and off) replay to the byte, and their "
             "reserved peaks too but 8K x 4 layers' (2 MiB: one small-pool segment more)",
    kernel_notes=(),
    not_modelled=(
        "pre-norm, MLP and residual adds between the layers (the stack chains the linear-attention blocks alone)",
        "autograd's first accumulation into a layer's input gradient is out of place (one [T, hidden] bf16 add, "
        "input_buffer.cpp), the model adds in place; the CPU allocation trace moves no peak with it "
        "(validate/data/records/runs/cpu_alloc_trace/)",
        "assumed: the dhu kernel's configs that fail to launch on the H200 (a cold first call keeps dv until the next "
        "garbage collection) were measured with STATE_V_FIRST 0; the layer's call has 1",
        "checkpoint's early stop (the recompute runs the layer's whole forward; o_proj's recomputed output dies at once)",
        "A_log and dt_bias in bf16 (a layer cast whole with .to(torch.bfloat16)): kept fp32 as the kernel's contract takes them",
        "temporaries of the first call only (tensor_cache misses); the CUDA backend of ShortConvolution",
    ),
)

VERSIONS: tuple[FlaLayer, ...] = (KDA_0_6_0,)     # a new version: an entry derived from the one it differs from
LAYER = KDA_0_6_0


def build(device=None, gva: bool = False, hidden: int = LAYER.default_hidden, layers: int = 1, checkpoint: bool = False,
          conv_size: int = LAYER.default_conv) -> LifetimeModel:
    """L KimiDeltaAttention layers (default 1), forward + backward, checkpointing off or per layer."""
    return build_layer(LAYER, device, gva, hidden, layers, checkpoint, conv_size)


for _v in VERSIONS:
    register_layer(_v)

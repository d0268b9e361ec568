"""What every cuDNN frontend KDA model shares: the entry point's contract, the forward output, the
gradients ``kda_bwd`` allocates and the per-call graph workspace (``cudnn/linear_attention/ops``).

Line numbers are those of nvidia-cudnn-frontend 1.32.0 (the PyPI wheel). A version entry
(``CudnnVersion``) says where the code was read; a later version that allocates differently overrides
the fields its models read.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from livebytes.estimator.buffers import Group
from livebytes.estimator.declare import Contract, Declaration, Input, source_root
from livebytes.estimator.symbols import DK, DV, H, MBS, T

src = source_root("cudnn/linear_attention")

HO = H   # equal q/k/v heads in every modelled configuration: gates, output and state heads


@dataclass(frozen=True)
class CudnnVersion:
    version: str
    origin: str
    notes: tuple[str, ...] = ()

    def derive(self, **overrides) -> "CudnnVersion":
        return replace(self, **overrides)


CUDNN_1_32_0 = CudnnVersion("1.32.0", "nvidia-cudnn-frontend 1.32.0 (PyPI)")

KIMI_DELTA_ATTENTION = src("ops/kda.py", "kimi_delta_attention", 1239, "def kimi_delta_attention(q, k, v, g, beta, cu_seqlens, ...)")

# The Hopper engines' contract: THD layout [T, H, D], pre-normalised bf16 q/k, fp32 log-space g, fp32 beta.
PLAIN = Contract("plain", KIMI_DELTA_ATTENTION, (
    Input("q", (T, H, DK), "bf16"),                               # [T, H, K] bf16
    Input("k", (T, H, DK), "bf16"),                               # [T, H, K] bf16
    Input("v", (T, H, DV), "bf16"),                               # [T, H, V] bf16
    Input("g", (T, HO, DK), "fp32", note="log-space"),            # [T, HO, K] fp32
    Input("beta", (T, HO), "fp32"),                               # [T, HO] fp32
    Input("cu_seqlens", (MBS + 1,), "int32"),                     # [N+1] int32
    Input("dO", (T, HO, DV), "bf16", backward_only=True),         # [T, HO, V] bf16
))


def forward_output(d: Declaration) -> None:
    """run_kda_fwd: the output, allocated before the graph executes; the caller holds it."""
    d.step("fwd.kernel", "forward", src("ops/kda.py", "run_kda_fwd", 321, "def run_kda_fwd("))
    d.buffer("o", Group.INPUTS, (T, HO, DV), "bf16",                                               # [T, HO, V] bf16
             src("ops/kda.py", "run_kda_fwd", 491, "o = torch.empty(total, HO, V, dtype=q.dtype, device=device)"),
             note="returned; the caller holds it")


def graph_workspace(d: Declaration, name: str, note: str = "") -> None:
    """A plan whose get_workspace_size() is 0 still gets a one-byte workspace, freed after the call."""
    d.buffer(name, Group.SCRATCH, (1,), "uint8", GRAPH_WORKSPACE, d.current, note=note)


GRAPH_WORKSPACE = src("ops/common.py", "graph_workspace", 72,
                      "return torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device=device)")


def backward_gradients(d: Declaration, contract: Contract) -> None:
    """kda_bwd: every gradient, in the dtype of its input, before the plan's workspace."""
    dtype = {i.name: i.dtype for i in contract.inputs}
    kb = "ops/kda.py"
    d.step("bwd.alloc_grads", "backward", src(kb, "kda_bwd", 857, "def kda_bwd("))
    d.buffer("dq", Group.OUTPUT_GRAD, (T, H, DK), "bf16", src(kb, "kda_bwd", 1015,
             "dq = torch.empty(total, H, K, dtype=q.dtype, device=device)"))                        # [T, H, K] bf16
    d.buffer("dk", Group.OUTPUT_GRAD, (T, H, DK), "bf16", src(kb, "kda_bwd", 1016,
             "dk = torch.empty(total, HK, K, dtype=q.dtype, device=device)"))                       # [T, HK, K] bf16
    d.buffer("dv", Group.DV, (T, H, DV), "bf16", src(kb, "kda_bwd", 1017,
             "dv = torch.empty(total, HV, V, dtype=q.dtype, device=device)"))                       # [T, HV, V] bf16
    d.buffer("dg", Group.OUTPUT_GRAD, (T, HO, DK), dtype["g"], src(kb, "kda_bwd", 1018,
             "dg = torch.empty(total, HO, K, dtype=g.dtype, device=device)"))                       # [T, HO, K] g's dtype
    d.buffer("dbeta", Group.BETA_REDUCTION, (T, HO), dtype["beta"], src(kb, "kda_bwd", 1019,
             "dbeta = torch.empty(total, HO, dtype=beta.dtype, device=device)"))                    # [T, HO] beta's dtype
    if "a_log" in dtype:
        d.buffer("d_a_log", Group.OUTPUT_GRAD, (HO,), "fp32", src(kb, "kda_bwd", 1047, "d_a_log = torch.empty_like(a_log)"))
    if "dt_bias" in dtype:
        d.buffer("d_dt_bias", Group.OUTPUT_GRAD, (HO, DK), "fp32", src(kb, "kda_bwd", 1051, "d_dt_bias = torch.empty_like(dt_bias)"))

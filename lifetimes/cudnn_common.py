"""What every cuDNN frontend KDA model shares: the entry point's contract, the forward output, the
gradients ``kda_bwd`` allocates and the per-call graph workspace (``cudnn/linear_attention/ops``).

Line numbers in the model files are those of nvidia-cudnn-frontend 1.32.0 (the PyPI wheel). A version entry
(``CudnnVersion``) says where the code was read and, as data, what it allocates differently: whether
``graph_workspace`` holds each graph's workspace on the graph (``workspace_held_on_graph``), the SM count
``_pick_nseg`` plans for, FROST's backward chain threshold, where it allocates the workspace, and how its
files' line numbers differ from
1.32.0's (``line_shifts``; ``cite`` applies them to every source of a declaration). The builders read these
fields; no version has a code path of its own.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from livebytes.estimator.buffers import Group, Source
from livebytes.estimator.declare import Contract, Declaration, Input, source_root
from livebytes.estimator.symbols import DK, DV, H, HV, MBS, T

src = source_root("cudnn/linear_attention")

HO = H   # equal q/k/v heads in every modelled configuration: gates, output and state heads
PLAN_CACHE_KEY = (T, MBS, H, HV, DK, DV)   # ops/kda.py make_fprop_cache_key / make_bprop_cache_key: (total, N, H, HK, HV, K, V, ...)


GRAPH_WORKSPACE = src("ops/common.py", "graph_workspace", 72,
                      "return torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device=device)")


@dataclass(frozen=True)
class CudnnVersion:
    version: str
    origin: str
    notes: tuple[str, ...] = ()
    workspace_held_on_graph: bool = False   # graph_workspace keeps the workspace on the cached graph (else freed per call)
    graph_workspace: Source = GRAPH_WORKSPACE   # where graph_workspace allocates it
    pick_nseg_sms: int | None = None        # the SM count kda_prefill_sm90._pick_nseg plans for (None: the device's)
    line_shifts: tuple[tuple[str, int, int], ...] = ()   # (file, from 1.32.0 line, delta): this version's numbering
    chain_min_tokens_reverse: int = 192     # FROST's backward never chains below it (piece_chain.chain_min_tokens; 1.31.0: none)
    read_from: "CudnnVersion | None" = None   # the entry whose code it follows when its own could not be read
    # the wheel ships hopper/cuda_kernels/*.cu, the NVRTC sources kda_hopper_cuda compiles (cuda_host.KERNEL_DIR);
    # without them the engine passes check_support and fails at its first compile, so no model of it is registered
    cuda_kernels_shipped: bool = True

    def derive(self, **overrides) -> "CudnnVersion":
        return replace(self, **overrides)

    def line(self, source: Source) -> Source:
        """``source`` (a 1.32.0 line) as this version numbers it: the delta of the last shift at or above it."""
        deltas = [delta for file, start, delta in self.line_shifts if source.file.endswith(file) and start <= source.line]
        return replace(source, line=source.line + deltas[-1]) if deltas else source


CUDNN_1_32_0 = CudnnVersion("1.32.0", "nvidia-cudnn-frontend 1.32.0 (PyPI)")
CUDNN_1_31_0 = CUDNN_1_32_0.derive(
    version="1.31.0", origin="nvidia-cudnn-frontend 1.31.0 (PyPI)", workspace_held_on_graph=True, pick_nseg_sms=132,
    graph_workspace=src("ops/common.py", "graph_workspace", 50, "workspace = torch.empty(max(size, 1), dtype=torch.uint8, device=device)"),
    chain_min_tokens_reverse=0, line_shifts=(("ops/kda.py", 321, -9), ("ops/kda.py", 491, -16), ("ops/kda.py", 857, -31),
                 ("ops/kda.py", 1015, -33), ("ops/kda.py", 1239, -36), ("hopper/kernel/kda_prefill_sm90.py", 1106, -2),
                 ("hopper/kernel/kda_prefill_sm90.py", 1112, -3), ("frost/kda_engine.py", 243, -7), ("frost/kda_engine.py", 547, -10)),
    notes=("1.31.0's graph_workspace keeps each graph's workspace on the graph object, grow-only (ops/common.py:48-51: "
           "graph.la_ops_workspace = workspace), and fprop_cache / bprop_cache keep the graphs: the workspace outlives the "
           "call, once per cache key; 1.32.0 allocates it per call and frees it",
           "1.31.0's _pick_nseg plans for a 132-SM wave whatever the device (kda_prefill_sm90.py:1115)",
           "1.31.0's FROST backward chains at any token count (piece_chain.py:94 choose_pieces has no min_tokens; "
           "1.32.0 keeps the uncut plan below 192 tokens)"),
)
# The Hopper engines only: 1.30.0's hopper/ files are 1.31.0's (diff -r: no .py differs) and its ops/common.py is 1.31.0's
# to line 110, so it allocates as 1.31.0 does; its ops/kda.py lacks the docstrings 1.31.0 added (the ops/kda.py shifts).
# Its FROST KDA kernels differ (split-K cuts with warmup kernels, no uncut kernels): not this entry, no cudnn_frost.py name.
CUDNN_1_30_0 = CUDNN_1_31_0.derive(
    version="1.30.0", origin="nvidia-cudnn-frontend 1.30.0 (PyPI)", cuda_kernels_shipped=False,
    line_shifts=(("ops/kda.py", 321, -12), ("ops/kda.py", 491, -19), ("ops/kda.py", 857, -37), ("ops/kda.py", 1015, -39),
                 ("ops/kda.py", 1239, -47), ("hopper/kernel/kda_prefill_sm90.py", 1106, -2),
                 ("hopper/kernel/kda_prefill_sm90.py", 1112, -3)),
    notes=("1.30.0 allocates as 1.31.0: graph_workspace keeps each graph's workspace on the graph object, grow-only "
           "(ops/common.py:48-51), and _pick_nseg plans for a 132-SM wave (kda_prefill_sm90.py:1115); the hopper/ "
           "Python files are 1.31.0's and 1.32.0's",
           "1.30.0's wheel ships no hopper/cuda_kernels/ (kda_fused_sm90.cu, kda_bwd_sm90.cu), which cuda_host.py:29 "
           "KERNEL_DIR names: kda_hopper_cuda passes check_support and fails at its first compile, so only kda_hopper "
           "(the CuTeDSL forward) is modelled; on sm90 the heuristics (kda_heuristics.py:38) still rank kda_hopper_cuda first"),
)


def cite(d: Declaration, version: CudnnVersion) -> None:
    """Every source of the declaration numbered as ``version``'s files are (``line_shifts``)."""
    if version.line_shifts:
        d.buffers = [replace(b, source=version.line(b.source)) for b in d.buffers]
        d.steps = [replace(s, source=version.line(s.source)) if s.source else s for s in d.steps]


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


def graph_workspace(d: Declaration, name: str, version: CudnnVersion, note: str = "") -> None:
    """A plan whose get_workspace_size() is 0 still gets a one-byte workspace: freed after the call, or held on the
    cached graph (``workspace_held_on_graph``)."""
    if version.workspace_held_on_graph:
        d.buffer(name, Group.SCRATCH, (1,), "uint8", version.graph_workspace, note=note or "held on the graph",
                 cached=True, cache_key=PLAN_CACHE_KEY)
    else:
        d.buffer(name, Group.SCRATCH, (1,), "uint8", version.graph_workspace, d.current, note=note)


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

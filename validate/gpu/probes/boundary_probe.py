"""Where does a real process run out of memory? A GPU probe, independent of the models.

One process per call: measures the process's own (non-PyTorch) device memory at each stage, then
bisects the sequence length at which one implementation's forward+backward stops fitting, the way a
user's training process meets it (fresh inputs, a first call at the shape, then steady calls). Every
trial is appended to ``OUT/probe.jsonl`` as soon as it ends, so a killed command loses nothing.

    python3 validate/gpu/probes/boundary_probe.py --impl fla-plain --heads 96 --lo 160000 \
        --hi 178000 --step 256 --state cold --out DIR
    python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --values 160000,161600 ...

``--values`` runs the listed values (in order) instead of bisecting: the planner's answer and the
value 1 % above it. The per-thread stack limit (``cudaLimitStackSize``) is recorded at each stage:
the driver grows it, and with it a reservation of local memory for every resident thread, when a
kernel needs more local memory than the limit; ``--reset-stack`` sets it back at the end to show how
much of the process's non-PyTorch memory that reservation is.

Inputs are made on the GPU in place (one block per tensor, normalisation and log-sigmoid in
chunks), then the allocator cache is emptied, so no input temporary shapes the layout.
``--state`` only labels the Triton cache: the caller points TRITON_CACHE_DIR at a fresh folder for
``cold`` (this process autotunes) or at one an earlier process filled for ``warm``.

Needs torch (and fla-core, flash-linear-attention for a layer, or nvidia-cudnn-frontend); it imports
nothing else of livebytes, so the same file runs wherever the kernels do.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
import importlib

CHUNK_TOKENS = 8192    # normalisation in token chunks: temporaries of at most [8192, H, D] fp32
LAYER_DEFAULTS = {"hidden": 2304, "layers": 1, "checkpoint": False, "conv_size": 4}   # Kimi-Linear's layer
# impl -> (module, class, options beyond the shape's): each family row's probe layer (lifetimes/traced/families.py
# ``Probe``); this file imports nothing of livebytes, so the rows are copied here and a test holds the two equal
LAYER_CLASSES = {"fla-kda-layer": ("fla.layers.kda", "KimiDeltaAttention", {}),
                 "fla-gdn-layer": ("fla.layers.gated_deltanet", "GatedDeltaNet", {"use_gate": True})}
LAYER_IMPLS = tuple(LAYER_CLASSES)


def _torch():
    import torch  # deferred: torch is not in the core install (model/validate extras)
    return torch


def nonpytorch_bytes() -> int:
    """Device memory this process holds outside PyTorch's allocator (context, modules, local memory)."""
    torch = _torch()
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


def stack_limit() -> int | None:
    """cudaDeviceGetLimit(cudaLimitStackSize): bytes of local memory reserved per thread (None if unreadable)."""
    try:
        from cuda.bindings import runtime as cudart  # deferred: cuda is not in the core install (model/validate extras)
        err, value = cudart.cudaDeviceGetLimit(cudart.cudaLimit.cudaLimitStackSize)
        return int(value) if int(err) == 0 else None
    except (ImportError, AttributeError, RuntimeError):   # no cuda-bindings on this machine
        return None


def set_stack_limit(nbytes: int) -> bool:
    try:
        from cuda.bindings import runtime as cudart  # deferred: cuda is not in the core install (model/validate extras)
        (err,) = cudart.cudaDeviceSetLimit(cudart.cudaLimit.cudaLimitStackSize, nbytes)
        return int(err) == 0
    except (ImportError, AttributeError, RuntimeError):
        return False


def segments() -> list[dict]:
    """The allocator's segments now (``torch.cuda.memory_snapshot``, host-side bookkeeping only): address, mapped
    size, pool, whether expandable. Shows, for one, when an expandable segment ran out of address range."""
    torch = _torch()
    return [{"address": seg["address"], "total_size": seg["total_size"], "allocated_size": seg["allocated_size"],
             "segment_type": seg["segment_type"], "is_expandable": seg.get("is_expandable")}
            for seg in torch.cuda.memory_snapshot()]


def report_inputs(tokens: int, heads: int, dim: int, seqs: int, gen, v_heads: int, grad: bool = True) -> dict:
    """The KDA report's contract: raw bf16 q/k/v/gate/beta, zero fp32 A_log and dt_bias (q, k over ``heads``,
    the rest over ``v_heads``); no dO for a forward-only process."""
    torch = _torch()
    x = {name: torch.empty(1, tokens, heads if name in ("q", "k") else v_heads, dim, dtype=torch.bfloat16,
                           device="cuda").normal_(generator=gen)
         for name in ("q", "k", "v", "g")}
    x["beta"] = torch.empty(1, tokens, v_heads, dtype=torch.bfloat16, device="cuda").normal_(generator=gen)
    x["A_log"] = torch.zeros(v_heads, device="cuda")
    x["dt_bias"] = torch.zeros(v_heads * dim, device="cuda")
    x["cu_seqlens"] = torch.arange(0, seqs + 1, dtype=torch.int64, device="cuda") * (tokens // seqs)
    if grad:
        x["dO"] = torch.empty(1, tokens, v_heads, dim, dtype=torch.bfloat16, device="cuda").normal_(generator=gen)
        for name in ("q", "k", "v", "g", "beta", "A_log", "dt_bias"):
            x[name].requires_grad_(True)
    return x


def gdn_inputs(tokens: int, heads: int, dim: int, seqs: int, gen, v_heads: int, grad: bool) -> dict:
    """Gated DeltaNet as validate/gdn_harness.py calls it, made in place: raw bf16 q/k [1, T, H, K], v [1, T, HV, V],
    log-space fp32 g [1, T, HV], post-sigmoid bf16 beta [1, T, HV], int64 boundaries, dO with a backward."""
    torch = _torch()
    x = {name: torch.empty(1, tokens, heads if name in ("q", "k") else v_heads, dim, dtype=torch.bfloat16,
                           device="cuda").normal_(generator=gen) for name in ("q", "k", "v")}
    x["g"] = torch.empty(1, tokens, v_heads, dtype=torch.float32, device="cuda").normal_(generator=gen)
    x["beta"] = torch.empty(1, tokens, v_heads, dtype=torch.bfloat16, device="cuda").uniform_(generator=gen)
    x["cu_seqlens"] = torch.arange(0, seqs + 1, dtype=torch.int64, device="cuda") * (tokens // seqs)
    if grad:
        x["dO"] = torch.empty(1, tokens, v_heads, dim, dtype=torch.bfloat16, device="cuda").normal_(generator=gen)
    with torch.no_grad():
        for start in range(0, tokens, CHUNK_TOKENS):
            g = x["g"][:, start:start + CHUNK_TOKENS]
            g.copy_(torch.nn.functional.logsigmoid(g))
    if grad:
        for name in ("q", "k", "v", "g", "beta"):
            x[name].requires_grad_(True)
    return x


def layer_class(impl: str):
    """The layer ``impl`` names (``LAYER_CLASSES``), built with its options; any other impl, one line."""
    if impl not in LAYER_CLASSES:
        raise SystemExit(f"error: no layer probe {impl!r} (known: {', '.join(LAYER_CLASSES)})")
    module, name, options = LAYER_CLASSES[impl]
    cls = getattr(importlib.import_module(module), name)

    def Layer(**sizes):
        return cls(**sizes, **options)
    return Layer


def layer_inputs(tokens: int, heads: int, dim: int, seqs: int, gen, v_heads: int, layer: dict,
                 impl: str = "fla-kda-layer") -> dict:
    """flash-linear-attention's KimiDeltaAttention (or GatedDeltaNet, ``fla-gdn-layer``) x ``layer["layers"]``, as
    ``validate/gpu/harnesses/fla_layer.py`` builds it: x, cu_seqlens, dY, then each layer (built on the CPU, bf16 but
    A_log and dt_bias fp32, moved one parameter at a time, bottom layer first)."""
    torch = _torch()
    Layer = layer_class(impl)
    hidden = layer["hidden"]
    x = {"x": torch.empty(1, tokens, hidden, dtype=torch.bfloat16, device="cuda").normal_(generator=gen),     # [1, T, hidden] bf16
         "cu_seqlens": torch.arange(0, seqs + 1, dtype=torch.int64, device="cuda") * (tokens // seqs),        # [N+1] int64
         "dO": torch.empty(1, tokens, hidden, dtype=torch.bfloat16, device="cuda").normal_(generator=gen)}   # [1, T, hidden] bf16
    x["x"].requires_grad_(True)
    layers = []
    for i in range(layer["layers"]):
        torch.manual_seed(i)
        m = Layer(hidden_size=hidden, head_dim=dim, num_heads=heads, num_v_heads=v_heads,
                  conv_size=layer["conv_size"], mode="chunk", expand_v=1.0)
        for name, p in m.named_parameters():
            if name not in ("A_log", "dt_bias"):
                p.data = p.data.to(torch.bfloat16)
        layers.append(m.to("cuda"))
    x["layers"], x["checkpoint"] = layers, layer["checkpoint"]
    return x


def make_inputs(impl: str, tokens: int, heads: int, dim: int, seqs: int, seed: int = 0, v_heads: int | None = None,
                grad: bool = True, layer: dict | None = None) -> dict:
    """Plain contract in place on the GPU: q, k L2-normalised bf16, v bf16, g log-space fp32, beta fp32."""
    torch = _torch()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    if impl in LAYER_IMPLS:
        x = layer_inputs(tokens, heads, dim, seqs, gen, v_heads or heads, {**LAYER_DEFAULTS, **(layer or {})}, impl)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return x
    if impl in ("fla-report", "fla-gdn"):
        make = report_inputs if impl == "fla-report" else gdn_inputs
        x = make(tokens, heads, dim, seqs, gen, v_heads or heads, grad)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return x
    if v_heads not in (None, heads) or not grad:
        raise SystemExit("--v-heads and --forward-only are taken by fla-report and fla-gdn only")
    fla = impl.startswith("fla")
    lead = (1,) if fla else ()
    x = {}
    for name in ("q", "k", "v"):
        x[name] = torch.empty(*lead, tokens, heads, dim, dtype=torch.bfloat16, device="cuda").normal_(generator=gen)
    x["g"] = torch.empty(*lead, tokens, heads, dim, dtype=torch.float32, device="cuda").normal_(generator=gen)
    x["beta"] = torch.empty(*lead, tokens, heads, dtype=torch.float32, device="cuda").uniform_(generator=gen)
    cu = torch.arange(0, seqs + 1, dtype=torch.int64 if fla else torch.int32, device="cuda") * (tokens // seqs)
    x["cu_seqlens"] = cu
    x["dO"] = torch.empty(*lead, tokens, heads, dim, dtype=torch.bfloat16, device="cuda").normal_(generator=gen)
    with torch.no_grad():
        for start in range(0, tokens, CHUNK_TOKENS):
            sl = (slice(None), slice(start, start + CHUNK_TOKENS)) if fla else (slice(start, start + CHUNK_TOKENS),)
            for name in ("q", "k"):
                part = x[name][sl]
                part.div_(part.float().norm(dim=-1, keepdim=True).clamp_min_(1e-6).to(part.dtype))
            g = x["g"][sl]
            g.copy_(torch.nn.functional.logsigmoid(g).clamp_min_(-5.0))
    for name in ("q", "k", "v", "g", "beta"):
        x[name].requires_grad_(True)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return x


def step(impl: str, x: dict, forward_only: bool = False):
    """One call: forward + backward, or (``forward_only``) the forward under ``torch.no_grad``, as the -fwd models."""
    if forward_only:
        with _torch().no_grad():
            return forward(impl, x)
    o = forward(impl, x)
    o.backward(x["dO"].view_as(o))
    return o


def forward(impl: str, x: dict):
    if impl in LAYER_IMPLS:
        from torch.utils.checkpoint import checkpoint  # deferred: torch is not in the core install (model/validate extras)
        h = x["x"]
        for layer in x["layers"]:
            def run(h, layer=layer):
                return layer(h, cu_seqlens=x["cu_seqlens"])[0]
            h = checkpoint(run, h, use_reentrant=False) if x["checkpoint"] else run(h)
        return h
    if impl == "fla-gdn":
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule  # deferred: fla is not in the core install (model/validate extras)
        o, _ = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], cu_seqlens=x["cu_seqlens"],
                                      use_qk_l2norm_in_kernel=True)
    elif impl == "fla-plain":
        from fla.ops.kda import chunk_kda  # deferred: fla is not in the core install (model/validate extras)
        o, _ = chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], cu_seqlens=x["cu_seqlens"])
    elif impl == "fla-report":
        from fla.ops.kda import chunk_kda  # deferred: fla is not in the core install (model/validate extras)
        o, _ = chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], cu_seqlens=x["cu_seqlens"], A_log=x["A_log"],
                         dt_bias=x["dt_bias"], use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                         use_beta_sigmoid_in_kernel=True, safe_gate=True, lower_bound=-5.0)
    else:
        from cudnn.linear_attention import kimi_delta_attention  # deferred: cudnn is not in the core install (model/validate extras)
        o, _ = kimi_delta_attention(x["q"], x["k"], x["v"], x["g"], x["beta"], x["cu_seqlens"], plan_name=impl)
    return o


def release(x: dict) -> None:
    for t in x.values():
        if hasattr(t, "grad"):
            t.grad = None
    for layer in x.get("layers", ()):
        for p in layer.parameters():
            p.grad = None


def trial(impl: str, seq: int, heads: int, dim: int, seqs: int, oom_calls: list, v_heads: int | None = None,
          forward_only: bool = False, layer: dict | None = None) -> dict:
    """Fresh inputs, a first call at the shape, two steady calls; an out-of-memory is a result."""
    torch = _torch()
    out = {"seq": seq, "mbs": seqs, "heads": heads, "dim": dim, "tokens": seq * seqs}
    if v_heads not in (None, heads):
        out["v_heads"] = v_heads
    x = None
    phase = "inputs"
    oom_calls.clear()
    try:
        t0 = time.time()
        x = make_inputs(impl, seq * seqs, heads, dim, seqs, v_heads=v_heads, grad=not forward_only, layer=layer)
        out["inputs_allocated_bytes"] = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        for phase in ("first_call", "steady_1", "steady_2"):
            o = step(impl, x, forward_only)
            torch.cuda.synchronize()
            out[phase] = {"max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
                          "requested_peak": torch.cuda.memory_stats().get("requested_bytes.all.peak"),
                          # outside PyTorch at the phase's end: a cold first call raises it as candidates launch
                          "nonpytorch_bytes": nonpytorch_bytes(), "stack_limit_bytes": stack_limit()}
            del o
            release(x)
            torch.cuda.reset_peak_memory_stats()
        out["fits"] = True
        out["seconds"] = round(time.time() - t0, 1)
        out["segments_at_end"] = segments()
    except torch.cuda.OutOfMemoryError as err:
        stats = torch.cuda.memory_stats()
        free, total = torch.cuda.mem_get_info()
        out.update(fits=False, oom_phase=phase, oom_message=str(err).splitlines()[0][:600],
                   oom_observer=list(oom_calls), after_unwind={"allocated": stats["allocated_bytes.all.current"],
                                                                "reserved": stats["reserved_bytes.all.current"],
                                                                "free": free, "total": total},
                   segments_at_oom=segments())
    finally:
        x = None
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    out["nonpytorch_after_bytes"] = nonpytorch_bytes()
    return out


def pretune_l2norm(tokens: int, heads: int, dim: int) -> dict:
    """Run FLA's l2norm forward and backward once at ``tokens x heads`` rows, so that their autotune key
    (D, NB = cdiv(rows, 65536)) lands in TRITON_CACHE_DIR: a later process at this size is then warm."""
    torch = _torch()
    from fla.modules.norm.l2norm import l2norm_bwd, l2norm_fwd  # deferred: fla is not in the core install (model/validate extras)
    x = torch.randn(tokens * heads, dim, dtype=torch.bfloat16, device="cuda")     # [T*H, D] bf16
    y, rstd = l2norm_fwd(x)
    # the key holds the arguments' dtypes too: chunk_kda hands l2norm_bwd an fp32 gradient (run 12 passed bf16,
    # so its "warm" processes still benchmarked l2norm_bwd_kernel)
    l2norm_bwd(y, rstd, torch.randn(y.shape, dtype=torch.float32, device="cuda"))              # dy [T*H, D] fp32
    torch.cuda.synchronize()
    rows = tokens * heads
    return {"tokens": tokens, "rows": rows, "NB": -(-rows // 65536)}


def layer_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--hidden", type=int, default=LAYER_DEFAULTS["hidden"], help="a layer: hidden size")
    ap.add_argument("--layers", type=int, default=LAYER_DEFAULTS["layers"], help="a layer: layers chained")
    ap.add_argument("--checkpoint", action="store_true", help="a layer: torch.utils.checkpoint per layer")
    ap.add_argument("--conv-size", type=int, default=LAYER_DEFAULTS["conv_size"], help="a layer: conv width")


def layer_of(args) -> dict | None:
    """A layer probe's stack, recorded in every line (probe_records.model_of builds the model with it)."""
    if args.impl not in LAYER_IMPLS:
        return None
    return {"hidden": args.hidden, "layers": args.layers, "checkpoint": args.checkpoint, "conv_size": args.conv_size}


FLA_IMPLS = ("fla-plain", "fla-report", "fla-gdn") + LAYER_IMPLS     # the FLA harnesses (process_memory.py's too)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True, choices=(*FLA_IMPLS, "kda_hopper_cuda"))
    layer_arguments(ap)
    ap.add_argument("--heads", type=int, default=96)
    ap.add_argument("--v-heads", type=int, help="value heads (grouped value heads: a multiple of --heads)")
    ap.add_argument("--forward-only", action="store_true", help="the forward alone under torch.no_grad (the -fwd models)")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--mbs", type=int, default=1)
    ap.add_argument("--lo", type=int, help="a sequence length expected to fit")
    ap.add_argument("--hi", type=int, help="a sequence length expected not to fit")
    ap.add_argument("--values", help="comma-separated values to run instead of bisecting")
    ap.add_argument("--reset-stack", action="store_true", help="at the end, set the stack limit back and measure")
    ap.add_argument("--no-warmup", action="store_true", help="no 1x1024 warmup: the process's first shape is the target")
    ap.add_argument("--step", type=int, default=256, help="stop when hi - lo <= step")
    ap.add_argument("--solve", default="seq", choices=("seq", "mbs"))
    ap.add_argument("--seq", type=int, default=8192, help="fixed sequence length when solving mbs")
    ap.add_argument("--pretune", help="report contract: only tune FLA's l2norm at these token counts (comma-separated)")
    ap.add_argument("--state", required=True, help="label: cold | warm | n/a")
    ap.add_argument("--out", required=True)
    return ap


def process_head(args) -> dict:
    """What every line of the probe's file carries: the probe, the case's settings, the device and library versions."""
    torch = _torch()
    props = torch.cuda.get_device_properties(0)
    base = {"probe": "boundary-v1", "impl": args.impl, "state": args.state, "forward_only": args.forward_only,
            "allocator_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR", ""),
            "device": props.name, "total_memory": props.total_memory, "torch": torch.__version__}
    layer = layer_of(args)
    if layer:
        base["layer"] = layer
    for mod in ("triton", "fla", "cudnn"):
        try:
            base[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            base[mod] = None
    return base


def bisect(args, run, write) -> None:
    """Halve [lo, hi] until hi - lo <= step: ``run(value)`` is one trial, each written as it ends."""
    lo, hi = args.lo, args.hi
    while hi - lo > args.step:
        mid = (lo + hi) // 2
        t0 = time.time()
        r = run(mid)
        write({"stage": "bisect", "solve": args.solve, "value": mid, "wall_seconds": round(time.time() - t0, 1), **r})
        lo, hi = (mid, hi) if r["fits"] else (lo, mid)
    write({"stage": "result", "solve": args.solve, "largest_fit": lo, "smallest_oom": hi})


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    torch = _torch()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "probe.jsonl"
    oom_calls: list = []
    torch._C._cuda_attach_out_of_memory_observer(
        lambda device, alloc, device_allocated, device_free: oom_calls.append(
            {"tried_bytes": int(alloc), "device_allocated": int(device_allocated), "device_free": int(device_free)}))
    torch.empty(1, device="cuda")
    base = process_head(args)
    layer = base.get("layer")

    def write(entry: dict) -> None:
        with open(log, "a") as fh:
            fh.write(json.dumps({**base, **entry}) + "\n")
        print(json.dumps(entry)[:300], flush=True)

    def at(seq: int, mbs: int) -> dict:
        return trial(args.impl, seq, args.heads, args.dim, mbs, oom_calls, args.v_heads, args.forward_only, layer)

    def run(value: int) -> dict:      # the solved dimension at ``value``, the other one held
        return at(value, args.mbs) if args.solve == "seq" else at(args.seq, value)

    context_stack = stack_limit()
    if args.pretune:    # a separate process fills the Triton cache; the probe's process stays warm
        for tokens in [int(v) for v in args.pretune.split(",")]:
            t0 = time.time()
            write({"stage": "pretune_l2norm", **pretune_l2norm(tokens, args.heads, args.dim),
                   "seconds": round(time.time() - t0, 1)})
        return 0
    write({"stage": "context", "nonpytorch_bytes": nonpytorch_bytes(), "stack_limit_bytes": context_stack})
    if not args.no_warmup:
        t0 = time.time()
        warm = at(1024, 1)
        write({"stage": "warmup_1x1024", "seconds": round(time.time() - t0, 1), "stack_limit_bytes": stack_limit(), **warm})
    for value in [int(v) for v in (args.values or "").split(",") if v.strip()]:
        t0 = time.time()
        r = run(value)
        write({"stage": "value", "solve": args.solve, "value": value, "wall_seconds": round(time.time() - t0, 1), **r})
    if args.reset_stack and context_stack is not None:
        before = nonpytorch_bytes()
        ok = set_stack_limit(context_stack)
        write({"stage": "reset_stack", "ok": ok, "stack_limit_bytes": stack_limit(), "nonpytorch_before_bytes": before,
               "nonpytorch_bytes": nonpytorch_bytes()})
    if not args.values:
        bisect(args, run, write)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())

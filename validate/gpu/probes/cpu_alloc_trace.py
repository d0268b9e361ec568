"""The allocation sequence of flash-linear-attention 0.6.0's KimiDeltaAttention stack, forward + backward, without a GPU:
every storage the step creates and when it dies, in order, with the op, the autograd node and the fla / torch Python
frame that asked for it; then that sequence against fla-kda-layer@0.6.0's request list.

Trace (needs torch, triton, fla-core and flash-linear-attention; no GPU, no CUDA toolkit):

    python validate/gpu/probes/cpu_alloc_trace.py trace --tokens 8192 --out DIR [--layers 4 --hidden 2304 --heads 32
        --dim 128 --conv-size 4] [--fla-layers SITE] [--cache-dir /tmp/cpuf_cache]

runs the step the H200 probe runs (``boundary_probe.layer_inputs`` and ``step``: x, cu_seqlens, dY, then each layer
built on the CPU, bf16 but A_log and dt_bias fp32; ``o.backward(dY.view_as(o))``) on CPU tensors, with
``cpu_frames``' fake H200 (fla's Hopper choices; Triton kernels compile and are never launched: their outputs hold
garbage, only fla's Python control flow runs). A ``TorchDispatchMode`` logs each new storage of each op's outputs (views
and in-place results share a storage and are not new; zero-byte storages are skipped) and, before and after every op,
the storages that died since (a weak reference per storage: a free is placed between two ops, never inside one).
GEMMs (mm, addmm, bmm) are not computed: their output is allocated as the op would (contiguous). The mode's Python
wrappers would turn the autograd engine's in-place gradient accumulation into an out-of-place add; it is emulated
(``engine_accumulation``: checked against the profiler without a mode). ``--fla-layers``: a
folder holding the flash-linear-attention wheel's ``fla/layers`` (``pip install --no-deps --target``) when it is not
installed over fla-core. Writes DIR/trace_T<T>.jsonl: one event a line (alloc, free, launch, bench, mark).

Extrapolate (a trace at another T, from traces at several, each dimension fitted as c, a*T or a*ceil(T/b)):

    python validate/gpu/probes/cpu_alloc_trace.py extrapolate DIR/trace_T8192.jsonl DIR/trace_T8200.jsonl ... --tokens 215000
        --out DIR/trace_T215000_extrapolated.jsonl

Compare (needs livebytes):

    python validate/gpu/probes/cpu_alloc_trace.py compare DIR/trace_T8192.jsonl [--out DIR/diff_T8192.json]

matches the trace's allocations against the model's requests (``replay.Process``, recorded; one first call, cold:
every autotuned kernel benchmarks) in order by size, and replays the trace through ``allocator.CachingAllocator``
with the GPU-only requests added (Triton's 256 MiB L2-flush buffer at each benchmarking launch, the cuBLAS / cuBLASLt
workspaces at the first GEMMs): max allocated and max reserved of both.

What it cannot see: allocations inside a CUDA library (cuBLAS / cuBLASLt workspaces are added by hand, as the model
has them), Triton's launch-time scratch (logged from each kernel's metadata, ``global_scratch_size``; none allocated),
the autotuner's ``restore_value`` copies (none of these kernels declares one), the CUDA allocator's own rounding
(the compare applies the model's), Python garbage-collector timing on the GPU (a free waits for a collection only
where a reference cycle holds it; here it dies when CPython frees it: a cold H200 call's failed launches keep their
arguments until the next collection, ``autotune.held_until_gc``, which no CPU compile reproduces), and CPU kernels'
internal temporaries (not dispatched, not logged: they are not the GPU's).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
import difflib
import importlib.machinery
import importlib.util
import os

HERE = Path(__file__).parent
GEMMS = ("aten.mm.default", "aten.addmm.default", "aten.bmm.default")
FLUSH_BYTES = 256 * 2**20                 # triton.testing.do_bench's L2-flush buffer
MACHINERY = ("_python_dispatch", "/_dynamo/", "torch/_ops.py", "torch/utils/_pytree")   # frames that are not callers


# ---- the trace ----------------------------------------------------------------------------------------------------

def frames() -> dict:
    """The innermost fla frame, the innermost torch Python frame outside dispatch machinery, and the user frame."""
    out, f = {}, sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        where = f"fla/{name.rsplit('/fla/', 1)[-1]}" if "/fla/" in name else name.split("site-packages/")[-1]
        where = f"{where}:{f.f_code.co_name}:{f.f_lineno}"
        if "/fla/" in name and "fla" not in out:
            out["fla"] = where
        elif "/torch/" in name and "torch" not in out and "fla" not in out and not any(m in name for m in MACHINERY):
            out["torch"] = where
        f = f.f_back
    return out


class Recorder:
    """Storages by identity (StorageImpl address) while alive, and the events in order."""

    def __init__(self):
        from torch.multiprocessing.reductions import StorageWeakRef  # deferred: torch is not in the core install (model/validate extras)
        self.weak = StorageWeakRef
        self.live: dict[int, tuple] = {}
        self.events: list[dict] = []
        self.next_id = 0
        from torch._C import _current_autograd_node  # deferred: torch is not in the core install (model/validate extras)
        self.current_node = _current_autograd_node

    def emit(self, **event) -> dict:
        event["i"] = len(self.events)
        self.events.append(event)
        return event

    def adopt(self, tensors, label: str) -> None:
        """Storages that exist before the traced step (inputs, parameters): known, not allocations."""
        for t in tensors:
            s = t.untyped_storage()
            self.live.setdefault(s._cdata, (self.weak(s), -1, label, s.nbytes()))

    def poll_frees(self) -> None:
        for key, (ref, sid, label, nbytes) in list(self.live.items()):
            if ref.expired():
                del self.live[key]
                if sid >= 0:
                    node = self.current_node()
                    self.emit(ev="free", sid=sid, bytes=nbytes, node=node.name() if node is not None else None)

    def outputs(self, func, out) -> None:
        import torch  # deferred: torch is not in the core install (model/validate extras)
        from torch.utils._pytree import tree_leaves  # deferred: torch is not in the core install (model/validate extras)
        from torch._C import _current_autograd_node  # deferred: torch is not in the core install (model/validate extras)
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            s = t.untyped_storage()
            if s.nbytes() == 0 or s._cdata in self.live:
                continue
            sid, self.next_id = self.next_id, self.next_id + 1
            self.live[s._cdata] = (self.weak(s), sid, str(func), s.nbytes())
            node = _current_autograd_node()
            self.emit(ev="alloc", sid=sid, bytes=s.nbytes(), dtype=str(t.dtype).removeprefix("torch."),
                      shape=list(t.shape), op=str(func), node=node.name() if node is not None else None, **frames())


def gemm_output(func, args):
    """A GEMM's output, allocated, not computed (contiguous, as on the GPU)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    if str(func) == "aten.bmm.default":
        a, b = args[0], args[1]
        return torch.empty(a.shape[0], a.shape[1], b.shape[2], dtype=a.dtype)
    a, b = (args[1], args[2]) if str(func) == "aten.addmm.default" else (args[0], args[1])
    return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)


def engine_accumulation(func, args) -> bool:
    """An ``old + new`` the autograd engine would do in place without this mode. InputBuffer's ``accumulate``
    (torch/csrc/autograd/input_buffer.cpp, ``can_accumulate_inplace``) adds in place when it holds the last reference
    to the old gradient and its storage; the mode's Python wrappers add a reference to every op's output, so under it
    every accumulation is out of place. Emulated: an aten.add.Tensor in a backward node outside fla's Python code whose
    old gradient is dense and no view (the first arrival, a view of a GEMM's output, is added out of place: the
    profiler, without a mode, shows one aten::add and then aten::add_ for each layer's input gradient)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    from torch._C import _current_autograd_node  # deferred: torch is not in the core install (model/validate extras)
    if str(func) != "aten.add.Tensor" or _current_autograd_node() is None or torch.is_grad_enabled():
        return False
    old, new = args[0], args[1]
    return (isinstance(new, torch.Tensor) and old.shape == new.shape and old.dtype == new.dtype and old._base is None
            and old.is_contiguous() and "fla" not in frames())


def tracing_mode(rec: Recorder):
    from torch.utils._python_dispatch import TorchDispatchMode  # deferred: torch is not in the core install (model/validate extras)

    class Trace(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            rec.poll_frees()
            if engine_accumulation(func, args):
                rec.emit(ev="inplace", op="aten.add_.Tensor", bytes=args[0].untyped_storage().nbytes())
                return args[0].add_(args[1])
            out = gemm_output(func, args) if str(func) in GEMMS else func(*args, **(kwargs or {}))
            rec.outputs(func, out)
            rec.poll_frees()
            return out
    return Trace()


def launch_log(rec: Recorder) -> None:
    """Over cpu_frames' compile-only Triton: a ``launch`` event per launch (kernel, grid-independent scratch sizes)
    and a ``bench`` event where an autotuner benchmarks (on the GPU: one L2-flush buffer per candidate)."""
    from triton.runtime.autotuner import Autotuner  # deferred: triton is not in the core install (model/validate extras)
    from triton.runtime.jit import JITFunction  # deferred: triton is not in the core install (model/validate extras)
    compiled_run, tuned_bench, tuned_run = JITFunction.run, Autotuner._bench, Autotuner.run
    state = {"benching": False, "benched": False}

    def run(self, *args, grid, warmup, **kwargs):
        kernel = compiled_run(self, *args, grid=grid, warmup=warmup, **kwargs)
        if not state["benching"]:
            rec.poll_frees()
            rec.emit(ev="launch", kernel=kernel.name, global_scratch=kernel.metadata.global_scratch_size,
                     profile_scratch=getattr(kernel.metadata, "profile_scratch_size", 0), fla=frames().get("fla"))
        return kernel

    def bench(self, *args, config, **meta):
        state["benching"] = True
        try:
            return tuned_bench(self, *args, config=config, **meta)
        finally:
            state["benching"], state["benched"] = False, True

    def autotuned(self, *args, **kwargs):
        state["benched"] = False
        try:
            return tuned_run(self, *args, **kwargs)
        finally:
            if state["benched"]:
                rec.emit(ev="bench", kernel=getattr(self.base_fn, "__name__", "?"), candidates=len(self.configs))
    JITFunction.run, Autotuner._bench, Autotuner.run = run, bench, autotuned


def fla_layers_path(site: str | None) -> None:
    """The wheel's ``fla.layers`` from a folder of its own, without running its ``__init__`` (which imports every
    layer): a bare package pointing at the folder."""
    if not site:
        return
    import fla  # deferred: fla is not in the core install (model/validate extras)
    folder = str(Path(site) / "fla" / "layers")
    spec = importlib.machinery.ModuleSpec("fla.layers", None, is_package=True)
    spec.submodule_search_locations = [folder]
    module = importlib.util.module_from_spec(spec)
    sys.modules["fla.layers"], fla.layers = module, module


def build_inputs(args) -> dict:
    """boundary_probe.layer_inputs on the CPU (the same order; values from a CPU generator)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    from fla.layers.kda import KimiDeltaAttention  # deferred: fla is not in the core install (model/validate extras)
    gen = torch.Generator().manual_seed(0)
    t, hidden = args.tokens, args.hidden
    x = {"x": torch.empty(1, t, hidden, dtype=torch.bfloat16).normal_(generator=gen),       # [1, T, hidden] bf16
         "cu_seqlens": torch.arange(0, 2, dtype=torch.int64) * t,                           # [2] int64
         "dO": torch.empty(1, t, hidden, dtype=torch.bfloat16).normal_(generator=gen)}      # [1, T, hidden] bf16
    x["x"].requires_grad_(True)
    layers = []
    for i in range(args.layers):
        torch.manual_seed(i)
        m = KimiDeltaAttention(hidden_size=hidden, head_dim=args.dim, num_heads=args.heads, num_v_heads=args.heads,
                               conv_size=args.conv_size, mode="chunk", expand_v=1.0)
        for name, p in m.named_parameters():
            if name not in ("A_log", "dt_bias"):
                p.data = p.data.to(torch.bfloat16)
        layers.append(m)
    x["layers"] = layers
    return x


def traced_step(rec: Recorder, x: dict) -> None:
    """boundary_probe.step for fla-kda-layer without checkpointing: the layers chained, then o.backward(dY)."""
    h = x["x"]
    with tracing_mode(rec):
        for i, layer in enumerate(x["layers"]):
            rec.emit(ev="mark", what=f"forward layer {i}")
            h = layer(h, cu_seqlens=x["cu_seqlens"])[0]
        rec.emit(ev="mark", what="backward")
        h.backward(x["dO"].view_as(h))
        rec.poll_frees()
        rec.emit(ev="mark", what="end of step (output and gradients alive)")
        del h
        rec.poll_frees()


def trace(args) -> int:
    os.environ.setdefault("TRITON_CACHE_DIR", args.cache_dir)
    os.environ.setdefault("FLA_CACHE_RESULTS", "0")
    sys.path.insert(0, str(HERE))
    import cpu_frames  # deferred: sibling script, importable once the probe's process has put its folder on sys.path
    cpu_frames.fake_h200()
    cpu_frames.compile_only([])
    fla_layers_path(args.fla_layers)
    cpu_frames.cpu_tensors_on_device_0()
    rec = Recorder()
    launch_log(rec)
    x = build_inputs(args)
    rec.adopt([x["x"], x["cu_seqlens"], x["dO"]] + [p for m in x["layers"] for p in m.parameters()], "input")
    traced_step(rec, x)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"trace_T{args.tokens}.jsonl"
    head = {"ev": "head", "tokens": args.tokens, "hidden": args.hidden, "layers": args.layers, "heads": args.heads,
            "dim": args.dim, "conv_size": args.conv_size, "torch": __import__("torch").__version__,
            "fla": __import__("fla").__version__, "triton": __import__("triton").__version__}
    path.write_text("".join(json.dumps(e) + "\n" for e in [head] + rec.events))
    allocs = [e for e in rec.events if e["ev"] == "alloc"]
    print(json.dumps({"trace": str(path), "allocs": len(allocs), "bytes": sum(e["bytes"] for e in allocs),
                      "launches": sum(e["ev"] == "launch" for e in rec.events)}))
    return 0


# ---- the comparison -----------------------------------------------------------------------------------------------
# GPU-only requests the model declares and a CPU trace cannot make: (name, bytes, after which trace allocation).
WORKSPACES = (("cublas.workspace.forward", 32 * 2**20, "first forward mm"),
              ("cublaslt.workspace.forward", 2**20, "first forward addmm"),
              ("cublas.workspace.backward", 32 * 2**20, "second backward mm"))


def load_trace(path: str) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return lines[0], lines[1:]


def segments(events: list[dict], head: dict) -> list[dict]:
    """Each alloc with its segment: (phase, layer), layer 0 the bottom one. The backward of a layer starts at its
    o_proj weight gradient ([hidden, HV*DV], MmBackward0: the first GEMM of every layer's backward)."""
    phase, layer, out = "forward", -1, []
    o_proj_grad = [head["hidden"], head["heads"] * head["dim"]]
    for e in events:
        if e["ev"] == "mark":
            if e["what"].startswith("forward layer"):
                layer = int(e["what"].split()[-1])
            elif e["what"] == "backward":
                phase, layer = "backward", head["layers"]
        elif e["ev"] in ("alloc", "bench"):
            if phase == "backward" and e.get("node") == "MmBackward0" and e.get("shape") == o_proj_grad:
                layer -= 1
            out.append({**e, "phase": phase, "layer": layer})
    return out


def workspace_points(allocs: list[dict]) -> dict[int, tuple[str, int]]:
    """Trace alloc index -> the GPU-only workspace cuBLAS makes right after it (the model's placement)."""
    fwd_mm = [e for e in allocs if e["ev"] == "alloc" and e["phase"] == "forward" and e["op"] == "aten.mm.default"]
    fwd_addmm = [e for e in allocs if e["ev"] == "alloc" and e["phase"] == "forward" and e["op"] == "aten.addmm.default"]
    bwd_mm = [e for e in allocs if e["ev"] == "alloc" and e["phase"] == "backward" and e["op"] == "aten.mm.default"]
    firsts = (fwd_mm[0], fwd_addmm[0], bwd_mm[1])
    return {e["i"]: (name, nbytes) for e, (name, nbytes, _) in zip(firsts, WORKSPACES)}


def trace_ops(events: list[dict], head: dict, run: int = 0) -> list[tuple]:
    """The trace as allocator operations ("malloc", tag, bytes, label) / ("free", tag), GPU-only requests added: the
    cuBLAS workspaces (first run only: cached), Triton's L2-flush buffer at each benchmark (first run only). A second
    run (``run`` 1) skips the storages the first one left in a library cache (alive at its end, made in the forward)."""
    allocs = segments(events, head)
    cached = cached_sids(events)
    points = workspace_points(allocs) if run == 0 else {}
    ops: list[tuple] = []
    for e in events:
        if e["ev"] == "alloc" and not (run and e["sid"] in cached):
            ops.append(("malloc", ("t", run, e["sid"]), e["bytes"], e.get("fla") or e.get("node") or e["op"]))
            if e["i"] in points:
                name, nbytes = points[e["i"]]
                ops.append(("malloc", ("ws", name), nbytes, name))
        elif e["ev"] == "free" and not (run and e["sid"] in cached):
            ops.append(("free", ("t", run, e["sid"])))
        elif e["ev"] == "bench" and run == 0:
            ops += [("malloc", ("flush", e["i"]), FLUSH_BYTES, "triton_l2_flush"), ("free", ("flush", e["i"]))]
    return ops


def cached_sids(events: list[dict]) -> set[int]:
    """Storages alive at the step's end that the forward made: library caches (tensor_cache's chunk indices)."""
    backward = next(e["i"] for e in events if e["ev"] == "mark" and e["what"] == "backward")
    freed = {e["sid"] for e in events if e["ev"] == "free"}
    return {e["sid"] for e in events if e["ev"] == "alloc" and e["sid"] not in freed and e["i"] < backward}


def released(events: list[dict]) -> list[int]:
    """What the harness drops after a step: the gradients (alive at the end, made in the backward)."""
    cached = cached_sids(events)
    freed = {e["sid"] for e in events if e["ev"] == "free"}
    return [e["sid"] for e in events if e["ev"] == "alloc" and e["sid"] not in freed and e["sid"] not in cached]


def model_requests(head: dict, tokens: int, runs: int = 1) -> tuple[list[dict], object]:
    """fla-kda-layer@0.6.0's allocator operations for ``runs`` calls' worth of steps, cold (every autotuned kernel
    benchmarks in the first), recorded with each request's step and buffer name."""
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.estimator import Shape, get_model
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.estimator.autotune import benchmarking_steps
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.estimator.replay import Call, Process
    model = get_model("fla-kda-layer@0.6.0", "H200", hidden=head["hidden"], layers=head["layers"], checkpoint=False,
                      conv_size=head["conv_size"])
    shape = Shape(1, tokens, head["heads"], head["dim"])
    steps, _ = benchmarking_steps(model, shape, frozenset())
    proc, where = Process(model, record=True), []
    malloc = proc._malloc

    def named(nbytes):
        where.append(proc.state.where)
        return malloc(nbytes)
    proc._malloc = named
    result = proc.call(Call(shape, runs, None, steps))
    phase = {s.name: s.phase for s in model.steps}
    ops, names = [], iter(where)
    for op in proc.ops:
        if op[0] == "malloc":
            step, name, run = next(names)
            ops.append({"op": "malloc", "tag": op[1], "bytes": op[2], "step": step, "name": name, "run": run,
                        "phase": phase.get(step, "harness"), "layer": model_layer(name, head["layers"])})
        else:
            ops.append({"op": op[0], "tag": op[1] if len(op) > 1 else None})
    return ops, result


def model_layer(name: str, layers: int) -> int:
    """below{i}.* (i = 1 the bottom one) is trace layer i - 1; the top layer's buffers have no prefix."""
    first = name.split(".")[0]
    return int(first[5:]) - 1 if first.startswith("below") and first[5:].isdigit() else layers - 1


def replay_ops(prefix: list[tuple], steps: list[list[tuple]], releases: list[list[tuple]], conf=None) -> list[tuple]:
    """(max allocated, max reserved) of each step through livebytes' CachingAllocator (peaks reset before each)."""
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.estimator.allocator import DEFAULT_CONF, CachingAllocator
    alloc, blocks, peaks = CachingAllocator(conf or DEFAULT_CONF), {}, []
    run_ops(alloc, blocks, prefix)
    for ops, drop in zip(steps, releases):
        alloc.reset_peak()
        run_ops(alloc, blocks, ops)
        peaks.append((alloc.peak, alloc.peak_reserved))
        run_ops(alloc, blocks, drop)
    return peaks


def run_ops(alloc, blocks: dict, ops: list[tuple]) -> None:
    for op in ops:
        if op[0] == "malloc":
            blocks[op[1]] = alloc.malloc(op[2])
        elif op[0] == "free":
            alloc.free(blocks.pop(op[1]))


def model_step_ops(ops: list[dict]) -> tuple[list[tuple], list[list[tuple]]]:
    """The model's recorded operations split: the harness's inputs, then each run's."""
    prefix, runs, tags = [], {}, {}
    for o in ops:
        if o["op"] == "malloc":
            tags[o["tag"]] = o
            target = prefix if o["phase"] == "harness" else runs.setdefault(o["run"], [])
            target.append(("malloc", o["tag"], o["bytes"], o["name"]))
        elif o["op"] == "free":
            owner = tags[o["tag"]]
            target = prefix if owner["phase"] == "harness" else runs.setdefault(owner["run"], [])
            target.append(("free", o["tag"]))
    return prefix, [runs[k] for k in sorted(runs)]

def align(trace_allocs: list[dict], model_ops: list[dict]) -> tuple[list[tuple], list[dict], list[dict]]:
    """Per (phase, layer) segment, the trace's allocations against the model's first-run requests in order, by size
    (difflib, no junk heuristic). Returns matched (trace event, model request) pairs, trace allocations the model
    lacks, model requests the trace lacks. GPU-only requests (L2 flush, cuBLAS workspaces) are left out of both."""
    gpu_only = {"triton_l2_flush"} | {name for name, _, _ in WORKSPACES}
    mine = [o for o in model_ops if o["op"] == "malloc" and o["run"] == 0 and o["phase"] != "harness"
            and o["name"].split(".", 1)[-1] not in gpu_only and o["name"] not in gpu_only]
    theirs = [e for e in trace_allocs if e["ev"] == "alloc"]
    pairs, missing, extra = [], [], []
    for key in dict.fromkeys([(e["phase"], e["layer"]) for e in theirs] + [(o["phase"], o["layer"]) for o in mine]):
        a = [e for e in theirs if (e["phase"], e["layer"]) == key]
        b = [o for o in mine if (o["phase"], o["layer"]) == key]
        sm = difflib.SequenceMatcher(None, [e["bytes"] for e in a], [o["bytes"] for o in b], autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                pairs += list(zip(a[i1:i2], b[j1:j2]))
            else:
                missing += a[i1:i2]
                extra += b[j1:j2]
    return pairs, missing, extra


def free_ranks(order: list[tuple], matched: set) -> dict:
    """For each matched allocation (by key), how many matched allocations came before its free (None: never freed)."""
    count, ranks = 0, {}
    for kind, key in order:
        if kind == "malloc" and key in matched:
            count += 1
        elif kind == "free" and key in matched:
            ranks[key] = count
    return ranks


def lifetimes(events: list[dict], model_ops: list[dict], pairs: list[tuple]) -> list[dict]:
    """Matched buffers whose free falls at a different point (counted in matched allocations) in the trace and in
    the model."""
    t_keys, m_keys = {e["sid"] for e, _ in pairs}, {o["tag"] for _, o in pairs}
    t = free_ranks([("malloc" if e["ev"] == "alloc" else "free", e["sid"]) for e in events if e["ev"] in ("alloc", "free")],
                   t_keys)
    m_run0 = [o for o in model_ops if o["op"] in ("malloc", "free")]
    m = free_ranks([(o["op"], o["tag"]) for o in m_run0], m_keys)
    out, last = [], len(pairs)
    for e, o in pairs:
        if t.get(e["sid"]) is None and m.get(o["tag"]) == last:
            continue                       # a gradient the harness drops after the step (both)
        if t.get(e["sid"]) != m.get(o["tag"]):
            out.append({"model": o["name"], "bytes": e["bytes"], "trace_sid": e["sid"], "trace_free_rank": t.get(e["sid"]),
                        "model_free_rank": m.get(o["tag"]), "where": e.get("fla") or e.get("node")})
    return out


def compare(path: str, out: str | None) -> int:
    """The trace against the model: the diff (missing, extra, lifetimes) and both replays' peaks."""
    head, events = load_trace(path)
    tokens = head["tokens"]
    model_ops, result = model_requests(head, tokens, runs=2)
    allocs = segments(events, head)
    pairs, missing, extra = align(allocs, model_ops)
    prefix, _ = model_step_ops(model_ops)
    grads = [("free", ("t", run, sid)) for sid in released(events) for run in (0,)]
    trace_peaks = replay_ops(prefix, [trace_ops(events, head, 0), trace_ops(events, head, 1)],
                             [grads, [("free", ("t", 1, sid)) for sid in released(events)]])
    report = {"tokens": tokens, "trace": path,
              "model": {"allocated": list(result.peaks), "reserved": list(result.reserved_peaks)},
              "trace_replay": {"allocated": [p[0] for p in trace_peaks], "reserved": [p[1] for p in trace_peaks]},
              "matched": len(pairs), "missing_in_model": [brief(e) for e in missing],
              "model_only": [{k: o[k] for k in ("name", "step", "bytes", "layer", "phase")} for o in extra],
              "lifetime_differs": lifetimes(events, model_ops, pairs)}
    text = json.dumps(report, indent=1)
    if out:
        Path(out).write_text(text)
    print(json.dumps({k: report[k] for k in ("tokens", "model", "trace_replay", "matched")}))
    print(json.dumps({"missing_in_model": len(missing), "bytes": sum(e["bytes"] for e in missing),
                      "model_only": len(extra), "lifetime_differs": len(report["lifetime_differs"])}))
    return 0


def brief(e: dict) -> dict:
    return {k: e.get(k) for k in ("sid", "bytes", "dtype", "shape", "op", "node", "fla", "torch", "phase", "layer")}


# ---- T-scaling: a trace at another T from traces at a few ----------------------------------------------------------

def dim_formula(values: dict[int, int]) -> tuple | None:
    """One dimension as a function of T over the traced T's: ("const", c), ("T", a) for a*T, or ("cdiv", a, b) for
    a*ceil(T/b); None when none fits."""
    ts = sorted(values)
    if len(set(values.values())) == 1:
        return ("const", values[ts[0]])
    for b in (1, 16, 32, 64, 128, 256, 512, 1024):
        a, rest = divmod(values[ts[0]], -(-ts[0] // b))
        if rest == 0 and all(values[t] == a * -(-t // b) for t in ts):
            return ("T", a) if b == 1 else ("cdiv", a, b)
    return None


def at_tokens(formula: tuple, tokens: int) -> int:
    if formula[0] == "const":
        return formula[1]
    if formula[0] == "T":
        return formula[1] * tokens
    return formula[1] * -(-tokens // formula[2])


def extrapolate(paths: list[str], tokens: int, out: str) -> int:
    """The event sequence of traces at several T (the same ops in the same order), each allocation's shape fitted
    dimension by dimension (``dim_formula``), written at ``tokens``; its bytes keep the traced bytes per element."""
    traces = {}
    for path in paths:
        head, events = load_trace(path)
        traces[head["tokens"]] = events
    ts = sorted(traces)
    base = traces[ts[0]]
    if any([(e["ev"], e.get("op")) for e in traces[t]] != [(e["ev"], e.get("op")) for e in base] for t in ts):
        raise SystemExit("error: the traces' event sequences differ: no T-scaling")
    events, unfitted = [], []
    for k, e in enumerate(base):
        if e["ev"] != "alloc":
            events.append(e)
            continue
        formulas = [dim_formula({t: traces[t][k]["shape"][d] for t in ts}) for d in range(len(e["shape"]))]
        if None in formulas:
            unfitted.append(e)
            events.append({**e, "bytes": None})
            continue
        shape = [at_tokens(f, tokens) for f in formulas]
        per = e["bytes"] // max(1, prod(e["shape"]))
        events.append({**e, "shape": shape, "bytes": per * prod(shape), "formula": formulas})
    head = {**load_trace(paths[0])[0], "tokens": tokens, "extrapolated_from": ts, "unfitted": len(unfitted)}
    Path(out).write_text("".join(json.dumps(x) + "\n" for x in [head] + events))
    print(json.dumps({"out": out, "tokens": tokens, "from": ts, "unfitted": [brief(e) for e in unfitted]}))
    return 0 if not unfitted else 1


def prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("--tokens", type=int, required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--layers", type=int, default=4)
    t.add_argument("--hidden", type=int, default=2304)
    t.add_argument("--heads", type=int, default=32)
    t.add_argument("--dim", type=int, default=128)
    t.add_argument("--conv-size", type=int, default=4)
    t.add_argument("--fla-layers", help="folder holding flash-linear-attention's fla/layers (pip --target)")
    t.add_argument("--cache-dir", default="/tmp/cpuf_cache")
    c = sub.add_parser("compare")
    c.add_argument("trace_file")
    c.add_argument("--out")
    x = sub.add_parser("extrapolate")
    x.add_argument("traces", nargs="+")
    x.add_argument("--tokens", type=int, required=True)
    x.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "trace":
        return trace(args)
    if args.cmd == "extrapolate":
        return extrapolate(args.traces, args.tokens, args.out)
    return compare(args.trace_file, args.out)


if __name__ == "__main__":
    raise SystemExit(main())

"""Record one steady-state step per shape with PyTorch's allocator history and write compact traces.

Per shape, in one process per implementation: one warmup step at that shape with its own inputs (compiles,
fills the library's tensor_cache), then ``torch.cuda.memory._record_memory_history(stacks="python")``
around creating fresh inputs (the warmup's ``cu_seqlens`` reused, so the caches hit as in the measured
protocol) and one step; ``_snapshot()``; only the device trace's ``alloc`` and ``free_requested`` events of
that window are kept, with the library frames (paths relative to site-packages). Sizes: a trace entry of an
allocation carries ``orig_size``, the requested bytes (CUDACachingAllocator.cpp, ``malloc``:
``record_trace(TraceEntry::ALLOC, ..., orig_size, ...)``), so ``size_field`` is ``requested``.

Autotuning is not what is measured, and costs minutes per new (H, D): by default ``Autotuner._bench`` is
replaced so the first config wins without benchmarking (the trace says so); host-side allocation sizes of
these paths do not depend on tile configs (chunk_bwd_dqkwg's BK comes from the device, not the tuner).
Each shape's file is written as soon as it is taken.

    python -m livebytes.validate.gpu.trace --impl fla-gdn-fwd@0.6.0 --shapes "2,1030,1,2,64,64;..." --out DIR
Shapes: the key=value shape strings of every command (``seq_len=1030,num_heads=2,num_v_heads=4,head_dim=64,batch_size=2``;
``estimator.shapes.parse_shape_list``), or the old ``N,S,H,HV,K,V`` (sequences, tokens per sequence, heads, value heads,
key dim, value dim), read as an alias.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
import importlib.util

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import TRACE_FORMAT as FORMAT, TRACE_FORMS, TRACE_SYMBOLS, Shape, parse_shape_list
import livebytes.validate as ours
from livebytes.validate.gpu.environment import cuda_available, environment

LIBRARY = "fla/"
MAX_FRAMES = 4
IMPLS = ("fla-kda@0.6.0", "fla-kda-fwd@0.6.0", "fla-gdn@0.6.0", "fla-gdn-fwd@0.6.0")


def parse_trace_shapes(text: str) -> list[Shape]:
    """The shapes to trace: key=value shape strings, or the old positional ``N,S,H,HV,K,V`` (``TRACE_FORMS``)."""
    shapes = parse_shape_list(text, TRACE_FORMS)
    if len(shapes) < 2:
        raise LivebytesError("learn needs traces at two shapes at least")
    return shapes


def trace_shape(shape: Shape) -> dict[str, int]:
    return {"T": shape.tokens, "N": shape.mbs, "H": shape.heads, "HV": shape.hv, "K": shape.dim, "V": shape.dv}


def varied(shapes: list[Shape]) -> list[str]:
    rows = [trace_shape(s) for s in shapes]
    return [s for s in TRACE_SYMBOLS if len({r[s] for r in rows}) > 1]


def relative(filename: str, roots: dict[str, str]) -> str:
    """A frame's file relative to site-packages (or to our package roots for an editable install)."""
    for root, prefix in roots.items():
        if filename.startswith(root):
            return prefix + filename[len(root):].lstrip("/")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def frames_of(entry: dict, roots: dict[str, str]) -> list[str]:
    """Innermost-first ``file:function:line`` frames: the library's, else our harness's (never this file)."""
    frames = [f"{relative(f['filename'], roots)}:{f['name']}:{f['line']}" for f in entry.get("frames", [])]
    own = [i for i, f in enumerate(frames) if f.startswith("livebytes/validate/gpu/trace.py")]
    lib = [i for i, f in enumerate(frames) if f.startswith(LIBRARY)]
    if own and lib and own[0] < lib[0]:          # outermost first: turn it round
        frames.reverse()
    library = [f for f in frames if f.startswith(LIBRARY)]
    if library:
        return library[:MAX_FRAMES]
    harness = [f for f in frames if f.startswith("livebytes/") and not f.startswith("livebytes/validate/gpu/trace.py")]
    return harness[:MAX_FRAMES] or frames[:1]


def events_of(snapshot: dict, roots: dict[str, str], device: int = 0) -> tuple[list, int]:
    """alloc/free events of the window as ``["a", id, bytes, frames]`` / ``["f", id]``; and how many frees
    were of allocations made before the window (not kept)."""
    events, open_ids, outside, next_id = [], {}, 0, 0
    for entry in snapshot["device_traces"][device]:
        action = entry.get("action")
        if action == "alloc":
            open_ids[entry["addr"]] = next_id
            events.append(["a", next_id, int(entry["size"]), frames_of(entry, roots)])
            next_id += 1
        elif action == "free_requested":
            ident = open_ids.pop(entry["addr"], None)
            if ident is None:
                outside += 1
            else:
                events.append(["f", ident])
    return events, outside


def disable_autotuning() -> str:
    """Make every Triton autotuner take its first config without benchmarking."""
    try:
        from triton.runtime import autotuner  # deferred: triton is not in the core install (model/validate extras)
    except ImportError:
        return "triton not importable: not patched"
    if not hasattr(autotuner.Autotuner, "_bench"):
        return "Autotuner._bench missing in this Triton: autotuning left on"

    def first_config_wins(self, *args, config, **kwargs):
        return [0.0, 0.0, 0.0] if config is self.configs[0] else [float("inf")] * 3
    autotuner.Autotuner._bench = first_config_wins
    return "disabled: Autotuner._bench patched, the first config of each kernel wins without benchmarking"


def load_probe(path: str):
    """A probe module: ``IMPL`` (a name), ``FORWARD_ONLY``, ``cpu_inputs(shape) -> dict`` of CPU tensors
    (``cu_seqlens`` among them) and ``step(x) -> output``."""
    spec = importlib.util.spec_from_file_location("livebytes_probe", path)
    if spec is None or spec.loader is None:
        raise LivebytesError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [n for n in ("IMPL", "cpu_inputs", "step") if not hasattr(module, n)]
    if missing:
        raise LivebytesError(f"{path}: probe lacks {', '.join(missing)}")
    return module


class _Impl:
    """Inputs (CPU, then device) and one step of one implementation (built in, or a probe file)."""

    def __init__(self, impl: str, contract: str):
        self.probe = load_probe(impl) if impl.endswith(".py") else None
        self.impl = self.probe.IMPL if self.probe else impl
        self.contract = contract
        self.forward_only = bool(getattr(self.probe, "FORWARD_ONLY", False)) if self.probe else "-fwd@" in impl
        self.gdn = self.impl.startswith("fla-gdn")

    def cpu_inputs(self, shape: Shape) -> dict:
        # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        from livebytes.validate.gpu.harnesses import fla_gdn, fla_kda
        if self.probe:
            return self.probe.cpu_inputs(shape)
        if self.gdn:
            return fla_gdn.gdn_cpu_inputs(shape, not self.forward_only)
        # the runner's recipe on the CPU (no device memory); to_device copies and marks them for grad
        x = fla_kda.fla_inputs(shape, self.contract, not self.forward_only, device="cpu")
        return {name: t.detach() for name, t in x.items()}

    def step(self, x: dict):
        from livebytes.validate.gpu import harnesses  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        from livebytes.validate.gpu.harnesses import fla_gdn  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        if self.probe:
            return self.probe.step(x)
        if self.gdn:
            return fla_gdn.gdn_step(x, self.forward_only)
        return harnesses.make(self.impl, self.contract, True, self.forward_only).step(x)


def take(impl: _Impl, shape: Shape, roots: dict[str, str]) -> dict:
    import torch  # deferred: torch is not in the core install (model/validate extras)
    from livebytes.validate.gpu.harnesses.fla_gdn import to_device  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    grad = not impl.forward_only
    warm = to_device(impl.cpu_inputs(shape), grad)
    o = impl.step(warm)
    del o
    torch.cuda.synchronize()
    cpu = impl.cpu_inputs(shape)
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=100000)
    x = to_device(cpu, grad, reuse={"cu_seqlens": warm["cu_seqlens"]})
    o = impl.step(x)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events, outside = events_of(snapshot, roots)
    del o, x, warm
    return {"events": events, "frees_outside_window": outside}


def _roots() -> dict[str, str]:
    import fla  # deferred: fla is not in the core install (model/validate extras)
    return {str(Path(fla.__file__).parent) + "/": "fla/", str(Path(ours.__file__).parent) + "/": "livebytes/validate/"}


def request(impl: str, shapes_text: str, contract: str = "report"):
    """What to trace, checked before anything runs: (the implementation, its shapes); one LivebytesError otherwise."""
    shapes = parse_trace_shapes(shapes_text)
    if not impl.endswith(".py") and impl not in IMPLS:
        raise LivebytesError(f"unknown implementation {impl!r}: {', '.join(IMPLS)} or a probe file")
    chosen = _Impl(impl, contract)
    if not cuda_available():
        raise LivebytesError("no CUDA device: the tracer records the real allocator and needs a GPU")
    return chosen, shapes


def write_traces(impl: _Impl, shapes: list, out: Path, contract: str = "report", autotune_on: bool = False) -> None:
    """Trace each shape on the GPU into ``out`` (one file per shape, printing a line each)."""
    os.environ.setdefault("TRITON_CACHE_DIR", "/tmp/livebytes-trace-triton-cache")   # keep tuned caches clean
    autotune = "on (Triton autotuning as shipped)" if autotune_on else disable_autotuning()
    import torch  # deferred: torch is not in the core install (model/validate extras)
    out.mkdir(parents=True, exist_ok=True)
    env, roots = environment(), _roots()
    for shape in shapes:
        t0 = time.time()
        body = take(impl, shape, roots)
        record = {"format": FORMAT, "impl": impl.impl, "options": {"contract": contract} if impl.impl.startswith("fla-kda") else {},
                  "shape": trace_shape(shape), "varied": varied(shapes), "size_field": "requested",
                  "size_source": "CUDACachingAllocator.cpp malloc: record_trace(TraceEntry::ALLOC, ptr, orig_size)",
                  "device": env["device"], "env": {k: env[k] for k in ("torch", "triton", "fla", "cuda", "driver")},
                  "autotune": autotune, "outside_window": ["cu_seqlens"], "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                  **body}
        s = trace_shape(shape)
        name = f"{impl.impl.replace('@', '_')}_" + "_".join(f"{k}{s[k]}" for k in TRACE_SYMBOLS) + ".json"
        (out / name).write_text(json.dumps(record, separators=(",", ":")))
        print(f"{name}: {len(body['events'])} events ({time.time() - t0:.1f} s)", flush=True)
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True, help=f"{', '.join(IMPLS)}, or a probe file PROBE.py")
    ap.add_argument("--contract", default="report", choices=("report", "plain"), help="KDA only")
    ap.add_argument("--shapes", required=True, help="seq_len=1030,num_heads=2,...;... (or the old N,S,H,HV,K,V;...)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--autotune", action="store_true", help="keep Triton autotuning (slow)")
    args = ap.parse_args(argv)
    try:
        impl, shapes = request(args.impl, args.shapes, args.contract)
    except LivebytesError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    write_traces(impl, shapes, Path(args.out), args.contract, args.autotune)
    return 0


if __name__ == "__main__":
    sys.exit(main())

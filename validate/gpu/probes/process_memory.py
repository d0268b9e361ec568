"""A process's own device memory (outside PyTorch) after its first call, many cases side by side on one GPU.

The figure that decides an out-of-memory verdict besides the allocator's segments: the CUDA context, the
loaded kernel modules and the local-memory (stack) reservation the driver keeps for every resident thread
once a kernel with a larger stack frame than the current limit has launched. It does not depend on the
sequence length, so a small shape measures it; every head dim and phase is its own process.

Processes run side by side (compiling and autotuning is nearly all of a cold first call's time), so no
process can read its own figure from ``cudaMemGetInfo``. The coordinator reads the device's used memory
through NVML while every worker idles after its first call, then ends them one at a time: the drop at each
exit is that process's whole footprint, and minus its ``memory_reserved`` it is the non-PyTorch figure.
The last worker also reads its own figure in process, alone on the device: the cross-check of the method.

Each worker logs every Triton kernel it compiled (function, constexprs, warps, stages, hash) and every one
it loaded (``knobs.runtime.kernel_load_end_hook``: a config that fails ``OutOfResources`` never loads), and
``cuobjdump -res-usage`` gives each loaded cubin's stack frame: the data ``lifetimes/data`` frames come from.

    python3 validate/gpu/probes/process_memory.py --cases CASES --cache-root /tmp/pm --out DIR --deadline 420
      CASES: ';'-separated impl:dim:heads:v_heads:tokens:state[:layer], impl one of fla-report, fla-plain, fla-gdn,
      or a layer, fla-kda-layer or fla-gdn-layer (layer: its options, hidden=2048,layers=1,checkpoint=0,conv_size=4;
      default hidden 2304, one layer), a kernel optionally suffixed -fwd (forward only); state cold (an empty
      TRITON_CACHE_DIR) or warm (the folder an earlier cold case of the same impl and dim filled).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
import select

HERE = Path(__file__).parent


# ---- NVML (no CUDA context in the coordinator) ---------------------------------------------------------------

class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvml_used() -> int:
    """nvmlDeviceGetMemoryInfo(device 0).used in bytes."""
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    lib.nvmlInit_v2()
    handle = ctypes.c_void_p()
    lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))
    mem = _Memory()
    if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) != 0:
        raise SystemExit("nvmlDeviceGetMemoryInfo failed")
    return int(mem.used)


def settled_used(previous: int | None = None, timeout: float = 20.0) -> int:
    """The used figure once two readings 0.5 s apart agree (and differ from ``previous``, when given)."""
    end = time.time() + timeout
    last = nvml_used()
    while time.time() < end:
        time.sleep(0.5)
        now = nvml_used()
        if now == last and (previous is None or now != previous):
            return now
        last = now
    return last


# ---- the worker ------------------------------------------------------------------------------------------------

def _hook_triton(log: list) -> None:
    """Record each compile (constexprs by name) and each successful load (cubin path) of a Triton kernel."""
    from triton import knobs  # deferred: triton is not in the core install (model/validate extras)
    from triton.runtime.jit import JITFunction  # deferred: triton is not in the core install (model/validate extras)
    original = JITFunction._do_compile

    def do_compile(self, key, signature, device, constexprs, options, attrs, warmup):
        kernel = original(self, key, signature, device, constexprs, options, attrs, warmup)
        names = {}
        for path, value in constexprs.items():
            i = path[0] if isinstance(path, tuple) else path
            name = self.arg_names[i] if isinstance(i, int) and i < len(self.arg_names) else str(path)
            names[name] = value if isinstance(value, (int, float, bool, str, type(None))) else str(value)
        log.append({"event": "compile", "fn": self.__name__, "hash": getattr(kernel, "hash", None),
                    "num_warps": options.num_warps, "num_stages": options.num_stages, "constexprs": names})
        return kernel

    JITFunction._do_compile = do_compile

    def loaded(module, function, name, metadata_group, hash):
        cubin = next((p for k, p in metadata_group.items() if k.endswith(".cubin")), None)
        log.append({"event": "load", "name": name, "hash": hash, "cubin": cubin})

    knobs.runtime.kernel_load_end_hook.add(loaded)


def _boundary_probe():
    """The sibling probe whose harnesses this one runs (imported by path: the probes are scripts, not a package)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import boundary_probe  # deferred: sibling script, importable once the probe's process has put its folder on sys.path
    return boundary_probe


def worker(case: dict, out: Path) -> int:
    """First call at the case's shape, then report and wait for the coordinator's word on stdin."""
    bp = _boundary_probe()
    torch = bp._torch()
    log: list = []
    _hook_triton(log)
    torch.empty(1, device="cuda")
    t0 = time.time()
    # before any kernel: the CUDA context; in process, so the reading holds only where this process is alone on the GPU
    rec = {"case": case, "context_stack_limit_bytes": bp.stack_limit(), "context_nonpytorch_bytes": bp.nonpytorch_bytes(),
           "gpu": torch.cuda.get_device_name(),
           "allocator_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR", "")}
    try:
        x = bp.make_inputs(case["impl"], case["tokens"], case["heads"], case["dim"], 1, v_heads=case["v_heads"],
                           grad=not case["forward_only"], layer=case.get("layer"))
        o = bp.step(case["impl"], x, case["forward_only"])
        torch.cuda.synchronize()
        del o
        bp.release(x)
    except Exception as err:     # the library's refusal is a result; the process's memory is still measured
        rec["error"] = f"{type(err).__name__}: {str(err)[:400]}"
    rec.update(first_call_seconds=round(time.time() - t0, 1), stack_limit_bytes=bp.stack_limit(),
               reserved_bytes=torch.cuda.memory_reserved(), allocated_bytes=torch.cuda.memory_allocated(),
               torch=torch.__version__, triton=__import__("triton").__version__, fla=__import__("fla").__version__)
    (out / f"{case['tag']}.kernels.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    print("READY " + json.dumps(rec), flush=True)
    for line in sys.stdin:
        if line.strip() == "alone":     # every other worker has exited: this process's own figure
            print("ALONE " + json.dumps({"nonpytorch_bytes": bp.nonpytorch_bytes(),
                                          "reserved_bytes": torch.cuda.memory_reserved()}), flush=True)
        elif line.strip() == "exit":
            return 0
    return 0


# ---- the coordinator -------------------------------------------------------------------------------------------

def parse_cases(text: str, cache_root: str) -> list[dict]:
    """The cases of ``--cases``; an unknown impl or state stops the probe before any process starts (run 22g's
    ``fla-kda`` ran no kernel and read the bare context as if measured)."""
    cases, impls = [], _boundary_probe().FLA_IMPLS
    for item in filter(None, (c.strip() for c in text.split(";"))):
        impl, dim, heads, v_heads, tokens, state, *layer = item.split(":")
        forward_only = impl.endswith("-fwd")
        base = impl.removesuffix("-fwd")
        if base not in impls or state not in ("cold", "warm") or len(layer) > 1:
            raise SystemExit(f"case {item!r}: impl must be one of {', '.join(impls)} (optionally -fwd), state cold or "
                             "warm, then at most a layer's options")
        options = parse_layer(layer[0], item) if layer else None
        suffix = "".join(f"_{k}{v}" for k, v in (options or {}).items())       # the layer's options in its names
        tag = f"{impl}_D{dim}_H{heads}_HV{v_heads}_T{tokens}{suffix}_{state}"
        folder = f"{cache_root}/tc_{impl}_D{dim}_H{heads}_HV{v_heads}_T{tokens}{suffix}"
        cases.append({"impl": base, "forward_only": forward_only, "dim": int(dim), "heads": int(heads),
                      "v_heads": int(v_heads), "tokens": int(tokens), "state": state, "tag": tag, "cache_dir": folder,
                      **({"layer": options} if options else {})})
    return cases


def parse_layer(text: str, item: str) -> dict:
    """A layer case's build options, ``hidden=2048,layers=1,checkpoint=0,conv_size=4`` (boundary_probe's
    ``LAYER_DEFAULTS`` where one is left out); an unknown name or a value that is no integer stops the probe."""
    layer = _boundary_probe().LAYER_DEFAULTS
    try:
        given = {k: int(v) for k, v in (part.split("=") for part in text.split(","))}
    except ValueError:
        raise SystemExit(f"case {item!r}: a layer's options are name=integer, comma-separated") from None
    if set(given) - set(layer):
        raise SystemExit(f"case {item!r}: a layer takes {', '.join(layer)}, not {', '.join(sorted(set(given) - set(layer)))}")
    return {**layer, **given, "checkpoint": bool(given.get("checkpoint", layer["checkpoint"]))}


def start(case: dict, out: Path) -> subprocess.Popen:
    if case["state"] == "cold":
        shutil.rmtree(case["cache_dir"], ignore_errors=True)
    env = {**os.environ, "TRITON_CACHE_DIR": case["cache_dir"], "PYTHONUNBUFFERED": "1",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}
    err = open(out / f"{case['tag']}.stderr", "w")
    return subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(case), "--out", str(out)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)


def read_ready(proc: subprocess.Popen, deadline: float) -> dict | None:
    while time.time() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if not line:
                return None
            if line.startswith("READY "):
                return json.loads(line[6:])
        elif proc.poll() is not None:
            return None
    return None


def cubin_frames(kernels_file: Path) -> list[dict]:
    """cuobjdump -res-usage of every cubin the worker loaded."""
    sys.path.insert(0, str(HERE))
    from cubin_usage import usage  # deferred: sibling script, importable once the probe's process has put its folder on sys.path
    import triton  # deferred: triton is not in the core install (model/validate extras)
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"   # the wheel ships one
    tool = shutil.which("cuobjdump") or (str(bundled) if bundled.exists() else "/usr/local/cuda/bin/cuobjdump")
    out = []
    for line in kernels_file.read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "load" and e.get("cubin"):
            out.append({"hash": e["hash"], "name": e["name"], **usage(Path(e["cubin"]), tool)})
    return out


def run_group(cases: list[dict], out: Path, deadline: float, summary: Path) -> set[str]:
    """Start every case, wait for each to report after its first call, then end them one at a time; returns the
    Triton cache folders of the cases that finished their first call."""
    procs = [(c, start(c, out)) for c in cases]
    results = []
    for case, proc in procs:
        rec = read_ready(proc, deadline)
        if rec is None:
            proc.kill()
            results.append({"case": case, "status": "did not finish its first call by the deadline"})
            continue
        results.append(rec)
    live = [(r, p) for r, (c, p) in zip(results, procs) if "status" not in r]
    used = settled_used()
    for i, (rec, proc) in enumerate(live):
        if i == len(live) - 1:
            proc.stdin.write("alone\n")
            proc.stdin.flush()
            for line in proc.stdout:
                if line.startswith("ALONE "):
                    rec["in_process_alone"] = json.loads(line[6:])
                    break
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        proc.wait(timeout=60)
        after = settled_used(previous=used)
        rec.update(footprint_bytes=used - after, nonpytorch_bytes=used - after - rec["reserved_bytes"],
                   method="NVML used-memory drop at the process's exit, minus its memory_reserved")
        used = after
    for rec in results:
        tag = rec["case"]["tag"]
        kernels = out / f"{tag}.kernels.jsonl"
        if kernels.exists():
            rec["frames"] = cubin_frames(kernels)
        with open(summary, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(json.dumps({k: rec.get(k) for k in ("case", "status", "stack_limit_bytes", "nonpytorch_bytes",
                                                   "first_call_seconds")})[:400], flush=True)
    return {r["case"]["cache_dir"] for r in results if "status" not in r}


def warm_over(cases: list[dict], args, out: Path, summary: Path) -> int:
    """Warm cases over a copy of a cache another process filled; each case names that process (``filled_by``), which
    ``validate/check/frames.py`` requires of a warm case whose cold case is not in the same file."""
    for case in cases:
        shutil.rmtree(case["cache_dir"], ignore_errors=True)
        shutil.copytree(args.warm_over, case["cache_dir"])
        case["filled_by"] = args.filled_by or args.warm_over
    run_group(cases, out, time.time() + args.deadline, summary)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases")
    ap.add_argument("--warm-cases", help="run after the --cases group, reusing its Triton cache folders (with --warm-over: "
                    "over copies of that folder instead)")
    ap.add_argument("--cache-root", default="/tmp/pm")
    ap.add_argument("--deadline", type=float, default=420.0, help="seconds for a group's first calls")
    ap.add_argument("--worker")
    ap.add_argument("--out", required=True, help="the workers' files (kernel logs, stderr)")
    ap.add_argument("--summary", help="the JSON lines of results (default OUT/process_memory.jsonl)")
    ap.add_argument("--warm-over", metavar="DIR", help="the warm cases run over a copy of DIR, a Triton cache another "
                    "process filled (a cold boundary probe at the same shape); no cold group needed")
    ap.add_argument("--filled-by", default="", help="with --warm-over: which process filled DIR (kept in each case)")
    args = ap.parse_args(argv)
    if args.warm_over and (args.cases or not args.warm_cases or not Path(args.warm_over).is_dir()):
        ap.error("--warm-over DIR takes --warm-cases and no --cases, and DIR must be a folder")
    if args.filled_by and not args.warm_over:
        ap.error("--filled-by names the process that filled --warm-over's folder")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.worker:
        return worker(json.loads(args.worker), out)
    summary = Path(args.summary or out / "process_memory.jsonl")
    with open(summary, "a") as fh:
        fh.write(json.dumps({"baseline_nvml_used_bytes": settled_used()}) + "\n")
    t0 = time.time()
    if args.warm_over:
        return warm_over(parse_cases(args.warm_cases or "", args.cache_root), args, out, summary)
    filled = run_group(parse_cases(args.cases or "", args.cache_root), out, t0 + args.deadline, summary)
    warm = [c for c in parse_cases(args.warm_cases or "", args.cache_root) if c["cache_dir"] in filled]
    if warm:     # only over a cache a cold case filled completely: a partial one would autotune the rest
        run_group(warm, out, time.time() + 120, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

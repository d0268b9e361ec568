"""Run the real kernels under the report's protocol and write one validation record per shape.

Protocol v4 (the KDA memory report's, section 'Sources and measurement configuration'):
- packed equal-length sequences with boundaries (cu_seqlens), seeded inputs drawn on the device,
  one allocation per input (``validate/inputs.py``: the same allocator state as v3's CPU-drawn copies);
- bounded warmup at a small shape of the same (H, D) (compilation, autotuning), then one
  target-shape warmup step, then ``torch.cuda.empty_cache()``;
- earlier outputs and gradients released before each measured step;
- the median of 3 steady-state forward+backward peaks of torch.cuda.max_memory_allocated (inputs,
  dO, output, gradients and intermediates included), PYTORCH_CUDA_ALLOC_CONF as given (``--alloc-conf``,
  default expandable_segments:False, set before torch is imported);
- finite checks on the output and every gradient, outside the measured interval;
- device memory outside PyTorch before the first and after the last step, the reserved peak, the
  seconds spent (setup, compile, measure); an out-of-memory is a result, with its figures.

Each record is written as its own file under ``--out`` as soon as it is measured (``records.write_record``).

Usage (one process; shapes of one (H, D) share compilation and autotuning):
    python -m livebytes.validate.runner --impl fla-kda@0.6.0 --shapes "1,8K,96,128;1,8K,16,128,hv=32" --out DIR
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import fcntl
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import Shape, parse_shape_list

from . import autotune, oom
from .inputs import build_inputs, input_specs
from .protocol import CURRENT, PROTOCOLS
from .records import write_record

PROCESS_START = time.time()
DEFAULT_ALLOC_CONF = "expandable_segments:False"
PROTOCOL = {   # written into every record; the version's meaning for the replay lives in validate/protocol.py
    "name": PROTOCOLS[CURRENT].name,
    "version": CURRENT,
    "empty_cache_after_warmup": "torch.cuda.empty_cache() after the target-shape warmup step",
    "inputs": "seeded on the device (torch.Generator on the GPU), one torch.empty per input filled in place; "
              "normalisation and log-sigmoid in row chunks freed (and the cache emptied) before the next input",
    "warmup": "2 fwd+bwd steps at MBS 1 x 1024 tokens of the same (H, HV, D), then 1 step at the target shape",
    "measured_steps": 3,
    "statistic": "median of torch.cuda.max_memory_allocated after reset_peak_memory_stats, per step",
    "released_before_each_step": "output, dO-derived tensors and every .grad",
    "finite_checks": "output and all input gradients, outside the measured interval",
}

SMALL_ELEMENTS = 2**28   # T*H*D at or below which a shape's warmup may overlap other processes (~17 GiB peak)
LOCK_PATH = os.environ.get("LIVEBYTES_GPU_LOCK", "/tmp/livebytes-gpu.lock")


def _torch():
    import torch
    return torch


def cuda_available() -> bool:
    try:
        return _torch().cuda.is_available()
    except (ImportError, RuntimeError):
        return False


def environment() -> dict:
    torch = _torch()
    props = torch.cuda.get_device_properties(0)
    env = {
        "device": {"name": props.name, "total_memory": props.total_memory, "sm_count": props.multi_processor_count,
                   "capability": f"sm{props.major}{props.minor}", "preset": _preset(props.name)},
        "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
    }
    import subprocess
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       check=False, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        env["driver"] = "unknown"
    for mod, key in (("triton", "triton"), ("fla", "fla"), ("cudnn", "cudnn_frontend")):
        try:
            env[key] = __import__(mod).__version__
        except (ImportError, AttributeError, RuntimeError):
            env[key] = None
    return env


def _preset(name: str) -> str:
    for p in ("H200", "H100", "B200", "B300"):
        if p in name.upper():
            return p
    return name


# ---------------------------------------------------------------- implementations

def fla_inputs(shape: Shape, contract: str, grad: bool, seed: int = 0, device: str = "cuda") -> dict:
    """FLA's varlen layout [1, T, H, D], int64 boundaries (recipe: validate/inputs.py)."""
    specs = input_specs(shape, contract, grad, batch_dim=True, cu_dtype="int64")
    return build_inputs(specs, device, shape.seq, seed)


def fla_forward(x: dict, contract: str, recompute: bool = True):
    from fla.ops.kda import chunk_kda
    kw = {"cu_seqlens": x["cu_seqlens"], "disable_recompute": not recompute}
    if contract == "report":
        kw.update(A_log=x["A_log"], dt_bias=x["dt_bias"], use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                  use_beta_sigmoid_in_kernel=True, safe_gate=True, lower_bound=-5.0)
    o, _ = chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], **kw)
    return o


def cudnn_inputs(shape: Shape, contract: str, grad: bool, seed: int = 0, device: str = "cuda") -> dict:
    """cuDNN's THD layout [T, H, D], int32 boundaries (the Hopper engines take the plain contract)."""
    specs = input_specs(shape, contract, grad, batch_dim=False, cu_dtype="int32")
    return build_inputs(specs, device, shape.seq, seed)


def cudnn_forward(x: dict, plan: str):
    from cudnn.linear_attention import kimi_delta_attention
    o, _ = kimi_delta_attention(x["q"], x["k"], x["v"], x["g"], x["beta"], x["cu_seqlens"], plan_name=plan)
    return o


def runner_kind(impl: str) -> str | None:
    """The validator's code path for a model (``ModelSpec.runner``; None when it cannot be run or is unknown)."""
    from livebytes.estimator.errors import UnknownModelError
    from livebytes.estimator.registry import spec
    try:
        return spec(impl).runner
    except UnknownModelError:
        return None


def _installed(kind: str) -> tuple[str, str | None]:
    """(package, installed version) behind a runner kind."""
    module = "cudnn" if kind.startswith("kda_") else "fla"      # fla (KDA, GDN) or the cuDNN frontend
    try:
        return module, __import__(module).__version__
    except (ImportError, AttributeError):
        return module, None


def decline_reason(impl: str) -> str | None:
    """Why this machine cannot run ``impl`` (None when it can)."""
    from livebytes.estimator.registry import spec
    kind = runner_kind(impl)
    if kind is None:
        return f"no runner for {impl}"
    if not cuda_available():
        return "no CUDA device: the validator runs the real kernels and needs a GPU"
    torch = _torch()
    major, minor = torch.cuda.get_device_capability(0)
    sm = major * 10 + minor
    if kind == "kda_frost" and not (100 <= sm <= 103 or sm == 107):
        return (f"kda_frost runs only on Blackwell (sm100-103, sm107: tcgen05/TMEM); this GPU is sm{sm} "
                f"({torch.cuda.get_device_name(0)}); FROST stays checked against the published table")
    if kind in ("kda_hopper_cuda", "kda_hopper") and sm != 90:
        return f"{kind} runs only on Hopper (sm90); this GPU is sm{sm}"
    module, version = _installed(kind)
    if version != spec(impl).version:   # a snapshot model (fla-kda@07b80f27) is not what 0.6.0 runs
        return f"{impl} models {module} {spec(impl).version}; this machine has {module} {version or 'not installed'}"
    return None


class Harness:
    """Builds inputs and runs one step of one implementation/configuration."""

    def __init__(self, impl: str, contract: str, recompute: bool, forward_only: bool):
        self.impl, self.contract, self.recompute, self.forward_only = impl, contract, recompute, forward_only
        self.kind = runner_kind(impl)

    def inputs(self, shape: Shape) -> dict:
        grad = not self.forward_only
        if self.kind == "fla":
            return fla_inputs(shape, self.contract, grad)
        if self.kind == "gdn":   # Qwen3-Next's recipe, shared with the tracer (one block per input, CPU-seeded)
            from .gdn_harness import gdn_inputs
            return gdn_inputs(shape, grad)
        return cudnn_inputs(shape, "plain", grad)

    def step(self, x: dict):
        torch = _torch()
        if self.forward_only:
            ctx = torch.inference_mode() if self.kind == "kda_hopper" else torch.no_grad()
            with ctx:
                return self._forward(x)
        o = self._forward(x)
        o.backward(x["dO"].view_as(o))
        return o

    def _forward(self, x):
        if self.kind == "fla":
            return fla_forward(x, self.contract, self.recompute)
        if self.kind == "gdn":
            from .gdn_harness import gdn_forward
            return gdn_forward(x)
        return cudnn_forward(x, self.kind)

    @staticmethod
    def release(x: dict) -> None:
        for t in x.values():
            if getattr(t, "grad", None) is not None:
                t.grad = None

    @staticmethod
    def finite(o, x: dict) -> bool:
        torch = _torch()
        tensors = [o] + [t.grad for t in x.values() if getattr(t, "grad", None) is not None]
        return all(bool(torch.isfinite(t.float()).all()) for t in tensors)


@contextlib.contextmanager
def gpu_lock():
    """Serialise measurements of processes sharing one GPU (their memory would add up)."""
    with open(LOCK_PATH, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class RunContext:
    """What every record of one runner process shares."""
    mode: str
    alloc_conf: str
    triton_cache: str                    # requested: cold, warm or n/a (cuDNN)
    triton_dir: Path | None = None
    installed: set = field(default_factory=set)
    earlier_shapes: list = field(default_factory=list)
    observer: oom.OomObserver = field(default_factory=oom.OomObserver)


def nonpytorch_bytes(free: int, total: int, reserved: int) -> int:
    """Device memory in use outside PyTorch's allocator: (total - free) from mem_get_info minus memory_reserved."""
    return total - free - reserved


def seconds_of(total: float, compile_s: float, measure_s: float, lock_wait: float) -> dict:
    """The record's ``seconds``: ``setup`` is what neither compiling (warmup steps) nor measuring nor
    waiting for the GPU lock took (imports and CUDA start-up for a process's first shape, inputs)."""
    return {"setup": round(total - compile_s - measure_s - lock_wait, 2), "compile": round(compile_s, 2),
            "measure": round(measure_s, 2), "total": round(total, 2), "lock_wait": round(lock_wait, 2)}


def base_record(h: Harness, shape: Shape, env: dict, ctx: RunContext) -> dict:
    from livebytes.estimator.registry import spec
    taken = spec(h.impl).options     # record the what-if options the model takes, as the model names them
    options = {k: v for k, v in (("contract", h.contract), ("recompute", h.recompute)) if k in taken}
    record = {"impl": h.impl, "origin": "measured", "mode": ctx.mode, "options": options,
              "forward_only": h.forward_only, "shape": shape.as_dict(), "protocol": PROTOCOL,
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "allocator_conf": ctx.alloc_conf, **env}
    if ctx.earlier_shapes:
        record["earlier_shapes_in_process"] = list(ctx.earlier_shapes)
    return record


def triton_state(ctx: RunContext) -> dict:
    """``triton_cache`` as it was: "cold" whenever a kernel benchmarked its configs in this process."""
    if ctx.triton_dir is None:
        return {"triton_cache": "n/a"}
    tuned = autotune.autotuned_kernels(ctx.triton_dir, ctx.installed)
    return {"triton_cache": "cold" if tuned else "warm", "triton_cache_requested": ctx.triton_cache,
            "autotuned_kernels": tuned}


def _device_now(torch) -> tuple[int, int, int]:
    free, total = torch.cuda.mem_get_info()
    return free, total, torch.cuda.memory_reserved()


def _timed_step(h: Harness, x: dict, clock: dict, key: str) -> None:
    t = time.time()
    o = h.step(x)
    h.release(x)
    del o
    _torch().cuda.synchronize()
    clock[key] += time.time() - t


def _measured_steps(h: Harness, x: dict, history: tuple | None) -> dict:
    torch = _torch()
    peaks, reserved, baselines, requested = [], [], [], []
    for i in range(PROTOCOL["measured_steps"]):
        torch.cuda.synchronize()
        baselines.append(torch.cuda.memory_allocated())
        torch.cuda.reset_peak_memory_stats()
        if history is not None and i == 0:
            torch.cuda.memory._record_memory_history(max_entries=200000)
        o = h.step(x)
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated())
        reserved.append(torch.cuda.max_memory_reserved())
        requested.append(torch.cuda.memory_stats().get("requested_bytes.all.peak"))
        if history is not None and i == 0:
            _dump_history(history[0], h, history[1])
        if i < PROTOCOL["measured_steps"] - 1:
            h.release(x)
            del o
    after = nonpytorch_bytes(*_device_now(torch))
    finite = h.finite(o, x)
    return {"finite": finite, "peaks_bytes": peaks, "peak_bytes": int(statistics.median(peaks)),
            "reserved_bytes": reserved, "baseline_bytes": baselines, "requested_peak_bytes": requested,
            "oom": False, "_nonpytorch_after": after}


def _oom_fields(torch, err: BaseException, stage: str, observer: oom.OomObserver) -> dict:
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    message = str(err)
    return {"oom": True, "oom_message": oom.first_line(message), "oom_step": stage,
            "oom_figures": oom.oom_figures(message, observer.last, stats.get("allocated_bytes.all.current", 0),
                                           stats.get("reserved_bytes.all.current", 0), free, total),
            "peak_before_oom_bytes": torch.cuda.max_memory_allocated(),
            "_nonpytorch_after": nonpytorch_bytes(free, total, stats.get("reserved_bytes.all.current", 0))}


def measure_shape(h: Harness, shape: Shape, env: dict, ctx: RunContext, history_dir: Path | None = None) -> dict:
    torch = _torch()
    t0 = PROCESS_START if not ctx.earlier_shapes else time.time()
    record = base_record(h, shape, env, ctx)
    clock, stage, x, before = {"compile": 0.0, "measure": 0.0, "lock": 0.0}, "warmup", None, None
    small = shape.tokens * shape.hv * shape.dim <= SMALL_ELEMENTS
    try:
        x = h.inputs(Shape(1, 1024, shape.heads, shape.dim, shape.v_heads, shape.dim_v))
        before = nonpytorch_bytes(*_device_now(torch))
        for _ in range(2):
            _timed_step(h, x, clock, "compile")
        x = None
        torch.cuda.empty_cache()
        # Small shapes do their target warmup (re-autotuning of T-keyed kernels) before taking the lock,
        # so parallel processes overlap it; large ones warm up under the lock, alone on the GPU.
        if small:
            stage, x = "inputs", h.inputs(shape)
            stage = "target-warmup"
            _timed_step(h, x, clock, "compile")
        t_wait = time.time()
        with gpu_lock():
            clock["lock"] = time.time() - t_wait
            if x is None:
                stage, x = "inputs", h.inputs(shape)
                stage = "target-warmup"
                _timed_step(h, x, clock, "compile")
            torch.cuda.empty_cache()   # v3 on: no first-call temporaries (autotune buffers) shape the measured layout
            stage, t_measure = "measured", time.time()
            record.update(_measured_steps(h, x, (history_dir, shape) if history_dir else None))
            clock["measure"] = time.time() - t_measure
    except torch.cuda.OutOfMemoryError as err:
        record.update(_oom_fields(torch, err, stage, ctx.observer))
        del err
    finally:
        if x is not None:
            h.release(x)
        x = None
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    record["device_memory"] = {"nonpytorch_before_bytes": before, "nonpytorch_after_bytes": record.pop("_nonpytorch_after"),
                               "reserved_peak_bytes": max(record.get("reserved_bytes") or [torch.cuda.max_memory_reserved()])}
    record.update(triton_state(ctx))
    record["seconds"] = seconds_of(time.time() - t0, clock["compile"], clock["measure"], clock["lock"])
    return record


def _dump_history(directory: Path, h: Harness, shape: Shape) -> None:
    torch = _torch()
    from livebytes.validate.history import as_rows, live_at_peak
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak, blocks = live_at_peak(snap)
    name = f"live_{h.impl.replace('@', '_')}_{shape.mbs}x{shape.seq}x{shape.heads}x{shape.dim}.json"
    (directory / name).write_text(json.dumps({"impl": h.impl, "shape": shape.as_dict(), "replayed_peak_bytes": peak,
                                              "blocks": as_rows(blocks)}, indent=1))


def probe_device(path: Path) -> dict:
    """What PyTorch can allocate on this device: total, free after context creation, largest single block."""
    torch = _torch()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    free, total = torch.cuda.mem_get_info()
    lo, hi = 0, free
    while hi - lo > 64 * 2**20:        # bisect the largest torch.empty that succeeds (64 MiB resolution)
        mid = (lo + hi) // 2
        try:
            t = torch.empty(mid, dtype=torch.uint8, device="cuda")
            del t
            torch.cuda.empty_cache()
            lo = mid
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            hi = mid
    info = {"probe": "device", **environment(), "mem_get_info_after_init": {"free": free, "total": total},
            "outside_pytorch_bytes": total - free, "largest_single_allocation_bytes": lo,
            "resolution_bytes": 64 * 2**20,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    path.write_text(json.dumps(info, indent=1))
    return info


def apply_alloc_conf(conf: str, environ=os.environ, modules=sys.modules) -> None:
    """Set PYTORCH_CUDA_ALLOC_CONF; the allocator reads it once, when torch is imported, so it must come first."""
    if "torch" in modules and environ.get("PYTORCH_CUDA_ALLOC_CONF", "") != conf:
        raise LivebytesError(f"--alloc-conf {conf!r}: torch is already imported with "
                             f"{environ.get('PYTORCH_CUDA_ALLOC_CONF', '')!r}; run the runner as its own process")
    environ["PYTORCH_CUDA_ALLOC_CONF"] = conf


def library_versions() -> dict:
    """fla and Triton versions from the installed distributions (no import: their caches read the
    environment at import time)."""
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for key, dist in (("fla", "fla-core"), ("triton", "triton")):
        try:
            out[key] = version(dist)
        except PackageNotFoundError:
            out[key] = "none"
    return out


def prepare_triton(mode: str, out: Path, cache_file: str | None) -> RunContext:
    """A fresh TRITON_CACHE_DIR (and FLA config folder), filled from the committed autotune file when warm."""
    gpu = _torch().cuda.get_device_name(0)
    versions = library_versions()
    path = Path(cache_file) if cache_file else autotune.find_cache(gpu, versions["fla"], versions["triton"])
    if mode == "auto":
        mode = "warm" if path else "cold"
    if mode == "warm" and (path is None or not path.exists()):
        raise LivebytesError(f"--triton-cache warm: no autotune file for {gpu}, fla {versions['fla']}, triton "
                             f"{versions['triton']} ({autotune.cache_file_name(gpu, versions['fla'], versions['triton'])}); "
                             "capture one with --triton-cache cold --autotune-capture")
    root = Path(tempfile.mkdtemp(prefix=f"livebytes-triton-{mode}-"))
    triton_dir, fla_dir = root / "triton", root / "fla-configs"
    triton_dir.mkdir()
    installed = autotune.install(json.loads(path.read_text()), triton_dir, fla_dir) if mode == "warm" else set()
    os.environ.update(autotune.environment(mode, triton_dir, fla_dir))
    return RunContext(mode="", alloc_conf="", triton_cache=mode, triton_dir=triton_dir, installed=installed)


def write_capture(ctx: RunContext, out: Path) -> Path:
    import gc

    from triton.runtime.autotuner import Autotuner
    tuners = [(getattr(o, "kernel_name", None) or o.base_fn.__name__, dict(o.cache))
              for o in gc.get_objects() if isinstance(o, Autotuner)]
    env = environment()
    versions = {"gpu": env["device"]["name"], "fla": env["fla"], "triton": env["triton"], "torch": env["torch"]}
    path = out / "autotune" / f"{autotune.cache_file_name(versions['gpu'], versions['fla'], versions['triton'])[:-5]}.{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as fh:     # replaced whole after every shape: a process killed later keeps this one
        fh.write(json.dumps(autotune.capture(ctx.triton_dir, tuners, versions), indent=1))
    os.replace(tmp, path)
    return path


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl")
    ap.add_argument("--shapes", help='"MBS,SEQ,HEADS[,DIM][,hv=HV][,dv=DV];..."')
    ap.add_argument("--out", required=True)
    ap.add_argument("--contract", default="report", choices=("report", "plain"))
    ap.add_argument("--no-recompute", action="store_true")
    ap.add_argument("--forward-only", action="store_true")
    ap.add_argument("--history", action="store_true", help="save the live blocks at the peak of the first shape")
    ap.add_argument("--mode", default="shared-process")
    ap.add_argument("--probe-device", action="store_true")
    ap.add_argument("--alloc-conf", default=DEFAULT_ALLOC_CONF, help="PYTORCH_CUDA_ALLOC_CONF, set before torch is imported")
    ap.add_argument("--triton-cache", default="auto", choices=("cold", "warm", "auto"),
                    help="cold: autotune in this process (fresh TRITON_CACHE_DIR); warm: load the committed "
                         "autotune file; auto: warm when a file exists for this GPU, fla and Triton")
    ap.add_argument("--autotune-file", help="an autotune file instead of the committed one")
    ap.add_argument("--autotune-capture", action="store_true",
                    help="after a cold run, write OUT/autotune/<key>.<pid>.json (merge with python -m livebytes.validate.autotune)")
    return ap.parse_args(argv)


def run_shapes(args, out: Path) -> int:
    shapes = parse_shape_list(args.shapes or "")
    from livebytes.estimator.registry import spec
    kind = runner_kind(args.impl)
    forward_only = args.forward_only or spec(args.impl).phase == "fwd"
    h = Harness(args.impl, args.contract if kind == "fla" else "plain", not args.no_recompute, forward_only)
    if kind in ("fla", "gdn"):   # Triton kernels: the autotune cache state is part of the record
        ctx = prepare_triton(args.triton_cache, out, args.autotune_file)
    else:
        ctx = RunContext(mode="", alloc_conf="", triton_cache="n/a")
    if args.autotune_capture and ctx.triton_cache != "cold":
        raise LivebytesError("--autotune-capture needs an FLA implementation and --triton-cache cold")
    ctx.mode, ctx.alloc_conf = args.mode, args.alloc_conf
    _torch()._C._cuda_attach_out_of_memory_observer(ctx.observer)
    env = environment()
    for i, shape in enumerate(shapes):
        rec = measure_shape(h, shape, env, ctx, out if (args.history and i == 0) else None)
        path = write_record(out, rec)
        ctx.earlier_shapes.append(shape.as_dict())
        status = f"OOM at {rec['oom_step']}" if rec["oom"] else f"{rec['peak_bytes']} B"
        print(f"[{args.impl} {h.contract}] {shape.label()}: {status} ({rec['seconds']['total']} s) -> {path.name}",
              flush=True)
        if args.autotune_capture:   # after every shape: a deadline that kills the process loses no tuning
            print(f"autotune configs: {write_capture(ctx, out)}", flush=True)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        apply_alloc_conf(args.alloc_conf)
        if args.probe_device:
            if not cuda_available():
                raise LivebytesError("no CUDA device")
            print(json.dumps(probe_device(out / "device.json")))
            return 0
        reason = decline_reason(args.impl)
        if reason:
            print(f"{args.impl}: declined: {reason}", file=sys.stderr)
            return 3
        return run_shapes(args, out)
    except LivebytesError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

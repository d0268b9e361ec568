"""Run the real kernels under the report's protocol and write one validation record per shape.

Protocol (the KDA memory report's, section 'Sources and measurement configuration'):
- packed equal-length sequences with boundaries (cu_seqlens), identically seeded inputs;
- bounded warmup at a small shape of the same (H, D) (compilation, autotuning), then one
  target-shape warmup step;
- earlier outputs and gradients released before each measured step;
- the median of 3 steady-state forward+backward peaks of torch.cuda.max_memory_allocated (inputs,
  dO, output, gradients and intermediates included), PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False;
- finite checks on the output and every gradient, outside the measured interval;
- peak reserved recorded beside it; an out-of-memory is a result, recorded as such.

Usage (one process; shapes of one (H, D) share compilation and autotuning):
    python -m livebytes.validate.runner --impl fla-kda@0.6.0 --shapes "1,8K,96,128;2,8K,96,128" --out DIR
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
import time
from pathlib import Path

from livebytes.estimator.shapes import Shape, parse_shape_list

PROTOCOL = {
    "name": "kda-report-v3",
    "empty_cache_after_warmup": "torch.cuda.empty_cache() after the target-shape warmup step",
    "inputs": "seeded on the CPU (torch.Generator), copied to the GPU once per tensor",
    "warmup": "2 fwd+bwd steps at MBS 1 x 1024 tokens of the same (H, D), then 1 step at the target shape",
    "measured_steps": 3,
    "statistic": "median of torch.cuda.max_memory_allocated after reset_peak_memory_stats, per step",
    "released_before_each_step": "output, dO-derived tensors and every .grad",
    "allocator": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False",
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
    except Exception:
        return False


def environment() -> dict:
    torch = _torch()
    props = torch.cuda.get_device_properties(0)
    env = {
        "device": {"name": props.name, "total_memory": props.total_memory, "sm_count": props.multi_processor_count,
                   "capability": f"sm{props.major}{props.minor}", "preset": _preset(props.name)},
        "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
    }
    try:
        import subprocess
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        env["driver"] = "unknown"
    for mod, key in (("triton", "triton"), ("fla", "fla"), ("cudnn", "cudnn_frontend")):
        try:
            env[key] = __import__(mod).__version__
        except Exception:
            env[key] = None
    return env


def _preset(name: str) -> str:
    for p in ("H200", "H100", "B200", "B300"):
        if p in name.upper():
            return p
    return name


# ---------------------------------------------------------------- implementations

def _to_gpu(tensors: dict, grad: bool) -> dict:
    """Each input becomes exactly one GPU allocation: built on the CPU, copied once, so the caching
    allocator's layout at the first step does not depend on temporaries of the input recipe."""
    out = {}
    for name, t in tensors.items():
        g = t.to("cuda")
        if name not in ("cu_seqlens", "dO"):
            g.requires_grad_(grad)
        out[name] = g
    return out


def seeded_inputs(shape: Shape, contract: str, grad: bool, batch_dim: bool, cu_dtype: str, seed: int = 0) -> dict:
    """Seeded inputs, allocated on the GPU in this order: q, k, v, g, beta, (A_log, dt_bias), cu_seqlens, dO.

    ``report``: raw bf16 q/k/v/gate/beta and zero fp32 A_log, dt_bias (the KDA report's configuration);
    ``plain``: L2-normalised bf16 q/k, bf16 v, fp32 log-space gate, fp32 post-sigmoid beta."""
    torch = _torch()
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(seed)
    T, H, D = shape.tokens, shape.heads, shape.dim
    lead = (1,) if batch_dim else ()          # FLA's varlen layout [1, T, H, D]; cuDNN's THD [T, H, D]
    bf16 = torch.bfloat16

    def randn(*size):
        return torch.randn(*lead, *size, generator=gen)

    x = {}
    if contract == "report":
        x["q"], x["k"], x["v"] = (randn(T, H, D).to(bf16) for _ in range(3))
        x["g"] = randn(T, H, D).to(bf16)                         # raw gate
        x["beta"] = randn(T, H).to(bf16)                         # raw beta
        x["A_log"] = torch.zeros(H)
        x["dt_bias"] = torch.zeros(H * D)
    else:
        x["q"] = F.normalize(randn(T, H, D), dim=-1).to(bf16)
        x["k"] = F.normalize(randn(T, H, D), dim=-1).to(bf16)
        x["v"] = randn(T, H, D).to(bf16)
        x["g"] = F.logsigmoid(randn(T, H, D)).clamp_min(-5.0)   # log-space fp32
        x["beta"] = torch.rand(*lead, T, H, generator=gen)       # post-sigmoid fp32
    x["cu_seqlens"] = torch.arange(0, shape.mbs + 1, dtype=getattr(torch, cu_dtype)) * shape.seq
    if grad:
        x["dO"] = randn(T, H, D).to(bf16)
    return _to_gpu(x, grad)


def fla_inputs(shape: Shape, contract: str, grad: bool, seed: int = 0) -> dict:
    """FLA's varlen layout [1, T, H, D], int64 boundaries."""
    return seeded_inputs(shape, contract, grad, batch_dim=True, cu_dtype="int64", seed=seed)


def fla_forward(x: dict, contract: str, recompute: bool = True):
    from fla.ops.kda import chunk_kda
    kw = dict(cu_seqlens=x["cu_seqlens"], disable_recompute=not recompute)
    if contract == "report":
        kw.update(A_log=x["A_log"], dt_bias=x["dt_bias"], use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                  use_beta_sigmoid_in_kernel=True, safe_gate=True, lower_bound=-5.0)
    o, _ = chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], **kw)
    return o


def cudnn_inputs(shape: Shape, contract: str, grad: bool, seed: int = 0) -> dict:
    """cuDNN's THD layout [T, H, D], int32 boundaries (the Hopper engines take the plain contract)."""
    return seeded_inputs(shape, contract, grad, batch_dim=False, cu_dtype="int32", seed=seed)


def cudnn_forward(x: dict, plan: str):
    from cudnn.linear_attention import kimi_delta_attention
    o, _ = kimi_delta_attention(x["q"], x["k"], x["v"], x["g"], x["beta"], x["cu_seqlens"], plan_name=plan)
    return o


IMPLS = {
    # key: (inputs, forward, plan/contract handling)
    "fla-kda@0.6.0": "fla",
    "fla-kda-fwd@0.6.0": "fla",
    "cudnn-kda-hopper-cuda@1.32.0": "kda_hopper_cuda",
    "cudnn-kda-hopper@1.32.0": "kda_hopper",
    "cudnn-kda-frost@1.32.0": "kda_frost",
}


def decline_reason(impl: str) -> str | None:
    """Why this machine cannot run ``impl`` (None when it can)."""
    if not cuda_available():
        return "no CUDA device: the validator runs the real kernels and needs a GPU"
    torch = _torch()
    major, minor = torch.cuda.get_device_capability(0)
    sm = major * 10 + minor
    if IMPLS.get(impl) == "kda_frost" and not (100 <= sm <= 103 or sm == 107):
        return (f"kda_frost runs only on Blackwell (sm100-103, sm107: tcgen05/TMEM); this GPU is sm{sm} "
                f"({torch.cuda.get_device_name(0)}); FROST stays checked against the published table")
    if IMPLS.get(impl) in ("kda_hopper_cuda", "kda_hopper") and sm != 90:
        return f"{IMPLS[impl]} runs only on Hopper (sm90); this GPU is sm{sm}"
    if impl not in IMPLS:
        return f"no runner for {impl}"
    return None


class Harness:
    """Builds inputs and runs one step of one implementation/configuration."""

    def __init__(self, impl: str, contract: str, recompute: bool, forward_only: bool):
        self.impl, self.contract, self.recompute, self.forward_only = impl, contract, recompute, forward_only
        self.kind = IMPLS[impl]

    def inputs(self, shape: Shape) -> dict:
        grad = not self.forward_only
        if self.kind == "fla":
            return fla_inputs(shape, self.contract, grad)
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


def measure_shape(h: Harness, shape: Shape, env: dict, mode: str, history_dir: Path | None = None) -> dict:
    torch = _torch()
    t0 = time.time()
    record = {
        "impl": h.impl, "origin": "measured", "mode": mode,
        "options": {"contract": h.contract, "recompute": h.recompute} if h.kind == "fla" else {},
        "forward_only": h.forward_only, "shape": shape.as_dict(), "protocol": PROTOCOL,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **env,
    }
    if h.impl == "fla-kda-fwd@0.6.0":
        record["options"] = {"contract": h.contract}
    warm = Shape(1, 1024, shape.heads, shape.dim)
    x = h.inputs(warm)
    for _ in range(2):
        o = h.step(x)
        h.release(x)
        del o
    del x
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    # Small shapes do their target warmup (re-autotuning of T-keyed kernels) before taking the lock,
    # so parallel processes overlap it; large ones warm up under the lock, alone on the GPU.
    small = shape.tokens * shape.heads * shape.dim <= SMALL_ELEMENTS
    x = None
    if small:
        x = h.inputs(shape)
        o = h.step(x)                # target-shape warmup
        h.release(x)
        del o
        torch.cuda.synchronize()
    with gpu_lock():
        t_lock = time.time()
        try:
            if x is None:
                x = h.inputs(shape)
                o = h.step(x)        # target-shape warmup
                h.release(x)
                del o
            torch.cuda.synchronize()
            torch.cuda.empty_cache()   # v3: no first-call temporaries (autotune buffers) shape the measured layout
            peaks, reserved, baselines, requested = [], [], [], []
            for i in range(PROTOCOL["measured_steps"]):
                torch.cuda.synchronize()
                baselines.append(torch.cuda.memory_allocated())
                torch.cuda.reset_peak_memory_stats()
                if history_dir is not None and i == 0:
                    torch.cuda.memory._record_memory_history(max_entries=200000)
                o = h.step(x)
                torch.cuda.synchronize()
                peaks.append(torch.cuda.max_memory_allocated())
                reserved.append(torch.cuda.max_memory_reserved())
                # what the tensors asked for, before block rounding and unsplit cached blocks
                requested.append(torch.cuda.memory_stats().get("requested_bytes.all.peak"))
                if history_dir is not None and i == 0:
                    _dump_history(history_dir, h, shape)
                if i < PROTOCOL["measured_steps"] - 1:
                    h.release(x)
                    del o
            record["finite"] = h.finite(o, x)
            record.update(peaks_bytes=peaks, peak_bytes=int(statistics.median(peaks)), reserved_bytes=reserved,
                          baseline_bytes=baselines, requested_peak_bytes=requested, oom=False)
            del o
        except torch.cuda.OutOfMemoryError as err:
            record.update(oom=True, oom_message=str(err).splitlines()[0][:400],
                          peak_before_oom_bytes=torch.cuda.max_memory_allocated())
        finally:
            if x is not None:
                h.release(x)
            x = None
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        record["seconds_measured"] = round(time.time() - t_lock, 1)
    record["seconds_total"] = round(time.time() - t0, 1)
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


def append_record(path: Path, record: dict) -> None:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(json.dumps(record) + "\n")
        fcntl.flock(fh, fcntl.LOCK_UN)


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl")
    ap.add_argument("--shapes")
    ap.add_argument("--out", required=True)
    ap.add_argument("--contract", default="report", choices=("report", "plain"))
    ap.add_argument("--no-recompute", action="store_true")
    ap.add_argument("--forward-only", action="store_true")
    ap.add_argument("--history", action="store_true", help="save the live blocks at the peak of the first shape")
    ap.add_argument("--mode", default="shared-process")
    ap.add_argument("--probe-device", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.probe_device:
        if not cuda_available():
            print("no CUDA device", file=sys.stderr)
            return 1
        print(json.dumps(probe_device(out / "device.json")))
        return 0
    reason = decline_reason(args.impl)
    if reason:
        print(f"{args.impl}: declined: {reason}", file=sys.stderr)
        return 3
    contract = args.contract if IMPLS[args.impl] == "fla" else "plain"
    h = Harness(args.impl, contract, not args.no_recompute, args.forward_only or args.impl == "fla-kda-fwd@0.6.0"
                or args.impl == "cudnn-kda-hopper@1.32.0")
    env = environment()
    for i, shape in enumerate(parse_shape_list(args.shapes)):
        rec = measure_shape(h, shape, env, args.mode, out if (args.history and i == 0) else None)
        append_record(out / "records.jsonl", rec)
        status = "OOM" if rec["oom"] else f"{rec['peak_bytes']} B"
        print(f"[{args.impl} {args.contract}] {shape.label()}: {status} ({rec['seconds_total']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

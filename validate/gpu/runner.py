"""Run the real kernels under the report's protocol and write one validation record per shape.

Protocol v4 (the KDA memory report's, section 'Sources and measurement configuration'):
- packed equal-length sequences with boundaries (cu_seqlens), seeded inputs drawn on the device,
  one allocation per input (``validate/gpu/inputs.py``: the same allocator state as v3's CPU-drawn copies);
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
This module is the protocol and the record alone: the implementation's inputs and step are its harness's
(``validate/gpu/harnesses``, found by model key); the machine, the GPU lock and Triton's cache state are
``environment``, ``gpu_lock`` and ``triton_state``; the command line is ``runner_args``.

Usage (one process; shapes of one (H, D) share compilation and autotuning):
    python -m livebytes.validate.gpu.runner --impl fla-kda@0.6.0 --out DIR \
        --shapes "seq_len=8K,num_heads=96;seq_len=8K,num_heads=16,num_v_heads=32"
"""
from __future__ import annotations

import datetime as _dt
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import Shape, parse_shape_list

from . import oom
from .environment import _torch, apply_alloc_conf, cuda_available, environment, probe_device
from .gpu_lock import gpu_lock
from .harnesses import Harness, decline_reason, make
from ..check.history import dump_live_at_peak
from ..check.protocol import CURRENT, PROTOCOLS
from ..check.records import write_record
from .runner_args import parse_args
from .triton_state import prepare_triton, triton_state, write_capture
from livebytes.estimator.registry import spec

PROCESS_START = time.time()
PROTOCOL = {   # written into every record; the version's meaning for the replay lives in validate/check/protocol.py
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
    taken = spec(h.impl).options     # record the what-if options the model takes, as the model names them
    options = {k: v for k, v in (("contract", h.contract), ("recompute", h.recompute)) if k in taken}
    record = {"impl": h.impl, "origin": "measured", "mode": ctx.mode, "options": options,
              "forward_only": h.forward_only, "shape": shape.record_dict(), "protocol": PROTOCOL,
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "allocator_conf": ctx.alloc_conf, **env}
    if ctx.earlier_shapes:
        record["earlier_shapes_in_process"] = list(ctx.earlier_shapes)
    return record


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
            dump_live_at_peak(history[0], h.impl, history[1])
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


def run_shapes(args, out: Path) -> int:
    shapes = parse_shape_list(args.shapes or "")
    forward_only = args.forward_only or spec(args.impl).phase == "fwd"
    h = make(args.impl, args.contract, not args.no_recompute, forward_only)
    if h.triton:   # Triton kernels: the autotune cache state is part of the record
        tc = prepare_triton(args.triton_cache, out, args.autotune_file)
        ctx = RunContext(mode="", alloc_conf="", triton_cache=tc.requested, triton_dir=tc.triton_dir, installed=tc.installed)
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
        ctx.earlier_shapes.append(shape.record_dict())
        status = f"OOM at {rec['oom_step']}" if rec["oom"] else f"{rec['peak_bytes']} B"
        print(f"[{args.impl} {h.contract}] {shape.label()}: {status} ({rec['seconds']['total']} s) -> {path.name}",
              flush=True)
        if args.autotune_capture:   # after every shape: a deadline that kills the process loses no tuning
            print(f"autotune configs: {write_capture(ctx, out)}", flush=True)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0])
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

"""Stack frames of every Triton kernel a whole model's training step launches, compiled for the GPU's architecture on
the CPU: the driver's stack limit of the step, derived (issue 48 point 1).

The step is the tracer's (``tracer.step.trace_training``: the model built from its HF config, the batch, forward,
backward, the optimizer, on meta tensors, the GPU described to torch and Triton by ``tracer.target``), so the kernels,
their arguments and the autotune candidates are exactly those the traced step launches. Where the tracer only records a
launch, this probe also compiles it: each launch's kernel, and for an autotuned kernel each candidate left by Triton's
``prune_configs``, through ``JITFunction.run(..., warmup=True)`` (compile, never load or launch) with every tensor
argument replaced by a stand-in of its dtype whose address is the tensor's offset into its storage (an allocation
starts 512-aligned, so a view's alignment specialisation is the GPU's), every integer the traced value (so an int64
specialisation or a divisibility by 16 is the GPU's at that length). ``cuobjdump -res-usage`` on each cubin gives its
STACK (``cpu_frames.candidates``); a candidate whose shared memory exceeds the device's is not counted (the GPU refuses
it before it loads), nor one Triton or ptxas refuses.

    python validate/gpu/probes/model_frames.py SPEC.json --out DIR [--workers W] [--legacy-ptxas]
      SPEC: the tracer's spec (``python -m livebytes.tracer``) of one run and one shape: {"device": "H200", "config":
      {...}, "precision", "optimizer", "checkpoint", "packed", "layers", "shapes": [[mbs, seq]], "tag"}

Writes DIR/<tag>.jsonl (one line per compiled candidate, as ``cpu_frames``) and prints the summary line: each kernel's
largest counted frame, the largest, the Triton and ptxas that compiled them, seconds. cuBLAS, cuDNN and PyTorch's own
kernels are not compiled here: their frames are not in this figure.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
import warnings
from pathlib import Path
import multiprocessing

HERE = Path(__file__).parent


class Stand:
    """A tensor argument as Triton's binder reads it: its dtype and an address whose alignment is the GPU's (the
    storage's start 512-aligned, plus the view's offset)."""

    def __init__(self, tensor):
        self.dtype = tensor.dtype
        self.shape = tuple(tensor.shape)
        self._offset = tensor.storage_offset() * tensor.element_size()

    def data_ptr(self) -> int:
        return 512 + self._offset

    def stride(self):
        return (1,) * len(self.shape)


def _stand(value):
    return Stand(value) if hasattr(value, "untyped_storage") else value


_ORIGINAL_RUN = None     # JITFunction.run before the patch: what compiles


def compile_into(log: list, fn, args, kwargs, grid, config) -> None:
    """Compile one launch (one autotune candidate: ``config``) without loading it; the cubin, or what refused it,
    appended to ``log``."""
    from triton.compiler.errors import CompileTimeAssertionFailure  # deferred: triton is not in the core install (model/validate extras)
    from triton.runtime.errors import OutOfResources, PTXASError  # deferred: triton is not in the core install (model/validate extras)
    try:
        kernel = _ORIGINAL_RUN(fn, *args, grid=grid, warmup=True, **kwargs)
        if hasattr(kernel, "result"):
            kernel = kernel.result()
    except (OutOfResources, CompileTimeAssertionFailure, PTXASError) as err:
        log.append({"kernel": fn.fn.__name__, "config": config, "refused": f"{type(err).__name__}: {str(err)[:200]}"})
        return
    log.append({"kernel": kernel.name, "hash": kernel.hash, "config": config, "shared": kernel.metadata.shared,
                "num_warps": kernel.metadata.num_warps, "num_stages": kernel.metadata.num_stages, "cubin": kernel})


def install_compiling(log: list, jobs: list | None = None) -> None:
    """Patch Triton's launch paths before the tracer does (it then keeps them): every launch is recorded for the trace
    as ``tracer.launches`` records it and compiled; an autotuned launch compiles each pruned candidate in turn. With
    ``jobs`` a list, each compile is kept there instead (``compile_jobs`` runs them side by side after the trace: the
    step's control flow never reads a compiled kernel)."""
    global _ORIGINAL_RUN
    from triton.runtime.autotuner import Autotuner  # deferred: triton is not in the core install (model/validate extras)
    from triton.runtime.jit import JITFunction  # deferred: triton is not in the core install (model/validate extras)

    from livebytes.tracer import launches  # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    _ORIGINAL_RUN = JITFunction.run
    state = {"config": None}

    def compile_one(fn, args, kwargs, grid):
        launch = (fn, tuple(map(_stand, args)), {k: _stand(v) for k, v in kwargs.items()}, grid, state["config"])
        if jobs is None:
            compile_into(log, *launch)
        else:
            jobs.append(launch)

    def jit_run(self, *args, grid=None, warmup=False, **kwargs):
        if not getattr(self, "_livebytes_under_tuner", False):
            launches._record(launches.Launch(self.fn.__name__, None, 1, (), launches._tensors(args, kwargs)))
        compile_one(self, args, kwargs, grid)
        return None

    def tuner_run(self, *args, **kwargs):
        kwargs.pop("warmup", None)
        grid = kwargs.pop("grid", None)
        configs = len(self.configs)
        key = launches._autotune_key(self, args, kwargs) if configs > 1 else None
        clones = tuple(self.reset_to_zero) + tuple(self.restore_value)
        launches._record(launches.Launch(self.base_fn.__name__, key, configs, clones, launches._tensors(args, kwargs)))
        self.nargs = dict(zip(self.arg_names, args))
        inner = self.fn
        while not isinstance(inner, JITFunction):
            inner = inner.fn
        inner._livebytes_under_tuner = True
        try:
            for config in (self.prune_configs(kwargs) if configs > 1 else self.configs):
                state["config"] = {"kwargs": dict(config.kwargs), "num_warps": config.num_warps,
                                   "num_stages": config.num_stages}
                self.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())
        finally:
            inner._livebytes_under_tuner = False
            state["config"] = None
            self.nargs = None
        return None

    jit_run._livebytes = True
    JITFunction.run = jit_run
    Autotuner.run = tuner_run


_JOBS: list = []        # the launches a forked worker compiles (inherited through the fork, never pickled)


def _compile_job(index: int) -> tuple[int, list[dict]]:
    """One kept launch compiled in a worker: its log entry read out (``cpu_frames.candidates``: cuobjdump's figures);
    the cubin object stays in the worker."""
    import cpu_frames  # deferred: sibling script, importable once the probe's process has put its folder on sys.path
    import triton  # deferred: triton is not in the core install (model/validate extras)
    log: list = []
    compile_into(log, *_JOBS[index])
    tool = str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")
    return index, cpu_frames.candidates(log, tool)


def compile_jobs(jobs: list, workers: int) -> list[dict]:
    """Every kept launch compiled, ``workers`` at a time (forked processes: Triton's cache is shared on disk), one row
    per distinct compiled kernel in launch order (the first of each hash, as ``cpu_frames.candidates`` keeps) and one
    per refusal."""
    _JOBS[:] = jobs
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            done = dict(pool.imap_unordered(_compile_job, range(len(jobs)), chunksize=1))
    finally:
        _JOBS.clear()
    seen, rows = set(), []
    for index in range(len(jobs)):
        for row in done[index]:
            if "hash" in row:
                if row["hash"] in seen:
                    continue
                seen.add(row["hash"])
            rows.append(row)
    return rows


def derive(spec: dict, out: Path, workers: int = 1) -> dict:
    """Trace ``spec``'s step (one shape), compiling every launch (``workers`` side by side after the trace where more
    than one); the summary line."""
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.estimator.devices import get_device
    device = get_device(spec["device"])
    warnings.filterwarnings("ignore")
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.tracer.target import install, meta_autocast_is_cuda, meta_index_is_device_0, meta_runs_gpu_packages
    install(device)
    meta_autocast_is_cuda()        # as the tracer's own process: peft's expert LoRA asks autocast of W.device.type
    log: list = []
    jobs: list | None = [] if workers > 1 else None
    install_compiling(log, jobs)
    # deferred: fla is not in the core install (model/validate extras)
    import fla  # noqa: F401  (registers its model types with transformers)
    import triton  # deferred: triton is not in the core install (model/validate extras)
    meta_index_is_device_0()
    meta_runs_gpu_packages()
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.tracer.step import trace_training
    sys.path.insert(0, str(HERE))
    import cpu_frames  # deferred: sibling script, importable once the probe's process has put its folder on sys.path
    t0 = time.time()
    (mbs, seq), = spec["shapes"]
    rec = {"tag": spec["tag"]}
    try:
        trace_training({**spec, "steps": 1}, mbs, seq)
    except Exception as err:        # the kernels compiled before a raise are still listed, the line says partial
        rec["error"] = f"{type(err).__name__}: {str(err)[:400]}"
        traceback.print_exc()          # where the trace stopped, for the deriver's log
    if jobs is None:
        tool = str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")
        rows = cpu_frames.candidates(log, tool)
    else:
        rows = compile_jobs(jobs, workers)
    (out / f"{spec['tag']}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    frames: dict = {}
    for r in rows:
        if r["counted"]:
            frames[r["kernel"]] = max(frames.get(r["kernel"], 0), r["STACK"])
    rec.update(frames=dict(sorted(frames.items())), largest_frame_bytes=max(frames.values(), default=0),
               compiled=sum(1 for r in rows if "hash" in r), counted=sum(1 for r in rows if r["counted"]),
               seconds=round(time.time() - t0, 1), target=f"cuda {device.arch}",
               triton=triton.__version__, fla=fla.__version__, ptxas=cpu_frames.ptxas_used())
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=1, help="compile this many launches side by side (after the trace)")
    ap.add_argument("--legacy-ptxas", action="store_true", help="compile sm90 with the ptxas the Triton wheel bundles "
                    "(Triton >= 3.9 picks ptxas-blackwell otherwise; the GPU runs under 3.9.0 used the bundled one)")
    args = ap.parse_args(argv)
    if args.legacy_ptxas:
        sys.path.insert(0, str(HERE))
        from cpu_frames import use_legacy_ptxas      # deferred: a probe helper beside this file, on sys.path above
        use_legacy_ptxas()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rec = derive(json.loads(Path(args.spec).read_text()), out, args.workers)
    print(json.dumps(rec), flush=True)
    return 0 if "error" not in rec else 1


if __name__ == "__main__":
    raise SystemExit(main())

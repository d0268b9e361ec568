"""Stack frames of fla-core's Triton kernels for the H200 without a GPU: every autotune candidate compiled for sm90 on
the CPU (Triton's own compiler and the ptxas its wheel ships), then ``cuobjdump -res-usage`` on each cubin.

A case runs in a process of its own, as on the GPU (autotune caches live in the process). Before fla is imported, a
fake active Triton driver reports an H200 (``GPUTarget("cuda", 90, 32)``, 232,448 B of shared memory per block, 132
SMs: ``estimator.devices``' preset, through ``tracer.target``'s stand-in) and ``torch.cuda`` answers "NVIDIA H200",
capability 9.0, so fla's import-time choices (config lists on Hopper) are the GPU's. The real fla entry points then
run on small CPU tensors, called through ``boundary_probe.step`` exactly as the GPU probes call them:
``JITFunction.run`` compiles and never launches (``warmup``), ``Autotuner._bench`` compiles each candidate left by
``prune_configs`` instead of timing it (the first that compiles is kept as "best"), and a candidate whose shared
memory exceeds the device's is not counted (on the GPU ``_init_handles`` refuses it with ``OutOfResources`` before it
loads); one ptxas or Triton refuses is not counted either, as the autotuner drops it.
Kernel outputs are never written (garbage values): only fla's Python control flow on shapes and ``cu_seqlens`` runs.

    python validate/gpu/probes/cpu_frames.py --cases 'fla-report:64:16:16;fla-gdn-fwd:128:16:32' --out DIR [--jobs 2]
      CASES: ';'-separated impl:dim:heads:v_heads[:hidden], impl fla-report, fla-plain or fla-gdn, -fwd for forward
      only, or a layer, fla-kda-layer or fla-gdn-layer (one layer, conv 4, hidden default 2048: the layer's
      projections are cuBLAS's, not Triton's; its convolutions, norms and chunk kernel are compiled)
    python validate/gpu/probes/cpu_frames.py --compare DATA.json --out DIR   # CPU max frames against the GPU's (cold)
    --legacy-ptxas: Triton >= 3.9 compiles sm90 with its bundled legacy ptxas (as the H200 runs did), not ptxas-blackwell

Writes DIR/<tag>.jsonl (one line per compiled candidate: kernel, config, hash, shared, cuobjdump's figures, counted)
and DIR/summary.jsonl (per case: {kernel: largest STACK over the counted candidates}, the data file's case shape).
Needs triton and fla-core (the ``validate`` extra), no GPU and no CUDA toolkit. Warm frames (the tuned configs) are
not derived: which candidate wins is a GPU timing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from importlib.util import find_spec

from livebytes.estimator.devices import get_device
from livebytes.lifetimes.traced.families import ROWS

HERE = Path(__file__).parent
DEVICE = get_device("H200")             # the GPU whose frames are derived (estimator/data/devices.json's row)
SM90_SHARED = DEVICE.shared_memory_per_block_optin      # cudaDevAttrMaxSharedMemoryPerBlockOptin: 232,448 B
LAYERS = {row.probe.impl: row.probe.harness for row in ROWS if row.probe is not None}   # impl -> harness key (the rows')
FAMILIES = {"fla-report": "fla-kda:report", "fla-plain": "fla-kda:plain", "fla-gdn": "fla-gdn:-"} \
    | {impl: f"{impl}:-" for impl in LAYERS}


# ---- an H200 that is not there ----------------------------------------------------------------------------------

def fake_h200() -> None:
    """Make Triton's active driver and ``torch.cuda``'s device queries describe one H200, every fact from its preset
    (``estimator.devices``: sm90, 232,448 B of shared memory per block, 132 SMs) through the tracer's stand-in
    (``tracer.target``), tensors on the CPU; call before importing fla."""
    from triton.runtime import driver  # deferred: triton is not in the core install (model/validate extras)

    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.tracer.target import describe_torch_cuda, target_driver
    driver.set_active(target_driver(DEVICE, torch_device="cpu", who="cpu_frames compiles only"))
    describe_torch_cuda(DEVICE)


def cpu_tensors_on_device_0() -> None:
    """fla picks block sizes by ``check_shared_mem(arch, k.device.index)``; a CPU tensor's index is None, which would
    fail the lookup (so: not Hopper) where a GPU tensor's 0 passes. Device None reads as device 0."""
    import fla.utils.hardware as hardware  # deferred: fla is not in the core install (model/validate extras)

    class AnyIndex(list):
        def __getitem__(self, i):
            return list.__getitem__(self, 0 if i is None else i)
    every_device = hardware.get_all_max_shared_mem
    hardware.get_all_max_shared_mem = lambda: AnyIndex(every_device())
    hardware.check_shared_mem.cache_clear()
    if not hardware.check_shared_mem("hopper", None):
        raise SystemExit("error: fla does not see the fake H200's shared memory")


def compile_only(log: list) -> None:
    """Every launch compiles and returns (never loads); every autotune candidate compiles in turn, logged with its
    config; a kernel whose shared memory the device could not give raises OutOfResources as ``_init_handles`` would."""
    from triton.compiler.errors import CompileTimeAssertionFailure  # deferred: triton is not in the core install (model/validate extras)
    from triton.runtime.autotuner import Autotuner  # deferred: triton is not in the core install (model/validate extras)
    from triton.runtime.errors import OutOfResources, PTXASError  # deferred: triton is not in the core install (model/validate extras)
    from triton.runtime.jit import JITFunction  # deferred: triton is not in the core install (model/validate extras)
    original_run = JITFunction.run
    state = {"config": None}

    def run(self, *args, grid, warmup, **kwargs):
        kernel = original_run(self, *args, grid=grid, warmup=True, **kwargs)
        if hasattr(kernel, "result"):
            kernel = kernel.result()
        shared = kernel.metadata.shared
        log.append({"kernel": kernel.name, "hash": kernel.hash, "config": state["config"], "shared": shared,
                    "num_warps": kernel.metadata.num_warps, "num_stages": kernel.metadata.num_stages, "cubin": kernel})
        if shared > SM90_SHARED:
            raise OutOfResources(shared, SM90_SHARED, "shared memory")
        return kernel

    def bench(self, *args, config, **meta):
        state["config"] = {"kwargs": dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}
        try:
            self.fn.run(*args, **meta, **config.all_kwargs())
            return [float(len(log)), 0.0, 0.0]      # the first candidate that compiles "wins"
        except (OutOfResources, CompileTimeAssertionFailure, PTXASError) as err:
            log.append({"kernel": getattr(self.base_fn, "__name__", "?"), "config": state["config"],
                        "refused": f"{type(err).__name__}: {str(err)[:200]}"})
            return [float("inf")] * 3
        finally:
            state["config"] = None

    JITFunction.run = run
    Autotuner._bench = bench


# ---- one case ---------------------------------------------------------------------------------------------------

def cpu_inputs(impl: str, tokens: int, heads: int, dim: int, v_heads: int, grad: bool) -> dict:
    """``boundary_probe.make_inputs``'s tensors (names, shapes, dtypes; one sequence in int64 cu_seqlens) on the CPU,
    values unset: q, k over ``heads``, the rest over ``v_heads``."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    bf16, fp32 = torch.bfloat16, torch.float32

    def t(h, *tail, dtype=bf16):
        return torch.zeros(1, tokens, h, *tail, dtype=dtype)
    if impl == "fla-report":
        x = {"q": t(heads, dim), "k": t(heads, dim), "v": t(v_heads, dim), "g": t(v_heads, dim), "beta": t(v_heads),
             "A_log": torch.zeros(v_heads), "dt_bias": torch.zeros(v_heads * dim)}          # [1, T, H(V), D] bf16
    elif impl == "fla-gdn":
        x = {"q": t(heads, dim), "k": t(heads, dim), "v": t(v_heads, dim), "g": t(v_heads, dtype=fp32), "beta": t(v_heads)}
    elif impl == "fla-plain" and v_heads == heads:
        x = {"q": t(heads, dim), "k": t(heads, dim), "v": t(heads, dim), "g": t(heads, dim, dtype=fp32),
             "beta": t(heads, dtype=fp32)}                                                  # [1, T, H, D]
    else:
        raise SystemExit(f"error: no inputs for {impl} with v_heads {v_heads} != heads {heads}")
    x["cu_seqlens"] = torch.tensor([0, tokens], dtype=torch.int64)                         # [2] int64
    if grad:
        x["dO"] = t(v_heads, dim)                                                           # [1, T, HV, D] bf16
        for name in ("q", "k", "v", "g", "beta", "A_log", "dt_bias"):
            if name in x:
                x[name].requires_grad_(True)
    return x


def layer_step(case: dict) -> None:
    """One layer's training step on the CPU through its GPU harness (``validate/gpu/harnesses/fla_layer.py``: the same
    modules, dtypes and call), one sequence of ``tokens``; the layer count and checkpointing change no kernel."""
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.estimator.shapes import Shape
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.validate.gpu.harnesses import harness_for
    key = LAYERS[case["impl"]]
    h = harness_for(key)(key, "plain", False, False)
    shape = Shape(1, case["tokens"], case["heads"], case["dim"], case["v_heads"], hidden=case["hidden"], layers=1,
                  conv_size=4)
    h.step(h.inputs(shape, device="cpu"))


def res_usage(kernel, tool: str, folder: Path) -> dict:
    """cuobjdump -res-usage of a compiled kernel's cubin (``cubin_usage.usage``)."""
    sys.path.insert(0, str(HERE))
    from cubin_usage import usage  # deferred: sibling script, importable once the probe's process has put its folder on sys.path
    path = folder / f"{kernel.hash}.cubin"
    path.write_bytes(kernel.asm["cubin"])
    return usage(path, tool)


def cubin_fields(kernel) -> dict:
    """The cubin's size and the sections the driver places in device memory (``module_load.image_fields``): what a
    per-module memory rule (issue 33) sums over the candidates a cold process loads."""
    sys.path.insert(0, str(HERE))
    from module_load import image_fields  # deferred: sibling script, importable once the probe's process has put its folder on sys.path
    return image_fields(kernel.asm["cubin"])


def constexprs(kernel) -> dict:
    fn = kernel.src.fn
    names = {}
    for path, value in kernel.src.constants.items():
        i = path[0] if isinstance(path, tuple) else path
        name = fn.arg_names[i] if isinstance(i, int) and i < len(fn.arg_names) else str(path)
        names[name] = value if isinstance(value, (int, float, bool, str, type(None))) else str(value)
    return names


def candidates(log: list, tool: str) -> list[dict]:
    """One line per compiled kernel (first log entry of each hash: the autotuner's, with its config) and per refusal."""
    seen, out = set(), []
    with tempfile.TemporaryDirectory(prefix="cpuf_cubin_") as tmp:
        for e in log:
            if "refused" in e:
                out.append({**e, "counted": False})
                continue
            if e["hash"] in seen:
                continue
            seen.add(e["hash"])
            kernel = e.pop("cubin")
            counted = e["shared"] <= SM90_SHARED
            out.append({**e, "constexprs": constexprs(kernel), "counted": counted,
                        **({} if counted else {"refused": f"OutOfResources: shared {e['shared']} > {SM90_SHARED}"}),
                        **res_usage(kernel, tool, Path(tmp)), **cubin_fields(kernel)})
    return out


def worker(case: dict, out: Path) -> int:
    """Compile every kernel one call of the case launches; write its candidates and its summary line."""
    fake_h200()
    log: list = []
    compile_only(log)
    sys.path.insert(0, str(HERE))
    import boundary_probe as bp  # deferred: sibling script, importable once the probe's process has put its folder on sys.path
    import triton  # deferred: triton is not in the core install (model/validate extras)
    cpu_tensors_on_device_0()
    t0 = time.time()
    rec = {"case": case}
    try:
        if case["impl"] in LAYERS:
            layer_step(case)
        else:
            bp.step(case["impl"], cpu_inputs(case["impl"], case["tokens"], case["heads"], case["dim"], case["v_heads"],
                                             not case["forward_only"]), case["forward_only"])
    except Exception as err:      # what the library refused is a result; the kernels compiled so far still count
        rec["error"] = f"{type(err).__name__}: {str(err)[:400]}"
    tool = str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")
    rows = candidates(log, tool)
    (out / f"{case['tag']}.jsonl").write_text("".join(json.dumps({"case": case["key"], **r}) + "\n" for r in rows))
    frames: dict = {}
    for r in rows:
        if r["counted"]:
            frames[r["kernel"]] = max(frames.get(r["kernel"], 0), r["STACK"])
    loaded = [r for r in rows if r["counted"]]         # the candidates a cold GPU process loads (issue 33)
    rec["modules"] = {"cubins": len(loaded), "cubin_bytes": sum(r["image_bytes"] for r in loaded),
                      "device_section_bytes": sum(r["device_section_bytes"] for r in loaded)}
    rec.update(key=case["key"], frames=dict(sorted(frames.items())), compiled=sum(1 for r in rows if "hash" in r),
               counted=sum(1 for r in rows if r["counted"]), seconds=round(time.time() - t0, 1),
               target="cuda sm90 (GPUTarget('cuda', 90, 32))", triton=triton.__version__, fla=__import__("fla").__version__,
               torch=__import__("torch").__version__, python=sys.version.split()[0], ptxas=ptxas_used())
    print(json.dumps(rec), flush=True)
    return 0 if "error" not in rec else 1


def ptxas_used() -> str:
    """The ptxas that compiled sm90 and its release: Triton 3.9.0 picks ``ptxas-blackwell`` for arch >= 90 unless
    TRITON_PTXAS_BLACKWELL_PATH names another (the H200 runs 20-22 named the bundled legacy ``ptxas``)."""
    from triton.backends.nvidia.compiler import get_ptxas  # deferred: triton is not in the core install (model/validate extras)
    path = get_ptxas(90).path
    release = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return f"{Path(path).name} ({release[-2] if len(release) > 1 else '?'})"


# ---- cases, comparison -----------------------------------------------------------------------------------------

def parse_cases(text: str, tokens: int) -> list[dict]:
    cases = []
    for item in filter(None, (c.strip() for c in text.split(";"))):
        impl, dim, heads, v_heads, *hidden = item.split(":")
        base, forward_only = impl.removesuffix("-fwd"), impl.endswith("-fwd")
        if base not in FAMILIES or (base in LAYERS and forward_only) or (hidden and base not in LAYERS):
            raise SystemExit(f"error: unknown case {item!r} (impl one of {', '.join(FAMILIES)}, a kernel optionally "
                             "-fwd; :hidden for a layer only)")
        family, contract = FAMILIES[base].split(":")
        key = f"{family}{'-fwd' if forward_only else ''}:{contract} D{dim} H{heads} HV{v_heads}"
        layer = {"hidden": int(hidden[0]) if hidden else 2048} if base in LAYERS else {}
        cases.append({"impl": base, "forward_only": forward_only, "dim": int(dim), "heads": int(heads),
                      "v_heads": int(v_heads), "tokens": tokens, "key": key, **layer,
                      "tag": f"{impl}_D{dim}_H{heads}_HV{v_heads}_T{tokens}"})
    return cases


def run_cases(cases: list[dict], out: Path, jobs: int, cache_dir: str) -> int:
    """Each case in its own process, ``jobs`` at a time, over one Triton cache (compiled kernels only: fla's autotune
    results are not cached, FLA_CACHE_RESULTS=0, so every process tunes afresh, as a cold GPU process did)."""
    env = {**os.environ, "TRITON_CACHE_DIR": cache_dir, "FLA_CACHE_RESULTS": "0", "CUDA_VISIBLE_DEVICES": ""}
    pending, running, failed = list(cases), [], 0
    with open(out / "summary.jsonl", "a") as summary:
        while pending or running:
            while pending and len(running) < jobs:
                case = pending.pop(0)
                err = open(out / f"{case['tag']}.stderr", "w")
                running.append(subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(case), "--out", str(out)],
                                                env=env, stdout=subprocess.PIPE, stderr=err, text=True))
            proc = running.pop(0)
            line = proc.communicate()[0].strip().splitlines()
            failed += proc.returncode != 0
            if line:
                summary.write(line[-1] + "\n")
                summary.flush()
                rec = json.loads(line[-1])
                print(json.dumps({k: rec.get(k) for k in ("key", "error", "compiled", "counted", "seconds")}), flush=True)
    return 1 if failed else 0


def compare(data_file: str, out: Path) -> int:
    """Every cold case of the data file that a summary line covers: per kernel the GPU's frame, the CPU's, and the
    limits each implies (largest frame rounded up to 16 B; the data file's ``limits`` where it has no kernels)."""
    data = json.loads(Path(data_file).read_text())
    cpu = {}
    for line in (out / "summary.jsonl").read_text().splitlines():
        rec = json.loads(line)
        cpu.setdefault(rec["key"], {}).update(rec["frames"])
    rows, differ = [], 0
    for key in sorted(cpu):
        gpu = data["frames"]["cold"].get(key)
        limit = data.get("limits", {}).get("cold", {}).get(key, {}).get("limit_bytes")
        for kernel in sorted(set(cpu[key]) | set(gpu or {})):
            g, c = (gpu or {}).get(kernel), cpu[key].get(kernel)
            differ += gpu is not None and g != c
            rows.append({"case": key, "kernel": kernel, "gpu": g, "cpu": c, "same": None if gpu is None else g == c})
        top = max(cpu[key].values(), default=0)
        rows.append({"case": key, "kernel": "(limit: largest frame rounded up to 16 B)", "cpu": -(-top // 16) * 16,
                     "gpu": -(-max(gpu.values()) // 16) * 16 if gpu else limit, "gpu_measured_limit": limit})
    for r in rows:
        print(json.dumps(r))
    print(json.dumps({"cases": len(cpu), "kernels_compared": sum(r.get("same") is not None for r in rows), "differ": differ}))
    return 0


def config_key(kernel: str, constexprs: dict, num_warps: int, num_stages: int) -> str:
    """A candidate's name in these data: ``estimator.autotune.candidate_key``."""
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.estimator.autotune import candidate_key
    return candidate_key(kernel, constexprs, num_warps, num_stages)


def gpu_configs(matrix: Path, logs: Path) -> dict:
    """{case tag: {config key: STACK}} from a GPU matrix (``process_memory.py``'s summary: each loaded cubin's hash and
    STACK) and its workers' kernel logs (each compile's constexprs, warps, stages and hash): cold cases only."""
    out = {}
    for line in matrix.read_text().splitlines():
        rec = json.loads(line)
        case = rec.get("case")
        log = logs / f"{case['tag']}.kernels.jsonl" if case else None
        if not case or case["state"] != "cold" or "frames" not in rec or not log.exists():
            continue
        stack = {f["hash"]: f["STACK"] for f in rec["frames"]}
        compiled = [json.loads(e) for e in log.read_text().splitlines() if '"compile"' in e]
        out[case["tag"]] = {config_key(e["fn"], e["constexprs"], e["num_warps"], e["num_stages"]): stack.get(e["hash"])
                            for e in compiled}
    return out


def compare_configs(out: Path, pairs: list[str]) -> int:
    """Candidate by candidate: each GPU cold case's compiled configs (None: compiled, never loaded) against the CPU
    candidates of the case with the same impl, D, H and HV (any T)."""
    cpu = {}
    for path in out.glob("*.jsonl"):
        if path.name != "summary.jsonl":
            cpu[path.stem.rsplit("_T", 1)[0]] = {config_key(r["kernel"], r["constexprs"], r["num_warps"], r["num_stages"]):
                                                  (r["STACK"] if r["counted"] else None)
                                                  for r in map(json.loads, path.read_text().splitlines()) if "hash" in r}
    total = {"cases": 0, "configs_equal": 0, "differ": 0}
    for pair in pairs:
        matrix, logs = pair.split(":")
        for tag, gpu in gpu_configs(Path(matrix), Path(logs)).items():
            mine = cpu.get(tag.rsplit("_cold", 1)[0].rsplit("_T", 1)[0])
            if mine is None:
                continue
            total["cases"] += 1
            for key in sorted(set(gpu) | set(mine)):
                if gpu.get(key, "absent") == mine.get(key, "absent"):
                    total["configs_equal"] += 1
                else:
                    total["differ"] += 1
                    print(json.dumps({"gpu_case": tag, "config": json.loads(key), "gpu": gpu.get(key, "not compiled"),
                                      "cpu": mine.get(key, "not compiled")}))
    print(json.dumps(total))
    return 0


def use_legacy_ptxas() -> None:
    """TRITON_PTXAS_BLACKWELL_PATH: the installed Triton's bundled legacy ``ptxas`` (found without importing triton),
    for this process and the cases' workers, which inherit it (``run_cases``)."""
    spec = find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: triton is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia" / "bin" / "ptxas"
    if not path.is_file():
        raise SystemExit(f"error: no bundled ptxas at {path}")
    os.environ["TRITON_PTXAS_BLACKWELL_PATH"] = str(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="")
    ap.add_argument("--tokens", type=int, default=4096, help="T (one sequence); frames do not depend on it")
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=1, help="cases compiled side by side")
    ap.add_argument("--cache-dir", default="/tmp/cpuf_cache", help="TRITON_CACHE_DIR shared by the cases' processes")
    ap.add_argument("--compare", metavar="DATA.json", help="compare DIR/summary.jsonl with a frames data file")
    ap.add_argument("--configs", nargs="+", metavar="MATRIX:LOGS", help="compare DIR's candidates config by config with "
                    "a GPU matrix (process_memory.py's summary) and the folder of its workers' kernel logs")
    ap.add_argument("--legacy-ptxas", action="store_true", help="compile sm90 with the ptxas the Triton wheel bundles "
                    "(Triton >= 3.9 picks ptxas-blackwell otherwise; the H200 runs 20-22 used the bundled one)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.legacy_ptxas:
        use_legacy_ptxas()
    if args.worker:
        return worker(json.loads(args.worker), out)
    if args.compare:
        return compare(args.compare, out)
    if args.configs:
        return compare_configs(out, args.configs)
    return run_cases(parse_cases(args.cases, args.tokens), out, args.jobs, args.cache_dir)


if __name__ == "__main__":
    raise SystemExit(main())

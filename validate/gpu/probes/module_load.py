"""What loading a kernel module costs in device memory, as a function of the cubin's own sections (issue 33).

A process's non-PyTorch memory is the CUDA context, the loaded modules and the stack reservation. The modules part is
measured only as a residue (~94-100 MiB for a kernel process, ``validate/check/frames.py``); a bound at an unmeasured
case needs the per-module rule. This probe loads cubins whose sections differ in one thing at a time and reads the
device's memory around every step, in one process alone on the GPU:

- hand-written PTX compiled by the ptxas that Triton's wheel ships (no CUDA toolkit needed): code from 256 B to 2 MiB
  (a chain of ``mad.lo.u32`` that ptxas cannot fold, 16 B of SASS each), 64 KiB of ``.nv.constant3``, zero-filled
  ``.nv.global`` (NOBITS) of 4 KiB and 8 MiB, 1 MiB of initialised ``.nv.global.init``, 64 functions in one module;
- Triton kernels of three code sizes (``tl.static_range`` unrolled), loaded as Triton loads them
  (``driver.active.utils.load_binary``: cuModuleLoadData, cuModuleGetFunction, cuFuncGetAttribute) and launched once
  through the JIT;
- optionally, first, every ``*.cubin`` under ``--cubins DIR`` (a Triton cache folder filled by a real cold run, or by
  ``cpu_frames.py``'s compile of a case for sm90: its TRITON_CACHE_DIR; candidates refused for shared memory load too);
- then PyTorch's own kernels (an elementwise op, a bf16 matmul: cuBLAS) and finally the unloading of every module.

N copies of each image are loaded (each cuModuleLoadData is a module of its own), so a driver that sub-allocates
modules from a pool growing in 2 MiB steps shows as steps every k copies. Readings at each copy: after
cuModuleLoadData, after cuModuleGetFunction, after the first launch (CUDA_MODULE_LOADING=LAZY, which torch sets,
defers a function's loading until one of those). A reading is cuMemGetInfo's free bytes, NVML's device used bytes
and NVML's per-process used bytes (None where the container hides the pid).

    python -m livebytes.validate.gpu.probes.module_load --out DIR [--loading lazy|eager] [--cubins DIR] [--deadline 170]
        [--variants a,b,...]     # loaded in the order given
    python -m livebytes.validate.gpu.probes.module_load --out DIR --dry-run      # CPU: compile, write sections only

Writes DIR/module_load.jsonl, one JSON line per step as it happens (``kind``: header, context, load, triton,
cache_cubin, torch, unload, stopped). Needs torch, triton (its bundled ptxas), libcuda and libnvidia-ml; nothing else.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SHF_ALLOC = 0x2               # ELF section flag: the section occupies memory when the image is loaded
SHT_NOBITS = 8                # ELF section type: no bytes in the file (zero-filled when loaded)
MAD_SASS_BYTES = 16           # one mad.lo.u32 becomes one 16-byte sm90 instruction (checked: 131,072 -> 2,097,152 B)
TRITON_UNROLLS = (1, 256, 2048)       # ~4.7 KB, ~19 KB, ~121 KB cubins under Triton 3.6.0 for sm90
TRITON_COPIES = 8


@dataclass(frozen=True)
class Variant:
    """One PTX image: ``instructions`` mads in each of ``functions`` entries, and module-scope data."""
    name: str
    instructions: int = 1
    const_bytes: int = 0          # initialised .const -> .nv.constant3
    zero_bytes: int = 0           # zero-initialised .global -> .nv.global (NOBITS)
    init_bytes: int = 0           # initialised .global -> .nv.global.init
    functions: int = 1
    copies: int = 4


VARIANTS = (
    Variant("tiny", copies=64),                                   # the per-module floor and the pool's step
    Variant("funcs64", functions=64, copies=8),                   # per-function cost at equal code
    Variant("code64k", instructions=4096, copies=16),
    Variant("code512k", instructions=32768, copies=8),
    Variant("code2m", instructions=131072, copies=4),
    Variant("const64k", const_bytes=65536, copies=16),
    Variant("zero4k", zero_bytes=4096, copies=32),
    Variant("zero8m", zero_bytes=8 << 20, copies=4),
    Variant("init1m", init_bytes=1 << 20, copies=4),
)


# ---- images (pure: tested on the CPU) ----------------------------------------------------------------------------

def _byte_list(n: int) -> str:
    return ",".join(str(i % 251 + 1) for i in range(n))      # non-zero, so ptxas keeps it initialised


def variant_ptx(v: Variant) -> str:
    """PTX for sm_90: entries k0..k{functions-1}(out), each loading out[0], running the mad chain, reading one word of
    each module-scope array (so none is dropped) and storing the result to out[0]."""
    head = [".version 8.0", ".target sm_90", ".address_size 64"]
    reads = []
    if v.const_bytes:
        head.append(f".visible .const .align 4 .b8 ctbl[{v.const_bytes}] = {{{_byte_list(v.const_bytes)}}};")
        reads.append("ld.const.u32 %r2, [ctbl+4];")
    if v.zero_bytes:
        head.append(f".visible .global .align 8 .b8 zbuf[{v.zero_bytes}];")
        reads.append("ld.global.u32 %r2, [zbuf+4];")
    if v.init_bytes:
        head.append(f".visible .global .align 4 .b8 ibuf[{v.init_bytes}] = {{{_byte_list(v.init_bytes)}}};")
        reads.append("ld.global.u32 %r2, [ibuf+4];")
    chain = "\n".join(f"mad.lo.u32 %r1, %r1, %r1, {2 * i + 1};" for i in range(v.instructions))
    extra = "\n".join(f"{r}\nadd.u32 %r1, %r1, %r2;" for r in reads)
    entries = [f".visible .entry k{f}(.param .u64 out)\n{{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n"
               f"ld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd1, %rd1;\nld.global.u32 %r1, [%rd1];\n"
               f"{chain}\n{extra}\nst.global.u32 [%rd1], %r1;\nret;\n}}" for f in range(v.functions)]
    return "\n".join(head + entries) + "\n"


def cubin_sections(image: bytes) -> dict[str, dict]:
    """{section name: {size, flags, nobits}} of an ELF64 little-endian cubin (section headers at e_shoff)."""
    if image[:4] != b"\x7fELF" or image[4] != 2:
        raise ValueError("not an ELF64 image")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    entsize, count, strndx = struct.unpack_from("<HHH", image, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * entsize) for i in range(count)]
    names_at = headers[strndx][4]

    def name(offset: int) -> str:
        start = names_at + offset
        return image[start:image.index(b"\0", start)].decode()
    return {name(h[0]): {"size": h[5], "flags": h[2], "nobits": h[1] == SHT_NOBITS} for h in headers[1:]}


def device_sections(sections: dict[str, dict]) -> dict[str, int]:
    """The sections the loader places in device memory: SHF_ALLOC ones, less ``.nv.shared.*`` (on-chip shared memory,
    reserved per block at launch, not device memory)."""
    return {n: s["size"] for n, s in sections.items() if s["flags"] & SHF_ALLOC and not n.startswith(".nv.shared")}


def delta(before: dict, after: dict) -> dict:
    """Growth between two readings: device used and process used (NVML), and free's drop (cuMemGetInfo)."""
    out = {"device_used": after["device_used"] - before["device_used"], "free_drop": before["free"] - after["free"]}
    if after.get("process_used") is not None and before.get("process_used") is not None:
        out["process_used"] = after["process_used"] - before["process_used"]
    return out


def image_fields(image: bytes) -> dict:
    dev = device_sections(cubin_sections(image))
    return {"image_bytes": len(image), "device_sections": dev, "device_section_bytes": sum(dev.values())}


# ---- compiling (CPU) ------------------------------------------------------------------------------------------------

def ptxas_path() -> str:
    """Triton's bundled ptxas (the one its kernels are compiled with), else TRITON_PTXAS_PATH, else PATH's."""
    try:
        import triton  # deferred: triton is not in the core install (model/validate extras)
        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = os.environ.get("TRITON_PTXAS_PATH") or shutil.which("ptxas")
    if not found:
        raise SystemExit("module_load: no ptxas (install triton, or set TRITON_PTXAS_PATH)")
    return found


def compile_variants(variants: tuple[Variant, ...], workdir: Path) -> dict[str, bytes]:
    """{name: cubin} for each variant, every ptxas running at once (the 2 MiB one takes ~30 s alone)."""
    tool, running = ptxas_path(), {}
    for v in variants:
        src = workdir / f"{v.name}.ptx"
        src.write_text(variant_ptx(v))
        running[v.name] = subprocess.Popen([tool, "-arch=sm_90", "-O3", str(src), "-o", str(workdir / f"{v.name}.cubin")],
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for name, proc in running.items():
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"module_load: ptxas refused {name}: {err.strip()[:300]}")
    return {v.name: (workdir / f"{v.name}.cubin").read_bytes() for v in variants}


def triton_kernel():
    """A Triton kernel whose code grows with UNROLL: x = x*x + i, UNROLL times, on one loaded int32."""
    import triton  # deferred: triton is not in the core install (model/validate extras)
    import triton.language as tl  # deferred: triton is not in the core install (model/validate extras)

    @triton.jit
    def unrolled(X, UNROLL: tl.constexpr):
        x = tl.load(X)
        for i in tl.static_range(UNROLL):
            x = x * x + i
        tl.store(X, x)
    return unrolled


def compile_triton(kernel, unroll: int, target=None):
    """The CompiledKernel of ``kernel`` at UNROLL=unroll for ``target`` (None: the active GPU's)."""
    import triton  # deferred: triton is not in the core install (model/validate extras)
    from triton.compiler import ASTSource  # deferred: triton is not in the core install (model/validate extras)
    return triton.compile(ASTSource(kernel, {"X": "*i32", "UNROLL": "constexpr"}, {"UNROLL": unroll}), target=target)


# ---- the driver and NVML through ctypes (no cuda-python needed) ----------------------------------------------------

class Cuda:
    """The few driver calls the probe needs, on device 0's primary context (the one torch and Triton use)."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.check(self.lib.cuInit(0), "cuInit")
        device, self.ctx = ctypes.c_int(), ctypes.c_void_p()
        self.check(self.lib.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), device), "cuDevicePrimaryCtxRetain")
        self.check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.buffer = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(self.buffer), ctypes.c_size_t(4096)), "cuMemAlloc")

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def free_bytes(self) -> int:
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.check(self.lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        return free.value

    def driver_version(self) -> int:
        v = ctypes.c_int()
        self.check(self.lib.cuDriverGetVersion(ctypes.byref(v)), "cuDriverGetVersion")
        return v.value

    def loading_mode(self) -> str:
        """The driver's own answer (cuModuleGetLoadingMode: 1 eager, 2 lazy), whatever the environment says."""
        mode = ctypes.c_int()
        self.check(self.lib.cuModuleGetLoadingMode(ctypes.byref(mode)), "cuModuleGetLoadingMode")
        return {1: "eager", 2: "lazy"}.get(mode.value, str(mode.value))

    def load(self, image: bytes) -> ctypes.c_void_p:
        module = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(image)), "cuModuleLoadData")
        return module

    def function(self, module, name: str) -> ctypes.c_void_p:
        fn = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()), f"cuModuleGetFunction {name}")
        return fn

    def launch(self, fn) -> None:
        """One thread of ``fn(out)`` on the probe's 4 KiB buffer, then a synchronize."""
        arg = ctypes.c_uint64(self.buffer.value)
        params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))      # kernelParams: one pointer per argument
        self.check(self.lib.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None), "cuLaunchKernel")
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def unload(self, module) -> None:
        self.check(self.lib.cuModuleUnload(module), "cuModuleUnload")


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Process(ctypes.Structure):      # nvmlProcessInfo_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint), ("usedGpuCcProtectedMemory", ctypes.c_ulonglong)]


class Nvml:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise RuntimeError("nvmlInit failed")
        self.handle = ctypes.c_void_p()
        self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle))

    def device_used(self) -> int:
        mem = _Memory()
        if self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(mem)) != 0:
            raise RuntimeError("nvmlDeviceGetMemoryInfo failed")
        return int(mem.used)

    def process_used(self, pid: int) -> int | None:
        """This pid's used memory as NVML lists it (the only process listed, where a container's pid namespace hides
        the pid: the probe runs alone); None where neither, or NVML gives no figure (NVML_VALUE_NOT_AVAILABLE)."""
        count, infos = ctypes.c_uint(64), (_Process * 64)()
        query = getattr(self.lib, "nvmlDeviceGetComputeRunningProcesses_v3", None)     # absent before driver 510
        if query is None or query(self.handle, ctypes.byref(count), infos) != 0:
            return None
        listed = infos[:count.value]
        used = [p.usedGpuMemory for p in listed if p.pid == pid] or [p.usedGpuMemory for p in listed[:1] if count.value == 1]
        return int(used[0]) if used and used[0] < 2**64 - 1 else None      # one listed: this process (run alone)


def reading(cuda: Cuda, nvml: Nvml) -> dict:
    return {"free": cuda.free_bytes(), "device_used": nvml.device_used(), "process_used": nvml.process_used(os.getpid())}


# ---- the experiments (GPU) ----------------------------------------------------------------------------------------

class Log:
    """The JSONL output, each row flushed as it is written (a killed run keeps what it measured)."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w")

    def write(self, row: dict) -> None:
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()

    def guarded(self, step: str, fn, *args) -> None:
        """Run one experiment; a failure is written as a row and the run goes on to the next (one GPU session)."""
        try:
            fn(*args)
        except Exception as e:      # noqa: BLE001 - any driver or Triton error: recorded, not fatal
            self.write({"kind": "error", "step": step, "error": f"{type(e).__name__}: {e}"[:500]})


def load_copies(cuda: Cuda, nvml: Nvml, log: Log, source: str, name: str, image: bytes, functions: list[str],
                copies: int, launch: bool, held: list) -> None:
    """Load ``image`` ``copies`` times; at each copy the growth at cuModuleLoadData, at cuModuleGetFunction of every
    function, and at their first launches (``launch``: only the probe's own PTX, whose one argument it knows)."""
    fields = image_fields(image)
    for copy in range(copies):
        start = reading(cuda, nvml)
        module = cuda.load(image)
        loaded = reading(cuda, nvml)
        handles = [cuda.function(module, f) for f in functions]
        got = reading(cuda, nvml)
        for fn in handles if launch else []:
            cuda.launch(fn)
        launched = reading(cuda, nvml)
        held.append(module)
        log.write({"kind": "load", "source": source, "variant": name, "copy": copy, "functions": len(functions), **fields,
                   "growth": {"load": delta(start, loaded), "get_function": delta(loaded, got),
                              "launch": delta(got, launched) if launch else None},
                   "after": launched, "modules_held": len(held)})


def triton_loads(cuda: Cuda, nvml: Nvml, log: Log, held: list, deadline: float) -> None:
    """Per unroll: the JIT's own first launch (compile, load_binary, launch), then TRITON_COPIES more load_binary calls
    of the same cubin, as the autotuner's candidates are loaded."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    import triton  # deferred: triton is not in the core install (model/validate extras)
    kernel, x = triton_kernel(), torch.ones(1, dtype=torch.int32, device="cuda")
    load_binary = triton.runtime.driver.active.utils.load_binary
    for unroll in TRITON_UNROLLS:
        if time.time() > deadline:
            return
        compiled = compile_triton(kernel, unroll)
        cubin = compiled.kernel
        start = reading(cuda, nvml)
        kernel[(1,)](x, UNROLL=unroll)
        torch.cuda.synchronize()
        log.write({"kind": "triton", "unroll": unroll, "step": "jit_first_launch", **image_fields(cubin),
                   "growth": delta(start, reading(cuda, nvml)), "reserved": torch.cuda.memory_reserved()})
        for copy in range(TRITON_COPIES):
            start = reading(cuda, nvml)
            module, *_ = load_binary(compiled.name, cubin, compiled.metadata.shared, 0)
            held.append(ctypes.c_void_p(module))
            log.write({"kind": "triton", "unroll": unroll, "step": "load_binary", "copy": copy, **image_fields(cubin),
                       "growth": delta(start, reading(cuda, nvml)), "modules_held": len(held)})


def cache_cubin_loads(cuda: Cuda, nvml: Nvml, log: Log, folder: Path, held: list, deadline: float) -> None:
    """Every ``*.cubin`` of a Triton cache folder, loaded once with its function fetched (the kernel's name from
    Triton's ``<name>.json`` beside it), as a cold process's autotuning loads them."""
    for path in sorted(folder.rglob("*.cubin")):
        if time.time() > deadline:
            log.write({"kind": "stopped", "at": str(path)})
            return
        meta_path = path.with_suffix(".json")
        name = json.loads(meta_path.read_text()).get("name", path.stem) if meta_path.exists() else path.stem
        image, start = path.read_bytes(), reading(cuda, nvml)
        module = cuda.load(image)
        loaded = reading(cuda, nvml)
        cuda.function(module, name)
        held.append(module)
        log.write({"kind": "cache_cubin", "path": str(path.relative_to(folder)), "name": name, **image_fields(image),
                   "growth": {"load": delta(start, loaded), "get_function": delta(loaded, reading(cuda, nvml))},
                   "modules_held": len(held)})


def torch_steps(cuda: Cuda, nvml: Nvml, log: Log) -> None:
    """PyTorch's own kernels as a kernel process loads them: an elementwise op, a reduction, a bf16 matmul (cuBLAS's
    handle and kernels; its workspace comes from the caching allocator, so ``reserved`` is read beside)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    a = torch.ones(1024, 1024, device="cuda", dtype=torch.bfloat16)
    steps = {"elementwise": lambda: a + 1, "reduction": lambda: a.float().sum(), "matmul_bf16": lambda: a @ a}
    for name, step in steps.items():
        torch.cuda.synchronize()
        start, reserved = reading(cuda, nvml), torch.cuda.memory_reserved()
        step()
        torch.cuda.synchronize()
        log.write({"kind": "torch", "step": name, "growth": delta(start, reading(cuda, nvml)),
                   "reserved_growth": torch.cuda.memory_reserved() - reserved})


# ---- the run ---------------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m livebytes.validate.gpu.probes.module_load", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path, help="folder for module_load.jsonl")
    p.add_argument("--loading", choices=("default", "lazy", "eager"), default="default",
                   help="CUDA_MODULE_LOADING before CUDA starts (default: as set, else torch's LAZY)")
    p.add_argument("--variants", default=",".join(v.name for v in VARIANTS), help="comma-separated PTX variants, loaded in this order")
    p.add_argument("--cubins", type=Path, help="a Triton cache folder whose *.cubin are loaded once each")
    p.add_argument("--no-triton", action="store_true", help="skip the Triton kernels")
    p.add_argument("--deadline", type=float, default=170.0, help="seconds after which no further step starts")
    p.add_argument("--dry-run", action="store_true", help="compile and write each image's sections; no GPU")
    args = p.parse_args(argv)
    known = {v.name for v in VARIANTS}
    unknown = [n for n in args.variants.split(",") if n not in known]
    if unknown:
        p.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if args.cubins is not None and not args.cubins.is_dir():
        p.error(f"--cubins {args.cubins}: not a folder")
    return args


def chosen(names: str) -> tuple[Variant, ...]:
    """The variants in the order asked: the heap's room at each copy depends on what was placed before, so a second
    order tests a placement rule fitted to the first."""
    by_name = {v.name: v for v in VARIANTS}
    return tuple(by_name[n] for n in names.split(","))


def dry_run(variants: tuple[Variant, ...], images: dict[str, bytes], log: Log, with_triton: bool) -> None:
    """No GPU: each image's sections, as the GPU run would record them beside its readings."""
    for v in variants:
        log.write({"kind": "image", "source": "ptx", "variant": v.name, "copies": v.copies, **image_fields(images[v.name])})
    if with_triton:
        from triton.backends.compiler import GPUTarget  # deferred: triton is not in the core install (model/validate extras)
        kernel = triton_kernel()
        for unroll in TRITON_UNROLLS:
            cubin = compile_triton(kernel, unroll, GPUTarget("cuda", 90, 32)).asm["cubin"]
            log.write({"kind": "image", "source": "triton", "unroll": unroll, **image_fields(cubin)})


def process_env(name: str) -> str | None:
    """The C environment's value (torch's CUDA init sets CUDA_MODULE_LOADING with setenv, unseen by os.environ)."""
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    value = libc.getenv(name.encode())
    return value.decode() if value is not None else None


def request_loading(loading: str) -> None:
    """Set CUDA_MODULE_LOADING before anything can initialise the driver: it reads the variable once, at cuInit, and
    ``has_cuda``'s torch.cuda.is_available() already calls cuInit (run 35's eager process asked for EAGER after that
    and its driver still answered lazy)."""
    if loading != "default":
        os.environ["CUDA_MODULE_LOADING"] = loading.upper()


def start_cuda(loading: str) -> tuple[Cuda, Nvml, dict]:
    """torch's context first (as every measured process), then the driver's handle on the same primary context."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    cuda, nvml = Cuda(), Nvml()
    header = {"kind": "header", "device": torch.cuda.get_device_name(0), "driver": cuda.driver_version(),
              "torch": torch.__version__, "cuda_module_loading": process_env("CUDA_MODULE_LOADING"),
              "driver_loading_mode": cuda.loading_mode(), "loading_requested": loading,
              "pid": os.getpid(), "python": sys.version.split()[0]}
    try:
        import triton  # deferred: triton is not in the core install (model/validate extras)
        header["triton"] = triton.__version__
    except ImportError:
        header["triton"] = None
    return cuda, nvml, header


def gpu_run(args: argparse.Namespace, variants: tuple[Variant, ...], images: dict[str, bytes], log: Log,
            deadline: float) -> int:
    """1 (after the header, nothing measured) where the driver's loading mode is not the one asked for."""
    cuda, nvml, header = start_cuda(args.loading)
    log.write(header)
    if args.loading != "default" and header.get("driver_loading_mode") != args.loading:
        print(f"module_load: asked for {args.loading} loading, the driver runs {header.get('driver_loading_mode')}",
              file=sys.stderr)
        return 1
    log.write({"kind": "context", "reading": reading(cuda, nvml)})
    held: list = []
    if args.cubins is not None:     # first, over the context alone, as a cold process loads its candidates
        log.guarded("cubins", cache_cubin_loads, cuda, nvml, log, args.cubins, held, deadline)
    for v in variants:
        if time.time() > deadline:
            log.write({"kind": "stopped", "at": v.name})
            break
        log.guarded(v.name, load_copies, cuda, nvml, log, "ptx", v.name, images[v.name],
                    [f"k{f}" for f in range(v.functions)], v.copies, True, held)
    if not args.no_triton and time.time() < deadline:
        log.guarded("triton", triton_loads, cuda, nvml, log, held, deadline)
    log.guarded("torch", torch_steps, cuda, nvml, log)
    start = reading(cuda, nvml)
    for module in held:
        cuda.unload(module)
    log.write({"kind": "unload", "modules": len(held), "growth": delta(start, reading(cuda, nvml))})
    return 0


def has_cuda() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    import torch  # deferred: torch is not in the core install (model/validate extras)
    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    request_loading(args.loading)          # first: before has_cuda or torch can initialise the driver
    deadline = time.time() + args.deadline
    variants = chosen(args.variants)
    args.out.mkdir(parents=True, exist_ok=True)
    log = Log(args.out / "module_load.jsonl")
    with tempfile.TemporaryDirectory() as work:
        os.environ.setdefault("TRITON_CACHE_DIR", str(Path(work) / "triton"))    # a cold cache: the kernels compile here
        images = compile_variants(variants, Path(work))
        if args.dry_run:
            dry_run(variants, images, log, not args.no_triton)
        elif not has_cuda():
            print("module_load: no CUDA device (use --dry-run on a machine without one)", file=sys.stderr)
            return 1
        else:
            return gpu_run(args, variants, images, log, deadline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The verdict: does a shape run on a device, or where does it go out of memory?

Three levels (docs/capacity.md): *allocated* (the model's peak of live blocks), *reserved* (the
segments the caching allocator holds: ``replay``), *device* (reserved plus the process's own memory
outside PyTorch: CUDA context, loaded kernel modules, what Triton's autotuning leaves behind).
cudaMalloc sees the device total minus that process memory; the replay runs against it with the
allocator's release-and-retry (``allocator.CachingAllocator.malloc``) and either fits or stops at
the failing request with PyTorch's figures.

The sequence simulated is what a process runs: a fresh start, the inputs, the first call at this
shape (library caches allocated), then steady steps. ``protocol=True`` runs the validator's
sequence instead (one target warmup step, ``empty_cache``, three measured steps) for the boundary
records; its small-shape warmup comes in as a ``prelude`` (``validate.protocol.prelude``: replayed whole) or,
coarser, as ``history`` (its leftovers put into an empty allocator).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from .allocator import DEFAULT_CONF, AllocatorConf
from .autotune import benchmarking_steps
from .devices import Device
from .errors import LivebytesError
from .replay import OomEvent, Prelude, replay
from .shapes import Shape

if TYPE_CHECKING:
    from .buffers import LifetimeModel

DATA = Path(__file__).parent / "data" / "process_memory.json"
TRITON_CACHE_STATES = ("cold", "warm")      # --triton-cache
STEADY_STEPS = 2     # steady steps after the first call: the second one shows any layout the first left


def check_state(triton_cache: str) -> str:
    if triton_cache not in TRITON_CACHE_STATES:
        raise LivebytesError(f"--triton-cache must be one of {', '.join(TRITON_CACHE_STATES)}, got {triton_cache!r}")
    return triton_cache


def cold_benchmarks(model: LifetimeModel, shape: Shape, triton_cache: str,
                    tuned_at_tokens: int | None = None) -> tuple[str, ...]:
    """Steps whose first call at ``shape`` benchmarks (``autotune.benchmarking_steps``). ``cold``: every declared
    autotuned launch benchmarks at a key the process has not tuned; with ``tuned_at_tokens`` the process's first
    call came earlier, at MBS 1 x that many tokens of the same heads and dims (the validator's warmup), so only
    kernels whose key differs here benchmark (l2norm's token bucket). ``warm``: the on-disk cache holds every key."""
    if check_state(triton_cache) == "warm":
        return ()
    tuned: frozenset = frozenset()
    if tuned_at_tokens is not None:
        earlier = Shape(1, tuned_at_tokens, shape.heads, shape.dim, shape.v_heads, shape.dim_v)
        _, tuned = benchmarking_steps(model, earlier, frozenset())
    return benchmarking_steps(model, shape, tuned)[0]


@dataclass(frozen=True)
class Figure:
    bytes: int
    status: str            # "measured" or "assumed: ..."
    source: str
    record: str | None = None


@dataclass(frozen=True)
class ProcessMemory:
    """The process's device memory outside the PyTorch allocator."""
    context: Figure
    library: Figure | None        # whole non-PyTorch memory once the library is loaded (None: not measured)
    library_name: str
    triton_cache: str

    @property
    def bytes(self) -> int:
        return self.library.bytes if self.library is not None else self.context.bytes

    @property
    def assumptions(self) -> list[str]:
        out = [] if self.context.status == "measured" else [f"CUDA context: {self.context.status}"]
        if self.library is None:
            out.append(f"{self.library_name}: its kernels' memory is not measured; counted as the context only")
        elif self.library.status != "measured":
            out.append(f"{self.library_name} ({self.triton_cache} cache): {self.library.status}")
        return out


@lru_cache(maxsize=1)
def _data() -> dict:
    return json.loads(DATA.read_text())


def _figure(entry: dict | None, assumed_from: str | None) -> Figure | None:
    if entry is None:
        return None
    status = entry["status"] if assumed_from is None else f"the {assumed_from}'s figure, not measured on this GPU"
    return Figure(int(entry["bytes"]), status, entry["source"], entry.get("record"))


def process_memory(device: Device, model_key: str, triton_cache: str = "cold") -> ProcessMemory:
    """Context and library memory for ``model_key`` on ``device`` (GPUs without their own figures take
    the H200's, labelled as assumptions)."""
    check_state(triton_cache)
    devices = _data()["devices"]
    name = device.name.upper()
    assumed_from = None if name in devices else "H200"
    entry = devices.get(name, devices["H200"])
    context = _figure(entry["context"], assumed_from)
    for lib in entry["libraries"]:
        if any(model_key.startswith(p) for p in lib["model_prefixes"]):
            return ProcessMemory(context, _figure(lib[triton_cache], assumed_from), lib["name"], triton_cache)
    return ProcessMemory(context, None, model_key.split("@")[0], triton_cache)


def triton_cache_matters(model: LifetimeModel, device: Device) -> bool:
    """Whether the Triton cache state changes anything this simulation counts for ``model``: it declares
    autotuned launches (``cold_benchmarks``) or its library's process memory differs cold vs warm. False for
    the cuDNN models (no Triton kernels): a --triton-cache given for them would be silently ignored."""
    cold, warm = (process_memory(device, model.key, state).bytes for state in TRITON_CACHE_STATES)
    return bool(model.autotuned) or cold != warm


@dataclass(frozen=True)
class Verdict:
    device: Device
    conf: AllocatorConf
    process: ProcessMemory
    allocated_peak_bytes: int     # whole run, first call included
    reserved_peak_bytes: int      # max_memory_reserved over the whole run (without a limit when it goes out of memory)
    oom: OomEvent | None          # the run against the capacity: None = it fits
    model_key: str = ""           # what was judged: the model and its options (contract), at ``shape``
    options: tuple = ()
    shape: Shape | None = None

    @property
    def total_bytes(self) -> int:
        return self.device.capacity_bytes

    @property
    def capacity_bytes(self) -> int:
        """What cudaMalloc can hand this process's allocator."""
        return self.total_bytes - self.process.bytes

    @property
    def device_need_bytes(self) -> int:
        return self.reserved_peak_bytes + self.process.bytes

    @property
    def fits(self) -> bool:
        return self.oom is None

    @property
    def headroom_bytes(self) -> int:
        """Device memory left at the reserved peak (negative: short by that much, before the retry's release)."""
        return self.total_bytes - self.device_need_bytes


def _run_kwargs(model: LifetimeModel, shape: Shape, conf: AllocatorConf, triton_cache: str,
                history: tuple[int, ...] = (), protocol: bool = False, prelude: Prelude | None = None,
                tuned_at_tokens: int | None = None) -> dict:
    """The replay of a process's sequence (``protocol``: the validator's: ``empty_cache`` after the first call, three
    measured steps): first call, then steady steps."""
    return {"warm_steps": 1, "measured_steps": 3 if protocol else STEADY_STEPS, "empty_cache_after_warmup": protocol,
            "history": history, "prelude": prelude, "conf": conf,
            "benchmarks": cold_benchmarks(model, shape, triton_cache, tuned_at_tokens)}


def allocated_peak(model: LifetimeModel, shape: Shape, conf: AllocatorConf = DEFAULT_CONF,
                   triton_cache: str = "cold") -> int:
    """What ``torch.cuda.max_memory_allocated`` shows after a fresh process's run at ``shape`` (no device limit):
    the allocator replay, first call included, blocks as the allocator hands them out (a block it does not split
    counts whole), so at least the model's 512-byte block sum (``engine.predict``)."""
    check_state(triton_cache)
    return replay(model, shape, **_run_kwargs(model, shape, conf, triton_cache)).allocated_peak_bytes


def verdict(model: LifetimeModel, shape: Shape, device: Device, conf: AllocatorConf = DEFAULT_CONF,
            triton_cache: str = "cold", history: tuple[int, ...] = (), protocol: bool = False,
            prelude: Prelude | None = None, tuned_at_tokens: int | None = None) -> Verdict:
    """Run the process's sequence (or the validator's, ``protocol=True``) without a limit, then, when its
    reserved peak exceeds the capacity, once more against it: the allocator may still fit by releasing
    cached segments, or stop at the failing request. ``tuned_at_tokens``: the process's first call, which
    autotuned, came earlier at MBS 1 x that many tokens (``cold_benchmarks``); its memory is the cold one."""
    proc = process_memory(device, model.key, triton_cache)
    kw = _run_kwargs(model, shape, conf, triton_cache, history, protocol, prelude, tuned_at_tokens)
    kw["device_total_bytes"] = device.capacity_bytes
    run = replay(model, shape, **kw)
    capacity = device.capacity_bytes - proc.bytes
    if run.reserved_peak_bytes > capacity:
        limited = replay(model, shape, capacity_bytes=capacity, **kw)
        run = limited if limited.oom is None else replace(run, oom=limited.oom)
    return Verdict(device, conf, proc, run.allocated_peak_bytes, run.reserved_peak_bytes, run.oom, model.key,
                   tuple(getattr(model, "options", ())), shape)


def oom_dict(v: Verdict) -> dict | None:
    """The ``oom`` JSON value: null, or where and PyTorch's figures."""
    if v.oom is None:
        return None
    f = v.oom.figures
    return {"run_step": v.oom.run_step, "first_call": v.oom.first_call, "step": v.oom.step, "buffer": v.oom.buffer,
            "request_bytes": f.request_bytes, "tried_bytes": f.tried_bytes, "allocated_bytes": f.allocated_bytes,
            "reserved_bytes": f.reserved_bytes, "reserved_unallocated_bytes": f.reserved_bytes - f.allocated_bytes,
            "free_bytes": f.free_bytes, "total_bytes": v.total_bytes}

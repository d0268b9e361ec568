"""The process's own device memory, outside PyTorch's allocator: a sum of named parts, each measured or derived.

1. **CUDA context** (per device, measured after ``torch.cuda.init()``): ``data/process_memory.json``.
2. **Loaded kernel modules** (per library, model family and Triton-cache state, measured: the process's non-PyTorch
   memory minus the context and the stack reservation; not derived from the cubins, whose code is far smaller than
   the ~94-100 MiB measured: the driver's module memory is not a sum of cubin sizes).
3. **Local-memory (stack) reservation**, derived: when a kernel whose per-thread stack frame exceeds the current
   ``cudaLimitStackSize`` launches, the driver raises the limit to the frame in 16-byte units
   (``driver_stack_limit``) and keeps local memory of that size for every thread that can be resident on the device
   (``resident_threads``), mapped in 2 MiB pages (``stack_reservation_bytes``); the limit never comes down by itself.
   The frames are data (``data/process/*.json``, ``cuobjdump -res-usage`` of every loaded cubin): cold, every
   autotune candidate launches while it is benchmarked; warm, only the tuned configs. A model's declared autotuned
   launches (``buffers.Autotune``) say at which step each kernel first launches, so the reservation grows there
   (``ProcessMemory.growth``), not at the start of the call.

Frames come from the H200's logs, or, for cases no GPU process logged, from every candidate compiled for sm90 on
the CPU (``derived_on_cpu``; equal to the H200's wherever both exist, and to the stack limits the edge probes read,
``limits``, a cross-check only). Where a part is neither measured nor derived for the asked case (another GPU, a head
count or head dim without frames, a library without a module figure), the figure used is the conservative one named
in ``assumptions``: each kernel's largest frame over every known case of the family (``_bound_cases``: frames do not
grow monotonically with the head count, so no neighbour bounds them); never silently another case's figure.
Not modelled: a launch the driver cannot grant its local memory (it fails in the driver, not in PyTorch); kernel
modules loading as the call goes (charged from its start).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .devices import MAX_THREADS_PER_SM, Device
from .errors import LivebytesError
from .fields import show

DATA = Path(__file__).parent / "data"
DEFAULT_STACK_LIMIT = 1024      # cudaLimitStackSize after CUDA init on the H200 (every probe's 'context' stage)
PAGE = 2 * 1024 * 1024          # the driver maps the reservation in 2 MiB pages (run 6a: reset freed product + 1 MiB)
STATES = ("cold", "warm")


@dataclass(frozen=True)
class Figure:
    bytes: int
    status: str            # "measured", "derived" or "assumed: ..."
    source: str
    record: str | None = None


def driver_stack_limit(frame_bytes: int) -> int:
    """The limit the driver sets for a kernel with this per-thread stack frame: the frame rounded up to 16 bytes, never
    below the default. Measured: 14,456 -> 14,464 (run 12), 18,584 -> 18,592, 18,104 -> 18,112, 1,224 -> 1,232 (run 13;
    1,232 is no multiple of 32), 14,392 -> 14,400, 14,904 -> 14,912."""
    return max(DEFAULT_STACK_LIMIT, -(-frame_bytes // 16) * 16)


def resident_threads(device: Device) -> int:
    """Threads that can be resident at once: SMs x 2,048 (``devices.MAX_THREADS_PER_SM``); 270,336 on the H200."""
    return device.sm_count * MAX_THREADS_PER_SM


def _pages(nbytes: int) -> int:
    return -(-nbytes // PAGE) * PAGE


def stack_reservation_bytes(limit: int, device: Device) -> int:
    """Local memory held beyond the context's own (the default limit's, part of the context figure): each limit's
    reservation in whole 2 MiB pages. Run 6a: resetting 14,464 B to 1,024 B freed 3,634,364,416 B = the product
    3,633,315,840 B rounded to pages."""
    threads = resident_threads(device)
    return _pages(limit * threads) - _pages(DEFAULT_STACK_LIMIT * threads)


@dataclass(frozen=True)
class ProcessMemory:
    """The process's device memory outside the PyTorch allocator after its first call, and where it grows in it."""
    context: Figure
    modules: Figure | None             # None: no library figure (a model whose library is not listed)
    stack: Figure                      # the reservation above the context's default limit
    library_name: str
    triton_cache: str
    stack_limit_bytes: int = DEFAULT_STACK_LIMIT
    growth: tuple[tuple[str, int], ...] = ()     # (step, bytes) where the first call's launches raise the reservation
    notes: tuple[str, ...] = field(default=())   # assumptions beyond the figures' own status
    triton: str | None = None                    # the Triton version whose kernels' data these are (None: no Triton)

    @property
    def bytes(self) -> int:
        return self.context.bytes + (self.modules.bytes if self.modules else 0) + self.stack.bytes

    @property
    def start_bytes(self) -> int:
        """Before the first call's launches raise the stack limit."""
        return self.bytes - sum(b for _, b in self.growth)

    @property
    def assumptions(self) -> list[str]:
        out = [f"{name}: {f.status.removeprefix('assumed: ')}" for name, f in (("CUDA context", self.context), ("kernel modules", self.modules),
                                                     ("stack reservation", self.stack))
               if f is not None and f.status.startswith(("assumed", "bounded"))]
        if self.modules is None:
            out.append(f"{self.library_name}: its kernels' memory is not measured; counted as the context only")
        return out + list(self.notes)


@lru_cache(maxsize=None)
def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _figure(entry: dict, assumed_from: str | None) -> Figure:
    status = entry["status"] if assumed_from is None else f"assumed: the {assumed_from}'s figure, not measured on this GPU"
    return Figure(int(entry["bytes"]), status, entry["source"], entry.get("record"))


def triton_versions(model_key: str, device_name: str = "H200") -> tuple[str, ...]:
    """The Triton versions whose kernels the process-memory data holds for ``model_key`` (its default first)."""
    devices = _json(DATA / "process_memory.json")["devices"]
    entry = devices.get(device_name.upper(), devices["H200"])
    return tuple(lib["triton"] for lib in entry["libraries"] if model_key in lib["models"] and "triton" in lib)


def check_triton(model_key: str, triton: str, device_name: str = "H200") -> None:
    """Refuse a Triton version the process-memory data lack for ``model_key``, in one line naming those they have."""
    known = triton_versions(model_key, device_name)
    if not known:
        raise LivebytesError(f"{model_key} runs no Triton kernels that the process-memory data hold: --triton changes "
                             "nothing for it; leave the flag out")
    if triton not in known:
        raise LivebytesError(f"{model_key}: no process-memory data for Triton {show(triton)} (measured on the H200: "
                             f"{', '.join(known)})")


def _library(device_entry: dict, model_key: str, triton: str | None = None) -> tuple[dict | None, list[str]]:
    """The library entry that lists ``model_key`` (the first: its default; ``triton``: the one of that Triton version,
    ``check_triton``'d), and what it says is assumed for that model (its note)."""
    listing = [lib for lib in device_entry["libraries"] if model_key in lib["models"]
               and (triton is None or lib.get("triton") == triton)]
    if not listing:
        return None, []
    note = listing[0]["models"][model_key]
    return listing[0], [note.removeprefix("assumed: ")] if note else []


def case_variant(options: dict) -> str:
    """The code a case runs beside its shape: a kernel's contract, or a whole model's packed sequences (``cu_seqlens``
    makes every kernel its varlen variant: other modules, other frames; runs 23 and 26 measured H8 both ways), else -;
    a whole model in fp32-amp adds ``+fp32-amp`` (fp32 activations and weights reach its kernels: other dtype
    specialisations, other modules, not measured as the bf16 ones)."""
    base = options.get("contract") or ("packed" if options.get("packed") else "-")
    return f"{base}+fp32-amp" if options.get("precision") == "fp32-amp" else base


def _case_key(prefix: str, shape) -> str:
    """The data file's case key, 'FAMILY:CONTRACT D.. H.. HV..' (``validate/frames.py``'s ``case_key``)."""
    return f"{prefix} D{shape.dim} H{shape.heads} HV{shape.hv}"


def _frame_table(data: dict, prefix: str, shape, state: str) -> tuple[dict, list[str]]:
    """Each kernel's largest frame for the case ``prefix`` (family:contract) at ``shape`` in ``state``, and what had to
    be assumed: the cases that bound it (``_bound_cases``); warm without the tuned configs' frames: every candidate's
    (the cold bound)."""
    table = data["frames"][state]
    case = _case_key(prefix, shape)
    if case in table:
        return table[case], []
    if state == "warm":     # the tuned configs depend on the key (the head counts among it): bound by every candidate's
        frames, notes = _frame_table(data, prefix, shape, "cold")
        return frames, [f"tuned configs' frames not measured at D{shape.dim} H{shape.heads} HV{shape.hv}: every "
                        "candidate's (the cold frames) assumed"] + notes
    scope, keys = _bound_cases(table, prefix)
    if keys:
        merged: dict = {}
        for k in keys:
            for kernel, frame in table[k].items():
                merged[kernel] = max(merged.get(kernel, 0), frame)
        return merged, [f"stack frames ({state}) not measured at D{shape.dim} H{shape.heads} HV{shape.hv}: each kernel's "
                        f"largest known {scope} ({len(keys)} cases, up to {max(merged.values()):,} B) assumed "
                        "(validate/probes/cpu_frames.py derives the case)"]
    largest = max((f for entry in table.values() for f in entry.values()), default=0)
    return {}, [f"no stack frames measured for {_readable(prefix)}: the library's largest ({largest:,} B) assumed for "
                "every kernel"]


def _bound_cases(table: dict, prefix: str) -> tuple[str, list[str]]:
    """The known cases that bound an unknown one: every case of the family, at any head dim and head count. A frame
    changes with the head count (a constexpr) and not monotonically (CPU-derived, sm90: D64 H16 and H128 need 18,584 B,
    H96 19,232 B; D128 H96 14,456 B, H16, H64 and H128 14,392 B), so no neighbour bounds it; the case itself is one
    ``validate/probes/cpu_frames.py`` run away."""
    return "at any head dim and head count", [k for k in table if k.startswith(f"{prefix} ")]


def _case_text(case: str) -> str:
    """``fla-kda:report D64 H16 HV16`` -> ``fla-kda (report contract) D64 H16/HV16``."""
    prefix, rest = case.split(" ", 1)
    return f"{_readable(prefix)} {rest.replace(' HV', '/HV')}"


def _readable(prefix: str) -> str:
    """``fla-kda:report`` -> ``fla-kda (report contract)``; ``fla-gdn:-`` -> ``fla-gdn``; ``fla-kda-model:packed`` ->
    ``fla-kda-model (packed sequences)``; ``fla-kda-model:-+fp32-amp`` -> ``fla-kda-model (fp32-amp)``."""
    family, variant = prefix.split(":")
    contract, amp = variant.removesuffix("+fp32-amp"), variant.endswith("+fp32-amp")
    what = [] if contract == "-" else ["packed sequences" if contract == "packed" else f"{contract} contract"]
    what += ["fp32-amp"] if amp else []
    return f"{family} ({', '.join(what)})" if what else family


def _model_limit(data: dict, prefix: str, shape, state: str) -> tuple[int, str, str] | None:
    """(limit, status, source) for a family whose stack limit is read from its own process after the first step
    (``model_limits``: a traced model's kernels, norms, MLP and loss among them, were not logged one by one), else
    None. A case's limit is measured at some numbers of tokens (``points``); at another length the next longer
    measured one's limit is taken, as a bound that rests on one assumption, said in the answer: the limit does not
    shrink as the length grows (Triton compiles an int64 specialisation once an integer argument reaches 2**31, which
    is what the records show: 15,280 B at 8-16K tokens, 16,320 B at 467,552-473,204 for the 1.3B KDA model, a multiple
    of 16 or not; not proved for every kernel). Above the longest, or at a case not measured, the family's largest
    measured limit is taken, named as assumed (frames are not monotonic in the head count). An fp32-amp case never
    measured takes its bf16 case's answer, named as assumed."""
    table = data.get("model_limits", {}).get(state, {})
    family = {k: v for k, v in table.items() if k.startswith(f"{prefix} ")}
    if not family and prefix.endswith("+fp32-amp"):     # its own process not measured: the bf16 one's, named
        bf16 = _model_limit(data, prefix.removesuffix("+fp32-amp"), shape, state)
        return None if bf16 is None else (bf16[0], f"assumed: fp32-amp's process not measured, the bf16 one's limit "
                                                   f"({bf16[1]})", bf16[2])
    if not family:
        return None
    tokens = shape.mbs * shape.seq
    points = family.get(_case_key(prefix, shape), {}).get("points", [])
    above = [p for p in points if p["tokens"] >= tokens]
    if above:
        p = above[0]
        status = "measured" if p["tokens"] == tokens else (
            f"bounded: the limit measured at {p['tokens']:,} tokens, assuming it does not shrink as the length grows"
            f"{_below(points, tokens)}")
        return p["limit_bytes"], status, f"read after the first step by {', '.join(p['records'])}"
    measured = [(p["limit_bytes"], k, p["records"][0]) for k, v in family.items() for p in v.get("points", [])]
    limit, top, record = max(measured)
    where = f"D{shape.dim} H{shape.heads} HV{shape.hv}" + (f" above {points[-1]['tokens']:,} tokens" if points else "")
    return (limit, f"assumed: stack limit not measured at {where}: the family's largest measured ({_case_text(top)}; "
            f"{len(measured)} figures)", f"read by {record}")


def _below(points: list, tokens: int) -> str:
    below = [p for p in points if p["tokens"] < tokens]
    return f" ({below[-1]['limit_bytes']:,} B at {below[-1]['tokens']:,})" if below else ""


def stack_timeline(frames: dict, launches: tuple, device: Device, fallback: int = 0,
                   partial: bool = False) -> tuple[int, tuple[tuple[str, int], ...], list[str]]:
    """(final limit, (step, reservation growth) per raise, notes) over the launches (kernel, step) in launch order; a
    kernel without a frame takes the largest of the table (named), or, where the table is ``partial`` (its call
    stopped before those kernels), the larger of that and ``fallback``, the library's largest."""
    limit, held, growth = DEFAULT_STACK_LIMIT, 0, []
    largest = max(frames.values(), default=fallback)
    if partial:
        largest = max(largest, fallback)
    unmeasured = [k for k, _ in launches if k not in frames] if frames else []
    for kernel, step in launches:
        new = driver_stack_limit(frames.get(kernel, largest))
        if new > limit:
            reserved = stack_reservation_bytes(new, device)
            growth.append((step, reserved - held))
            limit, held = new, reserved
    whose = "the larger of the case's and the library's largest" if partial else "the case's largest"
    notes = [f"no stack frame measured for {', '.join(dict.fromkeys(unmeasured))}: {whose} ({largest:,} B) "
             "assumed"] if unmeasured else []
    return limit, tuple(growth), notes


def _modules(data: dict, family: str, state: str, case: str | None = None) -> Figure:
    """The case's own measured module figure in ``state`` where the data keep them per case (``modules_by_case``: under
    Triton 3.9.0 they differ by head dim), else the family's, named as assumed where the data measured other cases of
    it only; else the library's largest (named as assumed)."""
    by_case = data.get("modules_by_case", {}).get(state, {})
    if case in by_case:
        entry = by_case[case]
        return Figure(int(entry["bytes"]), entry["status"], entry["source"])
    entry = data["modules"].get(family, {}).get(state)
    if entry is not None:
        measured = [k for k in by_case if k.split(":")[0] == family]
        if case is not None and measured:
            largest = " (the largest)" if len({by_case[k]["bytes"] for k in measured}) > 1 else ""
            return Figure(int(entry["bytes"]), f"assumed: not measured at {_case_text(case)}: the family's figure"
                          f"{largest} of {', '.join(map(_case_text, measured))}", entry["source"])
        return Figure(int(entry["bytes"]), entry["status"], entry["source"])
    top = max((e for states in data["modules"].values() for e in states.values()), key=lambda e: e["bytes"])
    return Figure(int(top["bytes"]), f"assumed: not measured for {family} ({state}); the library's largest module figure",
                  top["source"])


def process_memory(device: Device, model, triton_cache: str = "cold", shape=None, raised_before: bool = False,
                   triton: str | None = None) -> ProcessMemory:
    """The process memory of ``model`` (a built or compiled model, or a key alone: no launches, no frames) on ``device``
    after a first call at ``shape`` in ``triton_cache`` state, its kernels compiled by ``triton`` (None: the model's
    default, ``triton_versions``). ``raised_before``: an earlier call of the process launched the same kernels (a
    warmup): the stack limit is raised from the start, no growth."""
    key = model if isinstance(model, str) else model.key
    devices = _json(DATA / "process_memory.json")["devices"]
    assumed_from = None if device.name.upper() in devices else "H200"
    entry = devices.get(device.name.upper(), devices["H200"])
    context = _figure(entry["context"], assumed_from)
    if triton is not None:
        check_triton(key, triton, device.name)
    lib, model_notes = _library(entry, key, triton)
    none = Figure(0, "measured: no stack beyond the context's", "")
    if lib is None:
        return ProcessMemory(context, None, none, key.split("@")[0], triton_cache)
    if "data" not in lib:                       # no Triton kernels: one measured figure beyond the context
        return ProcessMemory(context, _figure(lib["modules"][triton_cache], assumed_from),
                             Figure(0, "measured: within the modules figure", ""), lib["name"], triton_cache,
                             notes=tuple(model_notes))
    data = _json(DATA / lib["data"])
    family = key.split("@")[0]
    prefix = None if isinstance(model, str) else f"{family}:{case_variant(dict(model.options))}"
    case = None if shape is None or prefix is None else _case_key(prefix, shape)
    modules, notes = _modules(data, family, triton_cache, case), model_notes
    if assumed_from:
        modules = Figure(modules.bytes, f"assumed: the {assumed_from}'s figure, not measured on this GPU", modules.source)
    if shape is None or isinstance(model, str):
        return ProcessMemory(context, modules, Figure(0, "assumed: no shape given, no stack frames looked up", ""),
                             lib["name"], triton_cache, notes=tuple(notes), triton=lib.get("triton"))
    measured_limit = _model_limit(data, prefix, shape, triton_cache)
    if measured_limit is not None:       # a traced model: its process's limit, its kernels' frames not logged one by one
        limit, status, source = measured_limit
        stack = Figure(stack_reservation_bytes(limit, device), status,
                       f"limit {limit:,} B per thread x {resident_threads(device):,} resident threads, 2 MiB pages, {source}; "
                       "charged from the call's start (where the kernel that raises it first launches is not modelled)")
        return ProcessMemory(context, modules, stack, lib["name"], triton_cache, limit, (), tuple(notes), lib.get("triton"))
    frames, frame_notes = _frame_table(data, prefix, shape, triton_cache)
    launches = tuple((a.kernel, a.step) for a in model.autotuned)
    on_cpu = data.get("derived_on_cpu", {})
    library_largest = max((f for key, case in data["frames"]["cold"].items() if not on_cpu.get(key, {}).get("partial")
                           for f in case.values()), default=0)      # over complete cases
    derived = on_cpu.get(_case_key(prefix, shape)) if not frame_notes and triton_cache == "cold" else None   # cold only
    partial = any(v["partial"] for k, v in on_cpu.items() if k.startswith(f"{prefix} "))   # the family's call stopped
    limit, growth, kernel_notes = stack_timeline(frames, launches, device, library_largest, partial=partial)
    assumed = frame_notes + kernel_notes
    status = ("derived" + (f" ({derived['note']})" if derived else "") if not assumed and not assumed_from
              else "assumed: " + "; ".join(assumed + ([f"the {assumed_from}'s frames and thread count rule"] if assumed_from
                                                      else [])))
    stack = Figure(stack_reservation_bytes(limit, device), status,
                   f"limit {limit:,} B per thread x {resident_threads(device):,} resident threads, 2 MiB pages, "
                   f"from {lib['data']}")
    return ProcessMemory(context, modules, stack, lib["name"], triton_cache, limit, () if raised_before else growth,
                         tuple(notes), lib.get("triton"))

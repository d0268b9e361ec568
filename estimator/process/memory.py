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
``limits``, a cross-check only), or, for a case the committed data lack, from the frames the user derived on this
machine (``frames_store``: the same CPU compile, kept signed in the private cache). A figure's status
(``process.status.Status``: a ``Kind`` and its reasons, typed; ``livebytes.process_words`` says them) is measured
or derived, or, where neither holds for the asked case, bounded (an upper bound, its proof in the reasons: a
warm process's tuned configs are among the candidates whose frames the cold case holds, it loads a subset of the cold
process's modules, a warm whole model's limit is at most its cold process's at the same case and length, each only
where the cold figure it rests on is itself measured, derived or bounded), estimated (a case or kernel without
frames, a whole model's case no process ran, a family's modules at another case: the nearest committed cases' figure,
``process.estimate``, with its rule's leave-one-out error, ``process.loo``; ``Figure.margin`` holds the high end, which
the verdict counts: ``ProcessMemory.high_bytes``) or unbounded (the figure used and why nothing bounds it:
another GPU, a whole model's length not measured, a library without a module figure); ``ProcessMemory.assumptions``
lists each such part with its status; never silently another case's figure. No neighbour bounds a case not compiled:
the head counts and head dims are constexprs of every kernel, and ptxas's frames at one value bound nothing at another
(the committed candidates: at D128, H96's differ from H16's in 42 of 202, 23 up and 19 down, H1's in 31;
``tests/test_process_memory.py``). CUDA's local-memory limit does (``LOCAL_MEMORY_LIMIT``), but its reservation,
141,457,096,704 B on the H200, is more than a GPU holds: it is kept for a kernel no estimate reaches
(``stack_timeline``), never a case's answer.
Not modelled: a launch the driver cannot grant its local memory (it fails in the driver, not in PyTorch); kernel
modules loading as the call goes (charged from its start).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from . import estimate, frames_store, loo, measured_store, model_frames
from .driver import (DATA, DEFAULT_STACK_LIMIT, data_files, data_json, device_entry, driver_stack_limit,
                     resident_threads, stack_reservation_bytes)
from ..devices import Device, get_device
from ..errors import LivebytesError
from ..fields import show
from .status import (ASSUMED, DERIVED, MEASURED, Act, Assumption, Cite, Hint, Kind, LooError, OffGpu, Part, Status,
                     StepCase, note, read_note, read_status, said)

STATES = ("cold", "warm")
# The most local memory a thread may have on any compute capability (CUDA C++ Programming Guide, Technical
# Specifications per Compute Capability: "Maximum amount of local memory per thread: 512 KB"); a kernel's stack frame
# lives in it, so the driver's stack limit (the largest launched frame rounded to 16 B) never exceeds it
LOCAL_MEMORY_LIMIT = 512 * 1024
LOCAL_MEMORY_SOURCE = ("the CUDA C++ Programming Guide's technical specifications per compute capability: at most "
                       "512 KB of local memory per thread, a kernel's stack frame within it")


BOUNDED, ESTIMATED, UNBOUNDED = Kind.BOUNDED, Kind.ESTIMATED, Kind.UNBOUNDED


@dataclass(frozen=True)
class Figure:
    bytes: int
    status: Status         # its kind and why (``process.status``; its words: ``livebytes.process_words``)
    source: str
    record: str | None = None
    margin: int = 0        # an estimate's high end above ``bytes``: the largest shortfall its rule made on a withheld case

    @property
    def kind(self) -> Kind:
        return self.status.kind


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
    notes: tuple[Status, ...] = field(default=())   # assumptions beyond the figures' own status
    triton: str | None = None                    # the Triton version whose kernels' data these are (None: no Triton)

    @property
    def bytes(self) -> int:
        return self.context.bytes + (self.modules.bytes if self.modules else 0) + self.stack.bytes

    @property
    def margin(self) -> int:
        """The estimated parts' high ends above their figures (``process.loo.margin``): 0 where nothing is estimated."""
        return sum(f.margin for f in (self.context, self.modules, self.stack) if f is not None)

    @property
    def high_bytes(self) -> int:
        """What a verdict counts: the figure, and each estimated part at its high end."""
        return self.bytes + self.margin

    @property
    def start_bytes(self) -> int:
        """Before the first call's launches raise the stack limit (estimated parts at their high ends, held from the
        start)."""
        return self.high_bytes - sum(b for _, b in self.growth)

    def _parts(self) -> list[tuple[Part, Figure]]:
        return [(part, f) for part, f in ((Part.CONTEXT, self.context), (Part.MODULES, self.modules),
                                          (Part.STACK, self.stack)) if f is not None]

    @property
    def assumptions(self) -> list[Assumption]:
        """Each part neither measured nor derived (bounded: its proof; estimated: its basis and error; unbounded: what
        is used and why nothing bounds it); a library without a module figure; then the model's notes."""
        out = [Assumption(f.status, part) for part, f in self._parts() if f.kind in ASSUMED]
        if self.modules is None and self.stack.bytes == 0:
            out.append(Assumption(said(UNBOUNDED, "its kernels' memory is not measured; counted as the context only"),
                                  library=self.library_name))
        elif self.modules is None:
            out.append(Assumption(said(UNBOUNDED, "its kernels' modules are not measured (no process of its library "
                                       "committed): none counted beside the context and the stack"),
                                  library=self.library_name))
        return out + [Assumption(n) for n in self.notes]

    @property
    def kind(self) -> Kind:
        """The answer's kind: the weakest assumption's, else derived where a part is, else measured."""
        kinds = {a.status.kind for a in self.assumptions}
        return next((k for k in (UNBOUNDED, ESTIMATED, BOUNDED) if k in kinds),
                    Kind.DERIVED if any(f.kind is Kind.DERIVED for _, f in self._parts()) else Kind.MEASURED)

    @property
    def kept_here(self) -> list[tuple[Part, Figure]]:
        """Each part this machine supplied (``frames derive``, ``process measure``: ``Status.here``): the answer says
        which figures no committed record holds."""
        return [(part, f) for part, f in self._parts() if f.status.here is not None]


def _device(device: Device | str) -> Device:
    return device if isinstance(device, Device) else get_device(device)


def _off(assumed_from: str, what: str) -> Status:
    """The status of a part taken from ``assumed_from``'s data on a GPU no process measured: estimated off that GPU."""
    return said(ESTIMATED, OffGpu(assumed_from, what))


def _figure(entry: dict, assumed_from: str | None) -> Figure:
    status = read_status(entry["status"]) if assumed_from is None else _off(assumed_from, f"the {assumed_from}'s figure")
    return Figure(int(entry["bytes"]), status, entry["source"], entry.get("record"))


def triton_versions(model_key: str, device: Device | str = "H200") -> tuple[str, ...]:
    """The Triton versions whose kernels the process-memory data of ``device`` (a Device or a preset name; default the
    models' default device) hold for ``model_key`` (its default first)."""
    entry = device_entry(_device(device))
    return tuple(lib["triton"] for lib in entry["libraries"] if model_key in lib["models"] and "triton" in lib)


def check_triton(model_key: str, triton: str, device: Device | str = "H200") -> None:
    """Refuse a Triton version the process-memory data lack for ``model_key``, in one line naming those they have."""
    device = _device(device)
    known = triton_versions(model_key, device)
    if not known:
        raise LivebytesError(f"{model_key} runs no Triton kernels that the process-memory data hold: --triton changes "
                             "nothing for it; leave the flag out")
    if triton not in known:
        raise LivebytesError(f"{model_key}: no process-memory data for Triton {show(triton)} (measured on the "
                             f"{device.process_memory}: "
                             f"{', '.join(known)})")


def _library(device_entry: dict, model_key: str, triton: str | None = None) -> tuple[dict | None, list[Status]]:
    """The library entry that lists ``model_key`` (the first: its default; ``triton``: the one of that Triton version,
    ``check_triton``'d), and what it says of that model's figures (its note: a bounded or unbounded status, read from
    the data once)."""
    listing = [lib for lib in device_entry["libraries"] if model_key in lib["models"]
               and (triton is None or lib.get("triton") == triton)]
    if not listing:
        return None, []
    words = listing[0]["models"][model_key]
    try:
        return listing[0], [read_note(words)] if words else []
    except ValueError:
        raise ValueError(f"process_memory.json: {model_key}'s note must say bounded: or unbounded:, not "
                         f"{words[:40]!r}") from None


def frames_case(model_key: str, options: dict, shape, triton: str | None = None, device: Device | str = "H200",
                purpose: str = "nothing to derive") -> tuple[str, str, dict | None]:
    """(the library data file, the case key, its committed cold frames or None) of ``model_key`` with ``options`` at
    ``shape`` under ``triton`` (None: the model's default): where derived frames of the case are kept and looked up
    (``frames_store``). A model whose library holds no Triton frames is refused in one line."""
    device = _device(device)
    if triton is not None:
        check_triton(model_key, triton, device)
    lib, _ = _library(device_entry(device), model_key, triton)
    if lib is None or "data" not in lib:
        raise LivebytesError(f"{model_key}: its library holds no Triton kernels' data on the {device.process_memory}: "
                             f"{purpose}")
    case = _case_key(f"{model_key.split('@')[0]}:{case_variant(options)}", shape)
    return lib["data"], case, data_json(DATA / lib["data"])["frames"]["cold"].get(case)


def case_variant(options: dict) -> str:
    """The code a case runs beside its shape: a kernel's contract, or a whole model's packed sequences (``cu_seqlens``
    makes every kernel its varlen variant: other modules, other frames; H8 was measured both ways), else -;
    a whole model in fp32-amp adds ``+fp32-amp`` (fp32 activations and weights reach its kernels: other dtype
    specialisations, other modules, not measured as the bf16 ones)."""
    base = options.get("contract") or ("packed" if options.get("packed") else "-")
    return f"{base}+fp32-amp" if options.get("precision") == "fp32-amp" else base


def _case_key(prefix: str, shape) -> str:
    """The data file's case key, 'FAMILY:CONTRACT D.. H.. HV..' (``validate/check/frames.py``'s ``case_key``)."""
    return f"{prefix} D{shape.dim} H{shape.heads} HV{shape.hv}"


def local_memory_bound(what: str, how: str) -> Status:
    """The note of a stack reservation bounded by CUDA's per-thread local-memory limit: a kernel's frame lives in its
    thread's local memory, at most ``LOCAL_MEMORY_LIMIT``, so the driver's limit never exceeds it and the reservation
    at it for every resident thread bounds any kernel's (loose: 141,457,096,704 B on the H200, never below the truth).
    ``what``: whose frames are missing; ``how``: how to get them."""
    return said(BOUNDED, f"CUDA's 512 KiB per-thread local-memory limit ({LOCAL_MEMORY_SOURCE}) caps the driver's "
                f"stack limit, so the reservation at {LOCAL_MEMORY_LIMIT:,} B for every resident thread bounds it, "
                f"loosely: {what}; {how}")


def _derive_hint(key: str, prefix: str, shape, triton: str | None) -> Hint:
    """How the user replaces the bound by the case's own frames: compile them on the CPU (the case None where no probe
    of this tool can)."""
    return Hint(Act.DERIVE, frames_store.probe_case(key, prefix, shape, triton))


def _measure_hint(key: str, prefix: str, shape, triton: str | None, options: dict, data_file: str) -> Hint | None:
    """How the user replaces unbounded module memory by the case's own: measure its process on a GPU at its number of
    tokens (``measured_store``; a layer's build options part of the case), or None where the probe runs no such case or
    runs another version's kernels (a snapshot modelled on the data's fla-core)."""
    fla = re.search(r"fla-core-([^_]+)_", data_file)
    if fla and key.split("@", 1)[-1] != fla.group(1):
        return None
    case = frames_store.probe_case(key, prefix, shape, triton, options)
    return None if case is None else Hint(Act.MEASURE, case)


def _frame_table(data: dict, prefix: str, shape, state: str, data_file: str | None,
                 hint: Hint) -> tuple[dict | None, list[Status], str | None]:
    """(each kernel's largest frame, notes, the derived status) for the case ``prefix`` (family:contract) at ``shape``
    in ``state``. Frames: the committed data's (derived, the CPU compile's note aside where ``derived_on_cpu``: else the
    GPU's logs); warm without the tuned configs' frames, every candidate's (a bound: the tuned config is one of them);
    cold, a case the data lack, the frames derived on this machine (``frames_store``, derived here, under Triton X;
    ``data_file`` None: not looked up); else None: no frames (``hint``: how to derive them)."""
    table = data["frames"][state]
    case = _case_key(prefix, shape)
    if case in table:
        on_cpu = data.get("derived_on_cpu", {}).get(case) if state == "cold" else None
        return table[case], [], Status(Kind.DERIVED, aside=on_cpu["note"]) if on_cpu else DERIVED
    if state == "warm":     # the tuned configs depend on the key (the head counts among it): bound by every candidate's
        frames, notes, _ = _frame_table(data, prefix, shape, "cold", data_file, hint)
        if frames is None:      # no candidate's frames either: the caller estimates them
            return None, notes, None
        return frames, [said(BOUNDED, f"tuned configs' frames not measured at {_dims(shape.dim, shape.heads, shape.hv)}: "
                             "every candidate's (the cold frames) bound them, each tuned config being one of the "
                             "candidates the autotuner chose from")] + notes, None
    mine = frames_store.lookup(data_file, case) if data_file else None
    if mine is not None:
        return mine["frames"], [], Status(Kind.DERIVED, here=f"Triton {mine['triton']}")
    return None, [], None       # no frames: the caller estimates the launched kernels' (``_estimated_frames``)


def _estimated_frames(data: dict, prefix: str, shape, frames: dict | None, kernels: tuple[str, ...], device: Device,
                      hint: Hint) -> tuple[dict | None, list[Status]]:
    """``frames`` with each launched kernel they lack estimated (``process.estimate.estimate_frames`` over these data's
    complete cold cases and the library's other Triton's), and the note that says so (estimated: the kernels,
    the rules' tiers, the leave-one-out error and ``hint``, how to derive the case's own); unchanged where nothing is
    missing."""
    missing = tuple(k for k in dict.fromkeys(kernels) if k not in (frames or {}))
    if not missing:
        return frames, []
    siblings = tuple(estimate.frame_cases(d) for _, d in data_files(device) if d is not data)
    asked = estimate.parse_case(_case_key(prefix, shape))
    guessed = estimate.estimate_frames(missing, asked, estimate.frame_cases(data), siblings)
    top = max(guessed.values(), key=lambda e: e.value)
    _, error = _estimate_error(loo.KINDS[0], device)
    what = ("stack frames" if frames is None else f"the frames of {', '.join(missing)}")
    said_ = said(ESTIMATED, f"{what} not measured or derived for {_readable(prefix)} at "
                 f"{_dims(shape.dim, shape.heads, shape.hv)}: each kernel's frame from the nearest committed cases, the "
                 f"largest {top.value:,} B ({top.tier}: {', '.join(map(_case_text, top.basis[:3]))}"
                 f"{' ...' if len(top.basis) > 3 else ''}); ", error, "; ", hint)
    return {**(frames or {}), **{k: e.value for k, e in guessed.items()}}, [said_]


def _dims(dim: int, heads: int, v_heads: int) -> str:
    """A case's sizes in the shape keys' words, one word each (they sit in comma lists): ``head_dim=64 num_heads=16``,
    ``num_v_heads=32`` only where it differs from the heads."""
    return f"head_dim={dim} num_heads={heads}" + (f" num_v_heads={v_heads}" if v_heads != heads else "")


def _case_text(case: str) -> str:
    """The data's case key in words: ``fla-kda:report D64 H16 HV16`` -> ``fla-kda (report contract) at head_dim=64
    num_heads=16``."""
    prefix, rest = case.split(" ", 1)
    dim, heads, v_heads = map(int, re.fullmatch(r"D(\d+) H(\d+) HV(\d+)", rest).groups())
    return f"{_readable(prefix)} at {_dims(dim, heads, v_heads)}"


def _readable(prefix: str) -> str:
    """``fla-kda:report`` -> ``fla-kda (report contract)``; ``fla-gdn:-`` -> ``fla-gdn``; ``fla-kda-model:packed`` ->
    ``fla-kda-model (packed sequences)``; ``fla-kda-model:-+fp32-amp`` -> ``fla-kda-model (fp32-amp)``."""
    family, variant = prefix.split(":")
    contract, amp = variant.removesuffix("+fp32-amp"), variant.endswith("+fp32-amp")
    what = [] if contract == "-" else ["packed sequences" if contract == "packed" else f"{contract} contract"]
    what += ["fp32-amp"] if amp else []
    return f"{family} ({', '.join(what)})" if what else family


def _model_limit(data: dict, prefix: str, shape, state: str, options: dict | None = None,
                 triton: str | None = None, here: bool = True) -> tuple[int, Status, str, str | None] | None:
    """(limit, status, source, the ``loo.KINDS`` whose error an estimate carries) for a family whose stack limit is read
    from its own process after the first step (``model_limits``: a traced model's kernels, norms, MLP and loss among
    them, were not logged one by one), else None. A case's limit is measured at some numbers of tokens (``points``); at
    another length the next longer measured one's limit is taken, estimated with that tier's leave-one-out error
    (``loo.length_rows``): it bounds the length only if the limit does not shrink as the length grows, which the
    records agree with (Triton compiles an int64 specialisation once an integer argument reaches 2**31: 15,280 B at
    8-32K tokens, 16,320 B at 467,490-473,204 for the 1.3B KDA model, a multiple of 16 or not; the derived steps put it
    in fla's ``swiglu_fwdbwd_kernel``, whose ``T`` is tokens x intermediate size) but nothing proves for every kernel
    (a divisibility-16 specialisation at the shorter length is other code). Above the longest, the larger of that
    length's and the rule's, estimated with the rule's error (``_above_longest``). A case never measured (another
    head count or head dim; fp32-amp, whose kernels are other dtype specialisations) is estimated from the measured
    cases (``_model_limit_estimate``): no measured case bounds it, frames not being monotonic in the head count. Warm,
    where no warm process was measured: the cold answer, a bound where it is one (``_warm_limit_by_cold``). A build
    its processes did not run (``options``: another config, depth or optimizer) takes its own step where that step was
    derived on the CPU at this length, else at the next longer length derived (estimated as a length between measured
    ones), else the point's limit, estimated, or bounded where the step's calls are a subset of a measured one's
    (``_limit_at_build``). ``here``: steps derived on this machine are read after the committed ones
    (``model_frames.known``)."""
    table = data.get("model_limits", {}).get(state, {})
    family = {k: v for k, v in table.items() if k.startswith(f"{prefix} ")}
    if not family and state == "warm":          # no warm process of the family measured: the cold one's limit
        cold = _model_limit(data, prefix, shape, "cold", options, triton, here)
        return None if cold is None else (cold[0], _warm_limit_by_cold(cold[1]), cold[2], cold[3])
    if not family and not prefix.split(":")[0].endswith("-model"):
        return None             # a kernel or layer: its kernels' frames decide
    tokens = shape.mbs * shape.seq
    points = family.get(_case_key(prefix, shape), {}).get("points", [])
    derived = _model_limit_derived(shape, options, triton, state, here)
    if derived is not None and not any(p["tokens"] == tokens and build_match(p.get("builds", []), options)[0] != "other"
                                       for p in points):
        return (*derived, None)  # not measured at this length and build: its step's own kernels, compiled on the CPU
    if not any(p["tokens"] >= tokens and build_match(p.get("builds", []), options)[0] != "other" for p in points):
        longer = _model_limit_derived_longer(shape, options, triton, here)
        if longer is not None:   # this build's step derived at a longer length: the length tier's estimate
            return (*longer, loo.KINDS[5])
    if not points:              # the case never measured: the nearest measured cases' limit, its error measured
        guess = _model_limit_estimate(data, prefix, shape, state, _derive_step_hint(options or {}, shape, triton))
        return None if guess is None else (*guess, loo.KINDS[1])
    above = [p for p in points if p["tokens"] >= tokens]
    if above:
        p = above[0]
        status = MEASURED if p["tokens"] == tokens else said(
            ESTIMATED, f"the limit measured at {p['tokens']:,} tokens{_below(points, tokens)} used, the next longer "
            f"length measured: it bounds {tokens:,} only if the limit does not shrink as the length grows, which no "
            "committed point contradicts but nothing proves for every kernel")
        other_build = build_match(p.get("builds", []), options)[0] == "other"
        return (p["limit_bytes"], _limit_at_build(p, status, options),
                f"read after the first step by {', '.join(p['records'])}",
                loo.KINDS[1] if other_build else loo.KINDS[5] if p["tokens"] != tokens else None)
    return _above_longest(data, prefix, shape, state, points, options)


def _above_longest(data: dict, prefix: str, shape, state: str, points: list[dict],
                   options: dict | None = None) -> tuple[int, Status, str, str]:
    """(limit, status, source, loo kind) of a whole model's case above its longest measured length: the larger of that
    length's limit and the whole-model rule's estimate from the other cases (``_model_limit_estimate``), estimated
    with the rule's leave-one-out error (the figure is never below the rule's, so its high end is never below the
    rule's high end either). The case's own longest alone would be short where a longer step compiles other code:
    the 1.3B KDA model's 32,768-token 15,280 B against 16,320 B at 467,490."""
    longest = points[-1]
    where = f"{_dims(shape.dim, shape.heads, shape.hv)} above {longest['tokens']:,} tokens"
    guess = _model_limit_estimate(data, prefix, shape, state)
    if guess is not None and guess[0] > longest["limit_bytes"]:
        limit, status, source = guess
        return limit, status.plus(note(f"above this case's longest length measured ({longest['tokens']:,} tokens, "
                                       f"{longest['limit_bytes']:,} B)")), source, loo.KINDS[1]
    said_rule = "" if guess is None else f", not below the whole-model rule's {guess[0]:,} B"
    match, ran = build_match(longest.get("builds", []), options)
    status = said(ESTIMATED, f"stack limit not measured at {where}: the case's longest measured length's "
                  f"({longest['limit_bytes']:,} B{said_rule}), its error the whole-model rule's: a longer step may "
                  "compile other code (an int64 specialisation past 2**31)")
    return (longest["limit_bytes"], status if match == "same" else status.plus(note(f"measured at {ran}")),
            f"read after the first step by {', '.join(longest['records'])}", loo.KINDS[1])


def _model_limit_derived(shape, options: dict | None, triton: str | None, state: str,
                         here: bool = True) -> tuple[int, Status, str] | None:
    """(limit, status, source) of a whole model's step whose Triton kernels were compiled on the CPU
    (``process.model_frames``: the same build less depth, precision, packing, batch and length under ``triton``;
    ``here``: one derived on this machine too): the largest frame rounded by ``driver_stack_limit``, derived cold; warm,
    the cold figure bounds it (a warm process launches a subset of the cold one's candidates). None where no such step
    was derived."""
    asked = options or {}
    if triton is None or "architecture" not in asked:
        return None
    step = model_frames.for_step(asked["architecture"], asked.get("precision", "bf16"), bool(asked.get("packed")),
                                 shape.mbs, shape.seq, triton, model_frames.known(here and _derivable(asked)))
    if step is None:
        return None
    limit = driver_stack_limit(step.frame)
    what = (f"its step's Triton kernels compiled on the CPU under Triton {step.triton} ({step.name}): the largest "
            f"frame {step.frame:,} B, {step.kernel}; cuBLAS's and PyTorch's own kernels not compiled")
    here_said = f"Triton {step.triton}, {step.ptxas}" if step.here else None
    status = Status(Kind.DERIVED, aside=what, here=here_said) if state == "cold" else said(
        BOUNDED, f"no warm process measured: the cold step's derived limit bounds it ({what}), a warm process "
        "launching a subset of the cold one's candidates")
    return limit, status, _derived_source(step)


def _derived_source(step: model_frames.DerivedStep) -> str:
    """Where a derived step is kept: the committed data file, or this machine's private cache."""
    if step.here:
        return (f"derived on this machine ({model_frames.FOLDER} in the private cache: {step.record}, Triton "
                f"{step.triton})")
    return f"derived on the CPU ({model_frames.DATA.name}: {step.record})"


def _model_limit_derived_longer(shape, options: dict | None, triton: str | None,
                                here: bool = True) -> tuple[int, Status, str] | None:
    """(limit, status, source) of a whole model's build whose step was derived on the CPU at a longer length only (a
    preset between its derived lengths): the next longer one's limit, estimated as a length between measured ones is
    (``loo.length_rows``: the limit never shrank as the length grew; nothing proves it for every kernel). Warm or cold:
    a warm process launches a subset of the cold one's candidates."""
    asked = options or {}
    if triton is None or "architecture" not in asked:
        return None
    tokens = shape.mbs * shape.seq
    step = model_frames.next_longer(asked["architecture"], asked.get("precision", "bf16"), bool(asked.get("packed")),
                                    tokens, triton, model_frames.known(here and _derivable(asked)))
    if step is None:
        return None
    what = (f"its step's Triton kernels compiled on the CPU under Triton {step.triton} at {step.tokens:,} tokens "
            f"({step.name}), the next longer length derived: the largest frame {step.frame:,} B, {step.kernel}; it "
            f"bounds {tokens:,} only if the limit does not shrink as the length grows, which no committed point "
            "contradicts but nothing proves for every kernel")
    return driver_stack_limit(step.frame), said(ESTIMATED, what), _derived_source(step)


def _model_limit_estimate(data: dict, prefix: str, shape, state: str,
                          hint: Hint | None = None) -> tuple[int, Status, str] | None:
    """(limit, status, source) of a whole model's case no process measured: ``process.estimate.model_limit`` over the
    measured cases of these data in ``state`` (cold where no warm one was measured), the status estimated, with the
    rule's leave-one-out error (``_estimate_error``). A family with one measured case (FLA's GLA and DeltaNet models:
    ``loo.model_rows`` withholds no such case, so the rule's error was never measured within it): the same figure,
    unbounded, with ``hint`` (the command that derives the step). None: these data hold no whole model."""
    cases = estimate.model_cases(data, state) or estimate.model_cases(data, "cold")
    asked = estimate.parse_case(_case_key(prefix, shape))
    guess = estimate.model_limit(asked, shape.mbs * shape.seq, cases, estimate.cold_frames(data))
    if guess is None:
        return None
    where = f"stack limit not measured for {_readable(prefix)} at {_dims(shape.dim, shape.heads, shape.hv)}: "
    if guess.layer is not None:       # the model's own layer's frames at its sizes, above the tier's cases
        below = (f", above the {guess.tier_value:,} B measured in {guess.tier} "
                 f"({', '.join(map(_case_text, guess.basis))})" if guess.basis else "")
        layer = guess.layer
        what = (f"{guess.value:,} B, its own layer's largest frame {layer.tier} "
                f"({', '.join(map(_case_text, layer.basis))}, compiled on the CPU; the layer probe's hidden size and "
                f"flags are not the model's){below}")
    else:
        what = (f"{guess.value:,} B, {'the largest ' if len(guess.basis) > 1 else ''}measured in {guess.tier} "
                f"({', '.join(map(_case_text, guess.basis))})")
    basis = guess.basis + (guess.layer.basis if guess.layer else ())
    if sum(c.family == asked.family for c in cases) < 2:
        status = said(UNBOUNDED, where + what, "; the rule's error is not measured for a family with one measured case",
                      *(("; ", hint) if hint else ()))
        return guess.value, status, f"the nearest measured case's, {', '.join(basis)}"
    return guess.value, said(ESTIMATED, where + what), f"estimated from {', '.join(basis)}"


def _estimate_error(kind: str, device: Device) -> tuple[int, LooError]:
    """(margin, error) of an estimate of ``kind`` (``process.loo.KINDS``) on ``device``: its leave-one-out error over
    the committed cases and the high end counted (the largest shortfall seen, 0 where it never fell short)."""
    low, high, n = loo.error_range(kind, device.name)
    margin = loo.margin(kind, device.name)
    return margin, LooError(n, low, high, margin)


def _warm_limit_by_cold(cold_status: Status) -> Status:
    """A warm whole model's stack limit where no warm process was measured: the cold process's at the same case and
    length bounds it (a warm process launches the tuned configs, each one of the candidates the cold process launched
    at that shape, or, at a key it has not tuned, every candidate, as the cold one did; the limit is the largest frame
    launched, rounded to 16 B, and the driver never lowers it). Not a bound where the cold limit is not one."""
    if cold_status.kind is UNBOUNDED:
        return said(UNBOUNDED, "no warm process measured, and the cold limit used for it bounds nothing here (",
                    Cite(cold_status, kind=False), ")")
    if cold_status.kind is ESTIMATED:
        return said(ESTIMATED, "no warm process measured: the cold estimate used, a warm process launching a subset of "
                    "the cold one's candidates (", Cite(cold_status, kind=False), ")")
    return said(BOUNDED, "no warm process measured: the cold process's limit (", Cite(cold_status), ") bounds it, a "
                "warm process launching a subset of the cold one's candidates at the same shape and the driver never "
                "lowering the limit")


def _below(points: list, tokens: int) -> str:
    below = [p for p in points if p["tokens"] < tokens]
    return f" ({below[-1]['limit_bytes']:,} B at {below[-1]['tokens']:,})" if below else ""


def stack_timeline(frames: dict | None, launches: tuple,
                   device: Device) -> tuple[int, tuple[tuple[str, int], ...], list[Status]]:
    """(final limit, (step, reservation growth) per raise, notes) over the launches (kernel, step) in launch order. A
    kernel without a frame in the case's table takes ``LOCAL_MEMORY_LIMIT``, the bound (named in the notes; ``frames``
    None: the case has none, its caller says so); with no launches declared, the bound is held from the call's start."""
    if frames is None and not launches:
        return LOCAL_MEMORY_LIMIT, (), []
    limit, held, growth = DEFAULT_STACK_LIMIT, 0, []
    known = frames or {}
    for kernel, step in launches:
        new = driver_stack_limit(known.get(kernel, LOCAL_MEMORY_LIMIT))
        if new > limit:
            reserved = stack_reservation_bytes(new, device)
            growth.append((step, reserved - held))
            limit, held = new, reserved
    unmeasured = list(dict.fromkeys(k for k, _ in launches if k not in known)) if frames is not None else []
    notes = [local_memory_bound(f"no stack frame measured or derived for {', '.join(unmeasured)}",
                                "the case's frames lack these kernels (a call that raised before them, or kernels "
                                "the data never logged): derive or measure the case again")] if unmeasured else []
    return limit, tuple(growth), notes


def _modules(data: dict, family: str, state: str, case: str | None = None, options: dict | None = None) -> Figure:
    """The case's own measured module figure in ``state`` where the data keep them per case (``modules_by_case``); where
    the data keep the family's figure only, that figure as measured at the cases its processes ran (``measured_at``);
    a layer's figure holds at the build ``options`` it was measured at only (``_at_options``); at a case neither
    holds, the largest of the family's figure and its measured cases', unbounded (each head dim compiles its own
    kernels: under Triton 3.9.0 GDN's differ by head dim, and no measured case bounds another); warm without a warm
    figure, the same case's cold one (``_warm_modules_by_cold``: a bound where that cold figure is not unbounded); else
    the library's largest, unbounded. No case asked (a key alone): the family's figure as the data label it."""
    by_case = data.get("modules_by_case", {}).get(state, {})
    if case in by_case and "builds" in by_case[case]:        # a whole model's processes
        return _model_at_build(by_case[case], case, options)
    if case in by_case:
        return _at_options(by_case[case], case, options)
    entry = data["modules"].get(family, {}).get(state)
    if entry is not None:
        own = {k: v for k, v in by_case.items() if k.split(":")[0] == family}
        measured = list(dict.fromkeys([*entry.get("measured_at", []), *own]))
        if case is not None and measured and case not in measured:    # measured at other cases than this one
            top = max([entry, *own.values()], key=lambda e: e["bytes"])     # the family's figure or a larger case's
            differ = len({entry["bytes"], *(v["bytes"] for v in own.values())}) > 1
            return Figure(int(top["bytes"]), said(
                ESTIMATED, f"not measured for {_case_text(case)}: the family's {'largest' if differ else 'figure'} of "
                f"{', '.join(map(_case_text, measured))} used (module memory is measured, not derived, and the kernels "
                "a case loads follow its shapes: Triton compiles one per head dim and head counts, cuBLAS picks its "
                "GEMMs by shape)" + (" (those cases differ)" if differ else "")), top["source"])
        return _at_options(entry, case, options)
    if state == "warm" and data["modules"].get(family, {}).get("cold") is not None:
        return _warm_modules_by_cold(_modules(data, family, "cold", case, options), family)
    top = max((e for states in data["modules"].values() for e in states.values()), key=lambda e: e["bytes"])
    return Figure(int(top["bytes"]), said(UNBOUNDED, f"not measured for {family} ({state}): the library's largest "
                                          "module figure used, which bounds nothing: another family's kernels"),
                  top["source"])


SAME_CALLS = {"layers", "checkpoint"}    # a layer's options that change how often its kernels run, not which


def _at_options(entry: dict, case: str | None, options: dict | None) -> Figure:
    """A measured figure as the data label it where the asked build ``options`` are among those it was measured at
    (``entry["options"]``: a layer's hidden size, layers, checkpointing, convolution width, each the values its
    processes ran; none for a kernel). Where only the layer count or checkpointing differ (``SAME_CALLS``), the figure
    bounds the case (the same calls); where the hidden size or the convolution width does, the same bytes, unbounded:
    they pick other GEMM shapes and kernels (cuBLAS's, loaded lazily), and no measured option set bounds another."""
    recorded, asked = entry.get("options"), options or {}
    off = {name: asked[name] for name, values in (recorded or {}).items() if name in asked and asked[name] not in values}
    if case is None or not off:
        return Figure(int(entry["bytes"]), read_status(entry["status"]), entry["source"])
    at = ", ".join(f"{name}={'/'.join(map(str, values))}" for name, values in recorded.items())
    where = f"measured for {_case_text(case)} at {at} only, not at {', '.join(f'{k}={v}' for k, v in off.items())}"
    if set(off) <= SAME_CALLS:
        return Figure(int(entry["bytes"]), said(BOUNDED, f"{where}: its figure bounds it, every layer of a stack running "
                                                "the same kernels at the same shapes and a recomputed forward the "
                                                "forward's (the same lazily loaded functions, the driver freeing none "
                                                "while the process lives)"), entry["source"])
    return Figure(int(entry["bytes"]), said(UNBOUNDED, f"{where}: its figure there used, which bounds nothing: the "
                                            "hidden size and the convolution width pick other GEMM shapes and kernels"),
                  entry["source"])


def _asked_build(options: dict | None) -> tuple:
    """(architecture, layers, optimizer) of a whole model's build options (``lifetimes/traced/model.py``'s fields)."""
    asked = options or {}
    return asked.get("architecture"), int(asked.get("layers") or 0), asked.get("optimizer", "adamw")


def build_match(builds: list[dict], options: dict | None) -> tuple[str, str]:
    """How a whole model's asked build stands to the builds its measured processes ran (each: the config less its
    depth, the depth, the optimizer; ``validate/check/frames.py``'s ``model_build``): ("same", "") where one of them;
    ("subset", where) where one ran the same config at least as deep with the same optimizer, or any optimizer where
    none is asked (the first L layers of a stack are a prefix of a deeper one's, each layer's kind set by its index,
    so its calls are a subset; no optimizer step is a subset of one); else ("other", where): another config (hidden
    size, intermediate size, vocabulary) or optimizer picks other GEMM shapes and kernels. ``where`` says both."""
    arch, layers, optimizer = want = _asked_build(options)
    if any((b["architecture"], b["layers"], b["optimizer"]) == want for b in builds):
        return "same", ""
    ran = "; ".join(f"hidden {b['hidden']}, vocab {b['vocab']}, {b['layers']} layers, {b['optimizer']} "
                    f"(architecture {b['architecture']})" for b in builds)
    where = f"the builds its processes ran only ({ran}), not architecture {arch} at {layers} layers with {optimizer}"
    subset = any(b["architecture"] == arch and b["layers"] >= layers and optimizer in (b["optimizer"], "none")
                 for b in builds)
    return ("subset" if subset else "other"), where


SUBSET = "the asked step's calls a subset of a measured one's (fewer layers of the same stack, or no optimizer step)"
OTHER_BUILD = "another config or optimizer picks other GEMM shapes and kernels (cuBLAS's and PyTorch's, loaded lazily)"


def _model_at_build(entry: dict, case: str, options: dict | None) -> Figure:
    """A whole model's measured modules at its case (``entry["builds"]``: what its processes ran): as measured at one
    of those builds; bounded at a subset of one (``build_match``); elsewhere the same bytes, estimated, with the module
    rule's leave-one-out error (``_process_memory`` adds it): no build bounds another's GEMM kernels, and the rule's
    withheld cases differ from the others in build as well as heads."""
    match, where = build_match(entry["builds"], options)
    if match == "same":
        return Figure(int(entry["bytes"]), read_status(entry["status"]), entry["source"])
    where = f"measured for {_case_text(case)} at {where}"
    if match == "subset":
        return Figure(int(entry["bytes"]), said(BOUNDED, f"{where}: its figure bounds it, {SUBSET}"), entry["source"])
    return Figure(int(entry["bytes"]), said(ESTIMATED, f"{where}: its figure there used, its error the module rule's "
                                            f"over the committed cases (each another build or head layout): "
                                            f"{OTHER_BUILD}"), entry["source"])


def _limit_at_build(point: dict, status: Status, options: dict | None) -> Status:
    """The status of a whole model's limit read at ``point`` (its processes' ``builds``) for the asked build: as it
    stands at one of those builds; at a subset of one (``build_match``) a bound where ``status`` is measured (the
    largest frame of fewer calls is no larger; the driver never lowers the limit); elsewhere estimated (another
    config's norm and GEMM kernels are other code, with other frames), with the whole-model rule's leave-one-out error,
    whose withheld cases differ from the rest in build as well as heads. A step derived at the asked build and length
    comes first (``_model_limit``)."""
    match, where = build_match(point.get("builds", []), options)
    if match == "same" or status.kind is UNBOUNDED:
        return status if match == "same" else status.plus(note(f"and measured at {where}"))
    cite = () if status == MEASURED else (" (", Cite(status), ")")
    if match == "subset" and status.kind is ESTIMATED:      # another length's limit: an estimate still
        return status.plus(note(f"and measured at {where}, {SUBSET}"))
    if match == "subset":
        return said(BOUNDED, f"the limit measured at {where}: it bounds it, {SUBSET}", *cite)
    return said(ESTIMATED, f"the limit measured at {where} used, its error the whole-model rule's over the committed "
                f"cases (each another build or head layout): {OTHER_BUILD}", *cite)


def _warm_modules_by_cold(cold: Figure, family: str) -> Figure:
    """A warm process's modules where none was measured: the same case's cold figure, a bound (a warm process loads a
    subset of the cold one's modules: its tuned configs are among the candidates the cold process loaded, cuBLAS's and
    PyTorch's kernels are the same calls, and the driver frees none while the process lives; every committed warm
    process holds no more than its cold case, ``tests/test_process_memory.py``) only where that cold figure is one;
    where it is unbounded or estimated, so is the warm one."""
    if cold.kind is UNBOUNDED:
        return Figure(cold.bytes, said(UNBOUNDED, f"no warm process of {family} measured, and the cold figure used for "
                                       "it bounds nothing here (", Cite(cold.status, kind=False), ")"), cold.source)
    if cold.kind is ESTIMATED:
        return Figure(cold.bytes, said(ESTIMATED, f"no warm process of {family} measured: the cold estimate used, a "
                                       "warm process loading a subset of the cold one's modules (",
                                       Cite(cold.status, kind=False), ")"), cold.source)
    return Figure(cold.bytes, said(BOUNDED, f"no warm process of {family} measured: its cold figure (", Cite(cold.status),
                                   ") bounds it, a warm process loading a subset of the cold one's modules (its tuned "
                                   "configs are among the candidates the cold process loaded; cuBLAS's and PyTorch's "
                                   "kernels are the same calls) and the driver freeing none while the process lives"),
                  cold.source)


def measured_here(pm: ProcessMemory, record: dict, device: Device, tokens: int) -> ProcessMemory:
    """``pm`` with its parts replaced by the process measured on this machine at its case (``measured_store``). At the
    measured number of tokens all three: the context read in that process before its first kernel, its stack limit's
    reservation on ``device``, and the modules as the committed data take theirs (non-PyTorch bytes after the call
    minus the context and the reservation, ``validate/check/frames.py``); the reservation grows where ``pm``'s frames
    raise it when they reach the measured limit, else from the call's start (where the limit rises is not known). At
    another length only the context (read before any kernel), and the modules where ``pm``'s are unbounded: the case's
    own figure, still unbounded (lazily loaded kernels and Triton's specialisations can follow the length)."""
    limit, context = record["stack_limit_bytes"], record["context_bytes"]
    reservation = stack_reservation_bytes(limit, device)
    status = Status(Kind.MEASURED, here=record["measured_on"])
    where = f"{record['gpu']} ({record['device']}), {record['state']}, Triton {record['triton']}, torch {record['torch']}"
    measured_context = Figure(context, status, f"{where}: the process's non-PyTorch bytes before its first kernel")
    modules = Figure(record["nonpytorch_bytes"] - context - reservation, status,
                     f"{where}, {record['tokens']:,} tokens: {record['nonpytorch_bytes']:,} B alone after the first call "
                     f"minus the context ({context:,}) and the {limit:,}-B limit's reservation ({reservation:,})")
    if record["tokens"] != tokens:
        if pm.modules is not None and pm.modules.kind in (UNBOUNDED, ESTIMATED):
            modules = Figure(modules.bytes, said(UNBOUNDED, f"measured on this machine ({record['measured_on']}) at "
                                                 f"{record['tokens']:,} tokens, not at {tokens:,}: lazily loaded kernels "
                                                 "and Triton's specialisations can follow the length"), modules.source)
        else:
            modules = pm.modules
        return ProcessMemory(measured_context, modules, pm.stack, pm.library_name, pm.triton_cache,
                             pm.stack_limit_bytes, pm.growth, pm.notes, pm.triton)
    return ProcessMemory(
        measured_context, modules,
        Figure(reservation, status, f"limit {limit:,} B per thread x {resident_threads(device):,} resident threads, "
                                    f"2 MiB pages, read in the process ({where})"),
        pm.library_name, pm.triton_cache, limit, pm.growth if pm.stack_limit_bytes == limit else (), pm.notes, pm.triton)


def process_memory(device: Device, model, triton_cache: str = "cold", shape=None, raised_before: bool = False,
                   triton: str | None = None, derived_frames: bool = True) -> ProcessMemory:
    """The process memory of ``model`` on ``device`` (``_process_memory``), or, where this machine measured the case's
    process on that GPU (``measured_store``; read only with ``derived_frames``), that process's figures."""
    pm = _process_memory(device, model, triton_cache, shape, raised_before, triton, derived_frames)
    data_file = measured_case(device, model, shape, pm.triton) if derived_frames else None
    record = data_file and measured_store.lookup(device.name, data_file[0], triton_cache, data_file[1])
    return measured_here(pm, record, device, shape.tokens) if record else pm


def measured_case(device: Device, model, shape, triton: str | None) -> tuple[str, str] | None:
    """(the library data file, the store's case key: a layer's build options in it) under which this machine keeps a
    measured process of ``model`` at ``shape`` (None: a key alone, no shape, or a library without Triton data)."""
    if shape is None or isinstance(model, str):
        return None
    lib, _ = _library(device_entry(device), model.key, triton)
    if lib is None or "data" not in lib:
        return None
    options = dict(model.options)
    case = _case_key(f"{model.key.split('@')[0]}:{case_variant(options)}", shape)
    return lib["data"], measured_store.store_key(model.key, case, options)


RESERVATION_RULE = "(the limit for every resident thread, in 2 MiB pages)"


def _derivable(options: dict) -> bool:
    """Whether ``livebytes frames derive --model`` derives this whole model's step: not packed and the default loss
    (the deriver traces the step unpacked with the model's own loss; Liger's kernels are not in it)."""
    return "architecture" in options and not options.get("packed") and options.get("loss", "default") == "default"


def step_hint(model, shape, triton: str | None = None) -> Hint | None:
    """How the user replaces a whole model's estimated or missing stack limit by its step's own: derive the step on the
    CPU under ``triton`` (``livebytes frames derive --model``); None for a kernel or layer, or a step the deriver does
    not trace (``_derivable``)."""
    return _derive_step_hint({} if isinstance(model, str) else dict(model.options), shape, triton)


def _derive_step_hint(options: dict, shape, triton: str | None) -> Hint | None:
    """``step_hint`` of a model with ``options``."""
    if shape is None or not _derivable(options):
        return None
    return Hint(Act.DERIVE, StepCase(shape.mbs, shape.seq, bool(options.get("checkpoint")),
                                     options.get("precision", "bf16"), triton))


def _unlisted(device: Device, model, context: Figure, none: Figure, triton_cache: str, shape, triton: str | None,
              here: bool) -> ProcessMemory:
    """A model whose library the process-memory data do not list (an fla family no process ran): the context, no
    module figure, and its stack limit where its step was derived on the CPU at this length (``_model_limit_derived``)
    or, estimated, at a longer one (``_model_limit_derived_longer``), under ``triton`` or, where none is asked, the
    Triton that compiled it (no data say which Triton the GPU runs); else no stack counted, unbounded, with the
    command that derives it. A kernel or layer of such a library counts the context only."""
    family = (model if isinstance(model, str) else model.key).split("@")[0]
    options = {} if isinstance(model, str) else dict(model.options)
    if shape is None or "architecture" not in options:
        return ProcessMemory(context, None, none, family, triton_cache)
    wanted = triton or model_frames.ANY     # whichever Triton compiled it
    found = _model_limit_derived(shape, options, wanted, triton_cache, here) or \
        _model_limit_derived_longer(shape, options, wanted, here)
    if found is None:
        hint = step_hint(model, shape, triton)
        status = said(UNBOUNDED, "its step's Triton kernels' frames neither measured nor derived: no stack counted",
                      *(("; ", hint) if hint else ()))
        return ProcessMemory(context, None, Figure(0, status, ""), family, triton_cache)
    limit, status, source = found
    if device.process_memory_assumed_from:
        status = Status.of(([] if status.kind is Kind.DERIVED else [status])
                           + [_other_gpu_stack(device.process_memory_assumed_from, True)])
    return ProcessMemory(context, None, _limit_stack(limit, status, source, device), family, triton_cache, limit, (),
                         (), triton)


def _limit_stack(limit: int, status: Status, source: str, device: Device, margin: int = 0) -> Figure:
    """The stack reservation of a whole model's limit (read from its process or derived from its step), charged from
    the call's start."""
    return Figure(stack_reservation_bytes(limit, device), status,
                  f"limit {limit:,} B per thread x {resident_threads(device):,} resident threads, 2 MiB pages, {source}; "
                  "charged from the call's start (where the kernel that raises it first launches is not modelled)",
                  margin=margin)


def _other_gpu_stack(assumed_from: str, frames_used: bool) -> Status:
    """Why a stack reservation on a GPU no process measured is estimated: the reservation rule was read on
    ``assumed_from`` only, and where frames were used they are that GPU's compile (the local-memory bound alone uses
    none)."""
    frames = f"the {assumed_from}'s frames used ({get_device(assumed_from).arch}'s compile), and " if frames_used else ""
    return _off(assumed_from, f"{frames}the reservation rule {RESERVATION_RULE} measured on the {assumed_from} only")


def _process_memory(device: Device, model, triton_cache: str = "cold", shape=None, raised_before: bool = False,
                    triton: str | None = None, derived_frames: bool = True) -> ProcessMemory:
    """The process memory of ``model`` (a built or compiled model, or a key alone: no launches, no frames) on ``device``
    after a first call at ``shape`` in ``triton_cache`` state, its kernels compiled by ``triton`` (None: the model's
    default, ``triton_versions``). ``raised_before``: an earlier call of the process launched the same kernels (a
    warmup): the stack limit is raised from the start, no growth. ``derived_frames``: read the frames derived on this
    machine (``frames_store``) where the committed data lack the case (the record checks do not: the committed model)."""
    key = model if isinstance(model, str) else model.key
    assumed_from, entry = device.process_memory_assumed_from, device_entry(device)
    context = _figure(entry["context"], assumed_from)
    if triton is not None:
        check_triton(key, triton, device)
    lib, model_notes = _library(entry, key, triton)
    none = Figure(0, said(Kind.MEASURED, "no stack beyond the context's"), "")
    if lib is None:
        return _unlisted(device, model, context, none, triton_cache, shape, triton, derived_frames)
    if "data" not in lib:                       # no Triton kernels: one measured figure beyond the context
        return ProcessMemory(context, _figure(lib["modules"][triton_cache], assumed_from),
                             Figure(0, said(Kind.MEASURED, "within the modules figure"), ""), lib["name"], triton_cache,
                             notes=tuple(model_notes))
    data = data_json(DATA / lib["data"])
    family = key.split("@")[0]
    prefix = None if isinstance(model, str) else f"{family}:{case_variant(dict(model.options))}"
    case = None if shape is None or prefix is None else _case_key(prefix, shape)
    modules = _modules(data, family, triton_cache, case, None if isinstance(model, str) else dict(model.options))
    notes = model_notes
    if modules.kind is ESTIMATED:    # the family's figure at another case: its error and high end
        margin, error = _estimate_error(loo.KINDS[2], device)
        modules = Figure(modules.bytes, modules.status.plus(note(error)), modules.source, margin=margin)
    if assumed_from:
        modules = replace(modules, status=_off(assumed_from, f"the {assumed_from}'s figure"))
    if modules.kind in (UNBOUNDED, ESTIMATED) and case is not None:
        hint = _measure_hint(key, prefix, shape, lib.get("triton"), dict(model.options), lib["data"])
        modules = modules if hint is None else replace(modules, status=modules.status.plus(note(hint)))
    if shape is None or isinstance(model, str):
        return ProcessMemory(context, modules, Figure(0, said(UNBOUNDED, "no shape given: no stack frames looked up, "
                                                              "0 B counted"), ""),
                             lib["name"], triton_cache, notes=tuple(notes), triton=lib.get("triton"))
    measured_limit = _model_limit(data, prefix, shape, triton_cache, dict(model.options), lib.get("triton"),
                                  derived_frames)
    if measured_limit is not None:       # a traced model: its process's limit, its kernels' frames not logged one by one
        limit, status, source, error_kind = measured_limit
        margin = 0
        if status.kind is ESTIMATED:      # not measured here: the estimate's error (its tier's) and high end
            margin, error = _estimate_error(error_kind or loo.KINDS[1], device)
            status = status.plus(note(error))
            hint = step_hint(model, shape, lib.get("triton"))
            status = status if hint is None else status.plus(note(hint))
        if assumed_from:        # its process ran on the H200: another GPU's compile and thread count, as the frames'
            status = Status.of(([] if status == MEASURED else [status]) +
                               [_off(assumed_from, f"the {assumed_from}'s limit used (its process's, "
                                     f"{get_device(assumed_from).arch}'s compile), and the reservation rule "
                                     f"{RESERVATION_RULE} measured on the {assumed_from} only")])
        stack = _limit_stack(limit, status, source, device, margin)
        return ProcessMemory(context, modules, stack, lib["name"], triton_cache, limit, (), tuple(notes), lib.get("triton"))
    frames, frame_notes, provenance = _frame_table(data, prefix, shape, triton_cache, lib["data"] if derived_frames else None,
                                                   _derive_hint(key, prefix, shape, lib.get("triton")))
    launches = tuple((a.kernel, a.step) for a in model.autotuned)
    frames, estimate_notes = _estimated_frames(data, prefix, shape, frames, tuple(k for k, _ in launches), device,
                                               _derive_hint(key, prefix, shape, lib.get("triton")))
    frame_notes = frame_notes + estimate_notes
    limit, growth, kernel_notes = stack_timeline(frames, launches, device)
    notes_on_stack = frame_notes + kernel_notes + ([_other_gpu_stack(assumed_from, frames is not None)] if assumed_from else [])
    status = (provenance or DERIVED) if not notes_on_stack else Status.of(notes_on_stack)
    whence = ("CUDA's per-thread local-memory limit" if frames is None else
              "from the frames derived on this machine (estimator/frames_store.py)"
              if provenance is not None and provenance.here is not None else f"from {lib['data']}")
    margin = _estimate_error(loo.KINDS[0], device)[0] if estimate_notes else 0
    stack = Figure(stack_reservation_bytes(limit, device), status,
                   f"limit {limit:,} B per thread x {resident_threads(device):,} resident threads, 2 MiB pages, {whence}",
                   margin=margin)
    return ProcessMemory(context, modules, stack, lib["name"], triton_cache, limit, () if raised_before else growth,
                         tuple(notes), lib.get("triton"))

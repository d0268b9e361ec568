"""How a process-memory status reads (``estimator/process/status.py``): its kind's word, its reasons, the statuses they
cite and the commands that replace a figure by the case's own (``livebytes frames derive``, ``livebytes process
measure``). The core says what is known and why; this module alone says it in words.
"""
from __future__ import annotations

from livebytes.estimator.process.status import (Act, Assumption, Cite, Hint, Kind, LooError, Note, OffGpu, ProbeCase,
                                                Status, StepCase)

ON_THIS_MACHINE = "on this machine"
PROBE_DEFAULT_TOKENS = 4096      # the process-memory probe's one sequence when --seq-len is not given
LAYER_FLAGS = (("hidden", "--hidden-size"), ("layers", "--num-hidden-layers"), ("conv_size", "--conv-size"))
OFF_GPU = "its error on this GPU not measured (no process of this GPU committed)"
MIB = 2**20
NO_PROBE = ("no probe of this tool compiles or measures this case (validate/gpu/probes/cpu_frames.py and "
            "process_memory.py run FLA's kernels and layers alone, the plain contract without grouped value heads "
            "only), so the bound stands")


def status_words(status: Status) -> str:
    """``measured``, ``derived (how)``, ``measured (on this machine, day)``, or ``KIND: reason; reason ...``."""
    if status.notes:
        return f"{status.kind.value}: {reason_words(status)}"
    if status.here is not None:
        return f"{status.kind.value} ({ON_THIS_MACHINE}, {status.here})"
    return status.kind.value + (f" ({status.aside})" if status.aside else "")


def reason_words(status: Status) -> str:
    """A status's reasons without its kind's word, each after the last's semicolon."""
    return "; ".join(note_words(n) for n in status.notes)


def note_words(n: Note) -> str:
    return "".join(_part(p) for p in n.parts)


def _part(p) -> str:
    if isinstance(p, Cite):
        return status_words(p.status) if p.kind else reason_words(p.status)
    if isinstance(p, Hint):
        return hint_words(p)
    if isinstance(p, LooError):
        return loo_words(p)
    if isinstance(p, OffGpu):
        return f"off the {p.assumed_from}: {p.what}, {OFF_GPU}"
    return p


def loo_words(e: LooError) -> str:
    """``leave-one-out over 100 committed cases: -70 to +376 MiB; the high end (+70 MiB) counted``."""
    return (f"leave-one-out over {e.cases} committed cases: {e.low / MIB:+,.0f} to {e.high / MIB:+,.0f} MiB; the high "
            f"end (+{e.margin / MIB:,.0f} MiB) counted")


def hint_words(h: Hint) -> str:
    """How the user replaces the figure: the command, on a line of its own where rendered (after ``: livebytes``)."""
    if isinstance(h.case, StepCase):
        where = f" with Triton {h.case.triton} installed" if h.case.triton else ""
        return f"derive the step's own frames on the CPU{where} (minutes; no GPU): {step_derive_command(h.case)}"
    if h.act is Act.DERIVE:
        return (f"derive the case's own frames on a machine with Triton {h.case.triton} installed: "
                f"{derive_command(h.case)}" if h.case else NO_PROBE)
    return f"measure the case's process on the GPU itself (minutes): {measure_command(h.case)}" if h.case else ""


def case_flags(case: ProbeCase) -> str:
    """The command-line flags that name ``case``, as ``livebytes frames derive`` and ``livebytes process measure`` take
    them."""
    return (f"--impl {case.key}" + (f" --contract {case.contract}" if case.contract else "")
            + f" --head-dim {case.dim} --num-heads {case.heads}"
            + (f" --num-v-heads {case.v_heads}" if case.v_heads != case.heads else "")
            + (f" --triton {case.triton}" if case.triton else ""))


def derive_command(case: ProbeCase) -> str:
    """The command that derives the case's frames on a machine with its Triton installed
    (``validate/gpu/derive_frames.py`` behind it)."""
    return f"livebytes frames derive {case_flags(case)}"


def step_derive_command(case: StepCase) -> str:
    """The command that derives a whole model's step on this machine (``validate/gpu/derive_model_frames.py`` behind
    it); ``CONFIG`` is the config asked about (a preset's name or its file)."""
    return (f"livebytes frames derive --model CONFIG --seq-len {case.seq}"
            + (f" --batch-size {case.mbs}" if case.mbs != 1 else "") + (" --checkpoint" if case.checkpoint else "")
            + (f" --precision {case.precision}" if case.precision != "bf16" else ""))


def measure_command(case: ProbeCase) -> str:
    """The command that measures the case's process at its tokens as one sequence on this machine's GPU
    (``validate/gpu/measure_process.py`` behind it), a layer's build options among its flags."""
    layer = dict(case.layer)
    length = f" --seq-len {case.tokens}" if case.tokens != PROBE_DEFAULT_TOKENS else ""
    layer_flags = "".join(f" {flag} {layer[name]}" for name, flag in LAYER_FLAGS if name in layer)
    return (f"livebytes process measure {case_flags(case)}{length}{layer_flags}"
            + (" --checkpoint" if layer.get("checkpoint") else ""))


class Said(str):
    """An assumption's words, ``KIND: text``, that keep its kind apart: JSON writes the words; a renderer that puts
    something between the kind and the text (``cli.render.assumed_notes``) reads ``kind`` and ``text``."""
    kind: str
    text: str

    def __new__(cls, kind: str, text: str) -> Said:
        said = super().__new__(cls, f"{kind}: {text}")
        said.kind, said.text = kind, text
        return said

    def __getnewargs__(self) -> tuple[str, str]:       # pickled and copied as itself (a worker's answer)
        return self.kind, self.text


def assumption_words(a: Assumption) -> Said:
    """``KIND: PART: reason`` (a part's), ``unbounded: LIBRARY: reason`` or ``KIND: reason`` (a model's note)."""
    what = a.part.value if a.part else a.library
    return Said(a.status.kind.value, (f"{what}: " if what else "") + reason_words(a.status))


def assumptions_words(process) -> list[Said]:
    """Each of a process-memory answer's assumptions in words (``ProcessMemory.assumptions``)."""
    return [assumption_words(a) for a in process.assumptions]


def kept_here_words(process) -> list[str]:
    """``PART: status`` of each part this machine supplied (``ProcessMemory.kept_here``)."""
    return [f"{part.value}: {status_words(f.status)}" for part, f in process.kept_here]


def kind_word(kind: Kind) -> str:
    return kind.value

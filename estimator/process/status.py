"""What a process-memory figure rests on, typed: a ``Kind`` (measured, derived, bounded, estimated, unbounded) and the
reason behind it (``Status``), so that no caller reads a verdict back out of words.

A status's reason is a sequence of ``Note``s, each a sequence of parts: the rule's own words (``str``), another status
it rests on (``Cite``: a warm figure's cold one), an estimate's measured error (``LooError``), another GPU's figure
used (``OffGpu``) and how the user replaces the figure by the case's own (``Hint``: the case a probe of this tool can
run, or None where none can). How any of it reads, the commands included, is the
presentation's (``livebytes/process_words.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """How a figure is known, weakest last: ``Status.of`` takes the weakest of the notes it combines."""
    MEASURED = "measured"
    DERIVED = "derived"
    BOUNDED = "bounded"          # an upper bound, its proof in the notes
    ESTIMATED = "estimated"      # the nearest committed cases' figure, its leave-one-out error in the notes
    UNBOUNDED = "unbounded"      # a figure used though nothing bounds it, why in the notes


ASSUMED = (Kind.BOUNDED, Kind.ESTIMATED, Kind.UNBOUNDED)     # the kinds a verdict lists as assumptions


class Act(Enum):
    """What the user runs to replace a figure by the case's own."""
    DERIVE = "derive"            # compile the case's kernels for the GPU on the CPU: its stack frames
    MEASURE = "measure"          # run the case's first call alone on the GPU: its context, modules and stack limit


@dataclass(frozen=True)
class ProbeCase:
    """One case a probe of this tool runs: the model key, its FLA contract (None: the model has none), the sizes, the
    Triton version whose kernels it compiles (None: the default), the tokens of its one sequence and a layer model's
    build options (name, value)."""
    key: str
    contract: str | None
    dim: int
    heads: int
    v_heads: int
    triton: str | None
    tokens: int
    layer: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class StepCase:
    """A whole model's training step whose Triton kernels the CPU compile can derive (``livebytes frames derive
    --model``): the asked config's shape and the options that change which kernels it launches."""
    mbs: int
    seq: int
    checkpoint: bool
    precision: str
    triton: str | None = None       # the Triton whose kernels the answer reads (None: any, a family with no data)


@dataclass(frozen=True)
class Hint:
    """How the user replaces a figure: ``act`` on ``case`` (None: no probe of this tool runs the case)."""
    act: Act
    case: ProbeCase | StepCase | None


@dataclass(frozen=True)
class LooError:
    """An estimate's error, measured: its rule's leave-one-out over ``cases`` committed cases, from ``low`` to ``high``
    bytes (estimate - committed), and the high end the verdict counts (``margin``: the largest shortfall, 0 where the
    rule never fell short; ``process.loo``)."""
    cases: int
    low: int
    high: int
    margin: int


@dataclass(frozen=True)
class OffGpu:
    """A figure taken from another GPU's data (``assumed_from``) on one no process of this tool measured: ``what`` was
    used there; its error on this GPU is not measured."""
    assumed_from: str
    what: str


@dataclass(frozen=True)
class Cite:
    """Another figure's status a reason rests on, told in its words (``kind``: with its kind's word)."""
    status: Status
    kind: bool = True


@dataclass(frozen=True)
class Note:
    """One reason: the rule's words, cited statuses and hints, in the order they read."""
    parts: tuple[str | Cite | Hint | LooError | OffGpu, ...]


def note(*parts: str | Cite | Hint | LooError | OffGpu) -> Note:
    return Note(tuple(parts))


@dataclass(frozen=True)
class Status:
    """A figure's kind and its reason: ``notes`` (what a bound, an estimate or an unbounded figure rests on); for a
    measured or derived figure, where it comes from (``aside``) or the day or version of this machine's figure
    (``here``: measured or derived on this machine)."""
    kind: Kind
    notes: tuple[Note, ...] = ()
    aside: str | None = None
    here: str | None = None

    @staticmethod
    def of(statuses) -> Status:
        """One status resting on each of ``statuses`` (each bounded, estimated or unbounded): unbounded where any is,
        else estimated where any is, else bounded; their notes in order."""
        kinds = {s.kind for s in statuses}
        kind = next((k for k in (Kind.UNBOUNDED, Kind.ESTIMATED) if k in kinds), Kind.BOUNDED)
        return Status(kind, tuple(n for s in statuses for n in s.notes))

    def plus(self, *notes: Note) -> Status:
        """This status with ``notes`` after its own."""
        return Status(self.kind, self.notes + notes, self.aside, self.here)


def said(kind: Kind, *parts: str | Cite | Hint | LooError | OffGpu) -> Status:
    """A status of one note."""
    return Status(kind, (note(*parts),))


MEASURED = Status(Kind.MEASURED)
DERIVED = Status(Kind.DERIVED)


class Part(Enum):
    """The parts of a process's memory an assumption is about."""
    CONTEXT = "CUDA context"
    MODULES = "kernel modules"
    STACK = "stack reservation"


@dataclass(frozen=True)
class Assumption:
    """One thing a process-memory answer rests on beyond measured and derived figures: a part's status, a library
    without a module figure (``library``), or a model's own note (neither)."""
    status: Status
    part: Part | None = None
    library: str | None = None


def read_status(word: str) -> Status:
    """A committed data file's status (only ever a measured figure's, ``"measured"``)."""
    if word != Kind.MEASURED.value:
        raise ValueError(f"process-memory data: a figure's status is 'measured', not {word[:40]!r}")
    return MEASURED


def read_note(text: str) -> Status:
    """A committed data file's note on a model (``process_memory.json``'s ``models``): its kind's word, a colon, why."""
    word, sep, why = text.partition(": ")
    if not sep or word not in (Kind.BOUNDED.value, Kind.UNBOUNDED.value):
        raise ValueError(f"process_memory.json: a model's note must say bounded: or unbounded:, not {text[:40]!r}")
    return said(Kind(word), why)

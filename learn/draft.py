"""A learned model as data the engine runs, and as a draft module a person reviews against the source.

The draft has one step per allocation (in the traced order) and one buffer per matched allocation, in
bytes (dtype ``uint8``: traces carry byte counts, not element types); its group is not known from
traces. Unsolved buffers are left out and listed in the module's notes.
"""
from __future__ import annotations

from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source, Step
from .learn import Learned, LearnedBuffer, device_dependent, to_model_expr


def _source(b: LearnedBuffer) -> Source:
    return Source(b.file, b.function, int(b.line) if b.line.isdigit() else 0)


def _note(b: LearnedBuffer) -> str:
    parts = []
    if b.alternatives:
        parts.append("ambiguous: also " + ", ".join(a.text() for a in b.alternatives))
    if device_dependent(b):
        parts.append(device_dependent(b))
    return "; ".join(parts)


def draft_model(learned: Learned) -> LifetimeModel:
    solved = [b for b in learned.buffers if b.formula is not None]
    steps = tuple(Step(f"s{b.allocated:03d}", "traced", _source(b)) for b in learned.buffers)
    names = {b.allocated: f"s{b.allocated:03d}" for b in learned.buffers}
    buffers = tuple(
        Buffer(b.name, Group.WORKSPACE, (to_model_expr(b.formula),), "uint8", _source(b), names[b.allocated],
               None if b.freed_after is None else names[b.freed_after], note=_note(b))
        for b in solved)
    unsolved = tuple(f"unsolved: {b.site} #{b.occurrence} sizes {list(b.sizes)}" for b in learned.buffers if b.formula is None)
    return LifetimeModel(key=f"{learned.impl}+learned", implementation=learned.impl, version="learned",
                         summary=f"learned from {len(learned.traces)} traces", steps=steps, buffers=buffers,
                         notes=unsolved + learned.unexplained)


def draft_source(learned: Learned) -> str:
    """Python source of the draft model (``MODEL``), for review against the library source."""
    model = draft_model(learned)
    lines = [f'"""Draft lifetime model of {learned.impl}, learned by `livebytes learn` from {len(learned.traces)} traces.',
             "", "Review every buffer against the library source (dtype, group, lifetime step) before use.",
             "Tied symbols (equal in every trace): " + (", ".join("=".join(g) for g in learned.ties if len(g) > 1) or "none"),
             '"""', "from sympy import ceiling", "",
             "from livebytes.estimator.buffers import Buffer, Group, LifetimeModel, Source, Step",
             "from livebytes.estimator.symbols import DK, DV, H, HV, MBS, S", "", "STEPS = ("]
    lines += [f"    Step({s.name!r}, 'traced', Source({s.source.file!r}, {s.source.function!r}, {s.source.line}))," for s in model.steps]
    lines += [")", "", "BUFFERS = ("]
    for b in model.buffers:
        lines.append(f"    Buffer({b.name!r}, Group.WORKSPACE, ({b.shape[0]},), 'uint8',  # bytes")
        lines.append(f"           Source({b.source.file!r}, {b.source.function!r}, {b.source.line}), {b.allocated_at!r}, "
                     f"{b.freed_after!r}, note={b.note!r}),")
    lines += [")", "", f"NOTES = {model.notes!r}", "",
              f"MODEL = LifetimeModel(key={model.key!r}, implementation={model.implementation!r}, version='learned',",
              f"                      summary={model.summary!r}, steps=STEPS, buffers=BUFFERS, notes=NOTES)", ""]
    return "\n".join(lines)

"""Whole models' stack frames derived on the CPU: every Triton kernel a model's traced training step launches, each
autotune candidate compiled for the GPU's architecture (``validate/gpu/probes/model_frames.py``), kept as data
(``data/process/model_frames_H200.json``, written by ``validate/gpu/derive_model_frames.py``) so that an answer compiles
nothing.

The driver's stack limit after a cold first step is the largest frame its launches loaded, rounded up to 16 B
(``driver.driver_stack_limit``): this module gives the largest derived frame of a step, which ``memory`` turns into the
limit. A derivation is one record's step (its config less depth, precision, packing, batch and length: Triton
specialises integer arguments by value, so the length is part of it); its figure stands for that step only. Not in
it: cuBLAS's, cuDNN's and PyTorch's own kernels (their frames are not compiled here), and a derivation that stopped
where the traced step raised (``partial``: never read).

A user's own config is derived on demand (``livebytes frames derive --model``): its entry, in the data file's form, is
kept in the private, signed cache (``save_here``; ``cache.write_signed``) and read after the committed ones
(``known``), its status saying it was derived on this machine (``DerivedStep.here``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..cache import read_signed, signed_names, write_signed

DATA = Path(__file__).resolve().parent.parent / "data" / "process" / "model_frames_H200.json"
ANY = "*"       # a Triton version that matches any (a family whose process data name none: ``memory._unlisted``)


@dataclass(frozen=True)
class DerivedStep:
    """One record's step derived: where it is kept (``record``), its case key and shape, what build it ran
    (``architecture``: the config less depth, ``validate/check/frames.model_build``), the Triton that compiled it, and
    its largest counted frame with the kernel whose it is."""
    record: str
    case: str
    mbs: int
    seq: int
    architecture: str
    precision: str
    packed: bool
    triton: str
    frame: int
    kernel: str
    measured: int | None = None     # the stack limit the record measured after its first step (None: not measured)
    ptxas: str = ""                 # the ptxas that compiled its sm90 cubins (an entry of this machine names it)
    here: bool = False              # derived on this machine (``save_here``), not committed

    @property
    def tokens(self) -> int:
        return self.mbs * self.seq

    @property
    def name(self) -> str:
        """The record's file name without its folder and suffix (``h200_run23_k1-packed``)."""
        return Path(self.record).stem


def step_of(record: str, entry: dict, here: bool = False) -> DerivedStep | None:
    """The derived step a data entry holds; None for a partial one or one without a counted frame. ``here``: an entry
    this machine derived (``save_here``)."""
    if entry.get("partial") or not entry.get("frames"):
        return None
    kernel, frame = max(entry["frames"].items(), key=lambda kv: (kv[1], kv[0]))
    return DerivedStep(record, entry["case"], int(entry["mbs"]), int(entry["seq"]), entry["architecture"],
                       entry["precision"], bool(entry["packed"]), entry["triton"], int(frame), kernel,
                       entry.get("measured_limit_bytes"), entry.get("ptxas", ""), here)


def steps_in(data: dict) -> tuple[DerivedStep, ...]:
    """Every complete derived step of a data file's ``records``, in the file's order."""
    return tuple(s for s in (step_of(k, v) for k, v in data.get("records", {}).items()) if s is not None)


@lru_cache(maxsize=1)
def steps() -> tuple[DerivedStep, ...]:
    """The committed derived steps (none where the data file is absent)."""
    return steps_in(json.loads(DATA.read_text())) if DATA.exists() else ()


def for_records(records, triton: str, derived: tuple[DerivedStep, ...] | None = None) -> DerivedStep | None:
    """The derived step of the largest frame among ``records`` (record paths) compiled by ``triton``; None where none
    of them was derived."""
    wanted = set(records)
    found = [s for s in (steps() if derived is None else derived) if s.record in wanted and s.triton == triton]
    return max(found, key=lambda s: (s.frame, s.record)) if found else None


def for_step(architecture: str, precision: str, packed: bool, mbs: int, seq: int, triton: str,
             derived: tuple[DerivedStep, ...] | None = None) -> DerivedStep | None:
    """A derived step of exactly this build, precision, packing, batch and length under ``triton`` (the largest frame
    where several are); None where none was derived."""
    found = [s for s in (steps() if derived is None else derived)
             if (s.architecture, s.precision, s.packed, s.mbs, s.seq) == (architecture, precision, packed, mbs, seq)
             and triton in (s.triton, ANY)]
    return max(found, key=lambda s: (s.frame, s.record)) if found else None


def next_longer(architecture: str, precision: str, packed: bool, tokens: int, triton: str,
                derived: tuple[DerivedStep, ...] | None = None) -> DerivedStep | None:
    """The derived step of this build, precision and packing under ``triton`` at the shortest length above ``tokens``
    (any batch: the tokens count); None where none was derived longer."""
    found = [s for s in (steps() if derived is None else derived)
             if (s.architecture, s.precision, s.packed) == (architecture, precision, packed)
             and triton in (s.triton, ANY) and s.tokens > tokens]
    return min(found, key=lambda s: (s.tokens, -s.frame, s.record)) if found else None


# ------------------------------------------------------------------------------ derived on this machine

FOLDER = "derived_model_frames"      # the private cache's folder of the steps derived here (``cache.write_signed``)
REQUIRED = {"case": str, "architecture": str, "mbs": int, "seq": int, "precision": str, "packed": bool,
            "triton": str, "ptxas": str, "frames": dict}


def _valid(entry) -> bool:
    """An entry in the data file's form, complete (never a partial derivation), every frame a non-negative int."""
    return (isinstance(entry, dict) and all(isinstance(entry.get(k), t) for k, t in REQUIRED.items())
            and not entry.get("partial") and entry["frames"]
            and all(type(v) is int and v >= 0 for v in entry["frames"].values()))


def _store_name(entry: dict) -> str:
    """The private cache's name of a derived step: its build, precision, packing, shape and Triton (what
    ``for_step`` matches), so two configs of one name (every HF checkpoint's ``config.json``) never replace each
    other, and deriving the same step again replaces it."""
    return (f"{entry['architecture']}|{entry['precision']}|{'packed' if entry['packed'] else '-'}|"
            f"{entry['mbs']}x{entry['seq']}|{entry['triton']}")


def save_here(record: str, entry: dict) -> bool:
    """Keep ``entry`` (``derive_model_frames.entry``'s form) as the step ``record`` (``CONFIG#MBSxSEQ``, its name in
    answers) derived on this machine; False where the private cache cannot be written. A partial or malformed entry is
    refused."""
    if not _valid(entry):
        raise ValueError(f"not a complete derived step: {str(entry)[:120]}")
    return write_signed(FOLDER, _store_name(entry), {**entry, "record": record})


def steps_here() -> tuple[DerivedStep, ...]:
    """The steps derived on this machine, each signature checked (one that fails it, or malformed, is never read)."""
    found = (read_signed(FOLDER, name) for name in signed_names(FOLDER))
    return tuple(s for s in (step_of(e["record"], e, here=True) for e in found
                             if _valid(e) and isinstance(e.get("record"), str)) if s is not None)


def known(here: bool = True) -> tuple[DerivedStep, ...]:
    """The committed derived steps, then (``here``) those derived on this machine."""
    return steps() + (steps_here() if here else ())

"""The stack-frame calls ``livebytes frames`` runs (the command is the lead's, ``cli/commands/frames.py``): derive one
case's frames on this machine, and list the cases derived. Where the committed data lack a case, the process-memory
model estimates its kernels' frames from the nearest committed cases (``estimator/process/estimate.py``, labelled
``estimated:`` with the rule's leave-one-out error, its high end counted by the verdict); a derived case replaces that
estimate by its own figure, labelled ``derived (on this machine, Triton X)``.

    import livebytes.frames as frames       # or: from livebytes.frames import derive_frames
    frames.derive_frames("fla-kda@0.6.0", num_heads=40, head_dim=128, contract="report", triton="3.6.0")
    frames.derived_frames()
    frames.derive_model_frames("config.json", seq_len="32K", checkpoint=True)   # a whole model's step

A whole model's step (``derive_model_frames``) is derived the same way (every Triton kernel its traced step launches,
each autotune candidate compiled for sm90, ``validate/gpu/derive_model_frames.py``), kept in the private cache and read
by every later answer of the same config at that batch and length (``estimator.process.model_frames.known``).
"""
from __future__ import annotations

from dataclasses import dataclass
import sys
from typing import Optional

from .arguments import checked, size
from livebytes.estimator.devices import get_device
from livebytes.estimator.process.memory import triton_versions
from livebytes.estimator.process.driver import driver_stack_limit, stack_reservation_bytes
from livebytes.estimator.registry import resolve_options, spec
from livebytes.validate.gpu.derive_frames import derive
from livebytes.validate.gpu.derive_model_frames import derive_here
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.process import model_frames
from livebytes.estimator.shapes import Shape, parse_size
from livebytes.estimator.process import frames_store
from livebytes.estimator import cache


@dataclass(frozen=True)
class DerivedFrames:
    """One derived case: where it is kept (``data_file``, ``case``), what compiled it, each kernel's largest cold frame,
    and what the estimator now takes for it on the H200 (the driver's stack limit and its reservation)."""
    case: str
    data_file: str
    triton: str
    ptxas: str
    frames: dict
    stack_limit_bytes: int
    reservation_bytes: int
    stored: bool            # False: the private cache could not be written (nothing kept)

    def to_dict(self) -> dict:
        return {"case": self.case, "data_file": self.data_file, "triton": self.triton, "ptxas": self.ptxas,
                "frames": dict(self.frames), "stack_limit_bytes": self.stack_limit_bytes,
                "reservation_bytes": self.reservation_bytes, "stored": self.stored}


def derive_frames_at(key: str, shape, options: Optional[dict] = None, triton: Optional[str] = None, *,
                     python: Optional[str] = None, timeout: Optional[float] = None, run=None) -> DerivedFrames:
    """What ``livebytes frames derive`` runs, with what its flags parsed to: ``key``'s kernels at ``shape``'s head dim,
    head count and value heads (``options``: the contract; its default where not given), compiled for sm90 on this
    machine's CPU by the installed Triton, which must be ``triton`` (None: the model's default version in the data).
    Takes minutes (every autotune candidate compiles); needs triton and fla-core, no GPU. Refused in one line
    (``LivebytesError``): a case the committed data hold, one the probe cannot compile, another installed Triton."""
    resolved = dict(resolve_options(spec(key), dict(options or {})))
    chosen = triton or next(iter(triton_versions(key)), None)
    extra = {k: v for k, v in (("python", python), ("run", run)) if v is not None}
    summary = derive(key, shape, chosen or "", resolved, timeout=timeout, **extra)
    limit = driver_stack_limit(max(summary["frames"].values()))
    return DerivedFrames(summary["key"], summary["data_file"], summary["triton"], summary["ptxas"], summary["frames"],
                         limit, stack_reservation_bytes(limit, get_device("H200")), summary["stored"])


@checked()
def derive_frames(impl: str, *, num_heads: int, head_dim: int = 128, num_v_heads: Optional[int] = None,
                  contract: Optional[str] = None, triton: Optional[str] = None, python: Optional[str] = None,
                  timeout: Optional[float] = None) -> DerivedFrames:
    """Derive the stack frames of ``impl`` (a registry key, ``fla-kda@0.6.0``) at ``num_heads`` / ``head_dim`` /
    ``num_v_heads`` (the value heads; None: ``num_heads``) under ``contract`` (``report``/``plain``, fla-kda's) and
    ``triton`` (the installed Triton's version, one the process-memory data hold; None: the model's default), and keep
    them for later answers on this machine. ``python``: another interpreter whose Triton and fla-core compile.
    Length and batch change no frame (one sequence of 4,096 tokens is compiled)."""
    heads, dim, v_heads = _sizes(num_heads=num_heads, head_dim=head_dim, num_v_heads=num_v_heads)
    options = {"contract": contract} if contract is not None else {}
    if v_heads is not None and v_heads != heads:
        options["gva"] = True
    return derive_frames_at(impl, Shape(1, 4096, heads, dim, v_heads), options, triton, python=python, timeout=timeout)


@dataclass(frozen=True)
class StepFrames:
    """One whole model's step derived on this machine: its label (``record``: the config's name and ``#MBSxSEQ``; the
    private cache keys it by build, precision, shape and Triton), its case key, what compiled it, each kernel's largest
    frame, and the driver's stack limit it gives."""
    record: str
    case: str
    triton: str
    ptxas: str
    frames: dict
    stack_limit_bytes: int
    seconds: float
    stored: bool            # False: the private cache could not be written (nothing kept)


@checked(kinds={"workers": size})
def derive_model_frames(model: str, *, seq_len, batch_size=1, checkpoint: bool = False, precision: str = "bf16",
                        python: Optional[str] = None, workers: Optional[int] = None,
                        timeout: Optional[float] = None) -> StepFrames:
    """Derive the stack frames of ``model``'s training step (a preset's name or a config file, as ``--model``) at
    ``batch_size`` x ``seq_len`` (``checkpoint``, ``precision``: the step's) on this machine's CPU and keep them for
    later answers: minutes (the step traced on meta tensors, every launch compiled for sm90, ``workers`` side by side,
    default every CPU); needs triton and flash-linear-attention (the ``model`` extra), no GPU. ``python``: another
    interpreter whose Triton compiles. Refused in one line: a dict config (the step is keyed by the config's name), a
    config that does not read, a trace that stops before its end."""
    if not isinstance(model, str):
        raise LivebytesError("derive_model_frames: model must be a preset's name or a config file's path (the derived "
                             f"step is kept under its name), not {type(model).__name__}")
    mbs, seq, jobs = _sizes(batch_size=batch_size, seq_len=seq_len, workers=workers)
    found = derive_here(model, mbs, seq, bool(checkpoint), precision, python=python or sys.executable, workers=jobs,
                        timeout=timeout)
    return StepFrames(found["record"], found["case"], found["triton"], found["ptxas"], found["frames"],
                       found["stack_limit_bytes"], found["seconds"], found["stored"])


@checked()
def derived_steps() -> list[dict]:
    """The whole models' steps derived on this machine: ``{"record", "case", "triton", "ptxas", "largest_frame_bytes",
    "kernel"}`` each, by name."""
    return [{"record": s.record, "case": s.case, "triton": s.triton, "ptxas": s.ptxas,
             "largest_frame_bytes": s.frame, "kernel": s.kernel} for s in model_frames.steps_here()]


def _sizes(**given) -> tuple:
    """Each keyword a positive size (``shapes.parse_size``), refused in one line by its own name (``num_heads``, not
    the shape's ``heads``); None stays None."""
    return tuple(None if v is None else parse_size(v, name) for name, v in given.items())


@checked()
def derived_frames() -> list[dict]:
    """The cases derived on this machine: ``{"data_file", "case", "triton", "ptxas", "largest_frame_bytes"}`` each."""
    return frames_store.derived_cases()


@checked()
def why_none_read() -> str | None:
    """Why the frames derived on this machine cannot be read, in one line, or None (``cache.signed_folder_problem``)."""
    return cache.signed_folder_problem(frames_store.FOLDER)

"""The process calls ``livebytes process`` runs (the command is the lead's, ``cli/commands/process.py``): measure one
case's process on this machine's GPU, and list the processes measured. Where no committed process measured a case, the
process-memory model has no bound on its loaded kernel modules (the driver's placement follows no rule we can state)
and says so with this call's command; a measured case replaces that by its own figures, labelled ``measured (on this
machine, DATE)``, for the GPU it ran on.

    import livebytes.process as process
    process.measure_process("fla-kda@0.6.0", num_heads=8, head_dim=256, contract="report", triton="3.6.0")
    process.measured_processes()
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .arguments import checked
from livebytes.estimator.process.memory import triton_versions
from livebytes.estimator.process.frames_store import PROBE_IMPLS
from livebytes.estimator.registry import get_model, resolve_options, shape_options, spec
from livebytes.validate.gpu.derive_frames import probe_case
from livebytes.validate.gpu.measure_process import measure
from livebytes.estimator.devices import get_device
from livebytes.estimator.process.driver import stack_reservation_bytes
from livebytes.estimator.shapes import Shape
from .frames import _sizes
from livebytes.estimator.process import measured_store
from livebytes.estimator import cache


@dataclass(frozen=True)
class MeasuredProcess:
    """One process measured on this machine: its case, state and GPU, and its figures (the context before the first
    kernel, the non-PyTorch bytes after the call, the driver's stack limit), and the modules the estimator now takes."""
    case: str
    state: str
    device: str
    triton: str
    measured_on: str        # the date, ISO
    context_bytes: int
    nonpytorch_bytes: int
    stack_limit_bytes: int
    modules_bytes: int
    stored: bool            # False: the private cache could not be written (nothing kept)

    def to_dict(self) -> dict:
        return {"case": self.case, "state": self.state, "device": self.device, "triton": self.triton,
                "measured_on": self.measured_on, "context_bytes": self.context_bytes, "nonpytorch_bytes": self.nonpytorch_bytes,
                "stack_limit_bytes": self.stack_limit_bytes, "modules_bytes": self.modules_bytes, "stored": self.stored}


def measure_process_at(key: str, shape, options: Optional[dict] = None, triton: Optional[str] = None, *,
                       python: Optional[str] = None, timeout: Optional[float] = None, run=None,
                       keep=None, ask=None) -> list[MeasuredProcess]:
    """What ``livebytes process measure`` runs, with what its flags parsed to: ``key``'s first call at ``shape``'s head
    dim, head counts and tokens, one sequence (``options``: the contract) on this machine's GPU, cold then warm, under the
    installed Triton, which must be ``triton`` (None: the model's default in the data). Refused in one line
    (``LivebytesError``): a case the probe cannot run, another installed Triton or fla-core, a GPU no preset describes,
    a process that was not alone on the GPU. ``keep``: a folder for the probe's own files (kept whatever the outcome);
    ``run`` and ``ask``: the probe's runner and the installed versions' inspection (``measure``'s; tests fake them)."""
    given = {**shape_options(key, shape), **dict(options or {})}
    if key.split("@")[0] not in {p.split(":")[0] for p in PROBE_IMPLS}:     # a whole model: refused before it is built
        probe_case(key, given, shape, "the process-memory probe runs")
    probe_case(key, dict(resolve_options(spec(key), given)), shape, "the process-memory probe runs")
    # every option the model is built with (a layer's defaults among them): the store's key is the answer's
    resolved = dict(get_model(key, None, **given).options)
    chosen = triton or next(iter(triton_versions(key)), None)
    extra = {k: v for k, v in (("python", python), ("run", run), ("timeout", timeout), ("keep", keep), ("ask", ask))
             if v is not None}
    return [_measured(r, r["stored"]) for r in measure(key, shape, chosen, resolved, **extra)]


def _measured(record: dict, stored: bool) -> MeasuredProcess:
    """A stored record (``estimator.process.measured_store``) as the result, with the modules the estimator takes from it
    (``memory.measured_here``: non-PyTorch bytes less the context and the stack limit's reservation on its GPU)."""
    reservation = stack_reservation_bytes(record["stack_limit_bytes"], get_device(record["device"]))
    return MeasuredProcess(record["key"], record["state"], record["device"], record["triton"], record["measured_on"],
                           record["context_bytes"], record["nonpytorch_bytes"], record["stack_limit_bytes"],
                           record["nonpytorch_bytes"] - record["context_bytes"] - reservation, stored)


@checked()
def measure_process(impl: str, *, num_heads: int, head_dim: int = 128, num_v_heads: Optional[int] = None,
                    seq_len: int = 4096, contract: Optional[str] = None, triton: Optional[str] = None,
                    hidden_size: Optional[int] = None,
                    num_hidden_layers: Optional[int] = None, checkpoint: Optional[bool] = None,
                    conv_size: Optional[int] = None, python: Optional[str] = None,
                    timeout: Optional[float] = None) -> list[MeasuredProcess]:
    """Measure the process of ``impl`` (a registry key, ``fla-kda@0.6.0``) at ``num_heads`` / ``head_dim`` /
    ``num_v_heads`` (the value heads; None: ``num_heads``) under ``contract`` (``report``/``plain``, fla-kda's) and
    ``triton`` (the installed Triton's version; None: the model's default) on this machine's GPU, cold then warm, and
    keep both for later answers on this machine about that GPU. One sequence of ``seq_len`` tokens runs (a reading
    answers as measured at its own length only). A layer model
    (``fla-kda-layer@0.6.0``) takes its build options too (``hidden_size``, ``num_hidden_layers``, ``checkpoint``,
    ``conv_size``; None: its defaults): its process is measured, and answers, at those."""

    seq, heads, dim, v_heads, hidden, layers, conv = _sizes(
        seq_len=seq_len, num_heads=num_heads, head_dim=head_dim, num_v_heads=num_v_heads, hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers, conv_size=conv_size)
    options = {"contract": contract} if contract is not None else {}
    shape = Shape(1, seq, heads, dim, v_heads, hidden=hidden, layers=layers, checkpoint=checkpoint, conv_size=conv)
    return measure_process_at(impl, shape, options, triton, python=python, timeout=timeout)


@checked()
def measured_processes() -> list[MeasuredProcess]:
    """The processes measured on this machine, each as ``measure_process`` returned it."""
    return [_measured(r, True) for r in measured_store.measured_cases()]


@checked()
def why_none_read() -> str | None:
    """Why the processes kept on this machine cannot be read, in one line (the cache folder or its subfolder not this
    user's, no signing key), or None: ``measured_processes`` then lists all there are."""
    return cache.signed_folder_problem(measured_store.FOLDER)

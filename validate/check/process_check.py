"""Every measured non-PyTorch figure against the process-memory model (``estimator.process.memory``): run 13's side-by-side
processes (every head dim, both phases, cold and warm) and each boundary probe process (its first trial, alone on the
GPU). One row per measured process; ``docs/capacity.md``'s process table and ``tests/test_process_memory.py`` read it."""
from __future__ import annotations

from dataclasses import dataclass

from livebytes.estimator.devices import get_device
from livebytes.estimator.process.memory import process_memory
from livebytes.estimator.process.status import Assumption
from livebytes.estimator.registry import get_model
from livebytes.estimator.shapes import Shape

from . import frames as frames_tool
from .probe_records import load_probe, probe_files


@dataclass(frozen=True)
class ProcessRow:
    label: str                  # model, contract, shape
    state: str                  # cold | warm (the Triton cache)
    record: str
    measured_limit: int | None  # cudaLimitStackSize after the first call (None: not recorded)
    predicted_limit: int
    measured_bytes: int
    predicted_bytes: int
    assumptions: tuple[Assumption, ...]   # typed (``process.status``); ``livebytes.process_words`` says them

    @property
    def difference_bytes(self) -> int:
        return self.predicted_bytes - self.measured_bytes


def _label(key: str, options: dict, shape: str) -> str:
    return " ".join(filter(None, (key, options.get("contract"), shape)))


def _row(label, state, record, model, shape, measured_limit, measured_bytes, triton: str | None = None) -> ProcessRow:
    """``triton``: the version the process ran (a matrix row's), whose kernels' data the model reads."""
    p = process_memory(get_device("H200"), model, state, shape, triton=triton, derived_frames=False)
    return ProcessRow(label, state, record, measured_limit, p.stack_limit_bytes, measured_bytes, p.bytes, tuple(p.assumptions))


def matrix_rows() -> list[ProcessRow]:
    out = []
    for r in frames_tool.complete(frames_tool.matrix_rows()):
        c = r["case"]
        key, options = frames_tool.case_model(c)
        layer = (c.get("layer") or frames_tool.PROBE_LAYER) if c["impl"] in frames_tool.LAYER_IMPLS else {}
        shape = Shape(1, c["tokens"], c["heads"], c["dim"], c["v_heads"] if options.get("gva") else None)
        model = get_model(key, "H200", **options, **layer)         # a layer as the probe built it
        size = f" hidden {layer['hidden']}" if layer else ""
        label = _label(key, options, f"D{c['dim']} H{c['heads']}/HV{c['v_heads']}{size} T{c['tokens']} Triton {r['triton']}")
        out.append(_row(label, c["state"], r["record"].split("records/runs/", 1)[-1], model, shape,
                        r["stack_limit_bytes"], r["nonpytorch_bytes"], r["triton"]))
    return out


def probe_rows() -> list[ProcessRow]:
    """Each probe process's first trial (later trials hold the same figure or an earlier trial's caches)."""
    out = []
    for path in probe_files():
        probe = load_probe(path)
        if not probe.trials:
            continue
        t = probe.trials[0]
        state = "warm" if probe.triton_cache == "warm" else "cold"
        first = t.measured.get("first_call", {})
        s = t.shape
        label = _label(probe.key, probe.options, f"D{s.dim} H{s.heads}/HV{s.hv} S{s.seq}")
        out.append(_row(label, state, path.name, probe.model(), s, first.get("stack_limit_bytes"),
                        t.measured["nonpytorch_after_bytes"]))
    return out


def rows() -> list[ProcessRow]:
    return matrix_rows() + probe_rows()

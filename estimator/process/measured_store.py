"""Processes a user measured on this machine's GPU, kept in the private, signed cache (``cache.write_signed``: JSON,
HMAC under the cache's own key, a 0600 file in a 0700 folder of ours), and read by ``estimator/process/memory.py`` before
anything it would otherwise label ``unbounded``.

The loaded kernel modules have no rule we can state (the driver's placement of code in 2 MiB pages
refutes every rule fitted to it, ``validate/data/records/runs/cpu_frames/MODULES.md``), so a case no committed process
measured has no bound on them. The one sound figure is the case's own process: the process-memory probe
(``validate/gpu/probes/process_memory.py``) runs its first call alone on the GPU, cold (an empty Triton cache) and then
warm (over that cache), and reads, in that process, the CUDA context before any kernel, and, after the call, its
non-PyTorch bytes and the driver's stack limit. ``validate/gpu/measure_process.py`` runs it and calls ``save``.

A record is one case (``fla-kda@0.6.0:report D256 H8 HV8``: ``validate/check/frames.py``'s ``case_key`` with the
model's full key, ``store_key``) of one library data file (library, Triton), in one state, on one GPU (the preset its
product name matches), at one number of tokens: a figure of another GPU, Triton, implementation or state is never read
for this one, and one of another length is read as unbounded (``memory.measured_here``).
"""
from __future__ import annotations

from .frames_store import LAYER_OPTIONS
from ..cache import write_signed, read_signed, signed_names

FOLDER = "measured_processes"
STATES = ("cold", "warm")
# What a stored record must hold to be read (every figure an int: bytes, or the stack limit per thread)
FIGURES = ("context_bytes", "nonpytorch_bytes", "stack_limit_bytes", "tokens")
REQUIRED = ("key", "device", "gpu", "state", "triton", "fla", "torch", "measured_on", *FIGURES)


def store_key(model_key: str, case: str, options: dict) -> str:
    """The store's case key: the committed data's (``fla-kda-layer:- D128 H16 HV32``) with the model's full key for its
    family (a snapshot modelled on fla-core 0.6.0's code path is another implementation: ``fla-kda@07b80f27`` never
    reads ``fla-kda@0.6.0``'s process), and for a layer model its build options, which pick other GEMM shapes and
    kernels (``... hidden=2048 layers=1 checkpoint=False conv_size=4``): a process measured at one hidden size answers
    for no other."""
    _, rest = case.split(":", 1)
    layer = [f"{name}={options[name]}" for name in LAYER_OPTIONS if name in options]
    return " ".join([f"{model_key}:{rest}", *layer])


def record_name(device: str, data_file: str, state: str, case: str) -> str:
    """The store's name of one measured process: ``H200|fla-core-0.6.0_triton-3.6.0_H200.json|cold|fla-kda@0.6.0:report
    D256 H8 HV8``."""
    return f"{device}|{data_file}|{state}|{case}"


def _valid(record) -> bool:
    """A record ``save`` accepts: every field there, the state one of ``STATES``, every figure a non-negative int, and
    the non-PyTorch bytes at least the context (the context is part of them)."""
    return (isinstance(record, dict) and all(k in record for k in REQUIRED) and record["state"] in STATES
            and all(isinstance(record[k], int) and not isinstance(record[k], bool) and record[k] >= 0 for k in FIGURES)
            and record["nonpytorch_bytes"] >= record["context_bytes"])


def save(data_file: str, record: dict) -> bool:
    """Keep ``record`` (one process the probe measured) under ``data_file``; False where the private cache cannot be
    written. A record missing a field or holding a figure that is no byte count is refused."""
    if not _valid(record):
        raise ValueError(f"not a complete record of a measured process: {str(record)[:120]}")
    return write_signed(FOLDER, record_name(record["device"], data_file, record["state"], record["key"]), record)


def lookup(device: str, data_file: str, state: str, case: str) -> dict | None:
    """The process this machine measured for ``case`` under ``data_file`` in ``state`` on ``device``, or None (none kept,
    or one that fails its signature or its shape: never read)."""
    record = read_signed(FOLDER, record_name(device, data_file, state, case))
    return record if _valid(record) and (record["key"], record["device"], record["state"]) == (case, device, state) else None


def measured_cases() -> list[dict]:
    """Every process measured on this machine: its record with the ``data_file`` it is kept under, sorted by name."""
    out = []
    for name in signed_names(FOLDER):
        parts = name.split("|", 3)
        if len(parts) != 4:            # signed with our key but no name ``record_name`` gives: no measured process
            continue
        record = lookup(*parts)
        if record is not None:
            out.append({**record, "data_file": parts[1]})
    return out

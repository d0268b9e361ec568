"""Stack frames a user derived on this machine, kept in the private, signed cache (``cache.write_signed``: JSON, HMAC
under the cache's own key, a 0600 file in a 0700 folder of ours), and read by ``estimator/process/memory.py`` after the
committed data (``data/process/*.json``) and before the estimate from the nearest committed cases (``process.estimate``).

A record is one case of one library data file (``fla-core-0.6.0_triton-3.6.0_H200.json``: library, Triton, device)
and one case key (``fla-kda:report D128 H40 HV40``, ``validate/check/frames.py``'s ``case_key``): the summary line the
CPU compile probe (``validate/gpu/probes/cpu_frames.py``) wrote for it, each kernel's largest cold frame. The probe
derives cold frames only (which candidate the autotuner keeps is a GPU timing), so only a cold case is stored; a warm
one is bounded by it as by committed cold frames. ``validate/gpu/derive_frames.py`` runs the probe and calls ``save``.

This module also names which cases the probe can compile (``PROBE_IMPLS``, ``probe_case``), so the estimator's
status can say how to replace its bound with the case's own frames (the command: ``livebytes.process_words``).
"""
from __future__ import annotations

from .status import ProbeCase
from ..cache import write_signed, read_signed, signed_names

FOLDER = "derived_frames"

# The process-memory data's case prefix (family:contract) -> the CPU compile probe's impl (cpu_frames.parse_cases)
PROBE_IMPLS = {"fla-kda:report": "fla-report", "fla-kda:plain": "fla-plain", "fla-kda-fwd:report": "fla-report-fwd",
               "fla-kda-fwd:plain": "fla-plain-fwd", "fla-gdn:-": "fla-gdn", "fla-gdn-fwd:-": "fla-gdn-fwd",
               "fla-kda-layer:-": "fla-kda-layer", "fla-gdn-layer:-": "fla-gdn-layer"}

# What a stored summary must hold to be read (the probe's summary line has more; these are the ones used)
REQUIRED = ("key", "frames", "triton", "ptxas", "target", "fla")


def record_name(data_file: str, case: str) -> str:
    """The store's name of a case of one library data file: ``fla-core-0.6.0_triton-3.6.0_H200.json|fla-kda:report D128
    H40 HV40``."""
    return f"{data_file}|{case}"


def _valid(summary) -> bool:
    """A cold summary line the probe writes: a finished call (a partial one holds only the kernels before a raise),
    every frame a non-negative int."""
    return (isinstance(summary, dict) and all(k in summary for k in REQUIRED) and not summary.get("error")
            and isinstance(summary["frames"], dict) and summary["frames"]
            and all(isinstance(v, int) and v >= 0 for v in summary["frames"].values()))


def save(data_file: str, summary: dict) -> bool:
    """Keep ``summary`` (the probe's line for one case) as the derived frames of its case under ``data_file``; False
    where the private cache cannot be written. A summary of a call that raised, or without frames, is refused."""
    if not _valid(summary):
        raise ValueError(f"not a complete summary of the CPU compile probe: {str(summary)[:120]}")
    return write_signed(FOLDER, record_name(data_file, summary["key"]), summary)


def lookup(data_file: str, case: str) -> dict | None:
    """The summary this machine derived for ``case`` under ``data_file``, or None (none kept, or one that fails its
    signature or its shape: never read)."""
    summary = read_signed(FOLDER, record_name(data_file, case))
    return summary if _valid(summary) and summary["key"] == case else None


def derived_cases() -> list[dict]:
    """Every case derived on this machine: ``{"data_file", "case", "triton", "ptxas", "largest_frame_bytes"}``, sorted."""
    out = []
    for name in signed_names(FOLDER):
        data_file, _, case = name.partition("|")
        summary = lookup(data_file, case)
        if summary is not None:
            out.append({"data_file": data_file, "case": case, "triton": summary["triton"], "ptxas": summary["ptxas"],
                        "largest_frame_bytes": max(summary["frames"].values())})
    return out


LAYER_OPTIONS = ("hidden", "layers", "checkpoint", "conv_size")     # a layer model's build options (registry)


def probe_case(key: str, prefix: str, shape, triton: str | None, options: dict | None = None) -> ProbeCase | None:
    """The case of ``key`` (its data prefix ``prefix``) at ``shape`` under ``triton`` (a layer's build ``options``
    part of it) as ``livebytes frames derive`` and ``livebytes process measure`` take it; None where the probes (the
    CPU compile and the process-memory probe share their cases) take no such case: a whole model, packed sequences,
    fp32-amp, another library, the plain contract with grouped value heads."""
    if prefix not in PROBE_IMPLS or (prefix.endswith(":plain") and shape.hv != shape.heads):
        return None
    contract = prefix.split(":")[1]
    layer = tuple((name, value) for name, value in (options or {}).items() if name in LAYER_OPTIONS)
    return ProbeCase(key, None if contract == "-" else contract, shape.dim, shape.heads, shape.hv, triton, shape.tokens,
                     layer)

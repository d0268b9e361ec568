"""Measure one case's process on this machine's GPU, so that ``estimator/process.py`` replaces its unbounded kernel
modules (no rule bounds the driver's module memory: ``runs/cpu_frames/MODULES.md``) by the case's own figures: the
process-memory probe (``validate/gpu/probes/process_memory.py``) run as a subprocess for that one case, cold (an empty
Triton cache) and then warm (over that cache), each process alone on the GPU; each reading checked (the asked case,
Triton and fla-core of the data's versions, a GPU a preset describes, a call that finished, the process alone: its
in-process figure equal to the NVML drop at its exit) and kept signed in the private cache (``estimator.measured_store``).

Needs the GPU itself, idle, and the ``validate`` extra (torch, triton, fla-core, cuda-bindings for the stack limit). A
cold case takes minutes (every autotune candidate compiles and runs). The call runs 4,096 tokens, one sequence: the
committed figures' length (the modules and the stack limit do not follow the length in any committed pair).
``livebytes process measure`` (the command line) calls ``measure``; ``measured`` lists the cases.
"""
from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from livebytes.estimator import measured_store
from livebytes.estimator.devices import get_device, preset_of
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.process import frames_case, stack_reservation_bytes

PROBE = Path(__file__).parent / "probes" / "process_memory.py"
TOKENS = 4096


def probe_cases(model_key: str, options: dict, shape) -> tuple[str, str]:
    """(the cold case, the warm case) in the probe's words (``impl:dim:heads:v_heads:tokens:state[:layer]``, a layer's
    build options last: ``hidden=2048,layers=1,checkpoint=0,conv_size=4``) of ``model_key``
    with ``options`` at ``shape``; a case the probe cannot run refused in one line (``derive_frames.probe_case``'s)."""
    from livebytes.validate.gpu.derive_frames import probe_case
    case = f"{probe_case(model_key, options, shape, 'the process-memory probe runs')}:{TOKENS}"
    layer = ",".join(f"{name}={int(options[name])}" for name in measured_store.LAYER_OPTIONS if name in options)
    return tuple(f"{case}:{state}" + (f":{layer}" if layer else "") for state in ("cold", "warm"))


def probe_command(cases: tuple[str, str], out: Path, cache_root: Path, python: str, deadline: float) -> list[str]:
    """The probe's command line: the cold case, then the warm one over the cache it filled."""
    return [python, str(PROBE), "--cases", cases[0], "--warm-cases", cases[1], "--cache-root", str(cache_root),
            "--out", str(out), "--deadline", f"{deadline:.0f}"]


def _case_of(text: str) -> dict:
    """A probe case (``impl:dim:heads:v_heads:tokens:state[:layer]``) as the probe's rows name theirs: impl without
    ``-fwd`` and ``forward_only``, the sizes as ints, the layer's options (checkpoint a bool) or None."""
    impl, dim, heads, v_heads, tokens, state, *layer = text.split(":")
    options = {k: int(v) for k, v in (part.split("=") for part in layer[0].split(","))} if layer else None
    if options:
        options["checkpoint"] = bool(options["checkpoint"])
    return {"impl": impl.removesuffix("-fwd"), "forward_only": impl.endswith("-fwd"), "dim": int(dim),
            "heads": int(heads), "v_heads": int(v_heads), "tokens": int(tokens), "state": state, "layer": options}


def _row_case(row: dict) -> dict:
    case = row.get("case", {})
    return {**{k: case.get(k) for k in ("impl", "forward_only", "dim", "heads", "v_heads", "tokens", "state")},
            "layer": case.get("layer")}


def checked_record(row: dict, asked: str, case_key: str, data_file: str, triton: str, today: str) -> dict:
    """The store's record of one probe row, which must be a process of the ``asked`` probe case (``case_key`` in the
    data's words), held to what the data file's figures are (its Triton, its fla-core) and to a sound reading; anything
    else refused in one line naming the field."""
    import re
    state = row.get("case", {}).get("state", "?")
    if row.get("status") or row.get("error"):
        raise LivebytesError(f"{case_key} ({state}): {row.get('status') or str(row['error'])[:160]}: nothing measured")
    if _row_case(row) != _case_of(asked):
        raise LivebytesError(f"{case_key}: the probe wrote a row of another case ({row.get('case', {}).get('tag')}, "
                             f"asked {asked}): not this case's figures")
    missing = [k for k in ("gpu", "torch", "fla", "triton") if not isinstance(row.get(k), str)]
    if missing:
        raise LivebytesError(f"{case_key} ({state}): the probe's row has no {', '.join(missing)}")
    fla = re.search(r"fla-core-([^_]+)_", data_file)
    if row.get("triton") != triton:
        raise LivebytesError(f"the installed Triton is {row.get('triton')}, not {triton}: measure under a Python whose "
                             f"Triton is {triton} (python=...)")
    if fla and row.get("fla") != fla.group(1):
        raise LivebytesError(f"the installed fla-core is {row.get('fla')}; these data are fla-core {fla.group(1)}'s")
    device = preset_of(row.get("gpu"))
    if device is None:
        raise LivebytesError(f"no preset describes this GPU ({row.get('gpu')!r}): its figures would answer no --gpu")
    alone = row.get("in_process_alone", {}).get("nonpytorch_bytes")
    if alone is None or alone != row.get("nonpytorch_bytes"):
        raise LivebytesError(f"{case_key} ({state}): the process read {alone} B in itself and {row.get('nonpytorch_bytes')} "
                             "B by NVML at its exit: another process used the GPU; measure on an idle GPU")
    for name in ("stack_limit_bytes", "context_nonpytorch_bytes"):
        if not isinstance(row.get(name), int):
            raise LivebytesError(f"{case_key} ({state}): no {name} read (the stack limit needs cuda-bindings)")
    if alone - row["context_nonpytorch_bytes"] < stack_reservation_bytes(row["stack_limit_bytes"], get_device(device)):
        raise LivebytesError(f"{case_key} ({state}): {alone:,} B after the call leave less than the context and the "
                             f"{row['stack_limit_bytes']:,}-B limit's reservation on the {device}: not a sound reading")
    return {"key": case_key, "device": device, "gpu": row["gpu"], "state": state, "triton": row["triton"],
            "fla": row["fla"], "torch": row["torch"], "measured_on": today, "tokens": row["case"]["tokens"],
            "context_bytes": row["context_nonpytorch_bytes"], "nonpytorch_bytes": alone,
            "stack_limit_bytes": row["stack_limit_bytes"]}


Runner = Callable[..., subprocess.CompletedProcess]


def measure(model_key: str, shape, triton: str, options: dict | None = None, *, python: str = sys.executable,
            timeout: float = 1800.0, run: Runner | None = None, keep: Path | None = None) -> list[dict]:
    """Run ``model_key``'s first call (its ``options``: the contract) at ``shape``'s head dim, head count and value heads
    on this machine's GPU, cold then warm, each process alone; keep both readings in the private, signed store the
    estimator reads, and return them, each with ``stored`` (False: the cache folder could not be written). A case the
    committed data measured is measured again (the user's GPU and driver are their own); one the probe cannot run is
    refused. ``python``: the interpreter whose torch, Triton and fla-core run; ``run``: the subprocess runner (None:
    ``subprocess.run``, looked up at the call; tests fake it); ``timeout``: seconds for the whole probe; ``keep``: a
    folder the probe's own files are copied to (its summary lines, each process's kernel log and stderr), whatever the
    outcome: nothing measured is lost."""
    options = dict(options or {})
    data_file, case, _ = frames_case(model_key, options, shape, triton, purpose="no process to measure")
    case_key = measured_store.store_key(case, options)
    cases = probe_cases(model_key, options, shape)
    rows, stderr_tail = _run_probe(cases, case_key, python, timeout, run or subprocess.run, keep)
    if not rows:
        raise LivebytesError(f"{case_key}: the process-memory probe measured nothing ({stderr_tail})")
    today = datetime.date.today().isoformat()
    asked = {_case_of(c)["state"]: c for c in cases}
    records = [checked_record(r, asked.get(r.get("case", {}).get("state"), cases[0]), case_key, data_file, triton, today)
               for r in rows]       # every row checked before any is kept: one process refused keeps none
    return [{**rec, "data_file": data_file, "stored": measured_store.save(data_file, rec)} for rec in records]


def _run_probe(cases: tuple[str, str], case_key: str, python: str, timeout: float, run: Runner,
               keep: Path | None) -> tuple[list[dict], str]:
    """(the probe's rows of processes, the last line of its stderr) for ``cases``, in a temporary folder whose files
    go to ``keep`` whatever happened (a probe past its time included)."""
    with tempfile.TemporaryDirectory(prefix="livebytes-process-") as tmp:
        out = Path(tmp) / "out"
        try:
            proc = run(probe_command(cases, out, Path(tmp) / "caches", python, timeout), capture_output=True,
                       text=True, timeout=timeout + 120)
        except subprocess.TimeoutExpired:
            raise LivebytesError(f"{case_key}: the probe did not finish within {timeout:,.0f} s") from None
        finally:
            if keep is not None and out.exists():
                shutil.copytree(out, keep, dirs_exist_ok=True)
        summary = out / "process_memory.jsonl"
        rows = [json.loads(line) for line in summary.read_text().splitlines()] if summary.exists() else []
    tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
    return [r for r in rows if "case" in r], tail[0][:200]


def measured() -> list[dict]:
    """The processes measured on this machine (``measured_store.measured_cases``)."""
    return measured_store.measured_cases()


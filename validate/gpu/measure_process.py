"""Measure one case's process on this machine's GPU, so that ``estimator/process/memory.py`` replaces its unbounded kernel
modules (no rule bounds the driver's module memory: ``runs/cpu_frames/MODULES.md``) by the case's own figures: the
process-memory probe (``validate/gpu/probes/process_memory.py``) run as a subprocess for that one case, cold (an empty
Triton cache) and then warm (over that cache), each process alone on the GPU; each reading checked (the asked case,
Triton and fla-core of the data's versions, a GPU a preset describes, a call that finished, the process alone: its
in-process figure equal to the NVML drop at its exit) and kept signed in the private cache (``estimator.process.measured_store``).

Needs the GPU itself, idle, and the ``validate`` extra (torch, triton, fla-core, cuda-bindings for the stack limit); the
installed versions and the GPU are asked first (``inspect``: seconds), so a mismatch is refused before the probe. A cold
case takes minutes (every autotune candidate compiles and runs). The call runs one sequence of the shape's tokens (4,096
by default): lazily loaded kernels and Triton's specialisations can follow the length, so a reading answers as measured
at its own length only (``memory.measured_here``). Each process's reading is kept on its own merits: a refused warm
process does not discard a sound cold one. ``livebytes process measure`` (the command line) calls ``measure``;
``measured`` lists the cases.
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
import os
import re

from livebytes.estimator.process import measured_store
from livebytes.validate.gpu import process_group
from livebytes.estimator.devices import get_device, preset_of
from livebytes.estimator.folders import own_leaf
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.process.memory import frames_case
from livebytes.estimator.process.driver import stack_reservation_bytes
from livebytes.validate.gpu import derive_frames
from livebytes.validate.gpu.derive_frames import probe_case, data_versions_installed

PROBE = Path(__file__).parent / "probes" / "process_memory.py"
TOKENS = 4096                   # the committed figures' length: the command's default
AFTER_COLD = 300                # seconds the probe's deadline leaves the warm process, the exits and cuobjdump


def probe_cases(model_key: str, options: dict, shape) -> tuple[str, str]:
    """(the cold case, the warm case) in the probe's words (``impl:dim:heads:v_heads:tokens:state[:layer]``, a layer's
    build options last: ``hidden=2048,layers=1,checkpoint=0,conv_size=4``) of ``model_key``
    with ``options`` at ``shape``; a case the probe cannot run refused in one line (``derive_frames.probe_case``'s)."""
    case = f"{probe_case(model_key, options, shape, 'the process-memory probe runs')}:{shape.tokens}"
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


def versions_match(found: dict, data_file: str, triton: str) -> None:
    """Refuse in one line what would make a reading no figure of the data file's case: another installed Triton (the
    fix named: ``--triton`` where the data hold that version too), another fla-core, a GPU no preset describes.
    ``found``: {"triton", "fla", "gpu"} as the probe's Python reports them."""
    data_versions_installed(found, data_file, triton, f"measure with --triton {found.get('triton')} where the data hold "
                                                      f"it, or under a Python whose Triton is {triton}")
    if preset_of(found.get("gpu")) is None:
        raise LivebytesError(f"no preset describes this GPU ({found.get('gpu')!r}): its figures would answer no --gpu")


def inspect(python: str) -> dict:
    """{"triton", "fla", "gpu"} of ``python`` (``derive_frames.inspect``, shared with the CPU compile)."""
    return derive_frames.inspect(python)


def checked_record(row: dict, asked: str, case_key: str, data_file: str, triton: str, today: str) -> dict:
    """The store's record of one probe row, which must be a process of the ``asked`` probe case (``case_key`` in the
    data's words), held to what the data file's figures are (its Triton, its fla-core) and to a sound reading; anything
    else refused in one line naming the field."""
    state = row.get("case", {}).get("state", "?")
    if row.get("status") or row.get("error"):
        raise LivebytesError(f"{case_key} ({state}): {row.get('status') or str(row['error'])[:160]}: nothing measured")
    if _row_case(row) != _case_of(asked):
        raise LivebytesError(f"{case_key}: the probe wrote a row of another case ({row.get('case', {}).get('tag')}, "
                             f"asked {asked}): not this case's figures")
    missing = [k for k in ("gpu", "torch", "fla", "triton") if not isinstance(row.get(k), str)]
    if missing:
        raise LivebytesError(f"{case_key} ({state}): the probe's row has no {', '.join(missing)}")
    versions_match({k: row.get(k) for k in ("triton", "fla", "gpu")}, data_file, triton)
    device = preset_of(row["gpu"])
    alone = row.get("in_process_alone", {}).get("nonpytorch_bytes")
    if not isinstance(alone, int) or not isinstance(row.get("nonpytorch_bytes"), int):
        raise LivebytesError(f"{case_key} ({state}): no reading of the process alone on the GPU (in itself and by NVML "
                             "at its exit): nothing measured")
    if alone != row["nonpytorch_bytes"]:
        raise LivebytesError(f"{case_key} ({state}): the process read {alone:,} B in itself and {row['nonpytorch_bytes']:,} "
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


def measure(model_key: str, shape, triton: str | None, options: dict | None = None, *, python: str = sys.executable,
            timeout: float = 1800.0, run: Runner | None = None, keep: Path | None = None,
            ask: Callable[[str], dict] | None = None) -> list[dict]:
    """Run ``model_key``'s first call (its ``options``: the contract, a layer's build options) at ``shape``'s head dim,
    head counts and tokens (one sequence) on this machine's GPU, cold then warm, each process alone; keep each sound
    reading in the private, signed store the estimator reads and return them, each with ``stored`` (False: the cache
    folder could not be written); a refused reading raises after the sound ones are kept, naming both. Refused before
    any process: a case the probe cannot run, a model of another version than the data's fla-core, another installed
    Triton or fla-core, no GPU or one no preset describes (``ask``: the inspection, ``inspect`` where None), a ``keep``
    that cannot be a folder. ``python``: the interpreter whose torch, Triton and fla-core run; ``run``: the subprocess
    runner (None: ``process_group.run``, looked up at the call: the probe's processes die with the call; tests fake
    it); ``timeout``: seconds for the whole probe;
    ``keep``: a folder the probe's own files are copied to (its summary lines, each process's kernel log and stderr),
    whatever the outcome."""
    options = dict(options or {})
    data_file, case, _ = frames_case(model_key, options, shape, triton, purpose="no process to measure")
    case_key = measured_store.store_key(model_key, case, options)
    _check_version(model_key, data_file)
    cases = probe_cases(model_key, options, shape)
    if keep is not None:
        _check_keep(Path(keep))
    found = (ask or inspect)(python)
    if found.get("gpu") is None:
        raise LivebytesError(f"no CUDA GPU visible to {python}: the process is measured on the GPU itself")
    versions_match(found, data_file, triton)
    if keep is not None:                    # made only now: a refusal above leaves no folder behind
        problem = own_leaf(Path(keep))
        if problem is not None:
            raise LivebytesError(f"--keep {keep}: not a folder we can write ({problem})")
    rows, stderr_tail, timed_out = _run_probe(cases, python, timeout, run or process_group.run, keep)
    return _keep_sound(rows, cases, case_key, data_file, triton, stderr_tail,
                       f"the probe did not finish within {timeout:,.6g} s" if timed_out else None)


def _check_keep(keep: Path) -> None:
    """Refuse a ``keep`` that cannot become a folder we write, without making it: a folder this user can write into, or
    a new one whose parent is such a folder (only the folder itself is ever made, never its parents: ``folders``)."""
    if keep.is_dir():
        if not os.access(keep, os.W_OK | os.X_OK):
            raise LivebytesError(f"--keep {keep}: not a folder we can write (not writable)")
        return
    if os.path.lexists(keep):
        raise LivebytesError(f"--keep {keep}: not a folder we can write ({keep} is not a folder)")
    parent = keep.parent
    if not parent.is_dir():
        what = "is not a folder" if os.path.lexists(parent) else "does not exist; create it first: only --keep's own folder is made"
        raise LivebytesError(f"--keep {keep}: not a folder we can write ({parent} {what})")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise LivebytesError(f"--keep {keep}: not a folder we can write ({parent} is not writable)")


def _check_version(model_key: str, data_file: str) -> None:
    """A model of another version than the data file's fla-core (a snapshot modelled on its code path) is refused: the
    probe runs the installed fla-core's kernels, whose figures would be stored as that version's."""
    fla = re.search(r"fla-core-([^_]+)_", data_file)
    version = model_key.split("@", 1)[1] if "@" in model_key else ""
    if fla and version != fla.group(1):
        raise LivebytesError(f"{model_key}: the probe runs the installed fla-core {fla.group(1)}'s kernels, not "
                             f"{version}'s: measure {model_key.split('@')[0]}@{fla.group(1)}")


def measured_on() -> str:
    """The day a measurement is kept under (``checked_record``'s ``measured_on``): today, ISO."""
    return datetime.date.today().isoformat()


def _keep_sound(rows: list[dict], cases: tuple[str, str], case_key: str, data_file: str, triton: str,
                stderr_tail: str, failure: str | None) -> list[dict]:
    """Each sound row kept (``checked_record`` then ``measured_store.save``), then one line for what was refused or
    missing (``failure``: why the probe stopped), naming what was kept."""
    today = measured_on()
    asked = {_case_of(c)["state"]: c for c in cases}
    kept, refused = [], []
    for r in rows:
        try:
            rec = checked_record(r, asked.get(r.get("case", {}).get("state"), cases[0]), case_key, data_file, triton, today)
        except LivebytesError as err:
            refused.append(str(err))
            continue
        kept.append({**rec, "data_file": data_file, "stored": measured_store.save(data_file, rec)})
    problem = refused[0] if refused else failure or (None if rows else f"the process-memory probe measured nothing "
                                                                       f"({stderr_tail})")
    if problem is None:
        return kept
    saved = f" (kept: {', '.join(r['state'] for r in kept)})" if kept else ""
    raise LivebytesError(f"{problem if problem.startswith(case_key) else f'{case_key}: {problem}'}{saved}")


def _run_probe(cases: tuple[str, str], python: str, timeout: float, run: Runner,
               keep: Path | None) -> tuple[list[dict], str, bool]:
    """(the probe's rows of processes, the last line of its stderr, whether it ran out of time) for ``cases``, in a
    temporary folder whose files go to ``keep`` whatever happened; a line that is no JSON (a probe killed mid-write)
    is skipped. The probe's own deadline for the cold first call leaves ``AFTER_COLD`` seconds of ``timeout``."""
    with tempfile.TemporaryDirectory(prefix="livebytes-process-") as tmp:
        out, timed_out, stderr = Path(tmp) / "out", False, ""
        command = probe_command(cases, out, Path(tmp) / "caches", python, max(60.0, timeout - AFTER_COLD))
        try:
            stderr = run(command, capture_output=True, text=True, timeout=timeout).stderr or ""
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if keep is not None and out.exists():
                shutil.copytree(out, keep, dirs_exist_ok=True, copy_function=_copy_or_skip)
        summary = out / "process_memory.jsonl"
        rows = [_json_or_none(line) for line in summary.read_text().splitlines()] if summary.exists() else []
    tail = stderr.strip().splitlines()[-1:] or ["no output"]
    return [r for r in rows if isinstance(r, dict) and "case" in r], tail[0][:200], timed_out


def _copy_or_skip(source: str, target: str) -> None:
    """One of the probe's files copied to --keep (a folder checked before the probe ran); a file that cannot be written
    there is skipped, so the readings are still kept in the store."""
    try:
        shutil.copy2(source, target)
    except OSError:
        pass


def _json_or_none(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return None


def measured() -> list[dict]:
    """The processes measured on this machine (``measured_store.measured_cases``)."""
    return measured_store.measured_cases()


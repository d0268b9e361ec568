"""Derive one case's stack frames on this machine, so that ``estimator/process/memory.py`` replaces its estimate (the
nearest committed cases' frames, ``process.estimate``) by the case's own reservation: the CPU compile probe
(``validate/gpu/probes/cpu_frames.py``: every autotune candidate compiled for sm90 by the installed Triton and the ptxas
its wheel ships, ``cuobjdump -res-usage`` on each cubin) run as a subprocess for that one case, its summary line
checked (the asked case, the asked Triton, fla-core of the data's version, under Triton >= 3.9 the bundled legacy
ptxas the H200 runs used, a call that finished) and kept signed in the private cache (``estimator.process.frames_store``).

No GPU and no CUDA toolkit are needed: triton and fla-core (the ``validate`` extra) are. A case takes 2-10 minutes of
one CPU core. Cold frames only: which candidate a warm process keeps is a GPU timing, so a warm case stays bounded by
the cold one's frames. ``livebytes frames derive`` (the command line) calls ``derive``; ``derived`` lists the cases.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from livebytes.estimator.process import frames_store
from livebytes.validate.gpu import process_group
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.process.memory import case_variant, frames_case

PROBE = Path(__file__).parent / "probes" / "cpu_frames.py"


def probe_case(model_key: str, options: dict, shape, probe: str = "the CPU compile probe derives") -> str:
    """The probe's case text (``impl:dim:heads:v_heads``) of ``model_key`` with ``options`` at ``shape``; a case the
    probe cannot compile (a whole model, packed sequences, fp32-amp, the plain contract with grouped value heads)
    refused in one line, ``probe`` its subject (the process-memory probe takes the same cases)."""
    prefix = f"{model_key.split('@')[0]}:{case_variant(options)}"
    impl = frames_store.PROBE_IMPLS.get(prefix)
    if impl is None or (prefix.endswith(":plain") and shape.hv != shape.heads):
        takes = ", ".join(sorted({p.split(":")[0] for p in frames_store.PROBE_IMPLS}))
        raise LivebytesError(f"{model_key} ({prefix.split(':')[1]}): {probe} no such case "
                             f"(it takes {takes}; the plain contract without grouped value heads)")
    return f"{impl}:{shape.dim}:{shape.heads}:{shape.hv}"


def probe_command(case: str, out: Path, cache_dir: Path, triton: str, python: str) -> list[str]:
    """The probe's command line for one case; from Triton 3.9 on, sm90 compiled by the bundled legacy ptxas, as the
    H200 runs and the committed 3.9.0 data were (``--legacy-ptxas``)."""
    legacy = ["--legacy-ptxas"] if tuple(int(p) for p in re.findall(r"\d+", triton)[:2]) >= (3, 9) else []
    return [python, str(PROBE), "--cases", case, "--out", str(out), "--jobs", "1", "--cache-dir", str(cache_dir), *legacy]


INSPECT = ("import json, torch, triton, fla; print(json.dumps({'triton': triton.__version__, 'fla': fla.__version__, "
           "'gpu': torch.cuda.get_device_name() if torch.cuda.is_available() else None}))")


def inspect(python: str) -> dict:
    """{"triton", "fla", "gpu"} of ``python``'s installed packages and its first GPU (None: no CUDA device), asked in a
    subprocess before a probe runs (seconds), so a mismatch is refused before minutes of compiling or measuring;
    refused in one line where that Python is missing or cannot import them."""
    try:
        proc = subprocess.run([python, "-c", INSPECT], capture_output=True, text=True, timeout=300)
    except OSError as err:
        raise LivebytesError(f"cannot run the Python {python!r}: {err.strerror or err}") from None
    except subprocess.TimeoutExpired:
        raise LivebytesError(f"{python} did not import torch, triton and fla within 300 s") from None
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise LivebytesError(f"{python} cannot import torch, triton and fla ({tail[0][:160]}): install the validate "
                             "extra there") from None


def data_versions_installed(found: dict, data_file: str, triton: str, fix: str) -> None:
    """Refuse in one line a Python whose Triton is not ``triton`` (``fix`` says what to do) or whose fla-core is not the
    data file's (``fla-core-<version>_`` in its name): its figures would be another compiler's or library's.
    ``found``: {"triton", "fla"} as that Python reports them (the probe's summary, or measure_process.inspect)."""
    fla = re.search(r"fla-core-([^_]+)_", data_file)
    if found.get("triton") != triton:
        raise LivebytesError(f"the installed Triton is {found.get('triton')}, not {triton}: {fix}")
    if fla and found.get("fla") != fla.group(1):
        raise LivebytesError(f"the installed fla-core is {found.get('fla')}; these data are fla-core {fla.group(1)}'s")


def checked_summary(lines: list[str], case_key: str, data_file: str, triton: str) -> dict:
    """The probe's summary line of ``case_key``, held to what the data file's frames are (its Triton, its fla-core, under
    3.9.0 its legacy ptxas); anything else refused in one line: a frame of another compiler is no frame of the case."""
    from livebytes.validate.check.frames import LEGACY_PTXAS  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    found = [json.loads(line) for line in lines if line.strip()]
    summary = next((r for r in found if r.get("key") == case_key), None)
    if summary is None:
        raise LivebytesError(f"the CPU compile probe wrote no summary of {case_key} (its stderr says why)")
    if summary.get("error"):
        raise LivebytesError(f"{case_key}: the library refused the call on the CPU ({summary['error'][:160]}): its frames "
                             "would be those of the kernels before the refusal only")
    data_versions_installed(summary, data_file, triton, f"derive under a Python whose Triton is {triton} (the API's python=)")
    if triton == "3.9.0" and summary.get("ptxas") != LEGACY_PTXAS:
        raise LivebytesError(f"sm90 was compiled by {summary.get('ptxas')}, not the H200 runs' {LEGACY_PTXAS}")
    return summary


Runner = Callable[..., subprocess.CompletedProcess]


def derive(model_key: str, shape, triton: str, options: dict | None = None, *, python: str = sys.executable,
           timeout: float | None = None, run: Runner | None = None, ask: Callable[[str], dict] | None = None) -> dict:
    """Compile ``model_key``'s kernels (its ``options``: the contract) at ``shape``'s head dim, head count and value
    heads for sm90 on this machine's CPU with the installed Triton, which must be ``triton``; keep the summary (each
    kernel's largest cold frame) in the private, signed store the estimator reads, and return it with ``stored``
    (False: the cache folder could not be written). A case the committed data hold is refused (nothing to derive);
    so is one the probe cannot compile. ``python``: the interpreter whose Triton and fla-core compile; ``run``: the
    subprocess runner (None: ``process_group.run``, looked up at the call: the probe's workers die with the call;
    tests fake it); ``ask``: the inspection of ``python``'s Triton and fla-core before the compile (None:
    ``inspect``)."""
    options = dict(options or {})
    data_file, case_key, committed = frames_case(model_key, options, shape, triton)
    if committed is not None:
        raise LivebytesError(f"{case_key}: the committed data already hold its frames (Triton {triton}): nothing to derive")
    case = probe_case(model_key, options, shape)
    found = (ask or inspect)(python)          # seconds, before minutes of compiling another Triton's kernels
    data_versions_installed(found, data_file, triton, f"derive with --triton {found.get('triton')} where the data "
                            f"hold it, or under a Python whose Triton is {triton} (the API's python=)")
    with tempfile.TemporaryDirectory(prefix="livebytes-frames-") as tmp:
        out, cache_dir = Path(tmp) / "out", Path(tmp) / "triton-cache"      # a cold Triton cache, as a cold process
        try:
            proc = (run or process_group.run)(probe_command(case, out, cache_dir, triton, python), capture_output=True,
                                              text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LivebytesError(f"{case_key}: the CPU compile did not finish within {timeout:,.6g} s") from None
        except OSError as err:
            raise LivebytesError(f"cannot run the Python {python!r}: {err.strerror or err}") from None
        summary_path = out / "summary.jsonl"
        lines = summary_path.read_text().splitlines() if summary_path.exists() else []
        if not lines and proc.returncode != 0:
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
            raise LivebytesError(f"{case_key}: the CPU compile probe failed ({tail[0][:200]})")
    summary = checked_summary(lines, case_key, data_file, triton)
    return {**summary, "data_file": data_file, "stored": frames_store.save(data_file, summary)}


def derived() -> list[dict]:
    """The cases derived on this machine (``frames_store.derived_cases``)."""
    return frames_store.derived_cases()

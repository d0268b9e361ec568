"""Derive the stack frames of every Triton kernel each committed whole-model record's step launches, on the CPU, and
keep them as data (``estimator/data/process/model_frames_H200.json``), so that an answer compiles nothing.

    python validate/gpu/derive_model_frames.py RECORD.json [...] [--python PY] [--out DIR] [--layers N] [--workers W]
    python validate/gpu/derive_model_frames.py --config CONFIG.json --seq-len N [--batch-size B] [--checkpoint] [...]

The second form derives a step no GPU ran (a preset at a length users ask for: the grid an answer reads before it
estimates): its entry is keyed ``PRESET#BxN`` (or the config file's path in this repository) and holds no measured
limit. ``derive_here`` (``livebytes frames derive --model``) derives a user's config the same way and keeps the entry
in the private cache of this machine (``estimator.process.model_frames.save_here``), not in the committed data.

Each record's step (its config, shape and options) runs through ``probes/model_frames.py`` in a process of its own,
under the interpreter ``--python`` (whose Triton must be the record's: the data keep Triton 3.6.0's and 3.9.0's apart),
with one Triton cache across records (kernels compiled once) and fla's autotune results not cached (every process tunes
afresh, as a cold GPU process did). A uniform stack (``kda``, ``gated_deltanet``) is traced at ``--layers`` layers (2):
its kernels are a layer's, whatever the depth; a hybrid at its own depth. ``--workers`` compiles that many launches
side by side once the step is traced (default: every CPU; the frames do not depend on it). A record of Triton >= 3.9
compiles sm90 with the wheel's bundled legacy ptxas (``--legacy-ptxas``), as the GPU runs under 3.9.0 did; the summary's
ptxas is checked. The record's Liger loss, packed-batch inputs and LoRA are its step's (``_step_options``). The data file keeps, per record, what the
probe's summary line says (each kernel's largest counted frame, Triton, ptxas, seconds); the limit is the estimator's
(``process.driver.driver_stack_limit`` of the largest frame).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import show
from livebytes.estimator.process.memory import triton_versions
from livebytes.lifetimes.traced.families import family
from livebytes.lifetimes.traced.model import PRECISIONS, known_refusal
from livebytes.estimator.process import model_frames
from livebytes.estimator.process.driver import driver_stack_limit
from livebytes.validate.gpu import process_group
from livebytes.validate.gpu.derive_frames import inspect
from livebytes.lifetimes.traced.presets import config_of, is_preset_name, preset_names
from livebytes.validate.check.frames import LEGACY_PTXAS, _model_case, model_build

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "estimator" / "data" / "process" / "model_frames_H200.json"
PROBE = Path(__file__).parent / "probes" / "model_frames.py"
UNIFORM = ("kda", "gated_deltanet")


def spec_of(record: dict, tag: str, layers: int) -> dict:
    """The tracer's spec of a model-step record's first step (one run, one shape)."""
    config, options = dict(record["config"]), record.get("options", {})
    depth = config.get("num_hidden_layers")
    return {"device": "H200", "config": config, "precision": options.get("precision", "bf16"),
            "optimizer": options.get("optimizer", "adamw"), "checkpoint": bool(options.get("checkpoint")),
            "packed": bool(options.get("packed")),
            "layers": min(layers, depth) if config["model_type"] in UNIFORM and depth else None,
            "shapes": [[record["shape"]["mbs"], record["shape"]["seq"]]], "tag": tag, **_step_options(options)}


def _step_options(options: dict) -> dict:
    """The record's options that change which kernels its step launches, as the tracer's spec names them: Liger's
    loss (its own Triton kernels), a packed batch's inputs (fla's ``cu_seqlens`` or transformers' flattened position
    ids), peft's LoRA (its matmuls launch no Triton kernel, but the step is the record's)."""
    lora = options.get("lora")
    return ({"loss": options["loss"]} if options.get("loss") else {}) \
        | ({"packed_batch": options["packed_batch"]} if options.get("packed_batch") else {}) \
        | ({"lora": json.loads(lora) if isinstance(lora, str) else lora} if lora else {})


def unmeasured_step(config: str, mbs: int, seq: int, checkpoint: bool, precision: str) -> dict:
    """A step no GPU ran, in a record's form (``spec_of``, ``entry``): ``config`` (a preset's name or a config file, read
    as ``--model`` reads it, so its build is the answer's) at ``mbs`` x ``seq``; no steps measured; its Triton the
    deriving interpreter's, set by the caller (it picks the ptxas as a record's version does)."""
    return {"config": json.loads(config_of(config)), "shape": {"mbs": mbs, "seq": seq},
            "options": {"checkpoint": checkpoint, "precision": precision}, "steps": [{}],
            "versions": {}}


def config_key(config: str, mbs: int, seq: int) -> str:
    """The data file's key of a step no GPU ran: ``PRESET#MBSxSEQ``, or the config file's path in this repository (a
    file elsewhere is refused: the committed data name no machine's paths)."""
    if is_preset_name(config) and not Path(config).is_file():
        if config not in preset_names():
            raise SystemExit(f"error: --config {config}: no such preset; presets: {', '.join(preset_names())} (or a "
                             "config file inside this repository)")
        return f"{config}#{mbs}x{seq}"
    try:
        where = Path(config).resolve().relative_to(ROOT)
    except ValueError:
        raise SystemExit(f"error: --config {config}: a preset's name or a config file inside this repository (the data "
                         "file keys a derivation by its path)") from None
    return f"{where}#{mbs}x{seq}"


def is_legacy(triton: str | None) -> bool:
    """Whether sm90 is compiled with the wheel's bundled legacy ptxas: Triton >= 3.9, as the GPU runs under 3.9.0 did."""
    return bool(triton) and tuple(int(p) for p in triton.split(".")[:2]) >= (3, 9)


def probe_run(python: str, spec_path: Path, out: Path, workers: int, legacy: bool) -> tuple[list[str], dict]:
    """(argv, environment) of the probe on one spec: one Triton cache under ``out`` (kernels compiled once across
    specs), fla's autotune results not cached (every process tunes afresh, as a cold GPU process), no GPU visible."""
    env = {**os.environ, "TRITON_CACHE_DIR": str(out / "triton-cache"), "FLA_CACHE_RESULTS": "0",
           "CUDA_VISIBLE_DEVICES": ""}
    return [python, str(PROBE), str(spec_path), "--out", str(out), "--workers", str(workers),
            *(["--legacy-ptxas"] if legacy else [])], env


def summary_of(stdout: str) -> dict | None:
    """The probe's summary line (its last JSON line), or None where it wrote none."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def probe_step(python: str, record: dict, tag: str, out: Path, layers: int, workers: int, run: Callable = subprocess.run,
               timeout: float | None = None) -> tuple[dict, subprocess.CompletedProcess]:
    """(spec, finished process) of the probe on ``record``'s step, its spec written to ``out``/``tag``.spec.json; its
    Triton the record's (``versions``), which picks the ptxas."""
    spec = spec_of(record, tag, layers)
    spec_path = out / f"{tag}.spec.json"
    spec_path.write_text(json.dumps(spec))
    argv, env = probe_run(python, spec_path, out, workers, is_legacy(record.get("versions", {}).get("triton")))
    return spec, run(argv, capture_output=True, text=True, env=env, timeout=timeout)


def checked_step(done: subprocess.CompletedProcess, name: str, triton: str | None, complete: bool) -> dict:
    """The probe's summary of step ``name``, refused in one line (``LivebytesError``) where it wrote none, where another
    Triton than ``triton`` compiled it, or, under Triton >= 3.9, another ptxas than the GPU runs' legacy one; with
    ``complete``, also where the trace stopped early, the probe failed or nothing was counted (a summary of the
    kernels before a raise: the committed data keep it, marked partial; an answer never reads one)."""
    summary = summary_of(done.stdout or "")
    last = ((done.stderr or "").strip().splitlines()[-1:] or ["no output"])[0]
    if summary is None and not complete:
        raise LivebytesError(f"{name}: the probe wrote no summary ({last[:400]})")
    if complete and (summary is None or summary.get("error") or done.returncode != 0 or not summary.get("frames")):
        why = (summary or {}).get("error") or last
        raise LivebytesError(f"{name}: " + (known_refusal(why) or f"the step's trace did not reach its end on the CPU "
                                            f"({why[:200]}): its frames would be those of the kernels before it only"))
    if triton and summary["triton"] != triton:
        raise LivebytesError(f"{name} ran Triton {triton}; the probe's Python has {summary['triton']}")
    if is_legacy(triton) and summary["ptxas"] != LEGACY_PTXAS:       # the GPU runs under 3.9.0 compiled sm90 with it
        raise LivebytesError(f"{name}: sm90 compiled by {summary['ptxas']}, not the H200 runs' {LEGACY_PTXAS}")
    return summary


def derive_one(path: Path, python: str, out: Path, layers: int, workers: int = 1, record: dict | None = None,
               tag: str | None = None) -> dict:
    """The probe's summary of one record's step (``record``/``tag``: a step given in a record's form instead); a
    partial one kept (marked so by ``entry``)."""
    record = json.loads(path.read_text()) if record is None else record
    _, done = probe_step(python, record, tag or path.stem, out, layers, workers)
    try:
        return checked_step(done, path.name, record.get("versions", {}).get("triton"), complete=False)
    except LivebytesError as err:
        raise SystemExit(f"error: {err}") from None


def step_name(config: str, mbs: int, seq: int) -> str:
    """The private cache's name of a step derived here: ``PRESET#MBSxSEQ`` or the config file's name (no folder: a
    machine's paths stay out of answers) ``#MBSxSEQ``."""
    return f"{config if is_preset_name(config) and not Path(config).is_file() else Path(config).name}#{mbs}x{seq}"


def data_tritons(model_type: str, triton: str, name: str) -> None:
    """Refuse in one line a step whose family's process data hold other Tritons than the installed one: an answer
    reads a derived step under the data's Triton only, so it would never be read (a family with no process data, an
    fla family no process ran, reads one under any Triton)."""
    key = family(model_type).key
    held = triton_versions(key)
    if held and triton not in held:
        raise LivebytesError(f"{name}: the installed Triton is {triton}; answers of {key} read Triton "
                             f"{', '.join(held)}'s kernels: derive where that Triton is installed (the API's python= "
                             "names another interpreter)")


def derive_here(config: str, mbs: int, seq: int, checkpoint: bool = False, precision: str = "bf16", *,
                python: str = sys.executable, workers: int | None = None, timeout: float | None = None,
                layers: int = 2, run: Callable | None = None) -> dict:
    """Derive the step of ``config`` (a preset's name or a config file, read as ``--model`` reads it) at ``mbs`` x
    ``seq`` on this machine's CPU and keep it in the private cache, where answers read it after the committed data:
    every Triton kernel the traced step launches, each autotune candidate compiled for sm90 by ``python``'s Triton
    (minutes; triton and flash-linear-attention installed there, no GPU). Returns the data entry with ``record`` (its
    name), ``stack_limit_bytes`` and ``stored`` (False: the cache could not be written). Refused in one line: a config
    that does not read, a Python without the packages, a step the probe could not trace to its end, a timeout."""
    if precision not in PRECISIONS:
        raise LivebytesError(f"precision {show(precision)}: one of {', '.join(PRECISIONS)}")
    record = unmeasured_step(config, mbs, seq, checkpoint, precision)     # LivebytesError: the config's own line
    found = inspect(python)
    name = step_name(config, mbs, seq)
    data_tritons(record["config"]["model_type"], found["triton"], name)
    record["versions"]["triton"] = found["triton"]
    with tempfile.TemporaryDirectory(prefix="livebytes-step-") as tmp:
        try:
            spec, done = probe_step(python, record, "step", Path(tmp), layers, workers or os.cpu_count() or 1,
                                    run or process_group.run, timeout)
        except subprocess.TimeoutExpired:
            raise LivebytesError(f"{name}: the CPU compile did not finish within {timeout:,.6g} s") from None
    summary = checked_step(done, name, found["triton"], complete=True)
    derived = entry(record, spec, summary)
    return {"record": name, **derived, "stack_limit_bytes": driver_stack_limit(max(derived["frames"].values())),
            "stored": model_frames.save_here(name, derived)}


def entry(record: dict, spec: dict, summary: dict) -> dict:
    """What the data file keeps of one record's derivation: the record's case key and build (as the process data and
    ``estimator/process/memory.py`` name them: ``validate/check/frames.py``), its shape and options, and the probe's
    summary (each kernel's largest counted frame)."""
    options = record.get("options", {})
    return {"case": _model_case(record["config"], options),
            "architecture": model_build(record["config"], options)["architecture"],
            "mbs": spec["shapes"][0][0], "seq": spec["shapes"][0][1], "precision": spec["precision"],
            "packed": spec["packed"], "checkpoint": spec["checkpoint"], "layers_traced": spec["layers"],
            "measured_limit_bytes": record["steps"][0].get("stack_limit_bytes"),
            "frames": summary["frames"], "partial": "error" in summary,
            **({"error": summary["error"]} if "error" in summary else {}),
            "triton": summary["triton"], "ptxas": summary["ptxas"], "fla": summary["fla"], "target": summary["target"],
            "compiled": summary["compiled"], "counted": summary["counted"], "seconds": summary["seconds"]}


def keep(data: dict, data_path: Path, key: str, derived: dict) -> None:
    """Write ``derived`` under ``key`` into the data file (keys in order) at once, and say its largest frame."""
    data["records"][key] = derived
    data["records"] = dict(sorted(data["records"].items()))
    data_path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{key}: largest frame {max(derived['frames'].values(), default=0):,} B, {derived['seconds']} s", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="*")
    ap.add_argument("--config", help="derive this config's step instead of records' (no GPU ran it)")
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--checkpoint", action="store_true")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", default="/tmp/model_frames")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--data", default=str(DATA), help="the data file to add the records to")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="launches compiled side by side")
    args = ap.parse_args(argv)
    data_path = Path(args.data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = json.loads(data_path.read_text()) if data_path.exists() else {"about": __doc__.split("\n\n")[0], "records": {}}
    if bool(args.config) == bool(args.records) or (args.config and args.seq_len <= 0):
        raise SystemExit("error: give record files, or --config with --seq-len above 0")
    if args.config:
        path = Path(args.config)
        key = config_key(args.config, args.batch_size, args.seq_len)
        try:
            record = unmeasured_step(args.config, args.batch_size, args.seq_len, args.checkpoint, args.precision)
        except LivebytesError as err:
            raise SystemExit(f"error: {err}") from None
        try:
            record["versions"]["triton"] = inspect(args.python)["triton"]
        except LivebytesError as err:
            raise SystemExit(f"error: {err}") from None
        tag = f"{path.stem}_{args.batch_size}x{args.seq_len}"
        summary = derive_one(path, args.python, out, args.layers, args.workers, record, tag)
        keep(data, data_path, key, entry(record, json.loads((out / f"{tag}.spec.json").read_text()), summary))
        return 0
    for name in args.records:
        path = Path(name).resolve()
        summary = derive_one(path, args.python, out, args.layers, args.workers)
        spec = json.loads((out / f"{path.stem}.spec.json").read_text())
        keep(data, data_path, str(path.relative_to(ROOT)), entry(json.loads(path.read_text()), spec, summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

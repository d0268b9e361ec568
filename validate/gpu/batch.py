"""Plans: runner processes on one GPU, built from one command line (``runner_command``) for both the
``validate`` command (``session``) and a plan file.

A plan file is a JSON list of groups ``{"impl", "shapes", "contract"?, "forward_only"?, "history"?,
"no_recompute"?, "fresh"?, "triton_cache"?, "alloc_conf"?, "autotune_capture"?}``; ``shapes`` takes the shape strings of
``parse_shape_list`` (``"seq_len=8K,num_heads=16,num_v_heads=32;seq_len=8K,num_heads=64,batch_size=2"``; the old
positional ``"1,8K,16,128,hv=32;2,8K,64,128"`` of the committed plans reads too). A group marked ``fresh`` runs each shape in a
process of its own (the protocol's default). Groups run side by side (compilation and autotuning
overlap on the CPU; the runner's GPU lock serialises the measured parts) or one after another. Side by side, a
record's ``device_memory`` (``mem_get_info``: the whole device) also holds the other processes' memory: it is not the
process's own (run 21d); measure process memory with ``validate/gpu/probes/process_memory.py``, alone. Record file names
before session 11 hold the shape's ``hv=``, which the device machine's transfer refuses (``records.record_file_name``
now writes ``hv-``).

    python -m livebytes.validate.gpu.batch PLAN.json --out DIR [--deadline SECONDS]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import read_json
from livebytes.estimator.shapes import parse_shape_list, shape_list_spec, shape_spec

from ..check.records import Record, load_records, record_files
from livebytes.estimator.registry import specs

GROUP_KEYS = {"impl", "shapes", "contract", "forward_only", "history", "no_recompute", "fresh", "triton_cache",
              "alloc_conf", "autotune_capture",
              "boundary"}   # metadata of boundary plans (solve, role, plan_value, expected); not passed to the runner


def _runnable() -> list[str]:
    """Models the validator has a harness for, in the registry's order."""

    from .harnesses import harness_for  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    return [s.key for s in specs() if harness_for(s.key)]


def check_group(group: dict) -> dict:
    """A plan group with its shapes parsed and written back in the round-tripping form; bad input is an error."""
    if not isinstance(group, dict) or "impl" not in group or "shapes" not in group:
        raise LivebytesError(f"plan group {group!r}: needs impl and shapes")
    if "boundary" in group:
        raise LivebytesError("a boundary plan is measured one process at a time with validate/gpu/probes/boundary_probe.py, "
                             "not side by side: python -m livebytes.validate.gpu.boundary --commands prints the runs")
    unknown = set(group) - GROUP_KEYS
    if unknown:
        raise LivebytesError(f"plan group of {group['impl']}: unknown keys {', '.join(sorted(unknown))}")
    if group["impl"] not in _runnable():
        raise LivebytesError(f"plan group: no runner for {group['impl']} (runnable: {', '.join(_runnable())})")
    return dict(group, shapes=shape_list_spec(parse_shape_list(group["shapes"])))


MAX_PLAN_BYTES = 1 << 20      # a plan lists a few runner groups: kilobytes


def load_plan(path: Path) -> list[dict]:
    groups = read_json(Path(path), MAX_PLAN_BYTES)
    if not isinstance(groups, list) or not groups:
        raise LivebytesError(f"plan {path}: expected a non-empty JSON list of groups")
    return [check_group(g) for g in groups]


def runner_command(group: dict, out: Path) -> list[str]:
    """The one runner command line (the ``validate`` command and plans both use it)."""
    cmd = [sys.executable, "-m", "livebytes.validate.gpu.runner", "--impl", group["impl"], "--shapes", group["shapes"],
           "--out", str(out), "--mode", "fresh-process" if group.get("fresh") else "shared-process"]
    if group.get("contract"):
        cmd += ["--contract", group["contract"]]
    for flag in ("forward_only", "history", "no_recompute", "autotune_capture"):
        if group.get(flag):
            cmd.append("--" + flag.replace("_", "-"))
    for option in ("triton_cache", "alloc_conf"):
        if group.get(option):
            cmd += ["--" + option.replace("_", "-"), group[option]]
    return cmd


def expand(groups: list[dict]) -> list[dict]:
    """A group marked ``fresh`` becomes one group per shape (v_heads and dim_v kept)."""
    out = []
    for g in groups:
        if g.get("fresh"):
            out += [dict(g, shapes=shape_spec(s)) for s in parse_shape_list(g["shapes"])]
        else:
            out.append(g)
    return out


@dataclass(frozen=True)
class PlanRun:
    records: list[Record]       # the records this run wrote, in file order
    exits: list[tuple[dict, int | None]]   # each process's group and exit status (None: killed at the deadline)
    device_seconds: float       # wall time from the first process's start to the last one's end


def _wait(procs, deadline: float, start: float, log) -> list[tuple[dict, int | None]]:
    while any(p.poll() is None for _, p in procs) and time.time() - start < deadline:
        time.sleep(1)
    exits = []
    for g, p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
        exits.append((g, p.returncode if p.returncode is not None and p.returncode >= 0 else None))
        log.write(f"[{time.time() - start:6.1f}s] exit {exits[-1][1]}: {g['impl']} {g['shapes']}\n")
    return exits


def run_plan(groups: list[dict], out: Path, deadline: float = 540.0, parallel: bool = True) -> PlanRun:
    """Run the groups (side by side or one after another); the records they wrote are read back from ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    before = set(record_files(out))
    start, exits = time.time(), []
    with open(out / "log.txt", "a") as log:
        procs = []
        for g in expand(groups):
            log.write(f"[{time.time() - start:6.1f}s] start {json.dumps(g)}\n")
            log.flush()
            sink = {"stdout": log, "stderr": subprocess.STDOUT} if parallel else {}
            procs.append((g, subprocess.Popen(runner_command(g, out), **sink)))
            if not parallel:
                exits += _wait(procs, deadline, start, log)
                procs = []
        exits += _wait(procs, deadline, start, log)
    new = [r for r in load_records(out) if r.path not in before]
    return PlanRun(new, exits, time.time() - start)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=540.0)
    args = ap.parse_args(argv)
    try:
        run = run_plan(load_plan(Path(args.plan)), Path(args.out), args.deadline)
    except LivebytesError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{len(run.records)} records in {run.device_seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

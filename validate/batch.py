"""Run several runner processes side by side on one GPU (one per implementation and (H, D) group).

Compilation and autotuning of different groups overlap on the CPU; the measured parts are
serialised by the runner's GPU lock, so no measurement shares the device with another's peak.

    python -m livebytes.validate.batch PLAN.json --out DIR [--deadline SECONDS]

PLAN.json: a list of {"impl", "shapes", "contract"?, "forward_only"?, "history"?, "no_recompute"?, "fresh"?}.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def command(group: dict, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "livebytes.validate.runner", "--impl", group["impl"], "--shapes", group["shapes"],
           "--out", str(out)]
    if group.get("contract"):
        cmd += ["--contract", group["contract"]]
    if group.get("forward_only"):
        cmd.append("--forward-only")
    if group.get("history"):
        cmd.append("--history")
    if group.get("no_recompute"):
        cmd.append("--no-recompute")
    if group.get("fresh"):
        cmd += ["--mode", "fresh-process"]
    return cmd


def expand(groups: list[dict]) -> list[dict]:
    """A group marked ``fresh`` runs each of its shapes in a process of its own (the protocol's default)."""
    out = []
    for g in groups:
        if g.get("fresh"):
            out += [dict(g, shapes=s) for s in g["shapes"].split(";") if s.strip()]
        else:
            out.append(g)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=540.0)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    groups = expand(json.loads(Path(args.plan).read_text()))
    log = open(out / "log.txt", "a")
    start = time.time()
    procs = []
    for g in groups:
        log.write(f"[{time.time() - start:6.1f}s] start {json.dumps(g)}\n")
        log.flush()
        procs.append((g, subprocess.Popen(command(g, out), stdout=log, stderr=subprocess.STDOUT)))
    while any(p.poll() is None for _, p in procs) and time.time() - start < args.deadline:
        time.sleep(2)
    for g, p in procs:
        if p.poll() is None:
            p.kill()
            log.write(f"[{time.time() - start:6.1f}s] killed at the deadline: {g['impl']} {g['shapes']}\n")
        else:
            log.write(f"[{time.time() - start:6.1f}s] exit {p.returncode}: {g['impl']} {g['shapes']}\n")
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

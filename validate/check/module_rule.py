"""Issue 33: kernel-module memory against the loaded cubins' own sections. Three readings of the data, no figure made up:

1. ``measured``: every committed process-memory row (``runs/*/process_memory*.jsonl``): its loaded cubins (the
   ``frames`` list: one entry per cubin the process loaded) and its modules figure, ``frames.modules_from_rows``'s rule
   (non-PyTorch bytes minus the context minus the stack limit's reservation), side-by-side rows included (their NVML
   drop reads 5.25 MiB below the in-process figure of the same case: plain D128 warm 90.8125 vs 96.0625 MiB);
2. ``sizes``: per process, the loaded set's cubin bytes and device-section bytes, matched config by config to a
   ``cpu_frames.py`` run that records them (``image_bytes``, ``device_section_bytes``: fields added for this issue)
   through the GPU worker's kernel log (its ``load`` events' hashes, their ``compile`` events' configs);
3. ``probe``: ``module_load.py``'s rows summed per image: the growth per copy and the 2 MiB steps it took.

    python -m livebytes.validate.check.module_rule measured
    python -m livebytes.validate.check.module_rule sizes --candidates DIR --logs LOGDIR [--logs LOGDIR ...]
    python -m livebytes.validate.check.module_rule probe FILE.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from livebytes.estimator.devices import get_device
from livebytes.estimator.process.memory import process_memory
from livebytes.estimator.process.driver import stack_reservation_bytes
from livebytes.estimator.autotune import candidate_key

RUNS = Path(__file__).parents[1] / "data" / "records" / "runs"
MIB = 1 << 20


def _context_bytes() -> int:
    return process_memory(get_device("H200"), "no-library@0").context.bytes


def module_figure(row: dict, context: int) -> tuple[int, str]:
    """(modules bytes, method) of one process row: in-process alone where it read one, else its side-by-side NVML
    drop; minus the context and the reservation of its measured stack limit (``estimator.process.memory``'s rules)."""
    alone = row.get("in_process_alone", {}).get("nonpytorch_bytes")
    nonpytorch, method = (alone, "alone") if alone is not None else (row["nonpytorch_bytes"], "side-by-side")
    return nonpytorch - context - stack_reservation_bytes(row["stack_limit_bytes"], get_device("H200")), method


def kernel_process_rows(runs: Path = RUNS) -> list[dict]:
    """Each kernel process of the committed matrices that read its figure (layers' rows of run 16b hold the records
    process's steps, not its modules: left out), with its loaded cubin count and modules figure."""
    context, out = _context_bytes(), []
    for path in sorted(runs.glob("*/process_memory*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if "case" not in row or row.get("nonpytorch_bytes") is None or path.name == "process_memory_16b.jsonl":
                continue
            modules, method = module_figure(row, context)
            out.append({"record": f"{path.parent.name}/{path.name}", "tag": row["case"]["tag"], "state": row["case"]["state"],
                        "triton": row["triton"], "cubins": len(row["frames"]), "limit": row["stack_limit_bytes"],
                        "method": method, "modules": modules})
    return out


def config_key(kernel: str, constexprs: dict, num_warps: int, num_stages: int) -> str:
    return candidate_key(kernel, constexprs, num_warps, num_stages)


def loaded_configs(log: Path) -> list[str]:
    """The config key of every cubin a GPU worker loaded: its ``load`` events' hashes, through its ``compile`` events."""
    events = [json.loads(e) for e in log.read_text().splitlines()]
    by_hash = {e["hash"]: config_key(e["fn"], e["constexprs"], e["num_warps"], e["num_stages"])
               for e in events if e.get("event") == "compile"}
    return [by_hash[e["hash"]] for e in events if e.get("event") == "load"]


def candidate_sizes(path: Path) -> dict[str, dict]:
    """{config key: candidate line} of a cpu_frames case file whose lines carry ``image_bytes`` (compiled ones)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {config_key(r["kernel"], r["constexprs"], r["num_warps"], r["num_stages"]): r for r in rows if "image_bytes" in r}


def loaded_bytes(keys: list[str], sizes: dict[str, dict]) -> dict:
    """The loaded set's totals: cubins matched to a CPU candidate, their cubin bytes and device-section bytes, and the
    keys no candidate matched (the sums then bound nothing)."""
    matched = [sizes[k] for k in keys if k in sizes]
    return {"matched": len(matched), "unmatched": [k for k in keys if k not in sizes],
            "image_bytes": sum(r["image_bytes"] for r in matched),
            "device_section_bytes": sum(r["device_section_bytes"] for r in matched)}


def sizes_table(candidates: Path, log_dirs: list[Path]) -> list[dict]:
    """Per GPU worker log whose case a candidates file covers: the case, state and its loaded set's totals."""
    files = {p.stem.rsplit("_T", 1)[0]: p for p in candidates.glob("*.jsonl") if p.name != "summary.jsonl"}
    out = []
    for folder in log_dirs:
        for log in sorted(folder.rglob("*.kernels.jsonl")):
            tag = log.name.removesuffix(".kernels.jsonl")
            case, state = tag.rsplit("_", 1)
            found = files.get(case.rsplit("_T", 1)[0])
            if found is not None:
                out.append({"log": str(log.relative_to(folder)), "tag": tag, "state": state,
                            **loaded_bytes(loaded_configs(log), candidate_sizes(found))})
    return out


def probe_summary(rows: list[dict]) -> list[dict]:
    """Per image of a module_load.jsonl: copies, device-section bytes, the device-used growth summed over copies at each
    step, and how many copies grew device used at all (a pooled heap grows every k copies, not at each)."""
    groups: dict = defaultdict(list)
    for r in rows:
        if r.get("kind") in ("load", "triton", "cache_cubin"):
            groups[(r["kind"], r.get("variant") or r.get("unroll") or r.get("path"), r.get("step", ""))].append(r)
    out = []
    for (kind, name, step), members in groups.items():
        growth = [r["growth"] if kind != "triton" else {"load": r["growth"]} for r in members]
        total = {s: sum((g.get(s) or {}).get("device_used", 0) for g in growth) for s in ("load", "get_function", "launch")}
        out.append({"kind": kind, "image": str(name), "step": step, "copies": len(members),
                    "device_section_bytes": members[0]["device_section_bytes"], "image_bytes": members[0]["image_bytes"],
                    "growth": total, "per_copy": sum(total.values()) / len(members),
                    "copies_that_grew": sum(1 for g in growth if any((v or {}).get("device_used", 0) for v in g.values()))})
    return out


# ---- rendering (no arithmetic beyond unit conversion) ----------------------------------------------------------------

def render_measured(rows: list[dict]) -> str:
    lines = ["| record | case | state | Triton | cubins loaded | stack limit | method | modules (B) | MiB |",
             "|---|---|---|---|---:|---:|---|---:|---:|"]
    lines += [f"| {r['record']} | {r['tag']} | {r['state']} | {r['triton']} | {r['cubins']} | {r['limit']:,} | {r['method']} "
              f"| {r['modules']:,} | {r['modules'] / MIB:.4f} |" for r in rows]
    return "\n".join(lines)


def render_sizes(rows: list[dict]) -> str:
    lines = ["| worker log | state | cubins matched | unmatched | cubin bytes | device-section bytes |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r['log']} | {r['state']} | {r['matched']} | {len(r['unmatched'])} | {r['image_bytes']:,} | "
              f"{r['device_section_bytes']:,} |" for r in rows]
    return "\n".join(lines)


def render_probe(rows: list[dict]) -> str:
    lines = ["| kind | image | step | copies | device sections (B) | growth at load / get_function / launch (B) | per copy (B) "
             "| copies that grew |", "|---|---|---|---:|---:|---|---:|---:|"]
    lines += [f"| {r['kind']} | {r['image']} | {r['step']} | {r['copies']} | {r['device_section_bytes']:,} | "
              f"{r['growth']['load']:,} / {r['growth']['get_function']:,} / {r['growth']['launch']:,} | "
              f"{r['per_copy']:,.0f} | {r['copies_that_grew']} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m livebytes.validate.check.module_rule")
    sub = p.add_subparsers(dest="what", required=True)
    sub.add_parser("measured", help="the committed processes' loaded cubins and modules figures")
    s = sub.add_parser("sizes", help="loaded sets' cubin and device-section bytes")
    s.add_argument("--candidates", type=Path, required=True, help="a cpu_frames.py --out folder with image_bytes")
    s.add_argument("--logs", type=Path, action="append", required=True, help="an unpacked kernels_*.tgz folder")
    q = sub.add_parser("probe", help="module_load.jsonl summed per image")
    q.add_argument("file", type=Path)
    args = p.parse_args(argv)
    for path in [getattr(args, "candidates", None), *(getattr(args, "logs", None) or []), getattr(args, "file", None)]:
        if path is not None and not path.exists():
            print(f"error: {path}: not found", file=sys.stderr)
            return 1
    if args.what == "measured":
        print(render_measured(kernel_process_rows()))
    elif args.what == "sizes":
        print(render_sizes(sizes_table(args.candidates, args.logs)))
    else:
        print(render_probe(probe_summary([json.loads(line) for line in args.file.read_text().splitlines()])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The whole allocator history of one validator process, segments included: why does the replay miss?

Runs the runner exactly as ``livebytes validate`` does (same protocol, one shape per process) with
PyTorch's memory history on from before the first allocation, and writes every trace entry
(``alloc``, ``free_requested``, ``free_completed``, ``segment_alloc``, ``segment_free``, with stream,
size, address and the top Python frames) to ``OUT/process_trace_<impl>_<shape>.json``. The runner's
record goes to ``OUT`` beside it. Comparing the ``segment_alloc`` sizes with the replay's segments
names the request at which the real allocator and ours first part ways.

    python3 validate/gpu/probes/process_trace.py --impl cudnn-kda-hopper-cuda@1.32.0 --shape 1,8K,32,128 --out DIR
    python3 validate/gpu/probes/process_trace.py --impl fla-kda@0.6.0 --contract report --shape 1,2048,96,128 \
        --triton-cache cold --frames 10 --out DIR     # where a cold first call's benchmark buffers land
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

KEEP = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
        "segment_unmap", "oom")


def compact(entry: dict, depth: int = 3) -> dict:
    """One trace entry without the bulk: action, addr, size, stream and the innermost ``depth`` Python frames."""
    frames = [f"{Path(f['filename']).name}:{f['line']}:{f['name']}" for f in entry.get("frames", [])
              if f.get("filename", "").endswith(".py")][:depth]
    return {"action": entry["action"], "addr": int(entry["addr"]), "size": int(entry["size"]),
            "stream": int(entry.get("stream", 0)), "frames": frames}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True)
    ap.add_argument("--shape", required=True, help="one shape: MBS,SEQ,HEADS[,DIM]")
    ap.add_argument("--contract", default="report", choices=("report", "plain"), help="FLA only (the runner's default)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--triton-cache", default="auto", choices=("cold", "warm", "auto"),
                    help="the runner's: cold autotunes in the process (its first call benchmarks every kernel)")
    ap.add_argument("--frames", type=int, default=3, help="Python frames kept per entry (innermost first)")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")
    import torch  # deferred: torch is not in the core install (model/validate extras)
    # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
    from livebytes.validate.gpu import runner
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rc = runner.main(["--impl", args.impl, "--shapes", args.shape, "--contract", args.contract,
                      "--out", str(out), "--mode", "fresh-process", "--triton-cache", args.triton_cache])
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    entries = [compact(e, args.frames) for e in snapshot["device_traces"][0] if e.get("action") in KEEP]
    fla = args.impl.startswith("fla-")
    name = (f"process_trace_{args.impl.replace('@', '_')}{'_' + args.contract if fla else ''}"
            f"_{args.shape.replace(',', 'x')}.json")
    (out / name).write_text(json.dumps({"impl": args.impl, "shape": args.shape, "runner_rc": rc,
                                        "contract": args.contract if fla else None,
                                        "triton_cache": args.triton_cache if fla else "n/a",
                                        "alloc_conf": os.environ["PYTORCH_CUDA_ALLOC_CONF"],
                                        "entries": entries}, separators=(",", ":")))
    print(f"{name}: {len(entries)} entries, runner rc {rc}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())

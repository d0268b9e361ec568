"""Per-kernel resource usage of every compiled config in Triton cache folders (``cuobjdump -res-usage``).

Which autotune candidate needs the most local memory (STACK / LOCAL) decides how far the driver raises
``cudaLimitStackSize`` in a cold process, and at which kernel. One JSON line per cubin: the cache folder,
the kernel name and launch metadata from Triton's ``<name>.json`` beside it, and cuobjdump's figures.

    python3 validate/gpu/probes/cubin_usage.py /tmp/tc_a /tmp/tc_b > usage.jsonl
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

FIELDS = re.compile(r"(REG|STACK|SHARED|LOCAL|CONSTANT\[\d+\]|TEXTURE|SURFACE|SAMPLER):(\d+)")


def usage(cubin: Path, tool: str) -> dict:
    """cuobjdump's figures for one cubin; a cubin it cannot read stops the listing with its message."""
    done = subprocess.run([tool, "-res-usage", str(cubin)], capture_output=True, text=True, check=False)
    found = {k: int(v) for k, v in FIELDS.findall(done.stdout)}
    if done.returncode != 0 or "STACK" not in found:
        raise SystemExit(f"cuobjdump -res-usage {cubin}: exit {done.returncode}: {done.stderr.strip()[:300]}")
    return found


def main(folders: list[str]) -> int:
    tool = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    for folder in folders:
        for cubin in sorted(Path(folder).rglob("*.cubin")):
            meta_path = cubin.with_suffix(".json")
            meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
            keep = {k: meta.get(k) for k in ("name", "num_warps", "num_stages", "shared", "num_ctas", "maxnreg")}
            print(json.dumps({"folder": folder, "hash": cubin.parent.name, **keep, **usage(cubin, tool)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

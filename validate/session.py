"""Drive the runner from the `validate` command: one fresh process per shape (the protocol's default)
or one process for all of them, a progress display, and the records read back."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import parse_shape_list

from .records import Record, load_records


def _gpu_reason(impl: str) -> str | None:
    try:
        from .runner import decline_reason
    except Exception as err:  # torch missing altogether
        return f"the validate extra is not installed ({err.__class__.__name__}: {err})"
    return decline_reason(impl)


def run(impl: str, shapes: str, contract: str | None, recompute: bool, forward_only: bool, same_process: bool,
        out: Path) -> list[Record]:
    from rich.progress import Progress

    parsed = parse_shape_list(shapes)
    if forward_only and impl == "fla-kda@0.6.0":
        impl = "fla-kda-fwd@0.6.0"
    reason = _gpu_reason(impl)
    if reason:
        raise LivebytesError(f"cannot validate {impl} here: {reason}")
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "records.jsonl"
    before = jsonl.read_text().count("\n") if jsonl.exists() else 0
    base = [sys.executable, "-m", "livebytes.validate.runner", "--impl", impl, "--out", str(out)]
    if contract:
        base += ["--contract", contract]
    if not recompute:
        base.append("--no-recompute")
    if forward_only:
        base.append("--forward-only")
    batches = [";".join(f"{s.mbs},{s.seq},{s.heads},{s.dim}" for s in parsed)] if same_process else \
        [f"{s.mbs},{s.seq},{s.heads},{s.dim}" for s in parsed]
    mode = "shared-process" if same_process else "fresh-process"
    with Progress() as progress:
        task = progress.add_task(f"{impl} ({mode})", total=len(batches))
        for batch in batches:
            done = subprocess.run(base + ["--shapes", batch, "--mode", mode])
            if done.returncode:
                raise LivebytesError(f"runner failed on {batch} (exit {done.returncode})")
            progress.advance(task)
    # records.jsonl holds one JSON object per line; wrap the new ones for load_records
    lines = jsonl.read_text().splitlines()[before:]
    wrapped = out / f"records-{len(lines)}-new.json"
    wrapped.write_text('{"records": [' + ",".join(lines) + "]}")
    return [r for r in load_records(out) if r.path == wrapped]

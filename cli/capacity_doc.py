"""The generated tables of docs/planning.md and docs/capacity.md (between ``<!-- capacity:NAME -->`` markers): the GPU
presets and where each total comes from (``estimator/data/devices.json``), which shapes run on which GPU and the longest
sequence per GPU, from the full simulation (``estimator.capacity``), and every measured process's own memory against
the process-memory model (``validate.check.process_check``).
``python -m livebytes.cli.capacity_doc`` rewrites them; tests/test_capacity.py keeps them in sync."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from livebytes.estimator.capacity import verdict
from livebytes.estimator.devices import DEVICES, GiB
from livebytes.estimator.planning import largest_running
from livebytes.estimator.registry import get_model, spec
from livebytes.estimator.shapes import Shape
from livebytes.validate.check.process_check import rows
from livebytes.estimator.process import loo

GPUS = tuple(d.name for d in sorted(DEVICES.values(), key=lambda d: d.capacity_bytes))   # columns: smallest total first
ROWS = (("fla-kda@07b80f27", {}), ("fla-kda@0.6.0", {}), ("fla-kda@0.6.0", {"contract": "plain"}),
        ("cudnn-kda-frost@1.32.0", {}), ("cudnn-kda-hopper-cuda@1.32.0", {}))
SHAPES = (Shape(1, 131072, 96), Shape(1, 262144, 96), Shape(1, 131072, 128), Shape(1, 262144, 128))


def _label(key: str, opts: dict) -> str:
    return f"`{key}`" + "".join(f" `--{k} {v}`" for k, v in opts.items())


def _runs_on(key: str, gpu: str) -> bool:
    return not spec(key).refuse(Shape(1, 8192, 96), DEVICES[gpu])


def presets_table() -> str:
    """Each preset's SMs and total as the table holds them, and the kind and source of the total."""
    lines = ["| preset | SMs | total (B) | GiB | source |", "|---|---:|---:|---:|---|"]
    for d in DEVICES.values():
        lines.append(f"| {d.name} | {d.sm_count} | {d.capacity_bytes:,} | {d.capacity_bytes / GiB:.3f} | "
                     f"{d.capacity_source.replace('|', '/')} |")
    return "\n".join(lines)


def fit_table() -> str:
    lines = ["| model | shape | " + " | ".join(GPUS) + " |", "|---|---|" + "---:|" * len(GPUS)]
    for key, opts in ROWS:
        for shape in SHAPES:
            cells = []
            for gpu in GPUS:
                if not _runs_on(key, gpu):
                    cells.append("-")
                    continue
                v = verdict(get_model(key, gpu, **opts), shape, DEVICES[gpu])
                cells.append(f"runs ({v.device_need_bytes / GiB:.1f})" if v.fits else
                             f"OOM ({v.device_need_bytes / GiB:.1f})")
            lines.append(f"| {_label(key, opts)} | H{shape.heads} {shape.seq // 1024}K | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def longest_table() -> str:
    lines = ["| model | H | " + " | ".join(GPUS) + " |", "|---|---:|" + "---:|" * len(GPUS)]
    for key, opts in ROWS:
        for heads in (96, 128):
            cells = []
            for gpu in GPUS:
                if not _runs_on(key, gpu):
                    cells.append("-")
                    continue
                r = largest_running(get_model(key, gpu, **opts), Shape(1, 8192, heads), "seq", DEVICES[gpu])
                cells.append("none" if r.value is None else f"{r.value:,}")
            lines.append(f"| {_label(key, opts)} | {heads} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def process_table() -> str:
    """Every measured process's non-PyTorch bytes and stack limit against the model (``validate.check.process_check``)."""
    lines = ["| process (record) | cache | limit measured / model (B) | non-PyTorch measured (B) | model - measured (MiB) |",
             "|---|---|---:|---:|---:|"]
    for r in rows():
        limit = "-" if r.measured_limit is None else f"{r.measured_limit:,}"
        lines.append(f"| `{r.label}` ({r.record}) | {r.state} | {limit} / {r.predicted_limit:,} | {r.measured_bytes:,} | "
                     f"{r.difference_bytes / 2**20:+.2f} |")
    return "\n".join(lines)


def loo_summary() -> str:
    """Per kind of estimate: the withheld cases, the error range, the high end counted (``estimator.process.loo``)."""
    lines = ["| estimate | withheld cases | error (MiB), smallest / largest | high end counted (MiB) | within 64 MiB |",
             "|---|---:|---:|---:|---:|"]
    for kind in loo.KINDS:
        low, high, n = loo.error_range(kind)
        within = sum(abs(r.error) <= 64 * 2**20 for r in loo.rows() if r.kind == kind)
        lines.append(f"| {kind} | {n} | {low / 2**20:+,.0f} / {high / 2**20:+,.0f} | {loo.margin(kind) / 2**20:,.0f} | "
                     f"{within} of {n} |")
    return "\n".join(lines)


def loo_table() -> str:
    """Every withheld case: the committed figure, the estimate without it, the tier it came from, the error in device
    bytes on the H200 (``estimator.process.loo.rows``)."""
    lines = ["| data (Triton) | estimate | case | tokens | source | committed | estimated | from | error (MiB) |",
             "|---|---|---|---:|---|---:|---:|---|---:|"]
    for r in loo.rows():
        triton = r.data_file.split("triton-")[1].split("_")[0]
        tokens = "" if r.tokens is None else f"{r.tokens:,}"
        lines.append(f"| {triton} | {r.kind} | `{r.case}` | {tokens} | {r.source} | {r.committed:,} | {r.estimated:,} | "
                     f"{r.tier} | {r.error / 2**20:+,.1f} |")
    return "\n".join(lines)


TABLES = {"presets": presets_table, "fit": fit_table, "longest": longest_table, "process": process_table,
          "loo-summary": loo_summary, "loo": loo_table}


def regenerate(text: str) -> str:
    for name, make in TABLES.items():
        pattern = re.compile(rf"(<!-- capacity:{name} -->\n).*?(<!-- /capacity:{name} -->)", re.DOTALL)
        if not pattern.search(text):
            continue
        table = make()
        text = pattern.sub(lambda m, table=table: m.group(1) + table + "\n" + m.group(2), text)
    return text


if __name__ == "__main__":
    for path in map(Path, sys.argv[1:] or ["docs/planning.md"]):     # each file named (it once read only the first)
        path.write_text(regenerate(path.read_text()))
        print(path)

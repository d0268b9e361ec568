"""``livebytes payload``: what autograd retains for backward, the payload model against the real autograd graph on the
CPU (exit 3 on a mismatch)."""
from __future__ import annotations

from typing import Optional

import typer

from .. import options as o
from .. import render
from ..render import Column
from ..errors import EXIT_VALIDATION_FAILED
from ..progress import counting, progress
from livebytes.estimator.errors import LivebytesError
from livebytes import report

NAME = "payload"


def command(fn: str = typer.Option("tiled", "--fn", metavar="dense|tiled|checkpointed", help="dense, tiled or checkpointed attention"),
            seq: str = typer.Option("128,256,512,1024", "--seq-len", "--seq", "--T", metavar="SIZES",
                                  help="token counts: a list 128,256 or a doubling range 128..1024 (--T: the payload "
                                       "model's T, docs/payload.md)"),
            dim: str = typer.Option("32", "--head-dim", "--dim", "--d", metavar="SIZE",
                                    help="query/key head dimension (--d: the payload model's d)"),
            dim_v: Optional[str] = typer.Option(None, "--head-v-dim", "--dim-v", "--dv", metavar="SIZE",
                                                help="value head dimension (--dv: the payload model's dv); default: "
                                                     "--head-dim"),
            block_q: str = typer.Option("32", "--block-q", metavar="SIZE", help="query block of the tiled and checkpointed forms"),
            block_k: str = typer.Option("32", "--block-k", metavar="SIZE", help="key block of the tiled and checkpointed forms"),
            measure_on_cpu: bool = typer.Option(True, "--measure/--no-measure", help="also run it on the CPU (needs torch)"),
            as_json: bool = o.Json) -> None:
    """What autograd retains for backward: the payload model against the real autograd graph (CPU, float32).
    Exit code 3 when a measurement differs from the model."""
    from livebytes.estimator.planning import parse_range  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import parse_size
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.attention_payload import PAYLOAD_MODELS

    if fn not in PAYLOAD_MODELS:
        raise LivebytesError(f"--fn must be one of {', '.join(PAYLOAD_MODELS)}, got {fn!r}")
    d, dv = parse_size(dim, "--head-dim"), (parse_size(dim_v, "--head-v-dim") if dim_v is not None else None)
    bq, bk = parse_size(block_q, "--block-q"), parse_size(block_k, "--block-k")
    seqs = parse_range(seq, "--seq-len")
    measure = None
    if measure_on_cpu:
        try:
            # deferred: the measurement's modules and torch, asked for only with --measure; the ImportError below says
            # what is missing
            from livebytes.validate.gpu.payload import measure
            # deferred: torch is not in the core install (model/validate extras)
            import torch  # noqa: F401 - the measurement needs it; say so before running anything
        except ImportError:
            raise LivebytesError("--measure needs torch (pip install torch, or the [test] extra); "
                                 "pass --no-measure for the model alone") from None
        # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
        from livebytes.validate.gpu.payload import check_host_memory, check_measurable
        check_measurable(max(seqs))       # up front: refuse before measuring any row
        check_host_memory(fn, max(seqs), d, dv, bq, bk)
    with progress(f"measuring {fn} attention on the CPU", as_json or measure is None) as step:
        rows = report.payload_rows(fn, seqs, d, dv, bq, bk, measure and counting(measure, step, len(seqs)))
    data = report.envelope("payload", rows, fn=fn, passed=all(r["passed"] is not False for r in rows))
    if as_json:
        render.print_json(data)
    else:
        render.show(payload_table(data))
    if not data["passed"]:
        raise typer.Exit(EXIT_VALIDATION_FAILED)



def _kib(nbytes: int, digits: int = 1) -> str:
    return f"{nbytes / 1024:,.{digits}f}"


def _match(r: dict) -> str:
    return "-" if r["passed"] is None else ("exact" if r["passed"] else f"{r['error_bytes']:+,}B")


# a row per token count (report.payload_rows): every column a number
COLUMNS = [
    Column("seq_len", lambda r: f"{r['shape']['seq_len']:,}", "number"),
    Column("predicted\nmeasured\nKiB", lambda r: f"{_kib(r['predicted_bytes'])}\n"
           + ("-" if r["measured_bytes"] is None else _kib(r["measured_bytes"])), "number"),
    Column("match", _match, "number"),
    Column("save\nevents", lambda r: f"{r['save_events']:,}", "number"),
    Column("largest\nelem", lambda r: f"{r['largest_elements']:,}", "number"),
    Column("growth", lambda r: "" if r["growth_ratio"] is None else f"x{r['growth_ratio']:.2f}", "number"),
    Column("vs dense\nvs tiled", lambda r: f"{r['vs_dense_ratio']:.2f}x\n{r['vs_tiled_ratio']:.2f}x", "number"),
    Column("3Td\nKiB", lambda r: _kib(r["inputs_bytes"], 0), "number"),
]


def payload_table(data: dict):
    """``data``: the payload command's JSON (rows from report.payload_rows)."""
    return render.table(f"saved payload of {data['fn']} attention (KiB = 1024 B); growth: against the previous row; "
                        "3Td: the inputs q, k, v", COLUMNS, data["results"])

def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import boolean, envelope, integer, mapof, number, obj, string
    return envelope(NAME, obj("one token count", {
        "impl": string("dense, tiled or checkpointed"), "device": string("cpu", enum=("cpu",)),
        "shape": obj("the attention's dimensions", {
            "seq_len": integer("tokens T"), "head_dim": integer("q/k head dim d"), "head_v_dim": integer("v head dim dv"),
            "block_q": integer("query block"), "block_k": integer("key block")}),
        "options": mapof({}, "none"),
        "predicted_bytes": integer("bytes autograd saves, per the model"),
        "measured_bytes": integer("measured on the CPU (null with --no-measure)", nullable=True),
        "save_events": integer("tensors saved, per the model"),
        "measured_save_events": integer("measured", nullable=True),
        "largest_elements": integer("largest saved tensor, elements"),
        "measured_largest_elements": integer("measured", nullable=True),
        "growth_ratio": number("predicted_bytes / previous row's", nullable=True),
        "vs_dense_ratio": number("predicted_bytes / dense's"), "vs_tiled_ratio": number("predicted_bytes / tiled's"),
        "inputs_bytes": integer("q, k, v themselves"),
        "passed": boolean("bytes, events and largest all equal (null unmeasured)", nullable=True),
        "error_bytes": integer("predicted - measured, as validate's (null unmeasured)", nullable=True)}),
        "what autograd retains for backward", fn=string("dense, tiled or checkpointed"),
        passed=boolean("every measured row matches the model (else exit code 3)"))

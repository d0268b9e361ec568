"""``livebytes process measure|list``: a case's process measured on this machine's GPU, kept for later answers.

Where no committed process measured a case, the process-memory model has no bound on its loaded kernel modules (the
driver's placement of code follows no rule we can state: validate/data/records/runs/cpu_frames/MODULES.md) and says so
with this command's line; ``measure`` runs the case's first call alone on the GPU, cold then warm (minutes), and
replaces the unbounded figure by the process's own, for that GPU; ``list`` shows what this machine measured. Parses,
calls ``livebytes.process``, renders."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import options as o
from .. import render
from ..errors import UsageProblem, warn
from ..render import Column
from livebytes.report import envelope

NAME = "process"
ACTIONS = ("measure", "list")
Action = typer.Argument(..., metavar="measure|list", help="measure: run one case's first call alone on this GPU, cold "
                                                          "then warm, and keep its figures; list: the processes "
                                                          "measured on this machine")
CASE = o.case_flags("measure")
SeqLen = typer.Option(None, "--seq-len", "--seq", metavar="SIZE", help="measure: tokens of the one sequence the call "
                                                                       "runs (default 4096); a reading answers as "
                                                                       "measured at its own length only")
Keep = typer.Option(None, "--keep", metavar="DIR", help="measure: also copy the probe's own files (its summary lines, "
                                                        "each process's kernel log and stderr) to DIR")


def command(action: str = Action, impl: Optional[str] = CASE["impl"], heads: Optional[str] = CASE["heads"],
            dim: Optional[str] = CASE["dim"], v_heads: Optional[str] = CASE["v_heads"],
            contract: Optional[str] = CASE["contract"], triton: Optional[str] = CASE["triton"],
            seq: Optional[str] = SeqLen, hidden: Optional[str] = CASE["hidden"], layers: Optional[str] = CASE["layers"],
            checkpoint: bool = CASE["checkpoint"], conv_size: Optional[str] = CASE["conv_size"],
            keep: Optional[str] = Keep, as_json: bool = o.Json) -> None:
    """A case's process memory measured on this GPU (its first call alone, cold then warm), or those measured."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import process
    if action not in ACTIONS:
        raise UsageProblem(f"process: the action is measure or list, not {action!r}")
    if action == "list":
        o.refuse_unused("with process list", impl=impl is not None, heads=heads is not None, dim=dim is not None,
                        v_heads=v_heads is not None, contract=contract is not None, triton=triton is not None,
                        seq=seq is not None, hidden=hidden is not None, layers=layers is not None, checkpoint=checkpoint,
                        conv_size=conv_size is not None, keep=keep is not None)
        measured = process.measured_processes()
        unread = process.why_none_read()
        if unread:
            warn(f"process list: {unread}")
    else:
        key, shape, options = o.case_from(impl, heads, dim, v_heads, contract, "process measure", NAME, seq, hidden=hidden,
                                          layers=layers, checkpoint=checkpoint, conv_size=conv_size)
        if keep is not None and not keep.strip():
            raise UsageProblem(f"process measure: --keep needs a folder, not {keep!r}")
        measured = process.measure_process_at(key, shape, options, triton, keep=None if keep is None else Path(keep))
        if not all(m.stored for m in measured):
            warn("process measure: the private cache could not be written: nothing was kept for later answers")
    rows = [{k: v for k, v in m.to_dict().items() if k != "stored"} for m in measured]
    data = envelope(NAME, rows, action=action)
    if as_json:
        render.print_json(data)
    else:
        render.show(process_table(data))


COLUMNS = [Column("case", lambda r: r["case"], "key"), Column("state", lambda r: r["state"], "key"),
           Column("GPU", lambda r: r["device"], "key"), Column("Triton", lambda r: r["triton"], "key"),
           Column("measured", lambda r: r["measured_on"], "text"),
           Column("context B", lambda r: f"{r['context_bytes']:,}", "number"),
           Column("modules B", lambda r: f"{r['modules_bytes']:,}", "number"),
           Column("stack limit B", lambda r: f"{r['stack_limit_bytes']:,}", "number"),
           Column("non-PyTorch B", lambda r: f"{r['nonpytorch_bytes']:,}", "number")]


def process_table(data: dict):
    title = "processes measured on this machine" if data["action"] == "list" else "process measured"
    return render.listing(title, COLUMNS, data["results"], "livebytes process measure")


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import envelope as schema_envelope, integer, obj, string
    return schema_envelope(NAME, obj("one process measured on this machine", {
        "case": string("the store's case key, 'KEY:CONTRACT D.. H.. HV..' (the model's full key; a layer's build "
                       "options after it: hidden=.. layers=.. checkpoint=.. conv_size=..)"),
        "state": string("cold (an empty Triton cache) or warm (over the cold process's cache)"),
        "device": string("the GPU preset the process ran on"),
        "triton": string("the Triton version whose kernels ran"),
        "measured_on": string("the date of the measurement, ISO"),
        "context_bytes": integer("the process's device memory outside PyTorch's allocator before its first kernel"),
        "nonpytorch_bytes": integer("the process's device memory outside PyTorch's allocator after the first call"),
        "stack_limit_bytes": integer("the driver's per-thread stack limit after the first call"),
        "modules_bytes": integer("the loaded kernel modules the estimator takes: non-PyTorch bytes less the context "
                                 "and the stack limit's reservation on that GPU"),
    }), "processes measured on this machine's GPU", action={"enum": list(ACTIONS), "description": "what the command did"})

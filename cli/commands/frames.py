"""``livebytes frames derive|list``: a case's stack frames compiled on this machine's CPU, kept for later answers.

Where the committed data lack a case, the process-memory model estimates its kernels' frames from the nearest
committed cases (``estimated:``, with the rule's leave-one-out error) and names this command's line; ``derive`` replaces
that estimate by the case's own frames (every autotune candidate compiled for sm90 by the installed Triton, minutes, no
GPU), ``list`` shows what this machine derived. Parses, calls ``livebytes.frames``, renders."""
from __future__ import annotations

from typing import Optional

import typer

from .. import options as o
from .. import render
from ..errors import UsageProblem, warn
from ..render import Column
from livebytes.report import envelope

NAME = "frames"
ACTIONS = ("derive", "list")
Action = typer.Argument(..., metavar="derive|list", help="derive: compile one case's kernels and keep their frames; "
                                                         "list: the cases derived on this machine")
CASE = o.case_flags("derive")


def command(action: str = Action, impl: Optional[str] = CASE["impl"], heads: Optional[str] = CASE["heads"],
            dim: Optional[str] = CASE["dim"], v_heads: Optional[str] = CASE["v_heads"],
            contract: Optional[str] = CASE["contract"], triton: Optional[str] = CASE["triton"],
            as_json: bool = o.Json) -> None:
    """Stack frames of a case the data lack: derive them here (the CPU compile, minutes), or list those derived."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import frames
    if action not in ACTIONS:
        raise UsageProblem(f"frames: the action is derive or list, not {action!r}")
    if action == "list":
        o.refuse_unused("with frames list", impl=impl is not None, heads=heads is not None, dim=dim is not None,
                        v_heads=v_heads is not None, contract=contract is not None, triton=triton is not None)
        rows = frames.derived_frames()
        unread = frames.why_none_read()
        if unread:
            warn(f"frames list: {unread}")
    else:
        rows = [_derive(frames, impl, heads, dim, v_heads, contract, triton)]
    data = envelope(NAME, rows, action=action)
    if as_json:
        render.print_json(data)
    else:
        render.show(frames_table(data))


def _derive(frames, impl, heads, dim, v_heads, contract, triton) -> dict:
    """One case derived, as a row of the table: the flags parsed as every command parses them (``options``)."""
    key, shape, options = o.case_from(impl, heads, dim, v_heads, contract, "frames derive", NAME)
    derived = frames.derive_frames_at(key, shape, options, triton)
    if not derived.stored:
        warn("frames derive: the private cache could not be written: nothing was kept for later answers")
    return {"case": derived.case, "data_file": derived.data_file, "triton": derived.triton, "ptxas": derived.ptxas,
            "largest_frame_bytes": max(derived.frames.values())}


COLUMNS = [Column("case", lambda r: r["case"], "key"), Column("data", lambda r: r["data_file"], "text"),
           Column("Triton", lambda r: r["triton"], "key"),
           Column("largest frame B", lambda r: f"{r['largest_frame_bytes']:,}", "number")]


def frames_table(data: dict):
    title = "stack frames derived on this machine" if data["action"] == "list" else "stack frames derived"
    return render.listing(title, COLUMNS, data["results"], "livebytes frames derive")


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import envelope as schema_envelope, integer, obj, string
    return schema_envelope(NAME, obj("one case derived on this machine", {
        "case": string("the data's case key, 'FAMILY:CONTRACT D.. H.. HV..'"),
        "data_file": string("the process-memory data file the case belongs to"),
        "triton": string("the Triton version that compiled it"), "ptxas": string("the ptxas that compiled it"),
        "largest_frame_bytes": integer("the largest stack frame over the case's kernels"),
    }), "cases whose stack frames were compiled on this machine",
        action={"enum": list(ACTIONS), "description": "what the command did"})

"""``livebytes frames derive|list``: a case's stack frames compiled on this machine's CPU, kept for later answers.

Where the committed data lack a case, the process-memory model bounds the stack reservation by CUDA's 512 KiB
per-thread local-memory limit (loose: 141 GB on the H200) and says so with this command's line; ``derive`` replaces
that bound by the case's own frames (every autotune candidate compiled for sm90 by the installed Triton, minutes, no
GPU), ``list`` shows what this machine derived. Parses, calls ``livebytes.frames``, renders."""
from __future__ import annotations

from typing import Optional

import typer

from .. import options as o
from .. import render
from ..errors import UsageProblem, warn
from ..render import Column

NAME = "frames"
ACTIONS = ("derive", "list")
Action = typer.Argument(..., metavar="derive|list", help="derive: compile one case's kernels and keep their frames; "
                                                         "list: the cases derived on this machine")
Impl = typer.Option(None, "--impl", help="derive: the kernel or layer model (fla-kda@0.6.0, fla-gdn@0.6.0, "
                                         "fla-kda-layer@0.6.0, ...)", metavar="KEY")
Heads = typer.Option(None, "--num-heads", "--heads", help="derive: query/key heads", metavar="SIZE")
Dim = typer.Option(None, "--head-dim", "--dim", help="derive: query/key head dimension (default 128)", metavar="SIZE")
VHeads = typer.Option(None, "--num-v-heads", "--v-heads", metavar="SIZE",
                      help="derive: value heads, a multiple of --num-heads (default: --num-heads)")
Contract = typer.Option(None, "--contract", metavar="report|plain", help="derive, fla-kda only: the call's contract")
Triton = typer.Option(None, "--triton", metavar="VERSION",
                      help="derive: the Triton that compiles, the installed one (default: the model's in the data)")


def command(action: str = Action, impl: Optional[str] = Impl, heads: Optional[str] = Heads,
            dim: Optional[str] = Dim, v_heads: Optional[str] = VHeads, contract: Optional[str] = Contract,
            triton: Optional[str] = Triton, as_json: bool = o.Json) -> None:
    """Stack frames of a case the data lack: derive them here (the CPU compile, minutes), or list those derived."""
    from livebytes import frames
    from livebytes.report import envelope
    if action not in ACTIONS:
        raise UsageProblem(f"frames: the action is derive or list, not {action!r}")
    if action == "list":
        o.refuse_unused("with frames list", impl=impl is not None, heads=heads is not None, dim=dim is not None,
                        v_heads=v_heads is not None, contract=contract is not None, triton=triton is not None)
        rows = frames.derived_frames()
    else:
        rows = [_derive(frames, impl, heads, dim, v_heads, contract, triton)]
    data = envelope(NAME, rows, action=action)
    if as_json:
        render.print_json(data)
    else:
        render.show(frames_table(data))


def _derive(frames, impl, heads, dim, v_heads, contract, triton) -> dict:
    """One case derived, as a row of the table: the flags parsed as every command parses them (``options``)."""
    if impl is None or heads is None:
        raise UsageProblem("frames derive: --impl and --num-heads are required")
    shape = o.shape_from("1", "4096", heads, dim or "128", v_heads)     # length changes no frame
    options = {"contract": contract} if contract is not None else {}
    if shape.hv != shape.heads:
        options["gva"] = True
    derived = frames.derive_frames_at(o.single_impl([impl], NAME), shape, options, triton)
    if not derived.stored:
        warn("frames derive: the private cache could not be written: nothing was kept for later answers")
    return {"case": derived.case, "data_file": derived.data_file, "triton": derived.triton, "ptxas": derived.ptxas,
            "largest_frame_bytes": max(derived.frames.values())}


COLUMNS = [Column("case", lambda r: r["case"], "key"), Column("data", lambda r: r["data_file"], "text"),
           Column("Triton", lambda r: r["triton"], "key"),
           Column("largest frame B", lambda r: f"{r['largest_frame_bytes']:,}", "number")]


def frames_table(data: dict):
    title = "stack frames derived on this machine" if data["action"] == "list" else "stack frames derived"
    return render.table(title, COLUMNS, data["results"])


def schema() -> dict:
    from ..schema import envelope, integer, obj, string
    return envelope(NAME, obj("one case derived on this machine", {
        "case": string("the data's case key, 'FAMILY:CONTRACT D.. H.. HV..'"),
        "data_file": string("the process-memory data file the case belongs to"),
        "triton": string("the Triton version that compiled it"), "ptxas": string("the ptxas that compiled it"),
        "largest_frame_bytes": integer("the largest stack frame over the case's kernels"),
    }), "cases whose stack frames were compiled on this machine",
        action={"enum": list(ACTIONS), "description": "what the command did"})

"""``livebytes frames derive|list``: a case's stack frames compiled on this machine's CPU, kept for later answers.

Where the committed data lack a case, the process-memory model estimates its kernels' frames from the nearest
committed cases (``estimated:``, with the rule's leave-one-out error) and names this command's line; ``derive`` replaces
that estimate by the case's own frames (every autotune candidate compiled for sm90 by the installed Triton, minutes, no
GPU), ``list`` shows what this machine derived. ``derive --model CONFIG --seq-len N`` does it for a whole model's
training step: every Triton kernel the traced step launches, so a config no GPU ran gets its own stack limit instead
of the whole-model rule's estimate (or none, for a family no process ran). Parses, calls ``livebytes.frames``,
renders."""
from __future__ import annotations

from typing import Optional

import typer

from .. import options as o
from .. import render
from ..errors import UsageProblem, warn
from ..progress import progress
from livebytes.estimator.shapes import parse_size
from ..render import Column
from livebytes.report import envelope

NAME = "frames"
ACTIONS = ("derive", "list")
Action = typer.Argument(..., metavar="derive|list", help="derive: compile one case's kernels and keep their frames; "
                                                         "list: the cases derived on this machine")
CASE = o.case_flags("derive")
STEP = {
    "model": typer.Option(None, "--model", metavar="CONFIG.json", help="derive: a whole model's training step instead "
                          "of --impl: a preset or an HF config.json, as predict --model takes it"),
    "seq": typer.Option(None, "--seq-len", "--seq", metavar="SIZE", help="derive --model: tokens per sequence (8192, "
                        "32K)"),
    "mbs": typer.Option(None, "--batch-size", "--mbs", metavar="SIZE", help="derive --model: sequences per "
                        "micro-batch (default 1)"),
    "checkpoint": typer.Option(False, "--checkpoint", help="derive --model: activation checkpointing per layer"),
    "precision": typer.Option(None, "--precision", metavar="bf16|fp32-amp", help="derive --model: the step's "
                              "precision (default bf16)"),
    "workers": typer.Option(None, "--workers", metavar="N", help="derive --model: launches compiled side by side "
                            "(default: every CPU)")}


def command(action: str = Action, impl: Optional[str] = CASE["impl"], heads: Optional[str] = CASE["heads"],
            dim: Optional[str] = CASE["dim"], v_heads: Optional[str] = CASE["v_heads"],
            contract: Optional[str] = CASE["contract"], triton: Optional[str] = CASE["triton"],
            model: Optional[str] = STEP["model"], seq: Optional[str] = STEP["seq"], mbs: Optional[str] = STEP["mbs"],
            checkpoint: bool = STEP["checkpoint"], precision: Optional[str] = STEP["precision"],
            workers: Optional[str] = STEP["workers"], as_json: bool = o.Json) -> None:
    """Stack frames of a case the data lack: derive them here (the CPU compile, minutes), or list those derived."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import frames
    if action not in ACTIONS:
        raise UsageProblem(f"frames: the action is derive or list, not {action!r}")
    step = {"model": model, "seq": seq, "mbs": mbs, "checkpoint": checkpoint or None, "precision": precision,
            "workers": workers}
    if action == "list":
        o.refuse_unused("with frames list", impl=impl is not None, heads=heads is not None, dim=dim is not None,
                        v_heads=v_heads is not None, contract=contract is not None, triton=triton is not None,
                        **{k: v is not None for k, v in step.items()})
        rows = frames.derived_frames() + [_step_row(r) for r in frames.derived_steps()]
        unread = frames.why_none_read()
        if unread:
            warn(f"frames list: {unread}")
    elif model is not None:
        o.refuse_unused("with frames derive --model", impl=impl is not None, heads=heads is not None,
                        dim=dim is not None, v_heads=v_heads is not None, contract=contract is not None,
                        triton=triton is not None)
        rows = [_derive_step(frames, model, seq, mbs, checkpoint, precision, workers, as_json)]
    else:
        o.refuse_unused("without --model", **{k: v is not None for k, v in step.items() if k != "model"})
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


STEPS_KEPT = "whole-model steps (private cache)"


def _derive_step(frames, model, seq, mbs, checkpoint, precision, workers, quiet) -> dict:
    """One whole model's step derived, as a row of the table (a progress line on a terminal while it compiles)."""
    if seq is None:
        raise UsageProblem("frames derive --model: --seq-len is required (Triton specialises on the length)")
    sizes = {flag: parse_size(value, flag) for flag, value in (("--seq-len", seq), ("--batch-size", mbs or "1"),
                                                                  ("--workers", workers)) if value is not None}
    with progress(f"compiling {model}'s step on the CPU (minutes)", quiet):
        derived = frames.derive_model_frames(model, seq_len=sizes["--seq-len"], batch_size=sizes["--batch-size"],
                                             checkpoint=checkpoint, precision=precision or "bf16",
                                             workers=sizes.get("--workers"))
    if not derived.stored:
        warn("frames derive: the private cache could not be written: nothing was kept for later answers")
    return {"case": derived.record, "data_file": STEPS_KEPT, "triton": derived.triton, "ptxas": derived.ptxas,
            "largest_frame_bytes": max(derived.frames.values())}


def _step_row(step: dict) -> dict:
    """A whole model's step derived on this machine, as ``frames list`` shows it beside the kernels' cases."""
    return {"case": step["record"], "data_file": STEPS_KEPT, "triton": step["triton"], "ptxas": step["ptxas"],
            "largest_frame_bytes": step["largest_frame_bytes"]}


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
        "case": string("the data's case key, 'FAMILY:CONTRACT D.. H.. HV..', or a whole model's step, "
                       "'CONFIG#MBSxSEQ' (the config's name and shape)"),
        "data_file": string("the process-memory data file the case belongs to, or 'whole-model steps (private "
                            "cache)' for a whole model's step"),
        "triton": string("the Triton version that compiled it"), "ptxas": string("the ptxas that compiled it"),
        "largest_frame_bytes": integer("the largest stack frame over the case's kernels"),
    }), "cases whose stack frames were compiled on this machine",
        action={"enum": list(ACTIONS), "description": "what the command did"})

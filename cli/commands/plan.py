"""``livebytes plan``: the largest sequence, micro-batch, head count or layer count that runs on the device (or fits a
budget), or the fewest FSDP2 ranks."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import typer

from .. import options as o
from .. import render
from ..render import Column, g
from ..errors import UsageProblem, warn
from ..progress import progress
from .predict import TRACING
from livebytes.estimator.devices import parse_budget
from livebytes.estimator.errors import LivebytesError

NAME = "plan"


Solve = typer.Option("seq_len", "--solve", metavar="NAME",
                     help="seq_len, batch_size, num_heads or num_hidden_layers (layer models, --model): which dimension to "
                          "maximise (their short names seq, mbs, heads, layers too); gpus (--model): the fewest ranks, "
                          "powers of two, over FSDP2 x CP (up to 8) x EP (dividing the experts)")
Budget = typer.Option(None, "--budget", metavar="SIZE",
                      help="a budget on the allocated peak (what max_memory_allocated would show) instead of the device "
                           "simulation: 80GiB, 141GB, 2TiB (a unit is required)")
Seq = typer.Option("8K", "--seq-len", "--seq", metavar="SIZE", help="tokens per sequence, held unless solved: 8192, 8K")
Heads = typer.Option(None, "--num-heads", "--heads", metavar="SIZE",
                     help="query/key heads, held unless solved (default 96; --model: the config's)")


@o.query_options(*o.MODEL_OPTIONS, "routing", *o.LORA_OPTIONS, "solve", "gpu", "budget", *o.SHAPE_OPTIONS, *o.WHAT_IF_OPTIONS[1:],
                 *o.PROCESS_OPTIONS, "as_json", "fsdp", "ep", seq=Seq, heads=Heads)
def command(q: o.QueryFlags, ctx: typer.Context, solve: str = Solve, budget: Optional[str] = Budget,
            as_json: bool = o.Json) -> None:
    """The largest sequence, micro-batch or head count that runs on each model's GPU without going out of
    memory (the full allocator simulation), or whose allocated peak fits --budget; the other dimensions held;
    --solve gpus: the fewest ranks over FSDP2 x CP x EP (--model)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import calls
    from livebytes.estimator.planning import SOLVABLE, solved_field  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import HF_NAMES
    gpus = solve.strip().lower() in GPUS
    try:
        solve = "seq" if gpus else solved_field(solve)      # --solve gpus holds every shape field
    except LivebytesError as err:
        raise UsageProblem(f"--solve: {err}") from None
    if not gpus:
        o.refuse_solved(solve, o.given(ctx, *SOLVABLE))
    # --alloc-conf and --triton-cache stay: they change the replayed max_memory_allocated, so the budget's answer
    o.refuse_unused("with --budget: the budget bounds the allocated peak (max_memory_allocated), and the Triton "
                    "version only sets the process memory (stack frames, modules), which is not part of it",
                    triton=budget is not None and q.triton is not None)
    ch = o.chosen_by(q)
    keys = o.distinct_impls(ch.keys, NAME)
    if gpus:
        return _plan_gpus(q, ch, budget, as_json)
    if ch.options and solve == "heads":
        raise UsageProblem("--solve num_heads with --model: the config fixes the heads; solve seq_len, batch_size or "
                           "num_hidden_layers")
    base = o.shape_by(q, ch, heads="96")
    if solve == "layers" and base.layers is None:
        base = replace(base, layers=1)      # the solver varies it: a layer model's field (a kernel model refuses it)
    limit = parse_budget(budget) if budget is not None else None
    setting = o.setting_by(q, ch)
    with progress(f"plan: the largest {HF_NAMES[solve]}" + (TRACING if ch.options else ""), as_json) as step:
        data = calls.plan_at(keys, base, solve, setting, limit, announce=warn, progress=step).to_dict()
    render.warn_all(data)
    if as_json:
        render.print_json(data)
        return
    render.show(plan_table(data, f"a budget of {limit:,} B") if limit is not None else capacity_plan_table(data))


GPUS = ("gpus", "gpu")       # plan --solve gpus: FSDP2's fewest ranks


def _plan_gpus(q: o.QueryFlags, ch, budget: Optional[str], as_json: bool) -> None:
    """``plan --solve gpus``: a whole model (--model) at one shape, the fewest FSDP2 ranks that run it."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import calls
    if q.model_config is None:
        raise UsageProblem("--solve gpus needs --model CONFIG.json (FSDP2 shards a whole model)")
    o.refuse_unused("with --solve gpus: plan solves for the FSDP2 world size and the CP and EP degrees",
                    fsdp=q.fsdp is not None, cp=q.cp is not None, ep=q.ep is not None)
    shape = o.shape_from(q.mbs, q.seq, ch.heads, ch.dim, layers=q.layers, checkpoint=q.checkpoint)
    limit = parse_budget(budget) if budget is not None else None
    setting = calls.Setting(q.gpu, ch.options, q.alloc_conf, q.triton_cache, q.triton)
    with progress("plan: the fewest FSDP2 ranks" + TRACING, as_json) as step:
        data = calls.plan_gpus_at(ch.keys[0], shape, setting, limit, progress=step).to_dict()
    render.warn_all(data)
    if as_json:
        render.print_json(data)
        return
    render.show(gpus_plan_table(data))


def _held(data: dict) -> list[str]:
    """The shape each answer holds, the solved field at its value: a flag left out shows here as its default."""
    return [f"{r['impl']} at its answer: {render.shape_label(r['shape'])}" for r in data["results"] if r["value"] is not None]


def probed_summary(r: dict) -> str:
    """The answer as the boundary probes ran it: outcomes and records, once each."""
    probes = r["at_value"]["probed"]
    outcomes = ", ".join(sorted({render.outcome(p) for p in probes}))
    records = ", ".join(p["record"].removesuffix(".jsonl") for p in probes)
    return f"{r['impl']} at {r['value']:,} on the {r['device']}: {outcomes} (boundary probe{'s' * (len(probes) > 1)} {records})"


def _fails_at(r: dict) -> str:
    o = r["at_next"]["oom"]
    return "-" if o is None else f"{o['step']}: {o['buffer']} ({g(o['tried_bytes'], 2)} GiB)"


def _largest_running(r: dict) -> str:
    need = "-" if r["at_value"] is None else g(r["at_value"]["device_need_bytes"])
    return ("none runs" if r["value"] is None else f"{r['value']:,}") + f"\n{need}"


def capacity_columns(solve: str) -> list[Column]:
    """Without --budget, a row per model: the largest value that runs and the device need there, the value above, and
    what fails there."""
    return [Column("impl\nGPU", lambda r: f"{r['impl']}\n{r['device']}", "key"),
            Column(f"largest {solve}\nneed there", _largest_running, "number"),
            Column(f"{solve} above", lambda r: f"{r['next_value']:,}", "number"),
            Column("fails at", _fails_at)]


def capacity_plan_table(data: dict):
    """plan without --budget: the largest value that runs under the full simulation, and what fails above it."""
    solve = data["solve"]
    t = render.table(f"largest {solve} that runs on the device (allocator simulation of a fresh process); device need "
                     "in GiB", capacity_columns(solve), data["results"])
    probed = [probed_summary(r) for r in data["results"] if r["at_value"] and r["at_value"]["probed"]]
    render.assumed_caption(t, data["results"], _held(data) + probed)
    return t


def _largest_fitting(r: dict) -> str:
    return ("none fits" if r["value"] is None else f"{r['value']:,}") + f"\n{g(r['peak_at_value_bytes'])}"


def budget_columns(solve: str) -> list[Column]:
    """With --budget, a row per model: the largest value that fits and its peak, the next value and its peak."""
    return [Column("impl\nGPU", lambda r: f"{r['impl']}\n{r['device']}", "key"),
            Column(f"largest {solve}\npeak there", _largest_fitting, "number"),
            Column(f"{solve} + 1\npeak there", lambda r: f"{r['next_value']:,}\n{g(r['peak_at_next_bytes'])}", "number")]


def plan_table(data: dict, budget_label: str):
    solve = data["solve"]
    t = render.table(f"largest {solve} whose max_memory_allocated (allocator replay of a fresh process, first call "
                     f"included) fits {budget_label}; peaks in GiB", budget_columns(solve), data["results"])
    render.assumed_caption(t, data["results"], _held(data))
    return t


# --solve gpus: a row per FSDP2 world size tried
GPUS_COLUMNS = [Column("ranks", lambda row: f"{row['world_size']:,}", "number"),
                Column("CP", lambda row: f"{row.get('cp', 1)}", "number"),
                Column("EP", lambda row: f"{row.get('ep', 1)}", "number"),
                Column("activations GiB", lambda row: g(row.get("activations_bytes")), "number"),
                Column("allocated peak GiB", lambda row: g(row["allocated_peak_bytes"]), "number"),
                Column("reserved peak GiB", lambda row: g(row.get("reserved_peak_bytes")), "number"),
                Column("fits", lambda row: "yes" if row["fits"] else "no", "key")]


def gpus_plan_table(data: dict):
    """``plan --solve gpus``: each FSDP2 world size tried, its peaks and whether it fits; the answer in the title."""
    r = data["results"][0]
    mesh = r.get("mesh") or {}
    answer = (f"{r['value']:,} GPU{'s' if r['value'] > 1 else ''} (--fsdp {r['value']} --cp {mesh.get('cp', 1)} --ep "
              f"{mesh.get('ep', 1)})" if r["value"] is not None else "none of those tried")
    return render.table(f"{r['impl']} on {r['device']}, FSDP2 rank 0: the fewest ranks that fit: {answer} "
                        f"({r['searched']}; {r['fsdp']['status']})", GPUS_COLUMNS, r["tried"])

def plan_item() -> dict:
    """One --impl's answer."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import ALLOCATOR, FSDP, LORA, SHAPE, VERDICT, VERDICT_KEYS, boolean, integer, listof, obj, string, terms
    return obj("one --impl", {
        **terms(shape=dict(SHAPE, description="the shape at the answer: the dimensions held, the solved field set to value "
                                              "(when value is null, nothing runs or fits: set to next_value, 1, the shape "
                                              "at_next judges)")),
        **ALLOCATOR,
        "value": integer("largest value that runs / fits (null: not even 1)", nullable=True),
        "next_value": integer("value + 1"),
        "budget_above_device": boolean("with --budget: the budget is above the device's whole memory"),
        "peak_at_value_bytes": integer("with --budget: replayed max_memory_allocated at value", nullable=True),
        "peak_at_next_bytes": integer("with --budget: replayed max_memory_allocated at next_value (over the budget)"),
        "at_value": dict(VERDICT, type=["object", "null"], description="without --budget: the verdict at value (null: none runs)"),
        "at_next": dict(VERDICT, description="without --budget: the verdict at next_value"),
        "fsdp": FSDP,
        "lora": LORA,
        "searched": string("--solve gpus: the FSDP2 world sizes tried (powers of two, the smallest first)"),
        "mesh": {"type": ["object", "null"], "description": "--solve gpus: the answer's CP and EP degrees (null: none "
                 "fits)", "properties": {"cp": integer("CP degree"), "ep": integer("EP degree")}},
        "tried": listof(obj("one mesh tried", {
            "world_size": integer("W"), "cp": integer("the CP degree (1: none)"),
            "ep": integer("the EP degree (1: none)"),
            "activations_bytes": integer("rank 0's layer activations and loss at the shape (what CP splits)"),
            "fits": boolean("rank 0's step runs on the device (fits the budget)"),
            **{k: v for k, v in VERDICT_KEYS.items() if k != "fits"}},
            optional=tuple(k for k in VERDICT_KEYS if k not in ("fits", "allocated_peak_bytes"))),
            "--solve gpus: each world size tried, in order, until one fits (with --budget: its allocated peak alone)"),
    }, optional=("budget_above_device", "peak_at_value_bytes", "peak_at_next_bytes", "at_value", "at_next", "next_value",
                 "fsdp", "lora", "searched", "tried", "mesh"))


def schema() -> dict:
    from livebytes.estimator.planning import SOLVE_NAMES  # deferred: loads sympy ~177 ms (importtime), which this module's import does not

    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import envelope, integer, string
    return envelope(NAME, plan_item(), "the largest value that runs (or fits --budget)",
                     solve=string("the dimension solved for, a shape key: seq_len, batch_size, num_heads or "
                                  "num_hidden_layers; gpus: the fewest FSDP2 ranks (--model)",
                                  enum=SOLVE_NAMES + ("gpus",)),
                     budget_bytes=integer("--budget in bytes (null: the device simulation)", nullable=True))

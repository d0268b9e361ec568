"""``livebytes sweep``: predictions over a grid of shapes (one vectorised evaluation per code path), each point with
predict's verdict."""
from __future__ import annotations

from typing import Optional

import typer

from .. import options as o
from .. import render
from ..render import Column, g
from ..progress import progress
from .predict import TRACING

NAME = "sweep"


# the grid's sizes: lists or doubling ranges, where the other commands take one size
Seq = typer.Option("8K..256K", "--seq-len", "--seq", metavar="SIZES", help="8K..256K (doubling, both ends included) or a list 8K,10K")
Heads = typer.Option(None, "--num-heads", "--heads", metavar="SIZES", help="a list of head counts, or a doubling range 16..128 "
                     "(default 16,32,64,96,128; --model: the config's)")
Mbs = typer.Option("1", "--batch-size", "--mbs", metavar="SIZES", help="a list of micro-batch sizes, or a doubling range")
Dim = typer.Option(None, "--head-dim", "--dim", metavar="SIZES", help="a list of head dimensions, or a doubling range (default "
                   "128; --model: the config's)")
VHeads = typer.Option(None, "--num-v-heads", "--v-heads", metavar="SIZES",
                      help="value heads, a list or a doubling range, each a multiple of every --num-heads (grouped value "
                           "attention, e.g. --num-heads 16 --num-v-heads 32); default: --num-heads at each point")
ExpandV = typer.Option(None, "--expand-v", metavar="RATIOS",
                       help="value head dimension over --head-dim, as FLA's expand_v: a list 0.5,1,2 or a doubling range "
                            "0.5..2 (head_dim * expand_v a whole number at each point); default 1")
Out = typer.Option(None, "--out", "--csv", metavar="FILE", help="write the grid to this .csv file instead of a table")


@o.query_options(*o.MODEL_OPTIONS, "seq", "heads", "mbs", "dim", *o.SHAPE_OPTIONS[4:], *o.WHAT_IF_OPTIONS,
                 *o.PROCESS_OPTIONS, seq=Seq, heads=Heads, mbs=Mbs, dim=Dim, v_heads=VHeads, expand_v=ExpandV)
def command(q: o.QueryFlags, out: Optional[str] = Out, as_json: bool = o.Json) -> None:
    """Predictions over a grid of shapes, from one vectorised evaluation of the symbolic model, and whether
    each runs on its device (the same verdict as predict and plan: the allocator simulation of a fresh process)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import calls
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.estimator.planning import parse_range, parse_ratio_range

    ch = o.chosen_by(q)
    keys = o.distinct_impls(ch.keys, NAME)
    seqs, head_list = parse_range(q.seq, "--seq-len"), parse_range(o.given_or(q.heads, ch.heads, "16,32,64,96,128"), "--num-heads")
    mbs_list, dims = parse_range(q.mbs, "--batch-size"), parse_range(o.given_or(q.dim, ch.dim, "128"), "--head-dim")
    path = o.out_file(out, (".csv",)) if out is not None else None
    hv_list = parse_range(q.v_heads, "--num-v-heads") if q.v_heads is not None else None
    ratios = parse_ratio_range(q.expand_v, "--expand-v") if q.expand_v is not None else None
    grid = calls.Grid(mbs_list, seqs, head_list, dims, o.stack_from(q.hidden, q.layers, q.checkpoint, q.conv_size), hv_list, ratios)
    setting = o.setting_by(q, ch)
    with progress("sweep: each point's verdict" + (TRACING if ch.options else ""), as_json) as step:
        data = calls.sweep_at(keys, grid, setting, progress=step).to_dict()
    render.warn_all(data)
    rows = data["results"]
    if path is not None:
        path.write_text(sweep_csv(data))
        typer.echo(f"wrote {len(rows)} row{'' if len(rows) == 1 else 's'} to {path}", err=as_json)
    if as_json:
        render.print_json(data)
    elif path is None:
        render.show(sweep_table(data))


def sweep_axes(results: list[dict]) -> tuple[list[str], dict]:
    """(the shape keys that vary over the grid, in the shape's order; the others with their one value): a sweep's
    columns are its axes, what it holds is said once in the title (the keys, the JSON's: batch_size, seq_len, ...)."""
    keys = list(dict.fromkeys(k for r in results for k in r["shape"]))
    values = {k: {r["shape"].get(k) for r in results} for k in keys}
    return [k for k in keys if len(values[k]) > 1], {k: next(iter(values[k])) for k in keys if len(values[k]) == 1}


def grid_cell(shape: dict, key: str) -> str:
    """One axis's value at a point; value heads and head dim left out there are the query/key ones (``Shape.hv``/``dv``)."""
    value = shape.get(key, shape.get({"num_v_heads": "num_heads", "head_v_dim": "head_dim"}.get(key, key)))
    return "-" if value is None else ("on" if value is True else "off" if value is False else f"{value:,}")


def columns(varying: list[str]) -> list[Column]:
    """The model, a column per axis that varies, the peak and the verdict; a row per model and point."""
    return [Column("impl", lambda r: r["impl"], "key"),
            *(Column(k, lambda r, k=k: grid_cell(r["shape"], k), "number") for k in varying),
            Column("peak GiB", lambda r: g(r["peak_bytes"]), "number"),
            Column("runs", lambda r: "yes" if r["fits"] else "OOM", "key")]


def sweep_table(data: dict):
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import format_tokens
    results = data["results"]
    devices = ", ".join(sorted({r["device"] for r in results}))
    varying, held = sweep_axes(results)
    shown = {"seq_len": format_tokens, "checkpoint": lambda v: "on" if v else "off"}
    at = ", ".join(f"{k}={shown.get(k, str)(v)}" for k, v in held.items() if v is not None)
    t = render.table(f"sweep{f' at {at}' if at else ''}: peak allocated GiB; runs: predict's verdict for a fresh process "
                     f"on {devices}", columns(varying), results)
    render.assumed_caption(t, results, terms=list({r["impl"]: r for r in results}.values()))
    return t


CSV_HEADER = ("impl,device,contract,recompute,alloc_conf,triton_cache,triton,batch_size,seq_len,num_heads,num_v_heads,"
              "head_dim,head_v_dim,peak_bytes,allocated_peak_bytes,reserved_peak_bytes,device_need_bytes,fits")


def sweep_csv(data: dict) -> str:
    """The grid as CSV, a row per implementation and shape, its options (contract, recompute) named; the shape's
    columns the JSON's keys (num_v_heads: the heads' count unless --num-v-heads set them; head_v_dim: the head dim
    unless --expand-v set it)."""
    lines = [CSV_HEADER]
    for r in data["results"]:
        s, o = r["shape"], r["options"]
        recompute = "" if "recompute" not in o else ("on" if o["recompute"] else "off")
        lines.append(f"{r['impl']},{r['device']},{o.get('contract', '')},{recompute},{r['alloc_conf']},{r['triton_cache']},"
                     f"{r['triton']},"
                     f"{s['batch_size']},{s['seq_len']},{s['num_heads']},{s.get('num_v_heads', s['num_heads'])},"
                     f"{s['head_dim']},{s.get('head_v_dim', s['head_dim'])},{r['peak_bytes']},{r['allocated_peak_bytes']},"
                     f"{r['reserved_peak_bytes']},{r['device_need_bytes']},{'yes' if r['fits'] else 'no'}")
    return "\n".join(lines) + "\n"


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import ALLOCATOR, OOM, VERDICT_PEAKS, boolean, envelope, integer, obj, terms
    return envelope(NAME, obj("one implementation at one grid point", {
        **terms(), "peak_bytes": integer("peak allocated bytes (512-byte blocks), as predict's"), **ALLOCATOR,
        **VERDICT_PEAKS, "device_need_bytes": integer("as predict's"), "fits": boolean("predict's verdict"), "oom": OOM}),
        "predictions over a grid")

"""``livebytes sweep``: predictions over a grid of shapes (one vectorised evaluation per code path), each point with
predict's verdict."""
from __future__ import annotations

from typing import Optional

import typer

from .. import options as o
from .. import render
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
    from livebytes import calls
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
        from .render import sweep_csv
        path.write_text(sweep_csv(data))
        typer.echo(f"wrote {len(rows)} row{'' if len(rows) == 1 else 's'} to {path}", err=as_json)
    if as_json:
        render.print_json(data)
    elif path is None:
        render.show(render.sweep_table(data))


def schema() -> dict:
    from ..schema import ALLOCATOR, OOM, VERDICT_PEAKS, boolean, envelope, integer, obj, terms
    return envelope(NAME, obj("one implementation at one grid point", {
        **terms(), "peak_bytes": integer("peak allocated bytes (512-byte blocks), as predict's"), **ALLOCATOR,
        **VERDICT_PEAKS, "device_need_bytes": integer("as predict's"), "fits": boolean("predict's verdict"), "oom": OOM}),
        "predictions over a grid")

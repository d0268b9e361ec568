"""``livebytes explain``: each live block of a memory snapshot named by the model's buffer, and the blocks the model
does not explain."""
from __future__ import annotations

import typer

from .. import options as o
from .. import render
from ..render import Column, T
from ..progress import progress
from .predict import TRACING
from livebytes.report import explain_shown

NAME = "explain"


Snapshot = typer.Argument(..., metavar="SNAPSHOT.pickle",
                          help="a torch.cuda.memory._dump_snapshot file (at an out-of-memory or the peak)")
At = typer.Option("peak", "--at", metavar="peak|snapshot",
                  help="the blocks live at the trace's peak (default) or the segments' as dumped")


@o.query_options("snapshot", *o.MODEL_OPTIONS, "routing", *o.SHAPE_OPTIONS, *o.WHAT_IF_OPTIONS, impl=o.Impl)
def command(q: o.QueryFlags, snapshot: str = Snapshot, at: str = At, as_json: bool = o.Json) -> None:
    """Each live block of your own memory snapshot named by the model's buffer, and the blocks the model does not
    explain (--model: a whole training step's snapshot against the config's traced step)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import calls
    ch = o.chosen_by(q)
    key = o.single_impl(ch.keys, NAME)
    shape = o.shape_by(q, ch)
    setting = o.setting_by(q, ch)
    with progress(f"explain: reading {snapshot} and matching its blocks" + (TRACING if ch.options else ""), as_json):
        answer = calls.explain_at(o.named(snapshot, "SNAPSHOT.pickle"), key, shape, setting, at)
    data = calls.explain_document(answer)
    render.warn_all(data)
    if as_json:
        render.print_json(data)
    else:
        render.show(explain_table(data))



def frame_cell(frame: str) -> str:
    """``file:line:function`` as two lines, ``file:line`` over ``function``: each fits a narrow column whole."""
    where, _, function = frame.rpartition(":")
    return f"{where}\n{function}" if where else frame


def columns(r: dict) -> list[Column]:
    """A row per live block (``report.explain_shown``): its bytes, the buffer (and how it was matched) or
    'unexplained', the frame that allocated it; the totals in the footer. A row of blocks left out: (bytes, count)."""
    return [Column("bytes", lambda b: f"{b['bytes']:,}", "number", footer=f"{r['live_bytes']:,}"),
            Column("buffer (matched by)", _named, footer=f"{r['unexplained_bytes']:,} B unexplained"),
            Column("allocated at (innermost frame)", _frame, footer="")]


def _named(b: dict):
    if "left_out" in b:
        return T(f"{b['left_out']:,} smaller unexplained blocks", "bold red")
    return f"{b['buffer']} ({b['match']})" if b["buffer"] else T("unexplained", "bold red")


def _frame(b: dict) -> str:
    if "left_out" in b:
        return "(not shown; --json lists every block)"
    return frame_cell(b["frames"][0]) if b["frames"] else "(no frame)"


def explain_table(data: dict):
    """``data``: report.explain_data. One row per live block, largest first, and one for the blocks left out."""
    r = data["results"][0]
    shown, left_out, left_out_bytes = explain_shown(r)
    rows = shown + ([{"bytes": left_out_bytes, "left_out": left_out}] if left_out else [])
    t = render.table(f"{r['snapshot']}: blocks live at {'the trace peak' if r['at'] == 'peak' else 'the snapshot'} as "
                     f"{r['impl']} {render.shape_label(r['shape'])} on {r['device']} explains them", columns(r), rows,
                     show_footer=True)
    render.assumed_caption(t, data["results"])
    return t

def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import envelope, integer, listof, obj, string, terms
    return envelope(NAME, obj("the snapshot's live blocks against the model", {
        **terms(), "snapshot": string("the snapshot file's name"),
        "at": string("peak: the blocks live at the trace's peak; snapshot: the segments' as dumped", enum=("peak", "snapshot")),
        "live_bytes": integer("bytes of every live block"), "explained_bytes": integer("bytes of the blocks a buffer explains"),
        "unexplained_bytes": integer("live_bytes - explained_bytes"),
        "blocks": listof(obj("one live block", {
            "address": integer("its address (null where the trace gives none)", nullable=True),
            "bytes": integer("its size as the snapshot gives it (a traced block: the request)"),
            "requested_bytes": integer("the request, where the snapshot gives it beside the size", nullable=True),
            "buffer": string("the model's allocation it is (null: unexplained)", nullable=True),
            "match": string("how: its frames name the source line, the function, or by size alone (null: unexplained)",
                            nullable=True, enum=("source line", "function", "size")),
            "frames": listof(string("file:line:function"), "the frames that allocated it, innermost first")}),
            "every live block, largest first")}),
        "a memory snapshot's live blocks named by the model's buffers")

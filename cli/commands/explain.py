"""``livebytes explain``: each live block of a memory snapshot named by the model's buffer, and the blocks the model
does not explain."""
from __future__ import annotations

from typing import List

import typer

from .. import options as o
from .. import render
from ..progress import progress

NAME = "explain"


Snapshot = typer.Argument(..., metavar="SNAPSHOT.pickle",
                          help="a torch.cuda.memory._dump_snapshot file (at an out-of-memory or the peak)")
At = typer.Option("peak", "--at", metavar="peak|snapshot",
                  help="the blocks live at the trace's peak (default) or the segments' as dumped")


@o.query_options("snapshot", "impl", *o.SHAPE_OPTIONS, *o.WHAT_IF_OPTIONS, impl=(List[str], o.Impl))
def command(q: o.QueryFlags, snapshot: str = Snapshot, at: str = At, as_json: bool = o.Json) -> None:
    """Each live block of your own memory snapshot named by the model's buffer, and the blocks the model does not
    explain."""
    from livebytes import calls
    key = o.single_impl(q.impl, NAME)
    shape = o.shape_from(q.mbs, q.seq, q.heads, q.dim, q.v_heads, q.hidden, q.layers, q.checkpoint, q.conv_size, q.expand_v)
    setting = calls.Setting(q.gpu, o.what_if_by(q))
    with progress(f"explain: reading {snapshot} and matching its blocks", as_json):
        answer = calls.explain_at(o.named(snapshot, "SNAPSHOT.pickle"), key, shape, setting, at)
    data = calls.explain_document(answer)
    render.warn_all(data)
    if as_json:
        render.print_json(data)
    else:
        render.show(render.explain_table(data))


def schema() -> dict:
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

"""``livebytes predict``: one model at one shape, its peak by storage group, the reserved peak and the verdict of a
fresh process on the device (``calls.predict_at``: one ``query.answer``)."""
from __future__ import annotations

import typer

from .. import options as o
from .. import render
from ..errors import warn
from ..progress import progress
from ..render import Column, g, tensor_cell
from livebytes.estimator.module_view import DEFAULT_DEPTH, module_view

NAME = "predict"
# a whole model's first use traces its config on the CPU (tens of seconds; cached after): the bar's label says so
TRACING = " (--model: a config's first use traces it on this CPU, cached after)"
Depth = typer.Option(DEFAULT_DEPTH, "--depth", min=1, metavar="N",
                     help="--model: the by-module table's levels (as torchinfo's depth): 1 the embedding, the layers "
                          "(repeated ones one row), the LM head and the loss; 2 each layer's children (attn, mlp); "
                          "3 their projections; and so on")
MAX_NAMES = 8     # buffers named per group in the table (a whole model has thousands)


@o.query_options(*o.MODEL_OPTIONS, "routing", *o.LORA_OPTIONS, *o.SHAPE_OPTIONS, *o.WHAT_IF_OPTIONS, *o.PROCESS_OPTIONS, "as_json", "fsdp", "ep",
                 impl=o.Impl)
def command(q: o.QueryFlags, as_json: bool = o.Json, depth: int = Depth) -> None:
    """Peak allocated memory of one implementation at one shape by storage group, the reserved peak, and
    whether a fresh process runs it on the device (or where it goes out of memory)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import calls
    ch = o.chosen_by(q)
    key = o.single_impl(ch.keys, NAME)
    shape = o.shape_by(q, ch)
    setting = o.setting_by(q, ch)
    with progress(NAME + TRACING, as_json or not ch.options):
        answer = calls.predict_at(key, shape, setting, announce=warn)  # warned at once: an absurd shape's run takes a moment
    if as_json:
        render.print_json(calls.prediction_document(answer))
    else:
        shown(answer, depth)


def shown(answer, depth: int = DEFAULT_DEPTH) -> None:
    """The summary line, the FSDP2 terms, the peak's table, the table by module (a traced model), the verdict's lines."""
    first = answer.to_dict()
    pred, measured, replayed = answer.engine
    render.show(render.T(answer.summary))
    if first.get("fsdp"):
        render.show(render.T(render.fsdp_line(first["fsdp"])))
    render.show(prediction_table(pred, measured, replayed, first["peaks_unbounded"], bool(first.get("probed"))))
    if first.get("module_bytes"):
        render.show(module_table(pred, depth))
    for line in render.verdict_lines(first):
        render.show(line)


def group_rows(p) -> list[tuple]:
    """(group, bytes, the buffers named) per storage group at the peak; a traced model's thousands: the largest
    ``MAX_NAMES``, then how many more."""
    rows = []
    for group, nbytes in p.groups.items():
        inside = [(b, n) for b, n in p.at_peak if b.group is group and n]
        whole_model = any(getattr(b, "module", "") for b, _ in inside)
        if whole_model and len(inside) > MAX_NAMES:
            inside.sort(key=lambda bn: -bn[1])
        names = [f"{b.name} {tensor_cell(b.tensor_text())}" for b, _ in (inside[:MAX_NAMES] if whole_model else inside)]
        if whole_model and len(inside) > MAX_NAMES:
            names.append(f"... and {len(inside) - MAX_NAMES:,} more (the largest first; --json lists every one)")
        rows.append((group, nbytes, names))
    return rows


def peak_columns(p) -> list[Column]:
    """The peak's table: a row per storage group (``group_rows``), the peak and its step in the footer."""
    return [Column("storage group", lambda r: r[0].label, footer="peak, sum of 512-B blocks", min_width=14),
            Column("GiB", lambda r: g(r[1]), "number", footer=g(p.peak_bytes)),
            Column("buffers live at the peak", lambda r: "\n".join(r[2]), footer=f"at step {p.peak_step.name}")]


def prediction_table(p, measured=None, replayed: int | None = None, no_limit: bool = False, probed: bool = False):
    """The peak's storage groups and buffers; ``no_limit``: the run goes out of memory on the device (the verdict's
    ``peaks_unbounded``), so the caption says the peaks are those of a device with no memory limit."""
    below = render.measured_text(measured, probed)
    if replayed is not None:
        below += f" | steady-state allocator replay (this shape run repeatedly): {g(replayed)} GiB"
    if no_limit:
        below += f" | these peaks are {render.NO_LIMIT}: it runs out of memory before them (below)"
    return render.table(f"{p.model.key}  {p.shape.label()}  on {p.model.device}", peak_columns(p), group_rows(p),
                        show_footer=True, **render.caption(below))


# a traced model's peak by module (``module_view``: grouped, cut at --depth, small modules folded): a ModuleRow a row
MODULE_COLUMNS = [
    Column("module", lambda r: module_cell(r), "key", min_width=14),
    Column("GiB", lambda r: g(r.bytes), "number"),
    Column("of which (GiB)", lambda r: of_which(r.groups)),
]
INDENT = "  "           # a row's level below its parent


def of_which(groups) -> str:
    """A row's storage groups, the largest first, each that prints above 0.000 GiB (the row's GiB counts them all)."""
    return ", ".join(f"{grp.label} {g(n)}" for grp, n in groups if g(n) != g(0)) or "-"


def module_cell(row) -> str:
    """The row's name at its level; a row of several modules: each one's GiB (its low and high end) below it."""
    head = INDENT * row.level + row.label
    if row.each is None:
        return head
    low, high = row.each
    each = g(low) if g(low) == g(high) else f"{g(low)}-{g(high)}"
    return f"{head}\n{INDENT * (row.level + 1)}each {each}"


def module_table(pred, depth: int = DEFAULT_DEPTH):
    """What each module holds at the peak, by storage group (``module_view``: repeated blocks one row, to ``depth``)."""
    view = module_view(pred.module_paths, depth)
    caption = module_caption(view, pred.forward_gradients)
    return render.table("at the peak, by module", MODULE_COLUMNS, view.rows, **render.caption(caption))


def module_caption(view, forward_gradients: dict) -> str:
    """What the table left out and how to see it; a gradient made in the forward (the fused loss's), in words."""
    folded = f"; {view.folded:,} modules under {view.fold_below >> 20} MiB folded into their parent" if view.folded else ""
    early = "".join(f"\n{m}'s gradient ({g(n)} GiB) is made in the forward: the fused loss computes it with the loss, "
                    f"chunk by chunk; kept to zero_grad" for m, n in forward_gradients.items())
    return f"depth {view.depth} (--depth N){folded}{early}"


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import PREDICTION, PREDICTION_OPTIONAL, envelope, obj
    return envelope(NAME, obj("the prediction", PREDICTION, optional=PREDICTION_OPTIONAL), "one implementation at one shape")

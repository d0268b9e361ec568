"""``livebytes predict``: one model at one shape, its peak by storage group, the reserved peak and the verdict of a
fresh process on the device (``calls.predict_at``: one ``query.answer``)."""
from __future__ import annotations

from .. import options as o
from .. import render
from ..errors import warn
from ..progress import progress
from ..render import Column, g, shape_cell

NAME = "predict"
# a whole model's first use traces its config on the CPU (tens of seconds; cached after): the bar's label says so
TRACING = " (--model: a config's first use traces it on this CPU, cached after)"
MAX_NAMES = 8     # buffers named per group in the table (a whole model has thousands)


@o.query_options(*o.MODEL_OPTIONS, "routing", *o.SHAPE_OPTIONS, *o.WHAT_IF_OPTIONS, *o.PROCESS_OPTIONS, "as_json", "fsdp",
                 impl=o.Impl)
def command(q: o.QueryFlags, as_json: bool = o.Json) -> None:
    """Peak allocated memory of one implementation at one shape by storage group, the reserved peak, and
    whether a fresh process runs it on the device (or where it goes out of memory)."""
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
        shown(answer)


def shown(answer) -> None:
    """The summary line, the FSDP2 terms, the peak's table, the table by module (a traced model), the verdict's lines."""
    first = answer.to_dict()
    pred, measured, replayed = answer.engine
    render.show(render.T(answer.summary))
    if first.get("fsdp"):
        render.show(render.T(render.fsdp_line(first["fsdp"])))
    render.show(prediction_table(pred, measured, replayed, first["peaks_unbounded"], bool(first.get("probed"))))
    if first.get("module_bytes"):
        render.show(module_table(first))
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
        names = [f"{b.name} {shape_cell(b.shape_text())} {b.dtype}" for b, _ in (inside[:MAX_NAMES] if whole_model else inside)]
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


# a traced model's peak by module (``report``'s ``module_bytes``): rows (module, its groups' bytes, the result's labels)
MODULE_COLUMNS = [
    Column("module", lambda r: r[0], min_width=14),
    Column("GiB", lambda r: g(r[1]["total"]), "number"),
    Column("of which (GiB)", lambda r: ", ".join(f"{r[2][key]} {g(n)}" for key, n in r[1].items() if key != "total")),
]


def module_table(result: dict):
    """What each module holds at the peak, by storage group (its label, ``group_labels``)."""
    rows = [(name, groups, result["group_labels"]) for name, groups in result["module_bytes"].items()]
    return render.table("at the peak, by module", MODULE_COLUMNS, rows)


def schema() -> dict:
    from ..schema import PREDICTION, PREDICTION_OPTIONAL, envelope, obj
    return envelope(NAME, obj("the prediction", PREDICTION, optional=PREDICTION_OPTIONAL), "one implementation at one shape")

"""``livebytes compare``: several models side by side at one shape, each one's change against the first and its
verdict (``calls.compare_at``: one ``query.answer``)."""
from __future__ import annotations

from .. import options as o
from .. import render
from ..progress import progress
from ..render import SECTION, Column, T, g, pct, no_limit_label
from .predict import TRACING

NAME = "compare"


@o.query_options(*o.MODEL_OPTIONS, *o.SHAPE_OPTIONS, *o.WHAT_IF_OPTIONS, *o.PROCESS_OPTIONS)
def command(q: o.QueryFlags, as_json: bool = o.Json) -> None:
    """Several implementations side by side at one shape, with the change against the first, and whether
    each runs on its device."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import calls
    ch = o.chosen_by(q)
    keys = o.distinct_impls(ch.keys, NAME)
    shape = o.shape_by(q, ch)
    setting = o.setting_by(q, ch)
    with progress(NAME + TRACING, as_json or not ch.options):
        answer = calls.compare_at(keys, shape, setting)
    data = answer.to_dict()
    render.warn_all(data)
    if as_json:
        render.print_json(data)
        return
    preds, measured = answer.engine
    render.show(compare_table(data, preds, measured))
    for r in data["results"]:
        render.show(T(f"assumed: {render.terms_line(r)}"))
    for line in render.autotune_lines(data["results"]):
        render.show(T(line))
    for r in data["results"]:
        render.show(render.compare_verdict_line(r))


def columns(results: list[dict]) -> list[Column]:
    """The row's name, then a column per implementation (a row: its name and a cell per column). Numbers carry no
    spaces; the measured row's words wrap; a key folds only where no width is left (no min_width: rich crops a table
    whose min_width columns it shrank)."""
    return [Column("storage group", lambda row: row[0], min_width=14),
            *(Column(r["impl"], lambda row, i=i: row[1][i], justify="right") for i, r in enumerate(results))]


def rows(data: dict, preds, measured) -> list:
    """The storage groups' bytes (every group of any column, in the groups' order), then the peaks, the peak step, the
    record quoted and the changes against the first. Out of memory, a column's peaks are labelled with no memory limit."""
    results = data["results"]
    groups = []
    for p in preds:
        groups += [grp for grp in p.groups if grp not in groups]
    order = {grp: i for i, grp in enumerate(type(groups[0]))} if groups else {}
    out = [(T(grp.label), [T(f"{g(p.groups.get(grp, 0))} GiB") for p in preds]) for grp in sorted(groups, key=order.get)]
    out += [SECTION,
            (T("peak, 512-B blocks", "bold"), [T(f"{g(r['peak_bytes'])} GiB{no_limit_label(r)}", "bold") for r in results]),
            (T("steady-state replay"), [T(f"{g(r['replay_peak_bytes'])} GiB{no_limit_label(r)}") for r in results]),
            (T("peak step"), [T(r["peak_step"]) for r in results]),
            (T("measured"), [T(render.measured_text(m)) for m in measured])]
    if len(results) > 1:
        first = results[0]["impl"]
        out.append((T(f"predicted vs {first}"), [T(pct(r["change_vs_first_fraction"])) for r in results]))
        if any(r["measured_change_vs_first_fraction"] is not None for r in results):
            out.append((T(f"measured vs {first}"), [T(pct(r["measured_change_vs_first_fraction"])) for r in results]))
    return out


def compare_table(data: dict, preds, measured):
    """``data``: report.compare_data; ``measured``: each implementation's records. Every number carries its unit."""
    return render.table(preds[0].shape.label(), columns(data["results"]), rows(data, preds, measured))


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import PREDICTION, PREDICTION_OPTIONAL, SHAPE, envelope, number, obj
    return envelope(NAME, obj("one --impl, in order", {
        **PREDICTION,
        "change_vs_first_fraction": number("peak_bytes / first's - 1 (null for the first)", nullable=True),
        "measured_change_vs_first_fraction": number("the same for the quoted measured peaks, when every "
                                                    "implementation has one", nullable=True)}, optional=PREDICTION_OPTIONAL),
        "several implementations at one shape", shape=SHAPE)

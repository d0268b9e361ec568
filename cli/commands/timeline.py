"""``livebytes timeline``: live bytes per step of each model, stacked by storage group, with predict's verdict
(``calls.timeline_at``: one ``query.answer``), drawn in the terminal, as a plot, or as PyTorch's memory snapshot."""
from __future__ import annotations

from typing import Optional

import typer
import pickle

from .. import options as o
from .. import render
from ..errors import UsageProblem
from ..progress import progress
from ..render import Column, T, g
from .predict import TRACING
from livebytes import report
from livebytes.report import timeline_rows, TIMELINE_ROWS, gib

NAME = "timeline"
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
SNAPSHOT_SUFFIX = ".pickle"
Out = typer.Option(None, "--out", metavar="FILE",
                   help="write a plot to this file (.png, .svg or .pdf), or the predicted process as PyTorch's memory "
                        "snapshot (.pickle, one --impl: open it in pytorch.org/memory_viz), instead of the terminal view")


@o.query_options(*o.MODEL_OPTIONS, *o.SHAPE_OPTIONS, "gpu", "contract", "no_recompute", *o.PROCESS_OPTIONS, "cp",
                 "cp_layout", "cp_rank")
def command(q: o.QueryFlags, out: Optional[str] = Out, as_json: bool = o.Json) -> None:
    """Live bytes per step, stacked by storage group, implementations side by side, the peak marked; or the predicted
    process as a torch.cuda.memory._snapshot() pickle. Warns when a fresh process would run out of memory on the device
    (predict's verdict: --alloc-conf and --triton-cache set what it simulates; the snapshot uses --alloc-conf too)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes import calls
    ch = o.chosen_by(q)
    keys = o.distinct_impls(ch.keys, NAME)
    shape = o.shape_by(q, ch)
    path = o.out_file(out, PLOT_SUFFIXES + (SNAPSHOT_SUFFIX,)) if out is not None else None
    snapshot = path is not None and path.suffix.lower() == SNAPSHOT_SUFFIX
    if snapshot and len(keys) != 1:
        raise UsageProblem(f"--out {out}: a snapshot holds one process: give one --impl (got {len(keys)})")
    with progress(NAME + TRACING, as_json or not ch.options):
        data, answer = calls.timeline_at(keys, shape, o.setting_by(q, ch), sources=snapshot)
    render.warn_all(data)
    if snapshot:
        _write_snapshot(answer, path, as_json)
    elif path is not None:
        with progress(f"timeline: drawing {path}", as_json):
            timeline_png(answer.predictions, path)
        typer.echo(f"wrote {path}", err=as_json)
    if as_json:
        render.print_json(data)
    elif path is None:
        preds = answer.predictions
        render.show(timeline_text(preds, report.bar_lengths(preds, bar_width(preds)), data))


def _write_snapshot(answer, path, as_json: bool) -> None:
    """The predicted process of the one model as ``torch.cuda.memory._snapshot()`` pickles it."""

    from livebytes.estimator.snapshot import process_snapshot  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    (one,) = answer.models
    with progress(f"timeline: tracing the predicted process into {path}", as_json):
        dumped = process_snapshot(one.resolved.model, one.prediction.shape, answer.resolution.conf, verdict=one.verdict)
        path.write_bytes(pickle.dumps(dumped))
    typer.echo(f"wrote {path} (torch.cuda.memory._snapshot() of the predicted process at "
               f"{dumped['livebytes']['taken_at']})", err=as_json)


PEAK_MARK = " ◀ peak"
TIMELINE_FRAME = 10     # 4 borders and 2 x 3 columns of padding


def bar_width(preds) -> int:
    """Columns the bars may take: what the console leaves after the widest key or step name, the widest GiB cell, the
    peak mark and the frame (10 to 40; narrower than that, ``fit`` stacks the table)."""
    names = max(len(name) for p in preds for name in [p.model.key, *(st.name for st in p.model.steps)])
    numbers = max(len(g(n)) for p in preds for n in p.step_bytes)
    return max(10, min(40, render.console.width - names - max(numbers, len("GiB")) - len(PEAK_MARK) - TIMELINE_FRAME))


# a row: (the step's label or the model's key, its GiB cell, its bar)
COLUMNS = [Column("step", lambda r: r[0], "key"), Column("GiB", lambda r: r[1], "number"), Column("", lambda r: r[2], "key")]


def rows(preds, bars: list[list[int]]) -> list:
    """Per model: its key in bold, a row per step (``report.timeline_rows``) with its bar, the peak marked; a rule."""
    out = []
    for p, lengths in zip(preds, bars):
        out.append((T(p.model.key, "bold"), T(""), T("")))
        for label, i in timeline_rows(p):
            mark = T(PEAK_MARK, "bold red") if i == p.peak_index else T("")
            out.append((T(label), T(g(p.step_bytes[i])), T("█" * lengths[i], "cyan") + mark))
        out.append(render.SECTION)
    return out


def timeline_text(preds, bars: list[list[int]], data: dict | None = None):
    """Compact terminal timeline: one bar per step (lengths from report.bar_lengths), the peak marked; below it
    what each model assumed (``data``: report.timeline_data)."""
    t = render.table("live bytes per step", COLUMNS, rows(preds, bars))
    if data is not None:
        render.assumed_caption(t, data["results"])
    return t


def timeline_png(preds, path) -> None:
    """Stacked live bytes per step by storage group, one panel per implementation, the peak marked."""
    import matplotlib  # deferred: matplotlib.pyplot ~490 ms at import (importtime), only this path needs it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: matplotlib.pyplot ~490 ms at import (importtime), only this path needs it

    from livebytes.estimator.buffers import Group  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    groups = [grp for grp in Group if any(p.groups_at(i).get(grp) for p in preds for i in range(len(p.model.steps)))]
    colors = dict(zip(groups, plt.get_cmap("tab20").colors))
    fig, axes = plt.subplots(1, len(preds), figsize=(7 * len(preds), 5.5), sharey=True, squeeze=False)
    for ax, p in zip(axes[0], preds):
        _panel(ax, p, groups, colors)
        ax.set_ylim(0, max(gib(q.peak_bytes) for q in preds) * 1.15)
    if any(len(p.model.steps) > TIMELINE_ROWS for p in preds):     # a whole model's bars fill the panel: legend beside
        axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


def _panel(ax, p, groups, colors) -> None:
    """One model's panel: its bars stacked by storage group, the peak marked, a tick per step (a whole model: per run)."""
    steps = list(range(len(p.model.steps)))
    bottom = [0.0] * len(steps)
    for grp in groups:
        vals = [gib(p.groups_at(i).get(grp, 0)) for i in steps]
        ax.bar(steps, vals, bottom=bottom, color=colors[grp], label=grp.label, width=0.85)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.annotate(f"peak {g(p.peak_bytes)} GiB\n{p.peak_step.name}", xy=(p.peak_index, gib(p.peak_bytes)),
                xytext=(0, 12), textcoords="offset points", ha="center", fontsize=9, arrowprops=dict(arrowstyle="->"))
    if len(steps) <= TIMELINE_ROWS:
        ax.set_xticks(steps)
        ax.set_xticklabels([s.name for s in p.model.steps], rotation=90, fontsize=7)
    else:       # a whole model: a tick per phase and module run, at most a few dozen labelled
        rows_ = timeline_rows(p)
        every = max(1, len(rows_) // 40)
        ax.set_xticks([i for _, i in rows_[::every]])
        ax.set_xticklabels([label for label, _ in rows_[::every]], rotation=90, fontsize=6)
    ax.set_title(f"{p.model.key}\n{p.shape.label()}", fontsize=10, pad=18)
    ax.set_ylabel("live GiB (2^30 B)")


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import (ALLOCATOR, GROUP_LABELS, OOM, SHAPE, VERDICT_PEAKS, boolean, envelope, integer, listof, mapof, obj,
                          string, terms)
    return envelope(NAME, obj("one --impl", {
        **terms(), "peak_bytes": integer("peak"), "peak_step": string("peak step"), **ALLOCATOR, **VERDICT_PEAKS,
        "fits": boolean("predict's verdict: a fresh process runs it on the device (false: a warning says so, and the "
                        "live bytes are those of a device with no memory limit)"), "oom": OOM,
        "group_labels": GROUP_LABELS,
        "steps": listof(obj("one step", {
            "name": string("step name"), "phase": string("harness, forward or backward"),
            "live_bytes": integer("bytes live at the step"),
            "group_bytes": mapof(integer("bytes"), "storage group key -> bytes live at the step")}),
            "every step in order")}),
        "live bytes per step", shape=SHAPE)

"""Every rich table and plot is built here; the CLI only chooses which."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from livebytes.estimator.engine import Prediction
from .report import gib

console = Console()


def _g(nbytes: int | None, digits: int = 3) -> str:
    return "-" if nbytes is None else f"{gib(nbytes):,.{digits}f}"


def measured_text(records) -> str:
    from livebytes.validate.records import best
    r = best(list(records or []))
    if r is None:
        return "predicted (never measured)"
    value = "OOM" if r.oom else f"{_g(r.peak_bytes)} GiB"
    more = f" (+{len(records) - 1} more records)" if len(records) > 1 else ""
    return f"{r.origin} {value} on {r.device}{more}"


def prediction_table(p: Prediction, measured=None, fits: str | None = None, show_buffers: bool = True,
                     replayed: int | None = None) -> Table:
    title = f"{p.model.key}  {p.shape.label()}"
    t = Table(title=title, title_justify="left", show_footer=True)
    t.add_column("storage group", footer="peak (allocated)")
    t.add_column("GiB", justify="right", footer=_g(p.peak_bytes))
    t.add_column("buffers", footer=f"at step {p.peak_step.name}")
    live = p.at_peak
    for group, nbytes in p.groups.items():
        names = [f"{b.name} {b.shape_text()} {b.dtype}" for b, n in live if b.group is group and n]
        t.add_row(group.label, _g(nbytes), ", ".join(names) if show_buffers else str(len(names)))
    caption = measured_text(measured)
    if replayed is not None:
        caption += f" | allocator replay of the validator's protocol: {_g(replayed)} GiB"
    t.caption = caption + (f" | {fits}" if fits else "")
    return t


def compare_table(preds: list[Prediction], measured: list[list], replayed: list[int] | None = None) -> Table:
    base = preds[0]
    t = Table(title=f"{base.shape.label()}", title_justify="left")
    t.add_column("storage group")
    for p in preds:
        t.add_column(p.model.key, justify="right")
    groups = []
    for p in preds:
        for g in p.groups:
            if g not in groups:
                groups.append(g)
    order = {g: i for i, g in enumerate(type(groups[0]))} if groups else {}
    for g in sorted(groups, key=order.get):
        t.add_row(g.label, *[_g(p.groups.get(g, 0)) for p in preds])
    t.add_section()
    t.add_row(Text("peak (predicted)", style="bold"), *[Text(_g(p.peak_bytes), style="bold") for p in preds])
    if replayed:
        t.add_row("peak, allocator replay", *[_g(n) for n in replayed])
    t.add_row("peak step", *[p.peak_step.name for p in preds])
    t.add_row("measured", *[(measured_text(m) if m else "never measured") for m in measured])
    from livebytes.validate.records import best
    quoted = [best(list(m or [])) for m in measured]
    if len(preds) > 1:
        cells = ["-"] + [f"{(1 - p.peak_bytes / base.peak_bytes) * 100:.1f}% lower" if p.peak_bytes <= base.peak_bytes
                         else f"{(p.peak_bytes / base.peak_bytes - 1) * 100:.1f}% higher" for p in preds[1:]]
        t.add_row(f"predicted vs {base.model.key}", *cells)
        if quoted[0] is not None and not quoted[0].oom and all(q is not None and not q.oom for q in quoted[1:]):
            m0 = quoted[0].peak_bytes
            t.add_row(f"measured vs {base.model.key}", "-",
                      *[f"{(1 - q.peak_bytes / m0) * 100:.1f}% lower" if q.peak_bytes <= m0
                        else f"{(q.peak_bytes / m0 - 1) * 100:.1f}% higher" for q in quoted[1:]])
    return t


def models_table(specs) -> Table:
    t = Table(title="lifetime models", title_justify="left")
    for c in ("key", "implementation", "version", "phase", "options", "default GPU", "covers"):
        t.add_column(c)
    for s in specs:
        opts = "; ".join(f"{k}: {'/'.join(map(str, v))}" for k, v in s.options.items()) or "-"
        t.add_row(s.key, s.implementation, s.version, s.phase, opts, s.default_device, s.covers)
    return t


def validation_table(comparisons, title: str = "validation") -> Table:
    t = Table(title=title, title_justify="left")
    for c in ("impl", "shape", "mode", "predicted GiB", "measured GiB", "error B", "error %", "requested", "s/shape", "result"):
        t.add_column(c, justify="right" if c not in ("impl", "shape", "mode", "result") else "left")
    for c in comparisons:
        r = c.record
        measured = "OOM" if c.measured is None else _g(c.measured, 4)
        err = "-" if c.error_bytes is None else f"{c.error_bytes:+,}"
        pct = "-" if c.error_fraction is None else f"{c.error_fraction * 100:+.4f}"
        req = "-" if c.requested_error is None else ("exact" if c.requested_error == 0 else f"{c.requested_error:+,} B")
        secs = r.data.get("seconds_total")
        result = Text("pass" if c.passed else "FAIL", style="green" if c.passed else "bold red")
        if c.note:
            result.append(f" ({c.note[:40]})", style="dim")
        opts = r.options.get("contract", "")
        t.add_row(f"{r.impl} {opts}".strip(), r.shape.label(), r.mode or r.origin, _g(c.predicted, 4), measured, err, pct, req,
                  "-" if secs is None else f"{secs:.0f}", result)
    return t


def plan_table(results, solve: str, budget_label: str, replayed: dict | None = None) -> Table:
    t = Table(title=f"largest {solve} that fits {budget_label}", title_justify="left")
    for c in ("impl", f"largest {solve}", "peak there (GiB)", f"{solve} + 1", "peak there (GiB)", "budget (GiB)"):
        t.add_column(c, justify="left" if c == "impl" else "right")
    for r in results:
        value = "none fits" if r.value is None else f"{r.value:,}"
        t.add_row(r.model.key, value, _g(r.peak_at_value), f"{r.next_value:,}", _g(r.peak_at_next), _g(r.budget_bytes))
    return t


def verdict_lines(v) -> list[str]:
    """Allocated, reserved, process memory, device need, and the verdict with its assumptions."""
    proc = v.process
    lines = [f"allocated peak {_g(v.allocated_peak_bytes)} GiB | reserved peak {_g(v.reserved_peak_bytes)} GiB | "
             f"process memory {_g(proc.bytes)} GiB ({escape(proc.library_name)}, {proc.triton_cache} Triton cache) | "
             f"device need {_g(v.device_need_bytes)} of {_g(v.total_bytes)} GiB ({escape(v.conf.text)})"]
    for note in proc.assumptions:
        lines.append(f"assumed: {escape(note)}")
    if v.oom is None:
        lines.append(f"runs on {escape(v.device.name)}: {_g(v.headroom_bytes)} GiB to spare at the reserved peak")
    else:
        o, f = v.oom, v.oom.figures
        when = "the first call" if o.first_call else ("the inputs" if o.run_step < 0 else f"step {o.run_step + 1}")
        lines.append(f"OUT OF MEMORY on {escape(v.device.name)} in {when}, at {escape(o.step)} allocating "
                     f"{escape(o.buffer)}: tried to allocate {_g(f.tried_bytes, 2)} GiB; {_g(f.allocated_bytes, 2)} GiB "
                     f"allocated, {_g(f.reserved_bytes - f.allocated_bytes, 2)} GiB reserved but unallocated, "
                     f"{_g(f.free_bytes, 2)} GiB free")
    return lines


def capacity_plan_table(results, solve: str) -> Table:
    first = results[0].at_next
    title = (f"largest {solve} that runs on {escape(first.device.name)} ({escape(first.conf.text)}, "
             f"{first.process.triton_cache} Triton cache)")
    t = Table(title=title, title_justify="left")
    for c in ("impl", f"largest {solve}", "device need there (GiB)", f"{solve} above", "fails at"):
        t.add_column(c, justify="left" if c in ("impl", "fails at") else "right")
    for r in results:
        value = "none runs" if r.value is None else f"{r.value:,}"
        need = "-" if r.at_value is None else _g(r.at_value.device_need_bytes)
        o = r.at_next.oom
        fails = "-" if o is None else f"{o.step}: {o.buffer} ({_g(o.figures.tried_bytes, 2)} GiB)"
        t.add_row(escape(r.model.key), value, need, f"{r.next_value:,}", escape(fails))
    return t


def sweep_table(rows, budget: int | None = None) -> Table:
    t = Table(title="sweep", title_justify="left")
    for c in ("impl", "MBS", "seq", "heads", "dim", "peak GiB") + (("fits",) if budget else ()):
        t.add_column(c, justify="left" if c == "impl" else "right")
    for key, shape, peak in rows:
        cells = [key, str(shape.mbs), f"{shape.seq:,}", str(shape.heads), str(shape.dim), _g(peak)]
        if budget:
            cells.append("yes" if peak <= budget else "no")
        t.add_row(*cells)
    return t


def timeline_text(preds) -> Table:
    """Compact terminal timeline: one bar per step, scaled to the largest peak, the peak marked."""
    top = max(p.peak_bytes for p in preds)
    t = Table(title="live bytes per step", title_justify="left", show_lines=False)
    t.add_column("impl")
    t.add_column("step")
    t.add_column("GiB", justify="right")
    t.add_column("", no_wrap=True)
    for p in preds:
        for i, step in enumerate(p.model.steps):
            n = p.step_bytes[i]
            bar = "█" * round(40 * n / top) if top else ""
            mark = Text(" ◀ peak", style="bold red") if i == p.peak_index else Text("")
            t.add_row(p.model.key, step.name, _g(n), Text(bar, style="cyan") + mark)
        t.add_section()
    return t


def timeline_png(preds, path: str) -> None:
    """Stacked live bytes per step by storage group, one panel per implementation, the peak marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from livebytes.estimator.buffers import Group
    groups = [g for g in Group if any(p.groups_at(i).get(g) for p in preds for i in range(len(p.model.steps)))]
    colors = dict(zip(groups, plt.get_cmap("tab20").colors))
    fig, axes = plt.subplots(1, len(preds), figsize=(7 * len(preds), 5.5), sharey=True, squeeze=False)
    for ax, p in zip(axes[0], preds):
        steps = list(range(len(p.model.steps)))
        bottom = [0.0] * len(steps)
        for g in groups:
            vals = [p.groups_at(i).get(g, 0) / 2**30 for i in steps]
            ax.bar(steps, vals, bottom=bottom, color=colors[g], label=g.label, width=0.85)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.annotate(f"peak {gib(p.peak_bytes):.3f} GiB\n{p.peak_step.name}", xy=(p.peak_index, gib(p.peak_bytes)),
                    xytext=(0, 12), textcoords="offset points", ha="center", fontsize=9,
                    arrowprops=dict(arrowstyle="->"))
        ax.set_xticks(steps)
        ax.set_xticklabels([s.name for s in p.model.steps], rotation=90, fontsize=7)
        ax.set_title(f"{p.model.key}\n{p.shape.label()}", fontsize=10)
        ax.set_ylabel("live GiB (2^30 B)")
        ax.set_ylim(0, max(gib(q.peak_bytes) for q in preds) * 1.15)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def payload_table(rows, fn: str) -> Table:
    """rows: dicts with T, predicted, measured (or None), events, largest, growth, vs_dense, vs_tiled, inputs."""
    t = Table(title=f"saved payload of {fn} attention (KiB = 1024 B)", title_justify="left")
    cols = ["T", "predicted KiB", "measured KiB", "match", "save events", "largest elem", "growth", "vs dense", "vs tiled", "3Td KiB"]
    for c in cols:
        t.add_column(c, justify="right")
    for r in rows:
        measured = "-" if r["measured"] is None else f"{r['measured'] / 1024:,.1f}"
        match = "-" if r["measured"] is None else ("exact" if r["measured"] == r["predicted"] else f"{r['measured'] - r['predicted']:+,} B")
        growth = "" if r["growth"] is None else f"x{r['growth']:.2f}"
        t.add_row(f"{r['T']:,}", f"{r['predicted'] / 1024:,.1f}", measured, match, f"{r['events']:,}", f"{r['largest']:,}",
                  growth, f"{r['vs_dense']:.2f}x", f"{r['vs_tiled']:.2f}x", f"{r['inputs'] / 1024:,.0f}")
    return t

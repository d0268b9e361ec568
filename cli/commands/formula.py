"""``livebytes formula``: the peak as a closed form in the shape's symbols, and each storage group's at each candidate
step."""
from __future__ import annotations

from typing import List

import typer
import textwrap

from .. import options as o
from livebytes.choose import model_for
from .. import render
from livebytes import report

NAME = "formula"


@o.query_options("impl", *o.WHAT_IF_OPTIONS, "hidden", "layers", "checkpoint", "conv_size", impl=(List[str], o.Impl))
def command(q: o.QueryFlags, latex: bool = typer.Option(False, "--latex", help="LaTeX instead of ASCII art"),
            groups: bool = typer.Option(True, "--groups/--no-groups", help="also the per-group formulas at each candidate step"),
            as_json: bool = o.Json) -> None:
    """The peak as a closed form in S, MBS, H, HV, DK, DV (seq_len, batch_size, num_heads, num_v_heads, head_dim,
    head_v_dim; a Max where the peak step changes with shape)."""
    import sympy as sp  # deferred: sympy ~177 ms at import (importtime), only this path needs it

    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.estimator.planning import closed_form, group_formulas
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import SYMBOL_NAMES

    key = o.single_impl(q.impl, NAME)
    o.refuse_unused("with --json (the JSON holds sympy's own text of each expression)", latex=latex and as_json)
    model = model_for(key, q.gpu, o.what_if_by(q), stack=o.stack_from(q.hidden, q.layers, q.checkpoint, q.conv_size))
    expr, steps = closed_form(model)
    per_group = {model.steps[i].name: group_formulas(model, i) for i in steps} if groups else {}
    if as_json:
        render.print_json(report.formula_data(model, expr, steps, per_group))
        return

    width = max(40, render.console.width)

    def show(e, indent: int = 0) -> str:
        """LaTeX as one line (it is pasted, not read); ASCII wrapped to the terminal: a one-line expression between
        terms (never inside a name or a number), 2-D art in sympy's own blocks of the width."""
        if latex:
            return sp.latex(e)
        flat = sp.pretty(e, use_unicode=False, wrap_line=False)
        if "\n" not in flat:
            return "\n".join(textwrap.wrap(flat, width - indent, subsequent_indent="  ", break_long_words=False,
                                            break_on_hyphens=False))
        return sp.pretty(e, use_unicode=False, wrap_line=True, num_columns=width - indent)
    typer.echo(textwrap.fill(f"peak bytes of {model.key} on {model.device} ({model.summary})", width,
                             break_long_words=False))
    typer.echo(textwrap.fill(f"candidate peak steps (every other step is dominated term by term): "
                             f"{', '.join(model.steps[i].name for i in steps)}", width, break_long_words=False))
    typer.echo(textwrap.fill("in " + ", ".join(f"{s}={name}" for s, name in SYMBOL_NAMES.items())
                             + " (HV=num_heads and DV=head_dim unless given)", width, break_long_words=False))
    typer.echo(show(expr))
    for step, grp in per_group.items():
        typer.echo(f"\nat {step}, by storage group:")
        for group, e in grp.items():
            typer.echo(f"  {group.label}:")
            typer.echo("\n".join("    " + line for line in show(e, 4).splitlines()))


def schema() -> dict:
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from ..schema import GROUP_LABELS, NO_SHAPE, envelope, listof, mapof, obj, string, terms
    return envelope(NAME, obj("the closed form", {
        **terms(shape=NO_SHAPE),
        "peak_bytes_expression": string("the peak in S, MBS, H, HV, DK, DV (sympy syntax; a Max over candidate steps)"),
        "symbols": mapof(string("the shape key it stands for"), "each symbol of the expressions -> the shape key "
                         "it stands for (S seq_len, MBS batch_size, H num_heads, HV num_v_heads, DK head_dim, DV "
                         "head_v_dim; HV is num_heads and DV head_dim where those are not given)"),
        "peak_steps": listof(string("step"), "candidate peak steps"),
        "group_bytes_expressions": mapof(mapof(string("expression"), "storage group key -> expression"),
                                         "step -> storage group key -> expression (empty with --no-groups)"),
        "group_labels": GROUP_LABELS}),
        "the peak as a closed form")

"""The progress bar of a long step (issue 34): a command that can take over 2 s (plan's searches, a sweep's verdicts,
re-checking records, a whole model's first trace) shows one on a terminal's stderr, and nothing elsewhere."""
from __future__ import annotations

from contextlib import contextmanager
from rich.console import Console


def _quiet(done: int, total: int | None, note: str = "") -> None:
    """The step of a bar not shown."""


@contextmanager
def progress(what: str, quiet: bool = False):
    """A rich progress bar of ``what`` on a terminal's stderr while a long step runs, removed when it ends: the context
    gives ``step(done, total, note)``, called by the library after each unit of work (``total`` None: a search of
    unknown length; the bar pulses and counts). Elsewhere (pipes, tests) and with ``quiet`` (--json) nothing: stderr
    keeps its one-line errors and warnings, stdout its answer. Every text is shown as written, never read as markup."""
    if quiet:
        yield _quiet
        return
    err = Console(stderr=True)
    if not err.is_terminal:
        yield _quiet
        return
    # deferred: rich.progress ~6 ms (importtime) at the CLI's start; only a terminal's progress bar needs it
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[note]}", markup=False))
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(what, total=None, note="")

        def step(done: int, total: int | None, note: str = "") -> None:
            bar.update(task, completed=done, total=total, note=note)
        yield step


def counting(call, step, total: int):
    """``call(fn, tokens, ...)`` (payload's measurement) that tells ``step`` after each: (calls done, ``total``, the
    tokens measured)."""
    done = [0]

    def counted(fn, tokens, *args, **kwargs):
        out = call(fn, tokens, *args, **kwargs)
        done[0] += 1
        step(done[0], total, f"{tokens:,} tokens")
        return out
    return counted

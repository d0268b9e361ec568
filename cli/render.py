"""Every rich table and plot is built here, from data the library and ``report`` computed: rendering
only formats. Every user-visible string goes in as ``rich.text.Text`` (never parsed as markup, so
``[ceiling(DK/32), ...]`` shows as written); keys, shapes and numbers are never wrapped or cut, long
descriptions fold instead; a suggested command (``with_commands``) is a line of its own, never wrapped."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

from rich.cells import cell_len
from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
import copy
import json
import textwrap
import typer

from livebytes.process_words import Said
from livebytes.report import gib, oom_when
from .errors import warn
from livebytes.report import measured_entry, quoted_record

def ignore_unusable_columns(environ=os.environ) -> None:
    """Drop a COLUMNS that is digits but no positive integer Python reads (``COLUMNS=0``: rich drew every table at no
    width, printing nothing, exit 0; 5,000 digits or a '²': rich's ``int()`` raised ValueError, a traceback): POSIX
    defines COLUMNS as a positive integer, and without it rich, typer's help and ``shutil.get_terminal_size`` all take
    the terminal's width (80 where none). Done once, here, before any console reads it."""
    columns = environ.get("COLUMNS", "")
    if not columns.isdigit():
        return                                 # rich ignores it already
    try:
        usable = int(columns) > 0
    except ValueError:
        usable = False
    if not usable:
        del environ["COLUMNS"]


ignore_unusable_columns()
console = Console()


def T(text, style: str = "") -> Text:   # noqa: N802 - short on purpose, it wraps every cell
    """A cell or title as plain text: rich never reads it as markup."""
    return Text(str(text), style=style)


def g(nbytes: int | None, digits: int = 3) -> str:
    """Bytes as GiB (2^30 B) with thousands separators; '-' when unknown."""
    return "-" if nbytes is None else f"{gib(nbytes):,.{digits}f}"


def pct(fraction: float | None, digits: int = 1) -> str:
    if fraction is None:
        return "-"
    return f"{-fraction * 100:.{digits}f}% lower" if fraction <= 0 else f"{fraction * 100:.{digits}f}% higher"


def shape_cell(shape_text: str) -> str:
    """A buffer shape without spaces, so a narrow column never breaks it: [MBS*S,H,DK], [MBS+1]."""
    return shape_text.replace(" ", "")


def tensor_cell(tensor_text: str) -> str:
    """A buffer's tensor (``Buffer.tensor_text``: ``[T, 5632] bf16``) with its shape unbroken: ``[T,5632] bf16``; a
    tensor told in words (a loop's chunk) as written."""
    end = tensor_text.rfind("]")
    return shape_cell(tensor_text[:end + 1]) + tensor_text[end + 1:] if tensor_text.startswith("[") else tensor_text


KEY_WIDTH = 28   # the longest model key, cudnn-kda-hopper-cuda@1.32.0; a column holding keys is never narrower


def _table(title: str, **kw) -> Table:
    return Table(title=T(title), title_justify="left", **kw)


@dataclass(frozen=True)
class Column:
    """One column of a table as data (torchinfo's way): its header, how to get the cell from a row (text, or a
    ``Text`` with its own style), and how it lays out: ``key`` never wrapped or cut, ``number`` right-justified and never
    wrapped, ``text`` folded where long. ``footer``: the cell under a table that shows footers."""
    header: str
    cell: Callable
    kind: str = "text"
    justify: Optional[str] = None
    footer: Optional[str] = None
    min_width: Optional[int] = None
    ratio: Optional[int] = None


KINDS = {"key": {"no_wrap": True}, "number": {"justify": "right", "no_wrap": True}, "text": {"overflow": "fold"}}
SECTION = None      # a row of ``table``'s rows that starts a new section (a rule across the table)


def table(title: str, columns: list, rows, **kw) -> Table:
    """The one table builder: a column per ``Column``, a row per item of ``rows`` (``SECTION``: a rule); ``kw``: rich's
    table settings (``show_footer``, ``show_lines``, ``caption``)."""
    t = _table(title, **kw)
    for c in columns:
        more = {k: v for k, v in (("justify", c.justify), ("min_width", c.min_width), ("ratio", c.ratio)) if v is not None}
        footer = {"footer": _cell(c.footer)} if c.footer is not None else {}
        t.add_column(T(c.header), **(KINDS[c.kind] | more | footer))
    for row in rows:
        if row is SECTION:
            t.add_section()
        else:
            t.add_row(*(_cell(c.cell(row)) for c in columns))
    return t


def listing(title: str, columns: list, rows: list, filler: str) -> Table:
    """A list of what this machine kept (``table``); empty, its caption says so and names ``filler``, the command that
    keeps one."""
    return table(title, columns, rows, **({} if rows else caption(f"none yet: {filler}")))


def _cell(value) -> Text:
    return value if isinstance(value, Text) else T(value)


def caption(text: str) -> dict:
    """A table's caption (``table``'s keywords): below it, left-justified."""
    return {"caption": T(text), "caption_justify": "left"}


def show(renderable) -> None:
    """Print a table (``fit``: stacked when the console cannot hold it whole) or a line. Not cropped: a suggested
    command (``with_commands``) is the one line that may run past the console's width."""
    console.print(fit(renderable), crop=False)


COMMAND_AT = ": livebytes "     # an assumption line's suggested command: everything after its last ": livebytes "


def with_commands(text: str) -> list[Text]:
    """``text``'s lines as ``Text``, a line that ends in a suggested command (everything after its last
    ``COMMAND_AT``) broken before it: its words up to the colon wrap as any line's, the command is a line of its own
    never wrapped or cut (wider than the console, the terminal wraps it softly: a copy pastes one shell line)."""
    out = []
    for line in text.split("\n"):
        words, at, command = line.rpartition(COMMAND_AT)
        out += [T(words + ":"), Text("livebytes " + command, no_wrap=True, overflow="ignore")] if at else [T(line)]
    return out


def _lines(text: str):
    """``with_commands``' lines as one renderable: ``text`` as a ``Text`` where no line carries a command."""
    return Group(*with_commands(text)) if COMMAND_AT in text else T(text)


def print_json(data: dict) -> None:
    """A command's ``--json`` document on stdout."""

    typer.echo(json.dumps(data, indent=1))


def warn_all(data: dict) -> None:
    """Every warning a command's answer carries, one line each on stderr (JSON keeps them in ``warnings``)."""
    for line in data["warnings"]:
        warn(line)


def _plain(cell, joint: str = " / ") -> str:
    """A header or cell as one line: a cell's stacked lines joined by ' / ', a header's by spaces."""
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return joint.join(line.strip() for line in text.splitlines() if line.strip())


def too_wide(table: Table, width: int) -> bool:
    """Whether ``table`` cannot be drawn in ``width`` columns without cutting a no-wrap (key or number) cell or
    header. rich's minimum takes a cell's longest word, as if every cell could wrap; a no-wrap column needs its
    longest whole line, so each adds the difference (a key with spaces, a date column squeezed to nothing)."""
    options = console.options.update_width(10**4)            # unconstrained
    need = Measurement.get(console, options, table).minimum
    _, right, _, left = table.padding
    for column in table.columns:
        if column.no_wrap:              # drawn whole or cut: its longest line
            measured = table._measure_column(console, options, column).minimum      # padding included
            need += max(0, max((_longest_line(c) for c in _cells_of(column)), default=0) + left + right - measured)
    return need > width


def _cells_of(column) -> list:
    return [column.header, *column._cells] + ([column.footer] if column.footer else [])


def _longest_line(cell) -> int:
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return max((cell_len(line) for line in text.splitlines()), default=0)


def vertical(table: Table) -> Group:
    """The table as one block per row: the first cell as a heading, then ``header: cell`` lines. Nothing is cut:
    a line longer than the console folds between words, and keys and numbers carry no spaces."""
    columns = table.columns
    heads = [_plain(c.header, " ") for c in columns]
    rows = [[c._cells[i] for c in columns] for i in range(table.row_count)]
    if table.show_footer:
        rows.append([c.footer for c in columns])
    out = [T(_plain(table.title, " "))] if table.title else []
    if not rows and not table.caption:  # an empty table still says so (its headers alone would vanish here)
        out.append(T("(none)"))
    for cells in rows:
        first = _plain(cells[0])
        out.append(T(f"{heads[0]}: {first}" if first else heads[0], "bold"))
        out += [T(f"  {head or 'value'}: {_plain(cell)}") for head, cell in zip(heads[1:], cells[1:]) if _plain(cell)]
    if table.caption:                   # its lines kept (a caption of several sentences, each its own line)
        out += with_commands(_plain(table.caption, "\n"))
    return Group(*out)


def fit(renderable):
    """A table as drawn when the console holds it whole (its caption's commands unbroken: ``with_commands``), else
    ``vertical``; anything else unchanged."""
    if not isinstance(renderable, Table):
        return renderable
    if too_wide(renderable, console.width):
        return vertical(renderable)
    if renderable.caption is not None and COMMAND_AT in _plain(renderable.caption, "\n"):
        renderable = copy.copy(renderable)      # the table's data keep their caption as written
        renderable.caption = _lines(_plain(renderable.caption, "\n"))
    return renderable


def measured_text(records, probed: bool = False) -> str:
    """The quoted record as validate judges it: measured GiB, and the replay of the validator's process with the error.
    ``probed``: no record, but a boundary probe ran the case (its verdict is printed below the table)."""
    r = quoted_record(records)
    if r is None:
        return "predicted (no peak record; a boundary probe ran this case: below)" if probed else "predicted (never measured)"
    m = measured_entry(r)
    more = f" (+{len(records) - 1} more records)" if len(records) > 1 else ""
    if m["oom"] is not None:
        return f"{m['origin']} OOM on {m['device']}{more}"
    text = f"{m['origin']} {g(m['peak_bytes'])} GiB on {m['device']}"
    if m["protocol_replay_bytes"] is not None:
        same = "=" if m["error_bytes"] == 0 else "vs"
        text += (f" {same} replay of the validator's process {g(m['protocol_replay_bytes'])} GiB "
                 f"({m['error_bytes']:+,} B)")
    return text + more


def options_text(r: dict) -> str:
    """The what-if options a result was built with, in the flags' words: contract report, recompute on."""
    o = r["options"]
    parts = ([f"contract {o['contract']}"] if "contract" in o else []) + (
        [f"recompute {'on' if o['recompute'] else 'off (--no-recompute)'}"] if "recompute" in o else []) + (
        [f"context parallelism over {o['cp']} GPUs ({o['cp_layout']}, {o['cp_rank']} rank; --seq-len is the total)"] if "cp" in o else [])
    if o.get("gva"):
        parts.append("grouped value heads")
    if "routing" in o:          # a model with experts: the routing assumed (its notes say what depends on it)
        parts.append(f"routing {o['routing']}")
    if o.get("loss"):           # a whole model offering several losses: the one computed (its notes say what it is)
        parts.append(f"loss {o['loss']}")
    if "hidden" in o:           # a layer model: the stack it describes (defaults included)
        n = o["layers"]
        parts.append(f"hidden {o['hidden']}, {n} layer{'' if n == 1 else 's'}, checkpointing "
                     f"{'per layer' if o['checkpoint'] else 'off'}, conv {o['conv_size']}")
    return ", ".join(parts) or "no what-if options"


def device_text(r: dict) -> str:
    d = r["device_memory"]
    # reported or assumed: the source opens with its kind's words (devices.CAPACITY_KINDS: "public report, ...")
    status = "measured" if d["status"] == "measured" else d["source"]
    return f"{r['device']} {g(d['total_bytes'])} GiB ({status})"


def cache_text(r: dict) -> str:
    """``cold Triton 3.6.0 cache``: the cache state and the Triton version whose kernels' process memory counts."""
    if r["triton_cache"] == "n/a":
        return "no Triton kernels"
    version = r.get("triton", "n/a")
    return f"{r['triton_cache']} Triton {version} cache" if version != "n/a" else f"{r['triton_cache']} Triton cache"


def terms_line(r: dict) -> str:
    """What one answer assumed, in one line: the model's phase and options, and with a verdict the allocator
    settings, the Triton cache, the device's memory and the process memory's status."""
    line = f"{r['impl']} ({r['phase']}; {options_text(r)}) on {r['device']}"
    if "device_memory" not in r:
        return line
    return (f"{line}: {alloc_conf_text(r)}, {cache_text(r)}; device {device_text(r)}; process memory "
            f"{g(r['process_memory']['bytes'])} GiB {r['process_memory']['status']}{high_end_text(r['process_memory'])}")


def high_end_text(pm: dict) -> str:
    """`` (high end X GiB)`` where a part of the process memory is estimated: what the verdict counts."""
    return f" (high end {g(pm['high_bytes'])} GiB, counted)" if pm.get("margin_bytes") else ""


def alloc_conf_text(r: dict) -> str:
    """The allocator settings simulated, and the environment variable they were read from when no flag gave them."""
    source = r.get("alloc_conf_source", "default")
    return r["alloc_conf"] + ("" if source in ("default", "--alloc-conf") else f" (read from {source})")


# a figure of a run that goes out of memory: the device never holds it. Not "unbounded", which is a process-memory
# figure's kind (estimator/process/status.py: used though nothing bounds it); the JSON key keeps its name
# (``peaks_unbounded``, schema 3)
NO_LIMIT = "with no memory limit"
NO_LIMIT_WHY = f"{NO_LIMIT}: it runs out of memory before this"


def no_limit_label(r: dict) -> str:
    """`` (with no memory limit)`` after a figure of a result whose run goes out of memory (``peaks_unbounded``);
    empty when it runs."""
    return f" ({NO_LIMIT})" if r["peaks_unbounded"] else ""


def verdict_lines(r: dict) -> list:
    """``r``: a result with report.allocator_terms and report.verdict_data. Allocated, reserved, process memory, device
    need (the three peaks labelled when they are those of a run without a limit); what it assumed; the verdict; the
    boundary probes that ran it. A line each (``Text``; one that suggests a command: the command on a line of its own,
    ``with_commands``)."""
    no_limit = f"; {NO_LIMIT_WHY}" if r["peaks_unbounded"] else ""
    pm = r["process_memory"]
    cache = cache_text(r)
    lines = [f"max_memory_allocated {g(r['allocated_peak_bytes'])} GiB (fresh process, first call included{no_limit}) | "
             f"reserved peak {g(r['reserved_peak_bytes'])} GiB{no_limit_label(r)}{band_text(r)} | "
             f"process memory {g(pm['bytes'])} GiB{high_end_text(pm)} ({pm['library']}, {cache}) | "
             f"device need {g(r['device_need_bytes'])} GiB{no_limit_label(r)} of {g(r['device_memory']['total_bytes'])} "
             f"GiB ({r['alloc_conf']})",
             f"assumed: {terms_line(r)}"]
    lines += list(pm["assumptions"])          # each in its kind's words: bounded: ... or unbounded: ...
    lines += list(pm.get("kept_here", []))    # PART: derived|measured (on this machine, ...)
    lines += [f"assumed: {note}" for note in r.get("autotune_assumptions", [])]
    lines.append(oom_text(r, assumptions_inline=False))
    lines += [probed_text(p, r["device"]) for p in r["probed"]]
    return [_lines(line) for line in lines]


def band_text(r: dict) -> str:
    """`` (placements: 1.23-1.45 GiB, high end decides)`` after the reserved peak where the driver's placements of its
    segments give a band (``reserved_low_bytes`` below ``reserved_high_bytes``); empty where every one gives the same."""
    low, high, by = r.get("reserved_low_bytes"), r.get("reserved_high_bytes"), r.get("reserved_decided_by")
    if low is None or low == high:
        return ""
    who = "high end decides" if by["kind"] == "high end" else f"measured: the {by['placement']} placement's"
    return f" (placements: {g(low)}-{g(high)} GiB, {who})"


def compare_verdict_line(r: dict) -> Text:
    """One compare column's verdict (``oom_text``); out of memory, it says that the column's peaks above are those
    of a device with no memory limit."""
    tail = f"; its peaks above are {NO_LIMIT}: it runs out of memory before them" if r["peaks_unbounded"] else ""
    return T(f"{r['impl']}: {oom_text(r)}{tail}")


def outcome(p: dict) -> str:
    return "ran" if p["fits"] else f"ran out of memory in {p['phase']}, tried {g(p['tried_bytes'], 2)} GiB"


def probed_text(p: dict, device: str) -> str:
    """One boundary-probe trial of this very case, as measured."""
    before = (["its 1x1024 warmup"] if p["after_warmup"] else []) + (
        [f"{p['earlier_trials']} earlier trial{'s' if p['earlier_trials'] > 1 else ''}"] if p["earlier_trials"] else [])
    process = f"a process after {' and '.join(before)}" if before else "a fresh process's first call"
    return f"measured on the {device} ({process}, boundary probe {p['record']}): {outcome(p)}"


def oom_text(r: dict, assumptions_inline: bool = True) -> str:
    """The verdict in one line: runs with so much to spare, or where it goes out of memory and PyTorch's figures;
    what the process memory rests on beyond measured and derived parts, in its own words (``assumptions_inline``: each
    bounded: or unbounded:), or a pointer to the lines above."""
    o, pm = r["oom"], r["process_memory"]
    notes = pm["assumptions"]
    assumed = "" if not notes else (f" (process memory {'; '.join(notes)})" if assumptions_inline
                                    else f" (process memory {pm['status']}"
                                    f"{', at its high end' if pm.get('margin_bytes') else ''}, as above)")
    if o is None:
        return f"{r['device']}: runs, {g(r['headroom_bytes'])} GiB to spare at the reserved peak{assumed}"
    return (f"{r['device']}: OUT OF MEMORY in {oom_when(o)}, at {o['step']} allocating {o['buffer']}: tried to allocate "
            f"{g(o['tried_bytes'], 2)} GiB; {g(o['allocated_bytes'], 2)} GiB allocated, "
            f"{g(o['reserved_unallocated_bytes'], 2)} GiB reserved but unallocated, {g(o['free_bytes'], 2)} GiB free"
            f"{_short(o)}{assumed}")


def _short(o: dict) -> str:
    """The shortfall in MiB where the rounded GiB figures would look as if the request fitted."""
    short = o["tried_bytes"] - o["free_bytes"]
    return f" ({short / 2**20:,.1f} MiB short)" if 0 < short < 0.01 * 2**30 else ""


def assumed_caption(t: Table, results: list[dict], more: list[str] = (), terms: list[dict] | None = None) -> None:
    """Below a table: what each row assumed (``terms_line`` of ``terms``, default the rows; ``assumed_notes``), then
    ``more``."""
    lines = [f"assumed: {terms_line(r)}" for r in (results if terms is None else terms)] + assumed_notes(results)
    t.caption = T("\n".join(dict.fromkeys(lines + list(more))))
    t.caption_justify = "left"


def autotune_lines(results: list[dict]) -> list[str]:
    """compare's lines for the autotuned launches' unmeasured assumptions (its verdict lines carry the process memory's)."""
    return [f"assumed: {r['impl']}: {note}" for r in results for note in r.get("autotune_assumptions", [])]


def assumed_notes(results: list[dict]) -> list[str]:
    """Each distinct assumption of the results (the process memory's, the autotuned launches'), once per model, with
    the shapes it holds at where not at every result of that model (a sweep's grid)."""
    rows_of: dict = {}
    for r in results:
        for note in r.get("process_memory", {}).get("assumptions", []) + r.get("autotune_assumptions", []):
            rows_of.setdefault((r["impl"], note), []).append(r)
    out = []
    for (impl, note), rows in rows_of.items():
        every = len(rows) == sum(r["impl"] == impl for r in results)
        where = "" if every else " at " + "; ".join(shape_label(r["shape"]) for r in rows)
        kind, text = (note.kind, note.text) if isinstance(note, Said) else ("assumed", note)
        out.append(f"{kind}: {impl}{where}: {text}")
    return out


SHAPE_LINE = 30      # a shape's label in a column that never wraps (validate's key column): fields, ~2 to a line


def shape_lines(shape: dict) -> list[str]:
    """A JSON shape's label (``shape_label``) broken between its fields, each line ``SHAPE_LINE`` wide or one field."""
    return textwrap.wrap(shape_label(shape), SHAPE_LINE, break_long_words=False, break_on_hyphens=False)


def shape_label(shape: dict) -> str:
    """A JSON shape as ``Shape.label`` writes it."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import Shape
    return Shape.from_dict(shape).label()


def fsdp_line(fsdp: dict) -> str:
    """The FSDP2 answer's terms: its world size, the rank answered, its status."""
    mesh = f" (CP {fsdp['cp']}, EP {fsdp['ep']})" if "cp" in fsdp else ""
    return (f"FSDP2 at {fsdp['world_size']:,} rank{'s' if fsdp['world_size'] > 1 else ''}{mesh}, rank {fsdp['rank']}'s "
            f"memory: {fsdp['status']}")

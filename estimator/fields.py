"""Reading a JSON file a person may have edited (validation records, allocator traces) without a traceback.

``read_json`` turns an unreadable, empty, truncated or non-JSON file into one ``LivebytesError`` naming
the file; ``check`` holds a parsed value to a declared layout (``Obj``, ``ListOf``, ``OneOf``, ``Either`` and
kind names such as ``"positive"`` or ``"string|null"``), naming the file and the field that is wrong:
``runs/x.json, record 2: shape.seq: expected a positive integer, got '64K'``. Fields a layout does not
declare are not read by anyone and are left alone (records carry free-text provenance).
"""
from __future__ import annotations

import json
import math
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .errors import LivebytesError

# every reader has a limit: the largest JSON file the project reads (a process trace) is ~0.6 MB
MAX_TEXT_BYTES = 64 << 20
KINDS = {
    "int": "an integer", "count": "a non-negative integer", "positive": "a positive integer",
    "number": "a number", "string": "a string", "bool": "true or false", "object": "an object", "list": "a list",
    "null": "null",
}


@dataclass(frozen=True)
class Obj:
    """An object with these fields (each a layout), ``required`` among them; other fields are not read."""
    fields: dict
    required: tuple = ()


@dataclass(frozen=True)
class ListOf:
    item: object
    nonempty: bool = False


@dataclass(frozen=True)
class OneOf:
    """One of these literal values (a format version, an enumerated word)."""
    values: tuple


@dataclass(frozen=True)
class Either:
    """Any of these layouts (a protocol written as an object or, in old records, as words)."""
    layouts: tuple


def show(value, limit: int = 40) -> str:
    """A value as the error quotes it: repr, cut to ``limit`` characters (a 5,000-digit number stays one short line)."""
    try:
        text = repr(value) if not isinstance(value, (dict, list)) else json.dumps(value, default=str)
    except (ValueError, RecursionError):        # a container that holds itself, or nested past the recursion limit
        return f"a {type(value).__name__} that holds itself or is nested too deep"
    return text if len(text) <= limit else f"{text[:limit - 12]}... ({len(text):,} characters)"


def _kind_ok(value, kind: str) -> bool:
    integer = isinstance(value, int) and not isinstance(value, bool)
    return {"int": integer, "count": integer and value >= 0, "positive": integer and value > 0,
            "number": isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
            "string": isinstance(value, str), "bool": isinstance(value, bool), "object": isinstance(value, dict),
            "list": isinstance(value, list), "null": value is None}[kind]


def describe(layout) -> str:
    if isinstance(layout, str):
        return " or ".join(KINDS[k] for k in layout.split("|"))
    if isinstance(layout, Obj):
        return "an object"
    if isinstance(layout, ListOf):
        return f"a {'non-empty ' if layout.nonempty else ''}list"
    if isinstance(layout, OneOf):
        return "one of " + ", ".join(show(v) for v in layout.values)
    return " or ".join(describe(x) for x in layout.layouts)


def _fails(value, layout) -> bool:
    """Whether ``value`` is not of ``layout``'s own kind (its items and fields are checked by ``check``)."""
    if isinstance(layout, str):
        return not any(_kind_ok(value, k) for k in layout.split("|"))
    if isinstance(layout, Obj):
        return not isinstance(value, dict)
    if isinstance(layout, ListOf):
        return not isinstance(value, list) or (layout.nonempty and not value)
    if isinstance(layout, OneOf):
        return not any(type(value) is type(v) and value == v for v in layout.values)
    return all(_fails(value, x) for x in layout.layouts)


def check(value, layout, where: str, field: str = "") -> None:
    """Raise one LivebytesError ``"<where>: <field>: expected ..., got ..."`` at the first field that is wrong."""
    label = field or "the file's top level"
    if _fails(value, layout):
        raise LivebytesError(f"{where}: {label}: expected {describe(layout)}, got {show(value)}")
    if isinstance(layout, Either):
        layout = next(x for x in layout.layouts if not _fails(value, x))
    if isinstance(layout, Obj):
        for name in layout.required:
            if name not in value:
                raise LivebytesError(f"{where}: {field + '.' if field else ''}{name}: missing")
        for name, sub in layout.fields.items():
            if name in value:
                check(value[name], sub, where, f"{field}.{name}" if field else name)
    elif isinstance(layout, ListOf):
        for i, item in enumerate(value):
            check(item, layout.item, where, f"{field}[{i}]")


def _decode(text: str, where: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise LivebytesError(f"{where}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}; "
                             "truncated or hand-edited?)") from None
    except (ValueError, RecursionError) as err:      # a number beyond Python's int-string limit, nesting too deep
        raise LivebytesError(f"{where}: not readable JSON ({show(str(err), 80)})") from None


def _opened(path: Path) -> int:
    """A descriptor of ``path`` opened without waiting: a named pipe no process writes to would block ``open`` for
    ever (fifo(7)); opened non-blocking it reads as empty, and with a writer (a shell's ``<(...)``) as that writer's
    bytes, once blocking reads are restored."""
    try:
        import fcntl  # deferred: POSIX-only; its ImportError elsewhere is the branch below
    except ImportError:                    # not POSIX: no named pipes of this kind
        return os.open(path, os.O_RDONLY)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The file's bytes; one error naming it when it cannot be read or holds more than ``max_bytes``: a regular file by
    its size, before reading; a device or a pipe (``/dev/zero``: its size says 0) by reading one byte past the limit."""
    try:
        with open(_opened(path), "rb") as f:
            too_large = os.fstat(f.fileno()).st_size > max_bytes
            data = b"" if too_large else f.read(max_bytes + 1)
    except OSError as err:
        raise LivebytesError(f"{path}: cannot read it ({err.strerror or err})") from None
    if too_large or len(data) > max_bytes:
        raise LivebytesError(f"{path}: more than {max_bytes:,} bytes, larger than such a file is; not read")
    return data


def read_text(path: Path, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The file's text; one error naming it when it cannot be read, is not UTF-8, is empty or is larger than
    ``max_bytes`` (``read_bytes``: never more is read)."""
    try:
        text = read_bytes(path, max_bytes).decode()
    except UnicodeDecodeError:
        raise LivebytesError(f"{path}: not a text file (not UTF-8)") from None
    if not text.strip():
        raise LivebytesError(f"{path}: the file is empty")
    return text


def read_json(path: Path, max_bytes: int = MAX_TEXT_BYTES):
    """The parsed file; one error naming the file when it cannot be read, is empty, too large or is not JSON."""
    return _decode(read_text(path, max_bytes), str(path))


def read_json_lines(path: Path, max_bytes: int = MAX_TEXT_BYTES) -> list:
    """A JSON-lines file: one value per non-blank line; an error names the file and the line."""
    return [_decode(line, f"{path}, line {n}") for n, line in enumerate(read_text(path, max_bytes).splitlines(), 1)
            if line.strip()]

"""Validation records: what a GPU measured, kept as JSON beside the code. No torch needed to read them.

The one place records are read and written. A record holds one implementation at one shape: the
measured peaks (or an out-of-memory), the device, driver and library versions, and the protocol.
``published`` records hold figures taken from a document (the KDA memory report), with the document
cited; the project's own measurements have ``origin == "measured"``.

Layouts read (nothing measured is ever rewritten): a file holding ``{"records": [...]}`` (runs 1-5 and
every file this module writes), a bare list, a single record, or JSON lines (the runner's old
``records.jsonl``). Record format 2 (protocol v4 on) adds the fields ``REQUIRED_V2`` lists; the writer
refuses a record without them, and the reader too (``checked_record``: every field a property reads is held to
``RECORD_LAYOUT``; a wrong type, a missing field, an unknown format, an unreadable or truncated file, one bad file in
a folder: one error naming the file and the field, never a traceback).
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import Either, ListOf, Obj, OneOf, check, read_json, read_json_lines, show
from livebytes.estimator.shapes import Shape, positional_spec

RECORDS_DIR = Path(__file__).parents[1] / "data" / "records"
RUNS_SUBDIR = "runs"          # validate/data/records/runs/<run>/*.json: one file per measured shape (format 2)
RECORD_FORMAT = 2
REQUIRED_V2 = ("impl", "shape", "protocol", "allocator_conf", "triton_cache", "device_memory", "seconds", "oom")
REQUIRED_OOM = ("oom_message", "oom_figures", "oom_step")
_OLD_PROTOCOL = re.compile(r"kda-report-v(\d+)$")


@dataclass(frozen=True)
class DeviceMemory:
    """Device memory outside PyTorch (mem_get_info total-free minus memory_reserved) and the reserved peak."""
    nonpytorch_before_bytes: int
    nonpytorch_after_bytes: int
    reserved_peak_bytes: int


@dataclass(frozen=True)
class Seconds:
    setup: float
    compile: float
    measure: float
    total: float


@dataclass(frozen=True)
class OomFigures:
    """At an out-of-memory: the failing request, PyTorch's current allocated/reserved, the device's free/total."""
    tried_bytes: int | None
    allocated_bytes: int
    reserved_bytes: int
    free_bytes: int
    total_bytes: int


def _typed(cls, value):
    return cls(**{k: value[k] for k in cls.__dataclass_fields__}) if isinstance(value, dict) else None


def protocol_version_of(protocol) -> int:
    """The protocol's integer version: ``{"version": 4}`` or an old name ``"kda-report-vN"``; 0 when unknown
    (published figures cite their document's protocol in words)."""
    if not isinstance(protocol, dict):
        return 0
    if isinstance(protocol.get("version"), int):
        return protocol["version"]
    match = _OLD_PROTOCOL.match(str(protocol.get("name", "")))
    return int(match.group(1)) if match else 0


@dataclass(frozen=True)
class Record:
    path: Path
    data: dict
    index: int = 0             # its place in the file (0: the first), which names it where a file holds several

    @property
    def label(self) -> str:
        """The record as a person finds it: its file, and its place there (1: the first)."""
        return f"{self.path.name}, record {self.index + 1}"

    @property
    def impl(self) -> str:
        return self.data["impl"]

    @property
    def shape(self) -> Shape:
        return Shape.from_dict(self.data["shape"])

    @property
    def options(self) -> dict:
        return dict(self.data.get("options", {}))

    @property
    def origin(self) -> str:
        return self.data.get("origin", "measured")

    @property
    def record_format(self) -> int:
        return int(self.data.get("format", 1))

    @property
    def oom(self) -> bool:
        return bool(self.data.get("oom", False))

    @property
    def peak_bytes(self) -> int | None:
        """The median of the steady-state peaks (the protocol's figure)."""
        if self.oom:
            return None
        if "peak_bytes" in self.data:
            return int(self.data["peak_bytes"])
        if "peak_gib" in self.data:  # a published figure, rounded to the document's precision
            return round(self.data["peak_gib"] * 2**30)
        return int(median(self.data["peaks_bytes"]))

    @property
    def device(self) -> str:
        return self.data.get("device", {}).get("name", "?")

    @property
    def total_memory(self) -> int | None:
        """The device's memory as torch reported it (None for a published figure)."""
        total = self.data.get("device", {}).get("total_memory")
        return None if total is None else int(total)

    @property
    def gpu(self) -> str:
        """Preset name of the device the record was taken on (H200, B300...)."""
        return self.data.get("device", {}).get("preset", "")

    @property
    def protocol(self) -> str:
        """The protocol's name, for display; compare ``protocol_version`` (an integer), never names."""
        return self.data.get("protocol", {}).get("name", "") if isinstance(self.data.get("protocol"), dict) else ""

    @property
    def protocol_version(self) -> int:
        return protocol_version_of(self.data.get("protocol"))

    @property
    def mode(self) -> str:
        return self.data.get("mode", "")

    @property
    def forward_only(self) -> bool:
        return bool(self.data.get("forward_only", False))

    @property
    def history_dependent(self) -> str | None:
        """Why this record's allocator state depends on what ran before it (then only bounds apply)."""
        return self.data.get("history_dependent")

    @property
    def requested_peak_bytes(self) -> int | None:
        """torch.cuda.memory_stats()['requested_bytes.all.peak']: the tensors' own sizes, before blocks."""
        values = self.data.get("requested_peak_bytes")
        return int(median(values)) if values else None

    @property
    def allocator_conf(self) -> str | None:
        """PYTORCH_CUDA_ALLOC_CONF in force; records before format 2 state it in their protocol's text."""
        if "allocator_conf" in self.data:
            return self.data["allocator_conf"]
        protocol = self.data.get("protocol")
        text = protocol.get("allocator", "") if isinstance(protocol, dict) else ""
        return text.split("=", 1)[1] if text.startswith("PYTORCH_CUDA_ALLOC_CONF=") else None

    @property
    def triton_cache(self) -> str | None:
        """"cold" (autotuned in this process), "warm" (loaded configs), "n/a" (no Triton kernels); records before
        format 2 did not record it: "not recorded" (runs 1-5 ran on machines whose ~/.triton persisted between
        calls, so a process was cold or warm depending on what ran before it)."""
        if "triton_cache" in self.data:
            return self.data["triton_cache"]
        if self.origin != "measured":
            return None
        return "n/a" if self.impl.startswith("cudnn-") else "not recorded"

    @property
    def device_memory(self) -> DeviceMemory | None:
        return _typed(DeviceMemory, self.data.get("device_memory"))

    @property
    def seconds(self) -> Seconds | None:
        return _typed(Seconds, self.data.get("seconds"))

    @property
    def seconds_total(self) -> float | None:
        """The runner's wall time for this shape (format 2: seconds.total; runs 1-5: seconds_total)."""
        return self.seconds.total if self.seconds else self.data.get("seconds_total")

    @property
    def oom_figures(self) -> OomFigures | None:
        return _typed(OomFigures, self.data.get("oom_figures"))

    @property
    def oom_step(self) -> str | None:
        return self.data.get("oom_step")


# ---------------------------------------------------------------- reading

SHAPE_LAYOUT = Obj({"mbs": "positive", "seq": "positive", "heads": "positive", "dim": "positive",
                    "v_heads": "positive|null", "dim_v": "positive|null"}, required=("mbs", "seq", "heads"))
# Every field a Record property (or the comparison) reads, with its type; other fields are provenance, never read.
RECORD_LAYOUT = Obj({
    "impl": "string", "shape": SHAPE_LAYOUT, "format": OneOf((1, RECORD_FORMAT)), "origin": OneOf(("measured", "published")),
    "options": "object", "oom": "bool", "peak_bytes": "count", "peak_gib": "number", "peaks_bytes": ListOf("count", nonempty=True),
    "device": Obj({"name": "string", "total_memory": "positive", "preset": "string", "sm_count": "positive"}),
    "protocol": Either((Obj({"version": "int", "name": "string", "measured_steps": "count"}), "string")),
    "mode": "string", "forward_only": "bool", "history_dependent": "string|null",
    "requested_peak_bytes": ListOf("count"), "allocator_conf": "string|null", "triton_cache": "string",
    "device_memory": Obj({k: "count" for k in DeviceMemory.__dataclass_fields__}, required=tuple(DeviceMemory.__dataclass_fields__)),
    "seconds": Obj({k: "number" for k in Seconds.__dataclass_fields__}, required=tuple(Seconds.__dataclass_fields__)),
    "seconds_total": "number|null",
    "oom_figures": Obj({k: "count|null" if k == "tried_bytes" else "count" for k in OomFigures.__dataclass_fields__},
                       required=tuple(OomFigures.__dataclass_fields__)),
    "oom_step": "string|null", "earlier_shapes_in_process": ListOf(SHAPE_LAYOUT),
}, required=("impl", "shape"))


def checked_record(item, where: str) -> dict:
    """One record held to ``RECORD_LAYOUT``: types, a peak unless out of memory, format 2's fields, a valid shape."""
    check(item, RECORD_LAYOUT, where)
    if item.get("origin", "measured") == "measured" and not isinstance(item.get("protocol", {}), dict):
        raise LivebytesError(f"{where}: protocol: expected an object (only a published figure cites its protocol in words), "
                             f"got {show(item['protocol'])}")
    if not item.get("oom", False) and not any(k in item for k in ("peak_bytes", "peak_gib", "peaks_bytes")):
        raise LivebytesError(f"{where}: peak_bytes: missing (a record that did not run out of memory needs "
                             "peak_bytes, peaks_bytes or peak_gib)")
    if item.get("format", 1) >= 2 and missing_fields(item):
        raise LivebytesError(f"{where}: {missing_fields(item)[0]}: missing (a format-{item['format']} record needs "
                             f"{', '.join(missing_fields(item))})")
    for name, shape in [("shape", item["shape"])] + [(f"earlier_shapes_in_process[{i}]", s)
                                                     for i, s in enumerate(item.get("earlier_shapes_in_process", []))]:
        try:
            Shape.from_dict(shape)
        except LivebytesError as err:
            raise LivebytesError(f"{where}: {name}: {err}") from None
    return item


def _items(path: Path) -> tuple[list, bool]:
    """The file's record entries, whatever its layout (module notes), and whether they came as a list (a bare list or
    JSON lines, whose entries ``_listed_record`` checks first); a device-probe file (``probe``) holds none."""
    if path.suffix == ".jsonl":
        return read_json_lines(path), True
    data = read_json(path)
    if isinstance(data, list):
        return data, True
    if not isinstance(data, dict):
        raise LivebytesError(f"{path}: expected a record, a list of records or {{'records': [...]}}, got {show(data)}")
    if "records" in data:
        check(data, Obj({"records": ListOf("object"), "format": OneOf((1, RECORD_FORMAT))}), str(path))
        return data["records"], False
    return ([] if "probe" in data and "impl" not in data else [data]), False


def _listed_record(item, where: str):
    """An entry of a list of records is a record object: a list in its place (records nested one list too deep), or a
    whole record file (``{"records": [...]}``) pasted into a list, is named as what it is, not as a record that
    lacks ``impl``."""
    if isinstance(item, list):
        raise LivebytesError(f"{where}: the file holds a list where a record object is expected (a list of records "
                             "nested in a list?)")
    if isinstance(item, dict) and "records" in item and "impl" not in item:
        raise LivebytesError(f"{where}: the file holds a record file ({{\"records\": [...]}}) where a record object is "
                             "expected; give each file on its own (or a folder of them)")
    if not isinstance(item, dict):
        raise LivebytesError(f"{where}: expected a record object, got {show(item)}")
    return item


def _read(path: Path) -> list[Record]:
    items, listed = _items(path)
    wheres = [f"{path}, record {i}" if len(items) > 1 else str(path) for i in range(1, len(items) + 1)]
    return [Record(path, checked_record(_listed_record(item, where) if listed else item, where), i)
            for i, (item, where) in enumerate(zip(items, wheres))]


def load_file(path: Path) -> list[Record]:
    """Every record in one file (any layout above), each checked (``checked_record``); a file that holds none,
    cannot be read, is not JSON or holds a wrong field is one error naming the file (and the field)."""
    records = _read(path)
    if not records:
        raise LivebytesError(f"{path} holds no records")
    return records


def record_files(directory: Path = RECORDS_DIR) -> list[Path]:
    """The record files of a records folder: its own ``*.json`` and ``runs/*/*.json`` (``live/`` holds block
    dumps, not records)."""
    return sorted(directory.glob("*.json")) + sorted(directory.glob(f"{RUNS_SUBDIR}/*/*.json"))


def load_records(directory: Path = RECORDS_DIR) -> list[Record]:
    """Every record of every record file in the folder: one bad file is an error naming it."""
    return [r for path in record_files(directory) for r in _read(path)]


def records_from(source: str) -> list[Record]:
    """What ``validate --from-records SOURCE`` checks: ``all`` = every committed record; else exactly the file
    (or records folder) at that path, or, when no such path exists, the committed file of that name. Only
    that file's contents count: a copy of a committed file is judged on its own figures."""
    if source == "all":
        return load_records()
    path = Path(source)
    if not path.exists() and path.name == source and (RECORDS_DIR / source).is_file():
        path = RECORDS_DIR / source
    if path.is_dir():
        records = load_records(path)
    elif path.is_file():
        records = load_file(path)
    elif path.exists():
        raise LivebytesError(f"--from-records {source!r}: not a record file (a device, pipe or socket); not read")
    else:
        raise LivebytesError(f"--from-records {source!r}: no such file (nor a committed record file of that name)")
    if not records:
        raise LivebytesError(f"{path} holds no records")
    return records


def find(impl: str, shape: Shape, options: dict | None = None, records: list[Record] | None = None) -> list[Record]:
    """Records of ``impl`` at ``shape`` whose options match (missing options take the model defaults)."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    out = []
    for r in records if records is not None else load_records():
        if r.impl != impl or r.shape != shape:
            continue
        if all(r.options.get(k, v) == v for k, v in options.items()):
            out.append(r)
    return out


def best(records: list[Record]) -> Record | None:
    """The record to quote for a shape: an out-of-memory if that is all there is, else the newest protocol,
    fresh process before shared, records whose allocator state is history-independent first."""
    if not records:
        return None
    return max(reversed(records), key=lambda r: (not r.oom, not r.history_dependent, r.protocol_version,
                                                 r.mode == "fresh-process", r.origin == "measured"))


# ---------------------------------------------------------------- writing

def missing_fields(data: dict) -> list[str]:
    """Fields a format-2 record lacks (an out-of-memory also needs its message, figures and step)."""
    need = REQUIRED_V2 + (REQUIRED_OOM if data.get("oom") else ())
    return [k for k in need if k not in data]


def record_file_name(data: dict) -> str:
    """``<impl>_<shape>_<UTC date>_<pid>.json``, the shape in the old positional form (the records' names keep their
    format), its ``=`` written ``-`` (``hv-32``: the GPU machine's transfer
    refuses a name with ``=``, which lost run 21d's D64 record) and other characters than [A-Za-z0-9._-] ``_``."""
    stamp = str(data.get("date", "")).replace(":", "").replace("+0000", "Z")
    raw = f"{data['impl']}_{positional_spec(Shape.from_dict(data['shape']))}_{stamp}_{os.getpid()}".replace("=", "-")
    return re.sub(r"[^A-Za-z0-9._-]", "_", raw) + ".json"


def write_record(directory: Path, data: dict) -> Path:
    """Write one record as its own file, atomically (a temporary file in the same folder, fsync, then
    ``os.replace``); an existing file is never replaced: a name already taken gets a numbered suffix."""
    missing = missing_fields(data)
    if missing:
        raise LivebytesError(f"record of {data.get('impl')} lacks {', '.join(missing)}")
    directory.mkdir(parents=True, exist_ok=True)
    name = record_file_name(data)
    target, n = directory / name, 1
    while target.exists():
        target, n = directory / f"{name[:-5]}-{n}.json", n + 1
    payload = json.dumps({"format": RECORD_FORMAT, "records": [dict(data, format=RECORD_FORMAT)]}, indent=1)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target

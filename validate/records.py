"""Validation records: what a GPU measured, kept as JSON beside the code. No torch needed to read them.

A record holds one implementation at one shape: the measured peaks (or an out-of-memory), the
device, driver and library versions, and the protocol. ``published`` records hold figures taken
from a document (the KDA memory report), with the document cited; the project's own measurements
have ``origin == "measured"``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from livebytes.estimator.shapes import Shape

RECORDS_DIR = Path(__file__).parent / "records"


@dataclass(frozen=True)
class Record:
    path: Path
    data: dict

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
    def gpu(self) -> str:
        """Preset name of the device the record was taken on (H200, B300...)."""
        return self.data.get("device", {}).get("preset", "")

    @property
    def protocol(self) -> str:
        return self.data.get("protocol", {}).get("name", "") if isinstance(self.data.get("protocol"), dict) else ""

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


def load_records(directory: Path = RECORDS_DIR) -> list[Record]:
    records = []
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        items = data if isinstance(data, list) else data.get("records", [data])
        for item in items:
            if "impl" in item:
                records.append(Record(path, item))
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
    return sorted(records, key=lambda r: (not r.oom, not r.history_dependent, r.protocol, r.mode == "fresh-process",
                                          r.origin == "measured"))[-1]

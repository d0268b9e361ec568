"""GPU presets: every fact a model, the process-memory model or planning asks of a GPU (architecture, SM count, shared
memory per block, resident threads per SM, total memory and whose figure it is, whose process-memory data it takes).
The presets are a table, estimator/data/devices.json, one row a card; every figure there says where it comes from,
and no other file names a card or holds its figures: a model asks the ``Device`` (``device.capability == (9, 0)``,
``device.shared_memory_per_block_optin``), never its name."""
from __future__ import annotations

import json
import re
from dataclasses import KW_ONLY, dataclass, fields
from pathlib import Path

from .errors import LivebytesError
from .fields import show

MiB = 2**20
GiB = 2**30
TiB = 2**40
GB = 10**9
TB = 10**12


# What a preset's capacity_bytes is, as the output says it: estimator/data/devices.json's capacity_kind
CAPACITY_KINDS = {"measured": "measured on our GPU", "reported": "public report, not measured by us",
                  "datasheet": "datasheet estimate, not measured"}


@dataclass(frozen=True)
class Device:
    name: str
    arch: str                 # the compute capability as smXY: "sm90" (Hopper), "sm100" (Blackwell)
    sm_count: int             # multiProcessorCount
    capacity_bytes: int       # total device memory as CUDA reports it (total_memory), or a datasheet estimate
    capacity_source: str      # what a process holds outside PyTorch is estimator/data/process_memory.json's
    capacity_kind: str = "datasheet"   # a key of CAPACITY_KINDS: whose figure capacity_bytes is
    product_name: str = ""    # torch.cuda.get_device_name() on the card: libraries match on it ("NVIDIA H" = Hopper)
    _: KW_ONLY
    shared_memory_per_block_optin: int    # cudaDevAttrMaxSharedMemoryPerBlockOptin: Triton's max_shared_mem, fla's classes
    max_threads_per_sm: int               # maxThreadsPerMultiProcessor: resident threads (stack), ATen's reduce grid
    process_memory: str                   # the process_memory.json device whose figures this one takes (itself if measured)

    @property
    def capacity_measured(self) -> bool:
        """capacity_bytes measured on our own GPU (else a public report or a datasheet estimate)."""
        return self.capacity_kind == "measured"

    @property
    def blackwell(self) -> bool:
        return self.capability[0] == 10

    @property
    def capability(self) -> tuple[int, int]:
        """(major, minor) of the compute capability: "sm90" -> (9, 0)."""
        return capability_of(self.arch)

    @property
    def process_memory_assumed_from(self) -> str | None:
        """The device whose process-memory figures stand in for this one's (None: its own, measured on it)."""
        return None if self.process_memory == self.name else self.process_memory


# Read only by the verdict (the device's memory and whose process-memory data it takes), never by a model's build
VERDICT_FIELDS = ("name", "capacity_bytes", "capacity_source", "capacity_kind", "process_memory")


def build_facts(device: Device) -> tuple:
    """What building a lifetime model reads of ``device``: every field but the verdict's (``VERDICT_FIELDS``), and of
    the product name only fla's ``'NVIDIA H'`` test (``tracer.target.trace_facts``). Two devices with the same facts
    build the same model but for its ``device`` name (tests/test_shared_models.py): the compiled-model cache keys on
    these (``registry.get_compiled``), so the H100 answers from the H200's entry. A field added to ``Device`` is a
    build fact until it is named a verdict field."""
    named = {f.name: getattr(device, f.name) for f in fields(device) if f.name not in VERDICT_FIELDS}
    named["product_name"] = "NVIDIA H" in device.product_name
    return tuple(sorted(named.items()))


def capability_of(arch: str) -> tuple[int, int]:
    """(major, minor) of an smXY architecture: "sm90" -> (9, 0), "sm100" -> (10, 0) (the last digit is the minor)."""
    digits = arch.removeprefix("sm")
    return int(digits[:-1]), int(digits[-1])


PRESETS_FILE = Path(__file__).parent / "data" / "devices.json"


def preset(entry: dict) -> Device:
    """One row of devices.json as a Device; its source starts with what kind of figure it is (CAPACITY_KINDS), so a
    datasheet estimate reads as one wherever the source is shown. A row without one of the facts a model asks is
    refused by name (no fact has a default: a card's limits are its own)."""
    kind = entry["capacity_kind"]
    if kind not in CAPACITY_KINDS:
        raise ValueError(f"{PRESETS_FILE.name}: {entry['name']}: capacity_kind {kind!r} is none of {', '.join(CAPACITY_KINDS)}")
    missing = [k for k in ROW_FACTS if k not in entry]
    if missing:
        raise ValueError(f"{PRESETS_FILE.name}: {entry['name']}: no {', '.join(missing)} (every row states {', '.join(ROW_FACTS)})")
    return Device(entry["name"], entry["arch"], int(entry["sm_count"]), int(entry["capacity_bytes"]),
                  f"{CAPACITY_KINDS[kind]}: {entry['capacity_source']}", kind, entry.get("product_name", ""),
                  shared_memory_per_block_optin=int(entry["shared_memory_per_block_optin"]),
                  max_threads_per_sm=int(entry["max_threads_per_sm"]), process_memory=entry["process_memory"])


# what every row of devices.json states besides its name and total (preset refuses a row without one)
ROW_FACTS = ("arch", "sm_count", "shared_memory_per_block_optin", "max_threads_per_sm", "limits_source", "process_memory")


# The H200 row is our own measurement (validate/data/records/h200_device.json, written by
# `python -m livebytes.validate.gpu.runner --probe-device` on 2026-11-29, driver 580.159.04, torch 2.11.0+cu130);
# the others are public reports, each row naming its address and the figure it quotes.
DEVICES: dict[str, Device] = {d.name.upper(): d for d in map(preset, json.loads(PRESETS_FILE.read_text())["presets"])}


def preset_of(product_name: str | None) -> str | None:
    """The preset name (``H200``) of a GPU's product name as torch reports it (``NVIDIA H200``, ``NVIDIA B300 SXM6 AC``):
    the preset whose product name it is, exactly (case and outer spaces aside); None for a GPU no preset describes,
    another product of the same chip among them (``NVIDIA H100 PCIe`` is not the H100 SXM row: other SMs and memory)."""
    text = (product_name or "").strip().upper()
    return next((d.name for d in DEVICES.values() if text and d.product_name.upper() == text), None)


def preset_names() -> str:
    """The presets as a user writes them, in the table's order: ``H200, H100, B200 or B300``."""
    names = [d.name for d in DEVICES.values()]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def get_device(name: str) -> Device:
    try:
        return DEVICES[name.strip().upper()]
    except KeyError:
        raise LivebytesError(f"unknown GPU {name!r}; presets: {', '.join(d.name for d in DEVICES.values())}") from None


# longest suffix first: "TIB" and "TB" must be tried before "B"
MEMORY_UNITS = {"TIB": TiB, "GIB": GiB, "MIB": 2**20, "KIB": 2**10, "TB": TB, "GB": GB, "MB": 10**6, "KB": 10**3, "B": 1}


UNIT_NAMES = ("TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "KB", "B")     # MEMORY_UNITS as a user writes them
_NUMBER_THEN_UNIT = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*)")


def _number_and_unit(text: str) -> tuple[str, str]:
    """``80GiB`` -> (``80``, ``GiB``), ``80XB`` -> (``80``, ``XB``); a text that does not start with a number keeps a
    known unit at its end (``lotsGiB`` -> (``lots``, ``GiB``), ``infGiB`` -> (``inf``, ``GiB``)); the unit as written,
    empty when none."""
    t = text.strip()
    m = _NUMBER_THEN_UNIT.fullmatch(t)
    if m:
        return m.group(1), m.group(2).strip()
    unit = next((u for u in MEMORY_UNITS if t.upper().endswith(u)), "")
    return t[: len(t) - len(unit)].strip(), t[len(t) - len(unit):]


def parse_budget(text: str) -> int:
    """``80GiB``, ``141GB``, ``512MiB``, ``2TiB``, ``1TB`` or ``1000B``. A number without a unit is refused: ``80`` could
    mean 80 bytes or 80 GiB, and a memory size read the wrong way is a silent wrong answer. Each refusal names what
    is wrong: no unit (``80``), a unit that is none of ``UNIT_NAMES`` (``80XB``), or no number (``lotsGiB``)."""
    number, unit = _number_and_unit(text)
    if not unit:
        raise LivebytesError(f"memory size {show(text)} needs a unit: 80GiB, 141GB, 512MiB, 2TiB, 1TB or 1000B")
    if unit.upper() not in MEMORY_UNITS:
        raise LivebytesError(f"memory size {show(text)}: unknown unit {show(unit)}; the units are {', '.join(UNIT_NAMES)}")
    try:
        value = float(number)
    except ValueError:
        what = f"{show(number)} is not a number" if number else "no number before the unit"
        raise LivebytesError(f"memory size {show(text)}: {what}; e.g. 80GiB") from None
    scale = MEMORY_UNITS[unit.upper()]
    if not value > 0 or value * scale >= 2**63:
        raise LivebytesError(f"memory size must be positive and finite, got {show(text)}")
    return int(value * scale)

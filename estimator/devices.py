"""GPU presets: what a model needs from the device (SM count, architecture) and what planning needs
(capacity and what PyTorch can actually allocate). The presets are a table, estimator/data/devices.json; every
figure there says where it comes from."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import LivebytesError
from .fields import show

MiB = 2**20
GiB = 2**30
TiB = 2**40
GB = 10**9
TB = 10**12


# cudaDeviceProp.maxThreadsPerMultiProcessor of compute capability 9.0 and 10.0, every device here (CUDA C++
# Programming Guide, 'Features and Technical Specifications'; the B300, compute capability 10.3, reports the same:
# devices.json's B300 source): resident threads, and ATen's reduce grid target
MAX_THREADS_PER_SM = 2048


# cudaDevAttrMaxSharedMemoryPerBlockOptin (CUDA C++ Programming Guide, "Technical Specifications per Compute
# Capability"): 227 KB on compute capability 9.0 and 10.0
SHARED_MEMORY_OPTIN = {"sm90": 232_448, "sm100": 232_448}


# What a preset's capacity_bytes is, as the output says it: estimator/data/devices.json's capacity_kind
CAPACITY_KINDS = {"measured": "measured on our GPU", "reported": "public report, not measured by us",
                  "datasheet": "datasheet estimate, not measured"}


@dataclass(frozen=True)
class Device:
    name: str
    arch: str                 # "sm90" (Hopper) or "sm100" (Blackwell)
    sm_count: int
    capacity_bytes: int       # total device memory as CUDA reports it (total_memory), or a datasheet estimate
    capacity_source: str      # what a process holds outside PyTorch is estimator/data/process_memory.json's
    capacity_kind: str = "datasheet"   # a key of CAPACITY_KINDS: whose figure capacity_bytes is
    product_name: str = ""    # torch.cuda.get_device_name() on the card: libraries match on it ("NVIDIA H" = Hopper)

    @property
    def capacity_measured(self) -> bool:
        """capacity_bytes measured on our own GPU (else a public report or a datasheet estimate)."""
        return self.capacity_kind == "measured"

    @property
    def blackwell(self) -> bool:
        return self.arch.startswith("sm10")

    @property
    def capability(self) -> tuple[int, int]:
        """(major, minor) of the compute capability: "sm90" -> (9, 0)."""
        digits = self.arch.removeprefix("sm")
        return int(digits[:-1]), int(digits[-1])

    @property
    def shared_memory_per_block_optin(self) -> int:
        return SHARED_MEMORY_OPTIN[self.arch]


PRESETS_FILE = Path(__file__).parent / "data" / "devices.json"


def preset(entry: dict) -> Device:
    """One row of devices.json as a Device; its source starts with what kind of figure it is (CAPACITY_KINDS), so a
    datasheet estimate reads as one wherever the source is shown."""
    kind = entry["capacity_kind"]
    if kind not in CAPACITY_KINDS:
        raise ValueError(f"{PRESETS_FILE.name}: {entry['name']}: capacity_kind {kind!r} is none of {', '.join(CAPACITY_KINDS)}")
    return Device(entry["name"], entry["arch"], int(entry["sm_count"]), int(entry["capacity_bytes"]),
                  f"{CAPACITY_KINDS[kind]}: {entry['capacity_source']}", kind, entry.get("product_name", ""))


# The H200 row is our own measurement (validate/records/h200_device.json, written by
# `python -m livebytes.validate.runner --probe-device` on 2026-11-29, driver 580.159.04, torch 2.11.0+cu130);
# the others are public reports, each row naming its address and the figure it quotes.
DEVICES: dict[str, Device] = {d.name.upper(): d for d in map(preset, json.loads(PRESETS_FILE.read_text())["presets"])}
H200 = DEVICES["H200"]


def preset_of(product_name: str | None) -> str | None:
    """The preset name (``H200``) of a GPU's product name as torch reports it (``NVIDIA H200``, ``NVIDIA B300 SXM6 AC``):
    the preset whose product name it is, else the one whose name it contains; None for a GPU no preset describes."""
    text = (product_name or "").strip().upper()
    for d in DEVICES.values():
        if d.product_name and d.product_name.upper() == text:
            return d.name
    return next((d.name for d in DEVICES.values() if text and d.name.upper() in text.split()), None)


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

"""GPU presets: what a model needs from the device (SM count, architecture) and what planning needs
(capacity and what PyTorch can actually allocate). Every figure says where it comes from."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import LivebytesError
from .fields import show

MiB = 2**20
GiB = 2**30
TiB = 2**40
GB = 10**9
TB = 10**12


# cudaDeviceProp.maxThreadsPerMultiProcessor of compute capability 9.0 and 10.0, every device here (CUDA C++
# Programming Guide, 'Features and Technical Specifications'): resident threads, and ATen's reduce grid target
MAX_THREADS_PER_SM = 2048


# cudaDevAttrMaxSharedMemoryPerBlockOptin (CUDA C++ Programming Guide, "Technical Specifications per Compute
# Capability"): 227 KB on compute capability 9.0 and 10.0
SHARED_MEMORY_OPTIN = {"sm90": 232_448, "sm100": 232_448}


@dataclass(frozen=True)
class Device:
    name: str
    arch: str                 # "sm90" (Hopper) or "sm100" (Blackwell)
    sm_count: int
    capacity_bytes: int       # total device memory as the driver reports it, or the datasheet figure
    capacity_source: str      # what a process holds outside PyTorch is estimator/data/process_memory.json's
    capacity_measured: bool = False   # capacity_bytes measured on our own GPU (else a datasheet or announced figure)
    product_name: str = ""    # torch.cuda.get_device_name() on the card: libraries match on it ("NVIDIA H" = Hopper)

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


# The H200 figures are our own measurement (validate/records/h200_device.json, written by
# `python -m livebytes.validate.runner --probe-device` on 2026-11-29, driver 580.159.04, torch 2.11.0+cu130).
H200 = Device(
    "H200", "sm90", 132, 150_109_880_320,
    "torch.cuda.get_device_properties(0).total_memory on our H200 (validate/records/h200_device.json)",
    capacity_measured=True, product_name="NVIDIA H200",
)

DEVICES: dict[str, Device] = {d.name.upper(): d for d in (
    H200,
    Device("H100", "sm90", 132, 80 * GB, "NVIDIA H100 SXM5 datasheet: 80 GB HBM3 (not measured here)",
           product_name="NVIDIA H100 80GB HBM3"),
    Device("B200", "sm100", 148, 180 * GB, "NVIDIA HGX B200 datasheet: 180 GB HBM3e per GPU, 148 SMs (not measured here)",
           product_name="NVIDIA B200"),
    Device("B300", "sm100", 160, 288 * GB,
           "NVIDIA Blackwell Ultra announcement: 288 GB HBM3e, 160 SMs (as reported; not measured here)",
           product_name="NVIDIA B300"),   # name not checked against a card: fla matches sm100 by capability
)}


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

"""What the CUDA driver does with a process's stack limit, and where the committed process data lie: the rules
``process.memory`` and the leave-one-out figures (``process.loo``) both apply."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..devices import Device

DATA = Path(__file__).parents[1] / "data"      # estimator/data
DEFAULT_STACK_LIMIT = 1024      # cudaLimitStackSize after CUDA init on the H200 (every probe's 'context' stage)
PAGE = 2 * 1024 * 1024          # the driver maps the reservation in 2 MiB pages (resetting the limit freed the product + 1 MiB)
def driver_stack_limit(frame_bytes: int) -> int:
    """The limit the driver sets for a kernel with this per-thread stack frame: the frame rounded up to 16 bytes, never
    below the default. Measured: 14,456 -> 14,464, 18,584 -> 18,592, 18,104 -> 18,112, 1,224 -> 1,232 (1,232 is no
    multiple of 32), 14,392 -> 14,400, 14,904 -> 14,912."""
    return max(DEFAULT_STACK_LIMIT, -(-frame_bytes // 16) * 16)


def resident_threads(device: Device) -> int:
    """Threads that can be resident at once: SMs x the device's maxThreadsPerMultiProcessor; 132 x 2,048 = 270,336 on
    the H200."""
    return device.sm_count * device.max_threads_per_sm


def _pages(nbytes: int) -> int:
    return -(-nbytes // PAGE) * PAGE


def stack_reservation_bytes(limit: int, device: Device) -> int:
    """Local memory held beyond the context's own (the default limit's, part of the context figure): each limit's
    reservation in whole 2 MiB pages. Measured: resetting 14,464 B to 1,024 B freed 3,634,364,416 B = the product
    3,633,315,840 B rounded to pages."""
    threads = resident_threads(device)
    return _pages(limit * threads) - _pages(DEFAULT_STACK_LIMIT * threads)


@lru_cache(maxsize=None)
def data_json(path: Path) -> dict:
    return json.loads(path.read_text())


def device_entry(device: Device) -> dict:
    """process_memory.json's entry whose figures ``device`` takes (``Device.process_memory``: its own where measured on
    it, else its stand-in's; ``Device.process_memory_assumed_from`` names the stand-in)."""
    return data_json(DATA / "process_memory.json")["devices"][device.process_memory]


def data_files(device: Device) -> list[tuple[str, dict]]:
    """(file name, data) of every Triton library's process data whose figures ``device`` takes."""
    libs = device_entry(device)["libraries"]
    return [(lib["data"], data_json(DATA / lib["data"])) for lib in libs if "data" in lib]

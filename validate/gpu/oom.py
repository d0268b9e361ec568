"""An out-of-memory as a result: the failing request, the allocator's and the device's figures at that moment.

``CUDACachingAllocator.cpp`` (``DeviceCachingAllocator::malloc``), when no block is found and cudaMalloc
fails: it calls every observer attached with ``torch._C._cuda_attach_out_of_memory_observer`` as
``obs(device, alloc_size, set_fraction ? allowed_memory_maximum : device_total, device_free)`` and then
raises ``"CUDA out of memory. Tried to allocate " + format_size(alloc_size) + ...``. ``alloc_size`` is the
size of the segment it tried to create (``get_allocation_size(round_size(request))``), so the observer
gives it to the byte and the message to two decimals of its unit. Pure Python: the runner feeds it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_TRIED = re.compile(r"Tried to allocate ([0-9.]+) (bytes|KiB|MiB|GiB|TiB)")
OOM_STEPS = ("inputs", "target-warmup", "measured")


def first_line(message: str) -> str:
    """The whole first line of the error message (PyTorch puts every figure on it)."""
    return message.strip().splitlines()[0] if message.strip() else ""


def tried_bytes_from_message(message: str) -> int | None:
    """``Tried to allocate 2.00 GiB`` -> 2147483648 (the message's rounding: exact only to 0.005 of the unit)."""
    match = _TRIED.search(message)
    return round(float(match.group(1)) * _UNITS[match.group(2)]) if match else None


@dataclass
class OomObserver:
    """Attach with ``torch._C._cuda_attach_out_of_memory_observer(observer)``; keeps the last call."""
    calls: list = field(default_factory=list)

    def __call__(self, device: int, alloc_size: int, device_total: int, device_free: int) -> None:
        self.calls.append({"device": device, "alloc_bytes": int(alloc_size), "total_bytes": int(device_total),
                           "free_bytes": int(device_free)})

    @property
    def last(self) -> dict | None:
        return self.calls[-1] if self.calls else None


def oom_figures(message: str, observed: dict | None, allocated: int, reserved: int, free: int, total: int) -> dict:
    """The record's ``oom_figures``: ``tried_bytes`` from the observer (exact) or else the message,
    ``allocated_bytes``/``reserved_bytes`` (memory_stats current at the OOM), ``free_bytes``/``total_bytes``
    (mem_get_info), and where ``tried_bytes`` came from."""
    tried = observed["alloc_bytes"] if observed else tried_bytes_from_message(message)
    return {"tried_bytes": tried, "tried_bytes_source": "observer" if observed else "message",
            "allocated_bytes": int(allocated), "reserved_bytes": int(reserved), "free_bytes": int(free),
            "total_bytes": int(total)}

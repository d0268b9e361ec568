"""The machine a record was measured on: torch (imported lazily), the device, library versions, the
allocator configuration (set before torch is imported) and the device probe."""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path
import subprocess
from importlib.metadata import PackageNotFoundError, version

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.devices import preset_of

DEFAULT_ALLOC_CONF = "expandable_segments:False"


def _torch():
    import torch  # deferred: torch is not in the core install (model/validate extras)
    return torch


def cuda_available() -> bool:
    try:
        return _torch().cuda.is_available()
    except (ImportError, RuntimeError):
        return False


def environment() -> dict:
    torch = _torch()
    props = torch.cuda.get_device_properties(0)
    env = {
        "device": {"name": props.name, "total_memory": props.total_memory, "sm_count": props.multi_processor_count,
                   "capability": f"sm{props.major}{props.minor}", "preset": _preset(props.name)},
        "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
    }
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       check=False, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        env["driver"] = "unknown"
    for mod, key in (("triton", "triton"), ("fla", "fla"), ("cudnn", "cudnn_frontend")):
        try:
            env[key] = __import__(mod).__version__
        except (ImportError, AttributeError, RuntimeError):
            env[key] = None
    return env


def _preset(name: str) -> str:
    """The preset whose product name the GPU reports, exactly (``devices.preset_of``); else the reported name."""
    return preset_of(name) or name


def library_versions() -> dict:
    """fla and Triton versions from the installed distributions (no import: their caches read the
    environment at import time)."""
    out = {}
    for key, dist in (("fla", "fla-core"), ("triton", "triton")):
        try:
            out[key] = version(dist)
        except PackageNotFoundError:
            out[key] = "none"
    return out


def apply_alloc_conf(conf: str, environ=os.environ, modules=sys.modules) -> None:
    """Set PYTORCH_CUDA_ALLOC_CONF; the allocator reads it once, when torch is imported, so it must come first."""
    if "torch" in modules and environ.get("PYTORCH_CUDA_ALLOC_CONF", "") != conf:
        raise LivebytesError(f"--alloc-conf {conf!r}: torch is already imported with "
                             f"{environ.get('PYTORCH_CUDA_ALLOC_CONF', '')!r}; run the runner as its own process")
    environ["PYTORCH_CUDA_ALLOC_CONF"] = conf


def probe_device(path: Path) -> dict:
    """What PyTorch can allocate on this device: total, free after context creation, largest single block."""
    torch = _torch()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    free, total = torch.cuda.mem_get_info()
    lo, hi = 0, free
    while hi - lo > 64 * 2**20:        # bisect the largest torch.empty that succeeds (64 MiB resolution)
        mid = (lo + hi) // 2
        try:
            t = torch.empty(mid, dtype=torch.uint8, device="cuda")
            del t
            torch.cuda.empty_cache()
            lo = mid
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            hi = mid
    info = {"probe": "device", **environment(), "mem_get_info_after_init": {"free": free, "total": total},
            "outside_pytorch_bytes": total - free, "largest_single_allocation_bytes": lo,
            "resolution_bytes": 64 * 2**20,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    path.write_text(json.dumps(info, indent=1))
    return info

"""Triton's autotune cache as a record's state: a fresh TRITON_CACHE_DIR per process (cold), or one filled
from the committed autotune file (warm); what the process tuned; the capture of its tuned configs."""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
import gc

from livebytes.estimator.errors import LivebytesError

from . import autotune
from .environment import _torch, environment, library_versions


@dataclass(frozen=True)
class TritonCache:
    """The cache a runner process starts with: requested mode (cold or warm), its folder, the kernels installed."""
    requested: str
    triton_dir: Path
    installed: set = field(default_factory=set)


def prepare_triton(mode: str, out: Path, cache_file: str | None) -> TritonCache:
    """A fresh TRITON_CACHE_DIR (and FLA config folder), filled from the committed autotune file when warm."""
    gpu = _torch().cuda.get_device_name(0)
    versions = library_versions()
    path = Path(cache_file) if cache_file else autotune.find_cache(gpu, versions["fla"], versions["triton"])
    if mode == "auto":
        mode = "warm" if path else "cold"
    if mode == "warm" and (path is None or not path.exists()):
        raise LivebytesError(f"--triton-cache warm: no autotune file for {gpu}, fla {versions['fla']}, triton "
                             f"{versions['triton']} ({autotune.cache_file_name(gpu, versions['fla'], versions['triton'])}); "
                             "capture one with --triton-cache cold --autotune-capture")
    root = Path(tempfile.mkdtemp(prefix=f"livebytes-triton-{mode}-"))
    triton_dir, fla_dir = root / "triton", root / "fla-configs"
    triton_dir.mkdir()
    installed = autotune.install(json.loads(path.read_text()), triton_dir, fla_dir) if mode == "warm" else set()
    os.environ.update(autotune.environment(mode, triton_dir, fla_dir))
    return TritonCache(mode, triton_dir, installed)


def triton_state(ctx) -> dict:
    """``triton_cache`` as it was: "cold" whenever a kernel benchmarked its configs in this process
    (``ctx``: the run's ``triton_dir``, ``installed`` and requested ``triton_cache``)."""
    if ctx.triton_dir is None:
        return {"triton_cache": "n/a"}
    tuned = autotune.autotuned_kernels(ctx.triton_dir, ctx.installed)
    return {"triton_cache": "cold" if tuned else "warm", "triton_cache_requested": ctx.triton_cache,
            "autotuned_kernels": tuned}


def write_capture(ctx, out: Path) -> Path:

    from triton.runtime.autotuner import Autotuner  # deferred: triton is not in the core install (model/validate extras)
    tuners = [(getattr(o, "kernel_name", None) or o.base_fn.__name__, dict(o.cache))
              for o in gc.get_objects() if isinstance(o, Autotuner)]
    env = environment()
    versions = {"gpu": env["device"]["name"], "fla": env["fla"], "triton": env["triton"], "torch": env["torch"]}
    path = out / "autotune" / f"{autotune.cache_file_name(versions['gpu'], versions['fla'], versions['triton'])[:-5]}.{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as fh:     # replaced whole after every shape: a process killed later keeps this one
        fh.write(json.dumps(autotune.capture(ctx.triton_dir, tuners, versions), indent=1))
    os.replace(tmp, path)
    return path

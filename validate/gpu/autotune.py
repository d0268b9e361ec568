"""Autotune once, reuse: the configurations FLA's Triton kernels chose, kept in a committed, versioned file.

How fla-core 0.6.0 autotunes (read from the wheel):
- its KDA kernels are decorated with ``fla_cache_autotune`` (``fla/ops/utils/cache.py``), a
  ``triton.runtime.autotuner.Autotuner`` subclass (``CachedAutotuner``) that first looks the kernel up in
  ``$FLA_CONFIG_DIR/<kernel>.json`` when ``FLA_CACHE_MODE`` is not ``disabled`` (the default), keyed by
  the md5 of the JSON autotune key (``AutotuneKey.key_hash``); ``strict`` takes exact keys only;
- every autotuner gets ``cache_results=FLA_CACHE_RESULTS`` (``fla/utils/env.py``, default on), so
  Triton 3.6 (``Autotuner.check_disk_cache``, ``triton/runtime/autotuner.py``) writes each tuning as
  ``$TRITON_CACHE_DIR/<base32 key>/<kernel>.autotune.json`` (timings of every config) and, when that file
  exists, takes the best config from it without benchmarking. The key hashes the Triton build, the
  backend (GPU target, ptxas), the kernel's source, Triton's cache-invalidating environment, the tuning
  key and the configs: nothing machine-local, so the same versions on the same GPU model find it.

The committed file (``validate/data/autotune_configs/<gpu>_fla-<v>_triton-<v>.json``) holds both: Triton's
``*.autotune.json`` files by relative path, and FLA's config entries built from the in-process
autotuners. ``--triton-cache warm`` installs them into a fresh ``TRITON_CACHE_DIR`` and an FLA config
folder (``FLA_CACHE_MODE=strict``); ``cold`` starts from an empty ``TRITON_CACHE_DIR`` and autotunes in
the process. Either way a kernel that benchmarked in the process leaves a new ``*.autotune.json``:
``autotuned_kernels`` lists them, and a record with any says ``triton_cache: "cold"``.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from pathlib import Path
import argparse
import sys

AUTOTUNE_DIR = Path(__file__).parents[1] / "data" / "autotune_configs"
CACHE_FORMAT = 1
SUFFIX = ".autotune.json"


def sanitize(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z.]+", "_", text).strip("_") or "unknown"


def cache_file_name(gpu_name: str, fla: str, triton: str) -> str:
    """``NVIDIA_H200_fla-0.6.0_triton-3.6.0.json``: one file per (GPU model, fla, Triton)."""
    return f"{sanitize(gpu_name)}_fla-{sanitize(fla)}_triton-{sanitize(triton)}.json"


def fla_key_hash(key) -> str:
    """FLA's entry name for an autotune key: md5 of its JSON (tuples as lists, sorted keys, no spaces),
    as ``AutotuneKey.key_hash`` in fla/ops/utils/cache.py computes it."""
    def norm(v):
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        return {k: norm(x) for k, x in v.items()} if isinstance(v, dict) else v
    return hashlib.md5(json.dumps(norm(key), separators=(",", ":"), sort_keys=True).encode()).hexdigest()


def config_dict(config) -> dict:
    """A ``triton.Config`` as FLA's config files hold it (``CachedAutotuner.maybe_load_cached_config``)."""
    return {"kwargs": dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages,
            "num_ctas": getattr(config, "num_ctas", 1), "maxnreg": getattr(config, "maxnreg", None),
            "ir_override": getattr(config, "ir_override", None)}


def fla_configs(autotuners) -> dict:
    """{kernel name: FLA config file} from ``(kernel name, Autotuner.cache)`` pairs (key tuple -> Config)."""
    out: dict = {}
    for name, cache in autotuners:
        entries = out.setdefault(name, {"kernel_name": name, "autotune_entries": {}})["autotune_entries"]
        for key, config in cache.items():
            entries[fla_key_hash(list(key))] = {"autotune_key": list(key), "config": config_dict(config)}
    return {k: v for k, v in out.items() if v["autotune_entries"]}


def triton_files(cache_dir: Path) -> dict:
    """Every ``*.autotune.json`` under a Triton cache folder, by path relative to it."""
    return {str(p.relative_to(cache_dir)): json.loads(p.read_text()) for p in sorted(cache_dir.rglob(f"*{SUFFIX}"))}


def capture(cache_dir: Path, autotuners, versions: dict) -> dict:
    """The committed file's content after a cold run: versions, Triton's tuning files, FLA's entries."""
    return {"format": CACHE_FORMAT, **versions, "captured": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "triton_files": triton_files(cache_dir), "fla_configs": fla_configs(autotuners)}


def install(cache: dict, triton_dir: Path, fla_dir: Path) -> set[str]:
    """Write a captured cache into a (fresh) Triton cache folder and an FLA config folder; the Triton
    paths written, to tell later which kernels tuned in the process."""
    for rel, content in cache.get("triton_files", {}).items():
        path = triton_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    fla_dir.mkdir(parents=True, exist_ok=True)
    for name, content in cache.get("fla_configs", {}).items():
        (fla_dir / f"{name}.json").write_text(json.dumps(content))
    return set(cache.get("triton_files", {}))


def autotuned_kernels(triton_dir: Path, installed: set[str]) -> list[str]:
    """Kernels that benchmarked their configs in this process: tuning files that were not installed."""
    return sorted(Path(rel).name[:-len(SUFFIX)] for rel in triton_files(triton_dir) if rel not in installed)


def environment(mode: str, triton_dir: Path, fla_dir: Path) -> dict[str, str]:
    """Variables to set before triton and fla are imported: a fresh Triton cache folder, tuning results
    written to it, FLA's config lookup on (warm) or off (cold)."""
    env = {"TRITON_CACHE_DIR": str(triton_dir), "TRITON_CACHE_AUTOTUNING": "1", "FLA_CACHE_RESULTS": "1"}
    if mode == "warm":
        env.update(FLA_CACHE_MODE="strict", FLA_CONFIG_DIR=str(fla_dir))
    else:
        env["FLA_CACHE_MODE"] = "disabled"
    return env


def find_cache(gpu_name: str, fla: str, triton: str, directory: Path = AUTOTUNE_DIR) -> Path | None:
    path = directory / cache_file_name(gpu_name, fla, triton)
    return path if path.exists() else None


def merge(captures: list[dict]) -> dict:
    """One file from the captures of several cold processes (same GPU, fla and Triton; a key tuned twice
    keeps the first capture's config)."""
    keys = {(c.get("gpu"), c.get("fla"), c.get("triton")) for c in captures}
    if len(keys) != 1:
        raise ValueError(f"captures of different GPUs or versions: {sorted(map(str, keys))}")
    out = {**captures[0], "triton_files": {}, "fla_configs": {}}
    for c in captures:
        out["triton_files"] = {**c["triton_files"], **out["triton_files"]}
        for name, entry in c["fla_configs"].items():
            have = out["fla_configs"].setdefault(name, {"kernel_name": name, "autotune_entries": {}})
            have["autotune_entries"] = {**entry["autotune_entries"], **have["autotune_entries"]}
    return out


def main(argv=None) -> int:
    """``python -m livebytes.validate.gpu.autotune OUT/autotune/*.json``: merge captures into the committed file."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--into", default=str(AUTOTUNE_DIR))
    args = ap.parse_args(argv)
    try:
        captures = [json.loads(Path(p).read_text()) for p in args.captures]
        path = Path(args.into) / cache_file_name(captures[0]["gpu"], captures[0]["fla"], captures[0]["triton"])
        committed = [json.loads(path.read_text())] if path.exists() else []   # merged into, never replaced
        merged = merge(committed + captures)
    except (ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=1))
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

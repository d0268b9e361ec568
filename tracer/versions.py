"""The library versions a trace depends on (recorded in every trace; the traced models' cache keys on them)."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

TRACED_DISTRIBUTIONS = ("torch", "triton", "fla-core", "flash-linear-attention", "transformers")


def installed_versions() -> dict:
    """Distribution -> installed version (None: not installed), read from the metadata (nothing imported)."""
    out = {}
    for dist in TRACED_DISTRIBUTIONS:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def liger_version() -> str | None:
    """liger-kernel's installed version (None: not installed): a trace of ``--loss liger`` depends on it too."""
    try:
        return version("liger-kernel")
    except PackageNotFoundError:
        return None

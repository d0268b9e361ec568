"""One GPU, one measurement at a time: processes sharing a device take this lock around their measured
steps (their memory would add up)."""
from __future__ import annotations

import contextlib
import fcntl
import os

LOCK_PATH = os.environ.get("LIVEBYTES_GPU_LOCK", "/tmp/livebytes-gpu.lock")


@contextlib.contextmanager
def gpu_lock():
    """Serialise measurements of processes sharing one GPU (their memory would add up)."""
    with open(LOCK_PATH, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

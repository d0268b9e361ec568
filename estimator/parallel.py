"""Independent verdicts in parallel: batches of ``fn(v)`` evaluated by forked workers, started once per search (each
inherits the model, the allocator and ``fn`` itself, so nothing but the values and the booleans crosses a pipe). Where
the platform does not fork (``fork`` is POSIX-only; macOS's default is ``spawn``, under which a closure cannot travel)
or one worker is asked for, batches run in this process. Results never depend on the worker count, only wall time."""
from __future__ import annotations

import gc
import multiprocessing as mp
import os

_FN = None      # the function the forked workers run: set before the fork, inherited


def worker_count() -> int:
    """The CPUs this process may run on (``sched_getaffinity``: a container's limit, not the host's), at most 8;
    ``LIVEBYTES_WORKERS`` overrides it (1: no worker processes)."""
    given = os.environ.get("LIVEBYTES_WORKERS", "").strip()
    if given.isdigit() and int(given) >= 1:
        return int(given)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cpus))


def _call(v):
    return _FN(v)


class Evaluator:
    """``map(values)`` = ``[fn(v) for v in values]``, ``workers`` at a time; the workers fork at the first batch of two
    or more and stop at ``close`` (a context manager)."""

    def __init__(self, fn, workers: int):
        self.fn, self.workers, self._pool = fn, workers, None

    def map(self, values: list) -> list:
        if self.workers <= 1 or len(values) <= 1 or "fork" not in mp.get_all_start_methods():
            return [self.fn(v) for v in values]
        if self._pool is None:
            global _FN
            _FN = self.fn
            gc.freeze()     # the workers' collector then leaves the inherited heap alone (no copy-on-write of every page)
            self._pool = mp.get_context("fork").Pool(self.workers)
            gc.unfreeze()
        return self._pool.map(_call, values, chunksize=1)

    def close(self) -> None:
        global _FN
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool, _FN = None, None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""Independent verdicts in parallel: batches of ``fn(v)`` evaluated by forked workers, started once per search (each
inherits the model, the allocator and ``fn`` itself, so nothing but the values and the booleans crosses a pipe). Only
on Linux, outside a daemonic process (a pool's own worker cannot have children): elsewhere, or with one worker, batches
run in this process (macOS lists ``fork`` but makes ``spawn`` its default: forking after its system libraries load is
unsafe there). Results never depend on the worker count, only wall time."""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
import signal

from .errors import LivebytesError

_FN = None      # the function a forked worker runs: set in the worker as it starts (``_worker``)
MAX_WORKERS = 8


def worker_count() -> int:
    """The CPUs this process may run on (``sched_getaffinity``: the affinity mask, not a container's CPU quota), at most
    ``MAX_WORKERS``; ``LIVEBYTES_WORKERS`` overrides it (1: no worker processes)."""
    given = os.environ.get("LIVEBYTES_WORKERS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise LivebytesError(f"LIVEBYTES_WORKERS={given!r}: a whole number of worker processes, 1 or more")
        return int(given)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_WORKERS, cpus))


_IN_WORKER = False     # set in a worker as it starts: its own evaluators run in it (no pool inside a pool's worker)


def can_fork() -> bool:
    return sys.platform.startswith("linux") and not mp.current_process().daemon and not _IN_WORKER


def _call(v):
    return _FN(v)


def _worker(fn) -> None:
    """A worker's start: its function, handed over by the fork itself (``initargs`` are inherited, not pickled), and
    the mark that keeps an evaluator its function makes (a verdict's placements inside a search's worker: the pool's
    workers are not daemons) in the worker, unforked; then quiet.
    A worker leaves Ctrl-C to the parent (which stops it) and writes nowhere: the parent's stderr may be a progress
    display's stand-in whose lock another thread held at the fork."""
    global _FN, _IN_WORKER
    _FN, _IN_WORKER = fn, True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stderr = sys.stdout = open(os.devnull, "w")


class Evaluator:
    """``map(values)`` = ``[fn(v) for v in values]``, ``workers`` at a time; the workers fork at the first batch of two
    or more and stop at ``close`` (a context manager). ``workers``: the effective count (1 where it cannot fork)."""

    def __init__(self, fn, workers: int):
        self.fn, self._pool = fn, None
        self.workers = workers if can_fork() else 1

    def map(self, values: list) -> list:
        if self.workers <= 1 or len(values) <= 1:
            return [self.fn(v) for v in values]
        starting = self._pool is None
        if starting:
            self._pool = self._start()
            gc.freeze()     # the workers fork at this first map: their collector then leaves the inherited heap alone
        try:
            return list(self._pool.map(_call, values))
        except BrokenProcessPool:
            raise LivebytesError("a worker process died (out of memory?); LIVEBYTES_WORKERS=1 runs every replay in "
                                 "this process") from None
        finally:
            if starting:
                gc.unfreeze()

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=mp.get_context("fork"), initializer=_worker,
                                   initargs=(self.fn,))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

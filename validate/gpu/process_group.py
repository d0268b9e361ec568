"""Run a probe as ``subprocess.run`` does, but in a process group of its own that dies with the call.

The probes start workers of their own (``cpu_frames.py --cases`` runs each case in a ``--worker`` child;
``process_memory.py`` one process per state). ``subprocess.run`` kills only its direct child on a timeout, and nothing
when the caller is terminated, so a worker compiled on, or held the GPU, with init as its parent. Here the probe leads
a new session (``start_new_session``): on a timeout, an interrupt, an exception or SIGTERM (turned into an exception
for the call's duration, in the main thread) the whole group gets SIGTERM, then SIGKILL after ``GRACE_S``.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading

from livebytes.estimator.errors import LivebytesError

GRACE_S = 5.0       # seconds between SIGTERM and SIGKILL to the group


class Terminated(LivebytesError):
    """SIGTERM reached the caller while the probe ran (one line, like every refusal)."""


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the probe's whole group, then, after ``GRACE_S`` at most for the leader, SIGKILL to whatever of the
    group is left (workers may outlive their leader); the leader reaped."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=GRACE_S)
    kill_group_left(proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=GRACE_S)


@contextlib.contextmanager
def _sigterm_raises():
    """SIGTERM raises ``Terminated`` inside the block (main thread only: signal handlers live there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated("terminated (SIGTERM): the probe and every process it started were stopped")
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(command: list[str], *, capture_output: bool = False, text: bool = False, timeout: float | None = None,
        **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(command, capture_output=..., text=..., timeout=...)`` whose probe and every process it started
    are ended when the call ends early (``TimeoutExpired`` re-raised; ``Terminated`` or an interrupt re-raised after the
    group is killed)."""
    pipe = subprocess.PIPE if capture_output else None
    proc = subprocess.Popen(command, stdout=pipe, stderr=pipe, text=text, start_new_session=True, **kwargs)
    try:
        with _sigterm_raises():
            out, err = proc.communicate(timeout=timeout)
    except BaseException:
        kill_group(proc)
        raise
    kill_group_left(proc)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def kill_group_left(proc: subprocess.Popen) -> None:
    """After the leader exited: any worker it left behind in its group is killed (a probe that returned early)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)

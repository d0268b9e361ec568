"""validate/gpu/process_group.py: a probe and every process it started end with the call (subprocess.run killed only
its direct child on a timeout, so a worker compiled on with init as its parent)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from livebytes.validate.gpu import process_group

# a leader that starts a worker which sleeps, writes the worker's pid, then sleeps itself
LEADER = ("import subprocess, sys, time; w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
          "open(sys.argv[1], 'w').write(str(w.pid)); time.sleep(60)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:            # a zombie is dead
        return fh.read().split()[2] != "Z"


def _worker(path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the leader never started its worker")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_timeout_kills_the_worker_too(tmp_path, monkeypatch):
    monkeypatch.setattr(process_group, "GRACE_S", 1.0)
    pid_file = tmp_path / "worker"
    with pytest.raises(subprocess.TimeoutExpired):
        process_group.run([sys.executable, "-c", LEADER, str(pid_file)], capture_output=True, text=True, timeout=2)
    worker = _worker(pid_file)
    deadline = time.time() + 5
    while _alive(worker) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_sigterm_to_the_caller_kills_the_worker_and_raises(tmp_path, monkeypatch):
    """SIGTERM while the probe runs (the reviewer's `kill <livebytes pid>`): the group dies, the call raises."""
    monkeypatch.setattr(process_group, "GRACE_S", 1.0)
    pid_file = tmp_path / "worker"
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGTERM))
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with pytest.raises(process_group.Terminated):
            process_group.run([sys.executable, "-c", LEADER, str(pid_file)], capture_output=True, text=True, timeout=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    worker = _worker(pid_file)
    deadline = time.time() + 5
    while _alive(worker) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)
    assert signal.getsignal(signal.SIGTERM) == before          # the caller's own handler back


def test_a_probe_that_finishes_returns_as_subprocess_run_does():
    done = process_group.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"],
                             capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")

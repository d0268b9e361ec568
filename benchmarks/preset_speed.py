"""What a new user waits for: a fresh ``pip install '.[model]'`` and each preset's first answer (not a test: it reports
numbers; issue 48 point 5). The numbers measured are in ``benchmarks/preset_speed.md``.

    python benchmarks/preset_speed.py --venv DIR [PRESET ...]     # DIR must not exist: a fresh venv, timed install
    python benchmarks/preset_speed.py [PRESET ...]                 # this environment as it is

With ``--venv``: ``python -m venv DIR``, ``pip install TORCH`` (default torch==2.13.0, the CPU build the dev machines
carry; the model extra takes any torch >= 2.4) and ``pip install '.[model]'``, each timed, pip's cache off; the answers
then run from that venv. Per preset (default: all four): ``livebytes predict --model NAME --seq-len 8K --json`` in a
fresh process with an empty model cache (``LIVEBYTES_CACHE_DIR``: a new temporary folder: the traces, the symbolic
solve and the compile all happen), then once more warm. Target (issue 48, Done when): each cold answer within 60 s on
a 2-core machine.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRESETS = ("qwen3-next-small", "kimi-linear-small", "qwen3-next-80b-a3b", "kimi-linear-48b-a3b")
ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the command and every process it waited for). On a machine other
    work shares, the CPU seconds are the command's own; the wall time is what the user waited."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, cwd=ROOT)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-400:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def install(venv: Path, torch: str) -> Path:
    """A fresh venv with torch and the model extra; the install times printed. Its python."""
    if venv.exists():
        raise SystemExit(f"{venv} exists: --venv takes a folder to create")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = dict(os.environ, PIP_NO_CACHE_DIR="1")
    (t_torch, c_torch), (t_model, c_model) = (timed([str(python), "-m", "pip", "install", "-q", what], env)
                                              for what in (torch, ".[model]"))
    versions = subprocess.run([str(python), "-c", "from livebytes.tracer.versions import installed_versions as v; "
                               "print(', '.join(f'{k} {x}' for k, x in v().items()))"], capture_output=True, text=True)
    print(f"pip install {torch}: {t_torch:.1f} s ({c_torch:.1f} s CPU); pip install '.[model]': {t_model:.1f} s "
          f"({c_model:.1f} s CPU) ({versions.stdout.strip()})")
    return python


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", type=Path)
    parser.add_argument("--torch", default="torch==2.13.0")
    parser.add_argument("presets", nargs="*", default=list(PRESETS))
    args = parser.parse_args()
    python = install(args.venv, args.torch) if args.venv else Path(sys.executable)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    for name in args.presets:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, LIVEBYTES_CACHE_DIR=cache)
            cmd = [str(python), "-m", "livebytes.cli.app", "predict", "--model", name, "--seq-len", "8K", "--json"]
            (cold, cold_cpu), (warm, warm_cpu) = timed(cmd, env), timed(cmd, env)
            print(f"{name}: predict --seq-len 8K {cold:.1f} s cold ({cold_cpu:.1f} s CPU; empty model cache), {warm:.2f} s "
                  f"warm ({warm_cpu:.2f} s CPU) (load average {os.getloadavg()[0]:.1f} after)")


if __name__ == "__main__":
    main()

"""Wall time of the commands a user waits for, each in a fresh process (not a test: it reports numbers).

    python benchmarks/cli_speed.py            # predict (cold and warm model cache) and formula for every model

Targets (issue 12): ``predict`` <= 0.5 s from a cold process once the model is compiled (the disk cache,
estimator/cache.py, keeps it per model version); ``formula`` <= 2 s for any model. The first
``predict`` of a model version builds and compiles it (sympy) and is slower; that figure is shown too.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

PREDICT = ["predict", "--impl", "{key}", "--seq", "8K", "--heads", "32", "--json"]
RUNS = 5


def wall(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "livebytes.cli.app", *args], env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.decode()[-300:]}")
    return elapsed


def main() -> None:
    from livebytes.estimator.registry import specs
    keys = [s.key for s in specs()]
    print(f"{'command':<60} {'cold cache s':>12} {'warm cache s (median of %d)' % RUNS:>28}")
    for key in keys:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "LIVEBYTES_CACHE_DIR": cache}
            gpu = ["--gpu", "B300"] if "frost" in key else []
            args = [a.format(key=key) for a in PREDICT] + gpu
            cold = wall(args, env)
            warm = statistics.median(wall(args, env) for _ in range(RUNS))
            print(f"{'predict ' + key:<60} {cold:>12.2f} {warm:>28.2f}")
    for key in keys:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "LIVEBYTES_CACHE_DIR": cache}
            print(f"{'formula ' + key:<60} {wall(['formula', '--impl', key], env):>12.2f}")


if __name__ == "__main__":
    main()

"""Wall time of a layer stack's commands against its depth, each a fresh process (not a test: it reports numbers;
issue 33 point 4).

    python benchmarks/layer_speed.py

``predict`` of fla-kda-layer@0.6.0 (MBS 1 x 8K, H16, D128, hidden 2048, the table a user reads) at 32 to 256 layers,
with an empty model cache (the stack built and compiled) and warm (the compiled stack from the cache); then ``sweep``
(two shapes) and ``timeline`` at 32 and 256 layers, ``plan --solve layers`` at 128K, and a depth no GPU preset holds
(refused before anything is built). Target: a 256-layer predict takes under 10x a 32-layer one, cold and warm (the
cost linear in layers, plus the fixed start).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from cli_speed import wall      # this folder's: one command's wall time as a fresh process

STACK = ["--impl", "fla-kda-layer@0.6.0", "--mbs", "1", "--heads", "16", "--dim", "128", "--hidden", "2048"]
DEPTHS = (32, 64, 128, 256)
WARM_RUNS = 3
TARGET_RATIO = 10


def refused(args: list[str], env: dict) -> tuple[float, int, str]:
    """(wall time, exit code, stderr's last line) of a command expected to fail."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "livebytes.cli.app", *args], env=env, capture_output=True, text=True)
    return time.perf_counter() - start, done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, LIVEBYTES_CACHE_DIR=cache)
        wall(["models"], env)           # the spec index, so that each cold figure is the stack's build alone
        cold, warm = {}, {}
        for depth in DEPTHS:
            args = ["predict", *STACK, "--seq", "8K", "--layers", str(depth)]
            cold[depth] = wall(args, env)
            warm[depth] = min(wall(args, env) for _ in range(WARM_RUNS))
            print(f"predict --layers {depth:>4}: {cold[depth]:6.2f} s cold cache, {warm[depth]:6.2f} s warm (best of {WARM_RUNS})")
        for name, times in (("cold", cold), ("warm", warm)):
            ratio = times[DEPTHS[-1]] / times[DEPTHS[0]]
            verdict = "ok" if ratio < TARGET_RATIO else f"MISSED (target < {TARGET_RATIO}x)"
            print(f"{name}: {DEPTHS[-1]} layers / {DEPTHS[0]} layers = {ratio:.1f}x  {verdict}")
        for depth in (DEPTHS[0], DEPTHS[-1]):
            grid = wall(["sweep", *STACK, "--seq", "8K,16K", "--layers", str(depth), "--json"], env)
            steps = wall(["timeline", *STACK, "--seq", "8K", "--layers", str(depth), "--json"], env)
            print(f"--layers {depth}: sweep --seq 8K,16K {grid:.1f} s (the symbolic stack, a verdict per shape), "
                  f"timeline {steps:.1f} s")
        plan = wall(["plan", *STACK, "--solve", "layers", "--seq", "128K"], env)
        print(f"plan --solve layers --seq 128K: {plan:.1f} s (a stack built per tried depth)")
        elapsed, code, line = refused(["predict", *STACK, "--seq", "8K", "--layers", "1000000"], env)
        print(f"predict --layers 1000000: exit {code} in {elapsed:.2f} s: {line}")


if __name__ == "__main__":
    main()

"""Wall time of the whole-model commands, each a fresh process (not a test: it reports numbers; issue 32 point 4).

    python benchmarks/model_speed.py [CONFIG.json ...]      # default: validate/data/model_configs/kda-1.3b.json

Per config: ``predict --model`` with an empty model cache (traces the model at the learning shapes, solves, compiles),
then warm (the compiled model from the private cache), and ``plan --model`` warm; then the build cost against depth
(``--layers`` 24, 48, 96, 192: one set of traces serves every depth from three up, expanded, so the cost should grow
linearly). Targets: a 24-layer model's predict within 3 s warm and plan within 15 s.
"""
from __future__ import annotations

import os
import sys
import tempfile

from cli_speed import wall      # this folder's: one command's wall time as a fresh process

DEFAULT = ["validate/data/model_configs/kda-1.3b.json"]
DEPTHS = (24, 48, 96, 192)


def main(configs: list[str]) -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, LIVEBYTES_CACHE_DIR=cache)
        for config in configs:
            base = ["--model", config, "--checkpoint"]
            cold = wall(["predict", *base, "--seq", "8K", "--json"], env)
            warm = min(wall(["predict", *base, "--seq", "8K", "--json"], env) for _ in range(3))
            plan = wall(["plan", *base, "--solve", "seq", "--json"], env)
            print(f"{config}: predict {cold:.1f} s cold (tracing), {warm:.2f} s warm; plan --solve seq {plan:.1f} s warm")
            for depth in DEPTHS:
                built = wall(["predict", *base, "--layers", str(depth), "--seq", "8K", "--json"], env)
                print(f"  --layers {depth}: predict {built:.1f} s (expanded from the cached traces, compiled once)")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)

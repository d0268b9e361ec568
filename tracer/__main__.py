"""``python -m livebytes.tracer SPEC.json``: trace what SPEC asks and print the traces as one JSON object.

SPEC (a file, or - for standard input): {"device": "H200", "config": {HF config, model_type included}, "precision":
"bf16" | "fp32-amp", "optimizer": "adamw" | "sgd" | "none", "checkpoint": bool, "packed": bool, "loss": "default" |
"liger" (left out: default, ``losses``), "steps": 3, "runs": [{"layers": L or null, "shapes": [[mbs, seq], ...]},
...]} (or one run's "layers" and "shapes" at the top).

Output: {"format": 1, "versions": {torch, triton, fla, transformers}, "device": ..., "runs": [{"layers": L,
"traces": [one per shape]}, ...]}.
Every problem is one ``error:`` line on stderr and exit code 1.
"""
from __future__ import annotations

import json
import sys
import warnings

from livebytes.estimator.devices import get_device

from .target import install, meta_autocast_is_cuda, meta_index_is_device_0, meta_runs_gpu_packages
from .versions import installed_versions

FORMAT = 1




def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("error: usage: python -m livebytes.tracer SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(open(argv[0]).read() if argv[0] != "-" else sys.stdin.read())
    device = get_device(spec["device"])
    warnings.filterwarnings("ignore")
    install(device)
    meta_autocast_is_cuda()
    try:
        # deferred: after target.install's patches (fla asks the device as it loads); missing, one error line
        import fla  # noqa: F401  (registers its model types with transformers)
    except ImportError as err:
        print(f"error: tracing needs flash-linear-attention and transformers ({err})", file=sys.stderr)
        return 1
    meta_index_is_device_0()
    meta_runs_gpu_packages()
    # deferred: these load transformers and the tracer's torch modes, after target.install and fla (the order above)
    from .autocast import AutocastUnknown
    from .losses import LossRefused  # deferred: after fla, as above
    from .sdpa import SdpaUnsupported  # deferred: after fla, as above
    from .step import trace_training  # deferred: after fla, as above
    runs = spec.get("runs") or [{"layers": spec.get("layers"), "shapes": spec["shapes"]}]
    out = []
    try:
        for run in runs:
            one = {**spec, "layers": run["layers"]}
            out.append({"layers": run["layers"], "traces": [trace_training(one, mbs, seq) for mbs, seq in run["shapes"]]})
    except (AutocastUnknown, SdpaUnsupported, LossRefused) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    # one string from json's C encoder, written once: json.dump streams through the pure-Python encoder in millions of
    # small writes (a deep MoE stack's 36 MB took ~10 s here and as much again in the reading parent's poll loop)
    sys.stdout.write(json.dumps({"format": FORMAT, "versions": installed_versions(), "device": device.name,
                                 "spec": spec, "runs": out, "traces": out[0]["traces"]}, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

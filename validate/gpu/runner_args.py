"""The runner's command line (``python -m livebytes.validate.gpu.runner``); ``batch.runner_command`` writes it."""
from __future__ import annotations

import argparse

from .environment import DEFAULT_ALLOC_CONF


def parse_args(argv=None, description: str = "") -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m livebytes.validate.gpu.runner", description=description)
    ap.add_argument("--impl")
    ap.add_argument("--shapes", help='"MBS,SEQ,HEADS[,DIM][,hv=HV][,dv=DV];..."')
    ap.add_argument("--out", required=True)
    ap.add_argument("--contract", default="report", choices=("report", "plain"))
    ap.add_argument("--no-recompute", action="store_true")
    ap.add_argument("--forward-only", action="store_true")
    ap.add_argument("--history", action="store_true", help="save the live blocks at the peak of the first shape")
    ap.add_argument("--mode", default="shared-process")
    ap.add_argument("--probe-device", action="store_true")
    ap.add_argument("--alloc-conf", default=DEFAULT_ALLOC_CONF, help="PYTORCH_CUDA_ALLOC_CONF, set before torch is imported")
    ap.add_argument("--triton-cache", default="auto", choices=("cold", "warm", "auto"),
                    help="cold: autotune in this process (fresh TRITON_CACHE_DIR); warm: load the committed "
                         "autotune file; auto: warm when a file exists for this GPU, fla and Triton")
    ap.add_argument("--autotune-file", help="an autotune file instead of the committed one")
    ap.add_argument("--autotune-capture", action="store_true",
                    help="after a cold run, write OUT/autotune/<key>.<pid>.json (merge with python -m livebytes.validate.gpu.autotune)")
    return ap.parse_args(argv)

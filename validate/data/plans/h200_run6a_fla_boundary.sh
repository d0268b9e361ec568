#!/bin/bash
# Run 6a on the H200 (one 10-minute command): plan's answer S* and ceil(S* x 1.01) for fla-kda@0.6.0 at
# MBS 1, H96, D128, each state in its own process (validate/gpu/probes/boundary_probe.py --values):
# plain cold (fresh Triton cache: this process autotunes), plain warm, plain warm with expandable segments,
# report cold. The cold processes also record the per-thread stack limit and reset it at the end.
# S* from `livebytes plan --impl fla-kda@0.6.0 --heads 96 --solve seq --contract C --triton-cache T [--alloc-conf A]`.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
P=validate/gpu/probes/boundary_probe.py
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
TRITON_CACHE_DIR=/tmp/tc_plain timeout 270 python3 $P --impl fla-plain --values 168192,169874 --state cold --reset-stack --out "$OUT/plain_cold"
TRITON_CACHE_DIR=/tmp/tc_plain timeout 60 python3 $P --impl fla-plain --values 172288,174011 --state warm --out "$OUT/plain_warm"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRITON_CACHE_DIR=/tmp/tc_plain timeout 60 \
  python3 $P --impl fla-plain --values 178079,179860 --state warm --out "$OUT/plain_expandable_warm"
TRITON_CACHE_DIR=/tmp/tc_report timeout 270 python3 $P --impl fla-report --values 163413,165048 --state cold --reset-stack --out "$OUT/report_cold"
(cd /tmp && find tc_plain tc_report -name '*.autotune.json' | tar -czf "$OUT/triton_autotune.tgz" -T -)

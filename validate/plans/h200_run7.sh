#!/bin/bash
# Run 7 on the H200 — what this project still needs measured (about 9 device-minutes; FLA only).
# 1. KDA allocator traces for `learn` (run 6b's tracer failed; fixed since): issue 13.
# 2. The report contract's cold boundary at plan's new answer (163,242 fits, 164,875 does not): issue 9.
# 3. Autotune capture of the report groups issue 11's 18-shape budget needs (H64, H128, H16 MBS 8, GVA),
#    so a later run measures them warm: merge with `python -m livebytes.validate.autotune OUT/.../autotune/*.json`.
# Each step writes as soon as it has something; step 2 runs alone on the GPU.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p "$OUT/traces" "$OUT/capture"
python3 -m livebytes.validate.trace --impl fla-kda@0.6.0 --contract report --out "$OUT/traces/fla-kda_0.6.0" \
  --shapes "2,1030,2,2,64,64;2,2048,2,2,64,64;3,1030,2,2,64,64;2,1030,4,4,64,64;2,1030,2,2,128,128" > "$OUT/traces/kda.log" 2>&1
TRITON_CACHE_DIR=/tmp/tc_report timeout 280 python3 validate/probes/boundary_probe.py --impl fla-report --heads 96 \
  --values 163242,164875 --state cold --reset-stack --out "$OUT/report_cold"
timeout 250 python3 -m livebytes.validate.batch validate/plans/h200_v4_capture.json --out "$OUT/capture" > "$OUT/capture.log" 2>&1
tar -czf "$OUT/traces.tgz" -C "$OUT" traces && rm -rf "$OUT/traces"
tar -czf "$OUT/capture.tgz" -C "$OUT" capture && rm -rf "$OUT/capture"

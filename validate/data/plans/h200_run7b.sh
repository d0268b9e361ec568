#!/bin/bash
# Run 7b on the same H200 machine (carry .bigB; run 7a left /tmp/site and /tmp/cu13part_00):
# 1. the report contract's cold boundary at plan's answer (163,242 fits, 164,875 does not): issue 9;
# 2. whole-process allocator traces of the two kda_hopper_cuda records whose reserved bytes the replay misses.
set -u
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
cat /tmp/cu13part_00 .bigB/cu13part_01 | tar -C /tmp/site -xJf - || echo "cu13 unpack failed"
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
TRITON_CACHE_DIR=/tmp/tc_report timeout 330 python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 \
  --values 163242,164875 --state cold --reset-stack --out "$OUT/report_cold"
for shape in 1,8K,32,128 2,16K,32,128; do
  timeout 60 python3 validate/gpu/probes/process_trace.py --impl cudnn-kda-hopper-cuda@1.32.0 --shape "$shape" --out "$OUT/ptrace"
done
tar -czf "$OUT/ptrace.tgz" -C "$OUT" ptrace && rm -rf "$OUT/ptrace"

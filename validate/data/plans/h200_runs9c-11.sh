#!/bin/bash
# The commands of runs 9c, 10 and 11 exactly as they ran on the H200 (2026-11-30), each a separate device call
# on a machine where runs 9a/9b (9c) or a fresh start (10, 11) had installed .whl/ into /tmp/site.
set -u
case "${1:-}" in
9c)   # kda_hopper_cuda, expandable segments, no warmup: plan's 247,476 and 1 % above (after run 9b's cu13 unpack)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  timeout 200 python3 validate/gpu/probes/boundary_probe.py --impl kda_hopper_cuda --heads 96 --values 247476,249951 \
    --state n/a --no-warmup --out "$OUT/kda_hopper_cuda_seq_True_na" ;;
10)   # one more KDA allocator trace at K = V = 16 (the tracer needs two shapes; the K 64 one repeats run 7a's)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core*.whl .whl/livebytes*.whl
  python3 -m livebytes.validate.gpu.trace --impl fla-kda@0.6.0 --contract report --out "$OUT/fla-kda_0.6.0" \
    --shapes "2,1030,2,2,16,16;2,1030,2,2,64,64" ;;
11)   # a cold report process's whole allocator trace (where the first call's benchmark buffers land)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core*.whl .whl/livebytes*.whl
  TRITON_CACHE_DIR=/tmp/tc_fresh timeout 300 python3 validate/gpu/probes/process_trace.py --impl fla-kda@0.6.0 --contract report \
    --shape 1,1024,96,128 --triton-cache cold --frames 12 --out "$OUT/ptrace" ;;
*) echo "usage: $0 9c|10|11" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 47 (issue 48 point 1): two KDA model steps off the measured grid, whose steps were derived on the CPU and never
# run, each a fresh cold process (an empty TRITON_CACHE_DIR of its own), side by side on one H100 (or H200: both sm90,
# 132 SMs), measured by validate/gpu/probes/model_step.py (protocol model-step-v1: bf16, AdamW, 1 x 8,192 tokens, no
# checkpointing, the first step then two steady steps, the peaks reset before each), with the allocator's history
# (--history) and under the image's Triton 3.6.0:
#   d  kda-h1536-l4-d64-h24-v32k  the KDA model at D64 H24 (hidden 1,536): no layer case of its own head counts; derived
#                                 limit 18,848 B (chunk_kda_bwd_kernel_wy_dqkg_fused); the whole-model rule without it
#                                 19,376 (run 46's D64 H16 model), before run 46 15,280 (920 MiB short)
#   e  kda-h1024-l4-d256-v32k     the KDA model at D256 H8 (hidden 1,024, key dim 2,048 over 8 heads); derived limit
#                                 14,528 B (14,520 swiglu_fwdbwd_kernel); the rule without it 19,376 (+1,250 MiB)
# What it tests: the derived limits (committed in estimator/data/process/model_frames_H200.json) to the byte; the
# allocator figures of two configs no GPU ran. Predictions committed before the run:
# validate/data/records/models/predictions/run47/.
# One call (carry [".whl"]: fla-core 0.6.0, flash-linear-attention 0.6.0, psutil):
#   DEADLINE=430 bash validate/data/plans/h100_run47_kda_off_grid.sh de
# Files: $OUT/<step>.tgz every 30 s and at the end, each allocator snapshot as $OUT/<tag>.snapshot.pickle.gz.
# Status: RAN 2026-12-07 23:21-23:31 UTC on an H200 (DEADLINE=540): d measured (validate/data/records/runs/run47/);
# e ended by the deadline inside its first step's cold compile, not measured: run e alone with a longer deadline.
set -u
cfg=validate/data/model_configs
W=/tmp/run47
. "$(dirname "$0")/model_step_lib.sh"     # pack, probe, case_run, snapshot
PACK_EXCLUDE='*.pickle'
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
python3 -c "import torch, triton, transformers, fla; print(torch.__version__, triton.__version__, transformers.__version__, fla.__version__)"
case "${1:-}" in
de)
  case_run d d-kda-d64-h24-8k kda-h1536-l4-d64-h24-v32k 1 8192 --history & p1=$!
  case_run e e-kda-d256-8k kda-h1024-l4-d256-v32k 1 8192 --history & p2=$!
  wait $p1 $p2 ;;
e)  # e alone (its cold D256 compile passed 540 s beside d): DEADLINE=590 bash validate/data/plans/h100_run47_kda_off_grid.sh e
  case_run e e-kda-d256-8k kda-h1024-l4-d256-v32k 1 8192 --history ;;
*) echo "usage: $0 de|e" >&2; exit 1 ;;
esac

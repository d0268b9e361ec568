#!/bin/bash
# Run 25 (session 14, issue 32 point 5): whole-model training steps of flash-linear-attention 0.6.0's
# GatedDeltaNetForCausalLM on the H200 under Triton 3.9.0 (fla-core 0.6.0 refuses the gated backward on Hopper below
# 3.7.1), four configurations side by side, each a fresh cold process (validate/gpu/probes/model_step.py, protocol
# model-step-v1, as run 23's KDA records). The configs select FLA's fused linear cross-entropy (KDA's default; GDN's
# default FusedCrossEntropyLoss is not traced yet). Triton 3.9.0 travels as in run 18 (h200_run18_triton39.sh
# prepare | part | install), compiled by its bundled legacy ptxas (TRITON_PTXAS_BLACKWELL_PATH, run 20).
#   records   the four configurations side by side; every line lands in $OUT/records.tgz as it appears
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/t39site:/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
export TRITON_PTXAS_BLACKWELL_PATH=/tmp/t39site/triton/backends/nvidia/bin/ptxas
cfg=validate/data/model_configs
W=/tmp/run25
DEADLINE=${DEADLINE:-540}
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing, probe
case "${1:-}" in
records)
  python3 -c "import triton; assert triton.__version__ == '3.9.0', triton.__version__" || exit 1
  STEP=records; mkdir -p "$W/records"
  packing records &
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$W/records/gpu.csv"
  probe g1-packed gdn-h1024-l2-v32k 2 4096 --packed & p1=$!
  probe g2-ckpt gdn-h2048-l6-v32k 1 16384 --checkpoint & p2=$!
  probe g3-v152k gdn-h1536-l8-v152k 1 8192 & p3=$!
  probe g4-1.3b gdn-1.3b 1 8192 --checkpoint & p4=$!
  wait $p1 $p2 $p3 $p4
  pack records; kill %1 2>/dev/null ;;
*) echo "usage: $0 records" >&2; exit 1 ;;
esac

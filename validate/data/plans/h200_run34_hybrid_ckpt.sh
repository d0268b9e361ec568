#!/bin/bash
# Run 34 (ran in session 19, folded in by session 20: runs/run34/README.md): the run-31 hybrid configurations with --checkpoint (gradient_checkpointing_enable(),
# non-reentrant), which the tracer could not trace before commit "tracer: checkpoint's recompute re-enters the
# forward's function modes": the recompute lost tracer/sdpa.py's cuDNN routing (math path, CheckpointError). The
# run checks (a) that transformers' checkpointing of both models runs on the GPU (no CheckpointError: the routing is
# C++ there, the same in both passes) and (b) the checkpointed peaks against this tree's predictions (to be committed
# under validate/data/records/models/predictions/run34/ before the run: `livebytes predict --model CONFIG --seq-len S
# --checkpoint --json`). Same machinery as run 31 (h200_run31_qwen3next.sh): `kimi` under the image's Triton 3.6.0
# (h200_run28.sh install first), `qwen` under Triton 3.9.0 (h200_run18_triton39.sh part | install first).
#   k1c kimi-h1024-l4-e16-v32k 1 x 8192 --checkpoint    q1c q3n-h1024-l4-e16-v32k 1 x 8192 --checkpoint
set -u
cfg=validate/data/model_configs
W=/tmp/run34
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing, probe
case "${1:-}" in
kimi)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  STEP=kimi; DEADLINE=${DEADLINE:-480}; mkdir -p "$W/kimi"
  packing kimi &
  probe k1c-l4-8k kimi-h1024-l4-e16-v32k 1 8192 --checkpoint --history --sdpa-choice
  pack kimi; kill %1 2>/dev/null ;;
qwen)
  . "$(dirname "$0")/t39_env.sh"; t39
  STEP=qwen; DEADLINE=${DEADLINE:-480}; mkdir -p "$W/qwen"
  packing qwen &
  probe q1c-l4-8k q3n-h1024-l4-e16-v32k 1 8192 --checkpoint --history --sdpa-choice
  pack qwen; kill %1 2>/dev/null ;;
*) echo "usage: $0 kimi | qwen" >&2; exit 1 ;;
esac

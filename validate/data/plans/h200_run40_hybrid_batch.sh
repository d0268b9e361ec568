#!/bin/bash
# Run 40 (issue 51 point 3): a hybrid's step at a batch of two sequences, the program transformers runs only from two
# rows on (loss_utils.py: the shifted labels a copy, not a view; the tree traces it as the row option "many"), which
# no GPU had run. One fresh cold process (an empty TRITON_CACHE_DIR of its own) alone on the H200, measured by
# validate/gpu/probes/model_step.py (protocol model-step-v1: bf16, AdamW, the first step then two steady steps, the
# peaks reset before each), with the allocator's history (--history).
#   k  kimi-h2304-l4-e16-v164k (the preset kimi-linear-small), MBS 2 x 8,192 tokens, no checkpointing, Triton 3.6.0
# Prediction committed before the run: validate/data/records/models/predictions/run40/ (`livebytes predict --model
# kimi-linear-small --seq-len 8K --batch-size 2 --gpu H200 --json`, this tree).
# Call: `bash validate/data/plans/h200_run40_hybrid_batch.sh k` with carry [".whl"] (fla-core and
# flash-linear-attention 0.6.0 wheels, installed where /tmp/site lacks them). Files: $OUT/k.tgz every 30 s and at the
# end, the allocator snapshot $OUT/<tag>.snapshot.pickle.gz. Then: validate/data/records/runs/run40/ and the record
# under validate/data/records/models/.
set -u
cfg=validate/data/model_configs
W=/tmp/run40
. "$(dirname "$0")/model_step_lib.sh"     # pack, probe, case_run, snapshot
PACK_EXCLUDE='*.pickle'
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
DEADLINE=${DEADLINE:-520}
[ -d /tmp/site/fla ] || bash "$(dirname "$0")/h200_run28.sh" install || exit 1
case "${1:-}" in
k)
  case_run k k-kimi-8k-mbs2 kimi-h2304-l4-e16-v164k 2 8192 --history ;;
*) echo "usage: $0 k" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 46 (issue 48 point 1): three whole-model training steps no GPU had run, two of them of families no GPU had run
# at all, each a fresh cold process (an empty TRITON_CACHE_DIR of its own), side by side on one H100 (each one's
# non-PyTorch bytes from NVML by pid), measured by validate/gpu/probes/model_step.py (protocol model-step-v1: bf16,
# AdamW, 1 x 8,192 tokens, no checkpointing, the first step then two steady steps, the peaks reset before each), with the
# allocator's history (--history) and under the image's Triton 3.6.0:
#   a  gla-h1024-l4-v32k        FLA's GLA model (gated linear attention, fla/ops/gla), hidden 1024, 4 layers, H4
#                               (key dim 128 per head, value 256), vocab 32,000, FLA's fused linear cross-entropy
#   b  kda-h1024-l4-d64-v32k    FLA's KDA model at head dim 64 (H16): no KDA process ran D64 before
#   c  deltanet-h1024-l4-v32k   FLA's DeltaNet model (fla/ops/delta_rule), hidden 1024, 4 layers, H8 D128, fused
#                               linear cross-entropy
# What it tests: the stack limit each process reads after its first step against the limit derived on the CPU before
# the run (validate/gpu/derive_model_frames.py --config: every Triton kernel the traced step launches, each autotune
# candidate compiled for sm90 by Triton 3.6.0; largest frames a 14,520 B swiglu_fwdbwd_kernel, b 19,376 B
# chunk_kda_bwd_kernel_wy_dqkg_fused, c 24,168 B chunk_bwd_kernel_dqkwg, so limits 14,528 / 19,376 / 24,176 B); the
# whole-model rule the tool used for b before (15,280 B, estimated from the D128 cases); and, for a and c, the first
# measurement of an "unvalidated" family's allocated and reserved peaks.
# Predictions committed before the run: validate/data/records/models/predictions/run46/.
# One call (carry [".whl"]: fla-core 0.6.0, flash-linear-attention 0.6.0, psutil; the probe imports nothing of
# livebytes for these models, so no livebytes wheel):
#   bash validate/data/plans/h100_run46_unmeasured_families.sh abc
# Files: $OUT/<step>.tgz every 30 s and at the end (record, jsonl, log with rc, gpu.csv), each allocator snapshot as
# $OUT/<tag>.snapshot.pickle.gz. Then here: validate/data/records/runs/run46/.
# Status: RUN 2026-12-07 19:21-19:30 UTC on one H100 (after 15 tries since 15:55 found no machine): every stack limit
# as derived; results and named misses in validate/data/records/runs/run46/README.md.
set -u
cfg=validate/data/model_configs
W=/tmp/run46
. "$(dirname "$0")/model_step_lib.sh"     # pack, probe, case_run, snapshot
PACK_EXCLUDE='*.pickle'
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
DEADLINE=${DEADLINE:-540}
[ -d /tmp/site/fla ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
python3 -c "import torch, triton, transformers, fla; print(torch.__version__, triton.__version__, transformers.__version__, fla.__version__)"
case "${1:-}" in
abc)
  case_run a a-gla-8k gla-h1024-l4-v32k 1 8192 --history & p1=$!
  case_run b b-kda-d64-8k kda-h1024-l4-d64-v32k 1 8192 --history & p2=$!
  case_run c c-deltanet-8k deltanet-h1024-l4-v32k 1 8192 --history & p3=$!
  wait $p1 $p2 $p3 ;;
*) echo "usage: $0 abc" >&2; exit 1 ;;
esac

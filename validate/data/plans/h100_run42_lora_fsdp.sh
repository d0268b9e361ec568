#!/bin/bash
# Run 42 (issue 51): LoRA under FSDP2, which the tool places since session 29 (lifetimes/traced/fsdp.py: the frozen base
# sharded and gathered like any parameter, only the adapters reduce-scattered, a unit without one skipping its
# reduce-scatter) and no GPU had run; beside it the same hybrid's full fine-tune under FSDP2 (run 32 measured FSDP2 at
# world size 1 on a KDA model only). World size 1 (one process, one GPU, NCCL): every FSDP2 buffer but the collectives'
# W > 1 copies is allocated as at any W. Each case a fresh cold process (an empty TRITON_CACHE_DIR of its own),
# validate/gpu/probes/model_step.py (protocol model-step-v1), with the allocator's history (--history).
#   f  kimi-h2304-l4-e16-v164k (the preset kimi-linear-small), 1 x 8,192 tokens, LoRA r16 alpha 8 on peft's all-linear
#      (peft 0.21.2), --fsdp 1, no checkpointing: run 41 l is the same case without FSDP2
#   s  the same model and shape, full fine-tune, --fsdp 1
# Triton 3.6.0 (KDA's backward runs on Hopper under it). Predictions committed before the run:
# validate/data/records/models/predictions/run42/ (`livebytes predict --model kimi-linear-small --seq-len 8K ... --fsdp 1
# --gpu H100 --json`): device need f 42,561,699,840, s 47,131,394,048 (together more than an H100 holds: one call each).
# Calls, each with carry [".whl"] (fla-core and flash-linear-attention 0.6.0, peft 0.21.2, accelerate 1.16.0, psutil
# 7.2.2, liger-kernel 0.8.5, this tree's livebytes wheel), installed into /tmp/site when absent:
#   f   then   s
# Files: $OUT/<step>.tgz every 30 s and at the end (record, jsonl, log with rc, gpu.csv), each allocator snapshot as
# $OUT/<tag>.snapshot.pickle.gz. Then here: validate/data/records/runs/run42/ and the records under
# validate/data/records/models/ where validate/check/model_records.py's checks pass.
set -u
cfg=validate/data/model_configs
W=/tmp/run42
. "$(dirname "$0")/model_step_lib.sh"     # pack, probe, case_run, snapshot
PACK_EXCLUDE='*.pickle'
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
DEADLINE=${DEADLINE:-560}
install() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -c "import torch, triton, transformers, fla, peft
print(torch.__version__, triton.__version__, transformers.__version__, peft.__version__)"
}
case "${1:-}" in
f)
  [ -d /tmp/site/peft ] || install || exit 1
  case_run f f-kimi-8k-lora16-fsdp1 kimi-h2304-l4-e16-v164k 1 8192 --lora-rank 16 --fsdp 1 --history ;;
s)
  [ -d /tmp/site/peft ] || install || exit 1
  case_run s s-kimi-8k-fsdp1 kimi-h2304-l4-e16-v164k 1 8192 --fsdp 1 --history ;;
*) echo "usage: $0 f | s" >&2; exit 1 ;;
esac

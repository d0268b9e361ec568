#!/bin/bash
# Run 41 (issue 51's measurement plan): the setups people train with, on a whole hybrid, which no GPU had run: LoRA
# through peft, Liger-Kernel's fused linear cross-entropy, and a packed batch as transformers' DataCollatorWithFlattening
# makes it. Each case a fresh cold process (an empty TRITON_CACHE_DIR of its own), measured by
# validate/gpu/probes/model_step.py (protocol model-step-v1: bf16, AdamW over the parameters that require grad, the
# first step then two steady steps, the peaks reset before each), with the allocator's history (--history).
#   l  kimi-h2304-l4-e16-v164k (the preset kimi-linear-small), 1 x 8,192 tokens, LoRA r16 alpha 8 on peft's
#      all-linear (peft 0.21.2), no checkpointing
#   g  the same model, 1 x 32,768 tokens, checkpointing, --loss liger (liger-kernel 0.8.5; Kimi-Linear has no Liger
#      patch: the forward livebytes binds, tracer/losses.py liger_forward): run 39 b is the same case with the default loss
#   p  the same model, 2 x 8,192 tokens packed into one row (--packed --packed-batch flattening), no checkpointing:
#      run 40 is the same case as a batch of two rows
# All three with Triton 3.6.0 (KDA's backward runs on Hopper under it; Qwen3-Next's GDN backward would need 3.9.0).
# Predictions committed before the run: validate/data/records/models/predictions/run41/ (`livebytes predict --model
# kimi-linear-small ... --gpu H200 --json`, this tree): device need l 40,508,588,032, g 40,745,566,208, p 73,169,633,280.
# Calls (the machine keeps /tmp only 30 s after a call: fire them back to back), each with carry [".whl"]: fla-core and
# flash-linear-attention 0.6.0, peft 0.21.2, accelerate 1.16.0, psutil 7.2.2, liger-kernel 0.8.5 and this tree's
# livebytes wheel (`pip wheel --no-deps --no-build-isolation -w .whl .`), installed into /tmp/site by the first call:
#   lg  install, then l and g side by side (their needs sum to 81.3 GB: an H100's 85.0 GB holds both, an H200 too)
#   p   p alone (73.2 GB)
# Files: $OUT/<step>.tgz every 30 s and at the end (record, jsonl, log with rc, gpu.csv), each allocator snapshot as
# $OUT/<tag>.snapshot.pickle.gz. Then here: validate/data/records/runs/run41/ and the records under
# validate/data/records/models/ where validate/check/model_records.py's checks pass.
set -u
cfg=validate/data/model_configs
W=/tmp/run41
. "$(dirname "$0")/model_step_lib.sh"     # pack, probe, case_run, snapshot
PACK_EXCLUDE='*.pickle'
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
DEADLINE=${DEADLINE:-540}
install() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -c "import torch, triton, transformers, fla, peft, liger_kernel, livebytes.tracer.losses as l
print(torch.__version__, triton.__version__, transformers.__version__, peft.__version__, l.__name__)"
}
case "${1:-}" in
lg)
  [ -d /tmp/site/peft ] || install || exit 1
  case_run l l-kimi-8k-lora16 kimi-h2304-l4-e16-v164k 1 8192 --lora-rank 16 --history & p1=$!
  case_run g g-kimi-32k-liger kimi-h2304-l4-e16-v164k 1 32768 --checkpoint --loss liger --history & p2=$!
  wait $p1 $p2 ;;
p)
  [ -d /tmp/site/peft ] || install || exit 1
  case_run p p-kimi-8k-x2-packed kimi-h2304-l4-e16-v164k 2 8192 --packed --packed-batch flattening --history ;;
*) echo "usage: $0 lg | p" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 43 (issue 51): run 41's setups on the other published hybrid, which no GPU had run: Qwen3-Next with LoRA through
# peft and with Liger-Kernel's fused linear cross-entropy (Liger's own patch, apply_liger_kernel_to_qwen3_next). Qwen3-Next's
# GDN backward needs Triton 3.9.0 on Hopper (fla-core 0.6.0 refuses 3.4-3.7.0, its #640), hence the parts below.
# Each case a fresh cold process (an empty TRITON_CACHE_DIR of its own), validate/gpu/probes/model_step.py (protocol
# model-step-v1: bf16, AdamW over the parameters that require grad, the first step then two steady steps, the peaks reset
# before each), with the allocator's history (--history) and SDPA's choice (--sdpa-choice):
#   m  q3n-h2048-l4-e16-v152k (the preset qwen3-next-small), 1 x 8,192 tokens, LoRA r16 alpha 8 on peft's all-linear
#      (peft 0.21.2), no checkpointing
#   q  the same model, 1 x 32,768 tokens, checkpointing, --loss liger (liger-kernel 0.8.5): run 39 c is the same case with
#      the default loss (H200)
# Predictions committed before the run: validate/data/records/models/predictions/run43/ (`livebytes predict --model
# qwen3-next-small ... --gpu H100 --json`, this tree, traced under Triton 3.9.0 and transformers 5.17.0 as the GPU has
# them): device need m 36,689,674,240, q 30,400,315,392 (together 67.1 GB: one H100 holds both side by side).
# Calls, back to back (a warm machine keeps /tmp 30 s after a call), each with carry [".whl", ".t39"]: .whl holds
# fla-core and flash-linear-attention 0.6.0, peft 0.21.2, accelerate 1.16.0, psutil 7.2.2, liger-kernel 0.8.5 (the probe
# imports nothing of livebytes for Qwen3-Next: no livebytes wheel, which would not fit beside a part); .t39 holds ONE
# part of Triton 3.9.0 (h200_run18_triton39.sh prepare, re-split in five: `split -n 5 -d -a 2 triton39.tar.xz part_`,
# 21.3 MB each beside this 38-MB tree and 3.8 MB of wheels in a 64-MiB call):
#   part  (parts 00, 01, 02, 03 in order; the first also installs the wheels)
#   mq    (part 04) append it, unpack Triton 3.9.0 ahead of the image's 3.6.0, then m and q side by side
# Files: $OUT/<step>.tgz every 30 s and at the end (record, jsonl, log with rc, gpu.csv), each allocator snapshot as
# $OUT/<tag>.snapshot.pickle.gz. Then here: validate/data/records/runs/run43/ and the records under
# validate/data/records/models/ where validate/check/model_records.py's checks pass.
# Status: RUN 2026-12-06 22:45-22:57 UTC on an H200 (no H100 could be started; five calls on one warm machine, ~660 s of
# device time with its start): validate/data/records/runs/run43/.
set -u
cfg=validate/data/model_configs
W=/tmp/run43
. "$(dirname "$0")/model_step_lib.sh"     # pack, probe, case_run, snapshot, part
PACK_EXCLUDE='*.pickle'
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
DEADLINE=${DEADLINE:-540}
install() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -c "import torch, triton, transformers, fla, peft, liger_kernel
print(torch.__version__, triton.__version__, transformers.__version__, peft.__version__)"
}
[ -d /tmp/site/peft ] || install || exit 1
case "${1:-}" in
part) part ;;
mq)
  part
  xz -t /tmp/t39.tar.xz || exit 1
  mkdir -p /tmp/t39site && tar -C /tmp/t39site -xJf /tmp/t39.tar.xz || exit 1
  sed -i '/amd/d' /tmp/t39site/triton-3.9.0.dist-info/entry_points.txt    # run 20: the AMD entry point prepare drops
  . "$(dirname "$0")/t39_env.sh"; t39                                       # Triton 3.9.0, its legacy ptxas
  DEADLINE=$((DEADLINE - 60))
  case_run m m-q3n-8k-lora16 q3n-h2048-l4-e16-v152k 1 8192 --lora-rank 16 --history --sdpa-choice & p1=$!
  case_run q q-q3n-32k-liger q3n-h2048-l4-e16-v152k 1 32768 --checkpoint --loss liger --history --sdpa-choice & p2=$!
  wait $p1 $p2 ;;
*) echo "usage: $0 part | mq" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 44 (issue 51): Qwen3-Next with two sequences per step, which no GPU had run (runs 40 and 41 p measured the same on
# Kimi-Linear): packed into one row as transformers' DataCollatorWithFlattening makes it (each GDN layer's varlen path,
# cu_seqlens) and as a batch of two rows. Qwen3-Next's GDN backward needs Triton 3.9.0 on Hopper, carried in parts.
# Each case a fresh cold process (an empty TRITON_CACHE_DIR of its own), validate/gpu/probes/model_step.py (protocol
# model-step-v1), with the allocator's history (--history) and SDPA's choice (--sdpa-choice):
#   p  q3n-h2048-l4-e16-v152k (the preset qwen3-next-small), 2 x 8,192 tokens packed into one row (--packed
#      --packed-batch flattening), no checkpointing
#   r  the same model, 2 rows x 8,192 tokens, no checkpointing
# Predictions committed before the run: validate/data/records/models/predictions/run44/ (`livebytes predict --model
# qwen3-next-small --seq-len 8K --batch-size 2 [--packed] --gpu H200 --json`, this tree, traced under Triton 3.9.0 and
# transformers 5.17.0): device need p 64,386,760,704, r 64,019,759,104 (together 128.4 GB: an H200 holds both side by
# side; on an H100 the `pr` step runs p alone and `r` follows).
# Calls, back to back (a warm machine keeps /tmp 30 s after a call), each with carry [".whl", ".t39"] as run 43's
# (h100_run43_qwen_setups.sh: the wheels without livebytes, ONE part of Triton 3.9.0 in five):
#   part  (parts 00, 01, 02, 03 in order; the first also installs the wheels)
#   pr    (part 04) append it, unpack Triton 3.9.0 ahead of the image's 3.6.0, then p and r side by side
#   r     r alone (after pr on an H100; on a fresh machine with part 04, after `part` with 00-03)
# Files: $OUT/<step>.tgz every 30 s and at the end (record, jsonl, log with rc, gpu.csv), each allocator snapshot as
# $OUT/<tag>.snapshot.pickle.gz. Then here: validate/data/records/runs/run44/ and the records under
# validate/data/records/models/ where validate/check/model_records.py's checks pass.
# Status: p RUN 2026-12-06 23:36-23:41 UTC on an H100; r RUN 2026-12-07 03:05-03:09 UTC on an H100 (`part` with parts
# 00-03, then `r` with part 04): validate/data/records/runs/run44/.
set -u
cfg=validate/data/model_configs
W=/tmp/run44
. "$(dirname "$0")/model_step_lib.sh"     # pack, probe, case_run, snapshot, part
PACK_EXCLUDE='*.pickle'
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
DEADLINE=${DEADLINE:-540}
install() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -c "import torch, triton, transformers, fla
print(torch.__version__, triton.__version__, transformers.__version__)"
}
unpack() {
  xz -t /tmp/t39.tar.xz || exit 1
  mkdir -p /tmp/t39site && tar -C /tmp/t39site -xJf /tmp/t39.tar.xz || exit 1
  sed -i '/amd/d' /tmp/t39site/triton-3.9.0.dist-info/entry_points.txt    # run 20: the AMD entry point prepare drops
}
[ -d /tmp/site/fla ] || install || exit 1
case "${1:-}" in
part) part ;;
pr)
  part
  [ -d /tmp/t39site/triton ] || unpack
  . "$(dirname "$0")/t39_env.sh"; t39                                       # Triton 3.9.0, its legacy ptxas
  DEADLINE=$((DEADLINE - 60))
  total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  case_run p p-q3n-8k-x2-packed q3n-h2048-l4-e16-v152k 2 8192 --packed --packed-batch flattening --history --sdpa-choice & p1=$!
  if [ "$total" -gt 140000 ]; then
    case_run r r-q3n-8k-mbs2 q3n-h2048-l4-e16-v152k 2 8192 --history --sdpa-choice & p2=$!
    wait $p1 $p2
  else
    wait $p1
  fi ;;
r)
  [ -d /tmp/t39site/triton ] || { part; unpack; }                           # a fresh machine: part 04 carried
  . "$(dirname "$0")/t39_env.sh"; t39
  case_run r r-q3n-8k-mbs2 q3n-h2048-l4-e16-v152k 2 8192 --history --sdpa-choice ;;
*) echo "usage: $0 part | pr | r" >&2; exit 1 ;;
esac

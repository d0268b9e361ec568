#!/bin/bash
# Run 39 (issue 48 point 6): three whole-model training steps nobody measured, each a fresh cold process (an empty
# TRITON_CACHE_DIR of its own) alone on the H200, measured by validate/gpu/probes/model_step.py (protocol model-step-v1:
# bf16, AdamW, one sequence of 32,768 tokens, gradient_checkpointing_enable(), the first step then two steady steps, the
# peaks reset before each), with the allocator's history (--history: host-side only). What each process reports: its
# non-PyTorch bytes before the model (the context) and after every step (NVML by pid minus memory_reserved), the stack
# limit it reads after every step (cudaDeviceGetLimit), max allocated / reserved per step; the modules are the
# non-PyTorch bytes after the first step minus the context and the limit's reservation (validate/check/frames.py).
# Predictions committed before the run: validate/data/records/models/predictions/run39/ (`livebytes predict --model
# CONFIG --seq-len 32K --checkpoint --json`, this tree; their process memory is CUDA's 512-KiB-per-thread cap, the figure
# issue 48 replaces, committed as it was).
#   a  kda-h4096-l32-v32k       FLA's KDA model, 7B class: hidden 4096, 32 layers, H32 D128, vocab 32,000 (Triton 3.6.0)
#   b  kimi-h2304-l4-e16-v164k  the preset kimi-linear-small: kimi-linear-48b-a3b's config (hidden 2304, KDA H32 D128,
#                               MLA H32 at qk 128+64 = 192 and v 128, kv_lora_rank 512, vocab 163,840, the first block
#                               dense, top 8 of the experts, moe_intermediate 1024) cut to 4 layers (KDA x3 then MLA, the
#                               published period) and 16 experts (Triton 3.6.0)
#   c  q3n-h2048-l4-e16-v152k   the preset qwen3-next-small: qwen3-next-80b-a3b's config (hidden 2048, GDN H16/HV32 D128,
#                               gated attention H16/KV2 D256, top 10 experts of 512 wide, vocab 151,936) cut to 4 layers
#                               (GDN x3 then attention, full_attention_interval 4) and 16 experts (Triton 3.9.0)
# The cuts leave every Triton kernel's compile-time constants as published: FLA's kernels specialise on head dims, value
# heads per key head, block sizes and flags (and autotune keys on them and on H), none on the depth, the hidden size's
# layer count or the expert count; the experts run torch's grouped GEMM (cuBLAS/CUTLASS, no Triton), whose count is a
# runtime argument, and top-k is kept, so every token's expert buffers are the published model's.
# Calls (the GPU machine keeps /tmp only while warm, 30 s after a call: fire them back to back). Triton 3.9.0 travels as
# in runs 20/25/28/31 (h200_run18_triton39.sh prepare, here), but split in four parts (`split -n 4`: about 26.6 MB each;
# three of 35.5 MB left 0.4 MB beside this 29.7-MB tree and the wheels in a 64-MiB call), one carried per call as .t39/,
# each call with .whl/ (fla-core 0.6.0, flash-linear-attention 0.6.0, installed where /tmp/site lacks them; the probe
# imports nothing of livebytes, so no livebytes wheel):
#   a     (carry .whl, .t39 = part 00) install the wheels, append the part, then case a
#   b     (carry .whl, .t39 = part 01) append the part, then case b
#   part  (carry .whl, .t39 = part 02) append the part
#   c     (carry .whl, .t39 = part 03) append the last part, unpack Triton 3.9.0 ahead of the image's 3.6.0, then case c
# Each step's files land in $OUT/<step>.tgz every 30 s and at the end (the snapshot pickle left out of it: it may pass
# what one returned file may hold), the allocator snapshot in $OUT/<tag>.snapshot.pickle.gz.
# Then here: validate/data/records/runs/run39/ (the tgz unpacked, a README), the records under
# validate/data/records/models/ where validate/check/model_records.py's format checks pass.
# Status: RUN. a on an H100 (2026-12-05 23:24 UTC, no H200 could be started that day: the same sm90 and 132 SMs), b and
# c on the H200 (2026-12-06 03:57-04:07 UTC, back to back on one warm machine): validate/data/records/runs/run39/.
# Before that, seven calls for an H200 over two days got no machine. To run it again: `.t39/` from
# `h200_run18_triton39.sh prepare` re-split with `cat .t39/part_* > t.xz && split -n 4 -d -a 2 t.xz .t39/part_`, one
# part per call in order (a or b with part 00, part with 01 and 02, c with 03).
# Budget seen: a ~480 s (cold KDA at hidden 4096 x 32 layers; run 26's ho2 at 32K took 431 s), b ~330 s, c ~300 s plus
# the Triton 3.9.0 parts and unpacking: about 20 minutes of device time with the machine's start.
set -u
cfg=validate/data/model_configs
W=/tmp/run39
. "$(dirname "$0")/model_step_lib.sh"     # pack, probe, case_run, snapshot, part
PACK_EXCLUDE='*.pickle'
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
DEADLINE=${DEADLINE:-560}
[ -d /tmp/site/fla ] || bash "$(dirname "$0")/h200_run28.sh" install || exit 1
case "${1:-}" in
a)
  part
  case_run a a-kda7b-32k kda-h4096-l32-v32k 1 32768 --checkpoint --history ;;
b)
  part
  case_run b b-kimi-32k kimi-h2304-l4-e16-v164k 1 32768 --checkpoint --history ;;
part) part ;;
c)
  part
  xz -t /tmp/t39.tar.xz || exit 1
  mkdir -p /tmp/t39site && tar -C /tmp/t39site -xJf /tmp/t39.tar.xz || exit 1
  sed -i '/amd/d' /tmp/t39site/triton-3.9.0.dist-info/entry_points.txt    # run 20: the AMD entry point prepare drops
  . "$(dirname "$0")/t39_env.sh"; t39                                       # Triton 3.9.0, its legacy ptxas
  DEADLINE=$((DEADLINE - 60)); case_run c c-q3n-32k q3n-h2048-l4-e16-v152k 1 32768 --checkpoint --history --sdpa-choice ;;
*) echo "usage: $0 a | b | part | c" >&2; exit 1 ;;
esac

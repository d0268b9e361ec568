#!/bin/bash
# Run 45 (issue 48): no GPU measurement. The GPU host's CPUs derive the stack frames of every Triton kernel each
# committed whole-model record's first step launches (validate/gpu/derive_model_frames.py: the tracer's step on meta
# tensors, each launch and each autotune candidate prune_configs leaves compiled for sm90 with the host's Triton 3.6.0
# and its ptxas, cuobjdump -res-usage on each cubin; CUDA_VISIBLE_DEVICES empty: no GPU is touched). The launches are
# compiled 16 side by side after the trace (probes/model_frames.py --workers); the frames do not depend on it (the first
# record re-derived here is one derived serially before, h200_run23_k3-v152k: its frames must come back equal).
# The Triton cache and the data file live under ~/.triton, which a warm machine keeps between calls, so a record cut
# off by a call's limit resumes from its compiled kernels in the next call.
#   bash validate/data/plans/h100_run45_model_frames.sh RECORD.json [...]     (carry: .whl with our wheel and fla's)
# Status: NOT RUN (2026-12-07: no machine could be started, three tries); every committed record was derived on the
# 2-CPU machine instead (validate/data/records/runs/model_frames/). This plan is the faster way to ship a grid: 16 CPUs.
# Triton 3.9.0 records need Triton 3.9.0 there first (h200_run18_triton39.sh's parts) and --legacy-ptxas, which
# derive_model_frames.py passes itself for a 3.9.0 record.
# Files: $OUT/model_frames_H200.json (the data file with every record derived so far), $OUT/<record>.jsonl (one line per
# compiled candidate), $OUT/log.txt. Then here: estimator/data/process/model_frames_H200.json.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site CUDA_VISIBLE_DEVICES=
W=$HOME/.triton/run45
mkdir -p "$W"
[ -d /tmp/site/livebytes ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
DATA=$W/model_frames_H200.json
[ -f "$DATA" ] || cp estimator/data/process/model_frames_H200.json "$DATA"
for rec in "$@"; do
  echo "$(date -u +%T) $rec" | tee -a "$OUT/log.txt"
  python3 validate/gpu/derive_model_frames.py "$rec" --out "$W" --data "$DATA" --workers "$(nproc)" 2>&1 \
    | tail -5 | tee -a "$OUT/log.txt"
  cp "$DATA" "$OUT/"
  cp "$W/$(basename "$rec" .json).jsonl" "$OUT/" 2>/dev/null
done
echo "$(date -u +%T) done" | tee -a "$OUT/log.txt"

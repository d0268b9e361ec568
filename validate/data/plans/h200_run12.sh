#!/bin/bash
# Run 12 (2026-11-30, session 4), on an nvidia-h200-x2 machine: two H200s of one host, one probe process per
# GPU at a time (CUDA_VISIBLE_DEVICES), so each process still has a whole H200 to itself. The probes are the
# lines `python -m livebytes.validate.gpu.boundary --commands` printed before run 12, verbatim (the report's expandable
# warm answer has moved since: run 12c). Two queues run in the background (a
# cold process can outlast one 10-minute device command); every device call runs `collect`, which waits up to
# $2 seconds and packs /tmp/run12 into $OUT/run12.tgz.
#   start:   install fla-core, start both queues, collect      collect: wait, pack
# Re-running this today differs: boundary_probe.py's --pretune now passes l2norm_bwd an fp32 gradient (run 12's bf16 one
# missed the key; see validate/data/records/runs/run12/).
set -u
export OUT=/tmp/run12 PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
queue0() {   # cold at the shape: report S*, plain S*; then the warm report's l2norm tuning and its default-allocator edge
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False TRITON_CACHE_DIR=/tmp/tc_fla-report_seq_False_cold_answer python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --values 164053 --state cold --no-warmup --reset-stack --out "$OUT/fla-report_seq_False_cold_answer"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False TRITON_CACHE_DIR=/tmp/tc_fla-plain_seq_False_cold_answer python3 validate/gpu/probes/boundary_probe.py --impl fla-plain --heads 96 --values 167893 --state cold --no-warmup --reset-stack --out "$OUT/fla-plain_seq_False_cold_answer"
  cp -r /tmp/tc_fla-report_seq_False_cold_answer /tmp/tc_report   # every kernel of the report contract, tuned once
  TRITON_CACHE_DIR=/tmp/tc_report python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --pretune 1024,167338,169012 --state warm --out "$OUT/fla-report_pretune_False"
  TRITON_CACHE_DIR=/tmp/tc_report python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --pretune 1024,172819,174548 --state warm --out "$OUT/fla-report_pretune_True"
  touch $OUT/pretuned
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False TRITON_CACHE_DIR=/tmp/tc_report python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --values 167338,169012 --state warm --out "$OUT/fla-report_seq_False_warm_warmup"
  python3 validate/gpu/probes/cubin_usage.py /tmp/tc_fla-report_seq_False_cold_answer /tmp/tc_fla-plain_seq_False_cold_answer > $OUT/cubin_usage.jsonl
}
queue1() {   # cold at the shape: report 1.01 S*, plain 1.01 S*; then the warm report's expandable-segments edge
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False TRITON_CACHE_DIR=/tmp/tc_fla-report_seq_False_cold_above python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --values 165694 --state cold --no-warmup --reset-stack --out "$OUT/fla-report_seq_False_cold_above"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False TRITON_CACHE_DIR=/tmp/tc_fla-plain_seq_False_cold_above python3 validate/gpu/probes/boundary_probe.py --impl fla-plain --heads 96 --values 169572 --state cold --no-warmup --reset-stack --out "$OUT/fla-plain_seq_False_cold_above"
  while [ ! -f $OUT/pretuned ]; do sleep 5; done
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRITON_CACHE_DIR=/tmp/tc_report python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --values 172819,174548 --state warm --out "$OUT/fla-report_seq_True_warm_warmup"
}
collect() {
  local deadline=$((SECONDS + $1))
  while { [ ! -f $OUT/queue0.done ] || [ ! -f $OUT/queue1.done ]; } && [ $SECONDS -lt $deadline ]; do sleep 5; done
  nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv > $OUT/nvidia-smi.csv 2>&1
  tar czf "$REAL_OUT/run12.tgz" -C /tmp run12 && ls $OUT
}
: "${REAL_OUT:?set REAL_OUT to the OUT of the device call}"
case "${1:-}" in
start)
  mkdir -p $OUT
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core*.whl
  nvidia-smi > $OUT/nvidia-smi.txt 2>&1
  export -f queue0 queue1
  (CUDA_VISIBLE_DEVICES=0 setsid nohup bash -c 'queue0; touch $OUT/queue0.done' > $OUT/queue0.log 2>&1 < /dev/null &)
  (CUDA_VISIBLE_DEVICES=1 setsid nohup bash -c 'queue1; touch $OUT/queue1.done' > $OUT/queue1.log 2>&1 < /dev/null &)
  collect "${2:-540}" ;;
collect) collect "${2:-560}" ;;
*) echo "usage: REAL_OUT=\$OUT $0 start|collect [seconds]" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 13 (2026-12-01, session 5; issue 18): the process's own memory after its first call, per implementation,
# phase, head dim and Triton-cache state, with every loaded cubin's stack frame (validate/gpu/probes/process_memory.py).
#   matrix: cold cases side by side (each its own empty TRITON_CACHE_DIR), then the same cases warm.
#   edges:  boundary probes, one fresh process per value, cold, no warmup (arguments: the probe lines).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
case "${1:-}" in
matrix)
  cold=""; warm=""
  for d in 32 64 128 256; do
    for c in "fla-report:$d:16:16" "fla-report-fwd:$d:16:32" "fla-gdn-fwd:$d:16:32"; do
      cold="$cold;$c:4096:cold"; warm="$warm;$c:4096:warm"
    done
  done
  for d in 64 128; do cold="$cold;fla-plain:$d:16:16:4096:cold"; warm="$warm;fla-plain:$d:16:16:4096:warm"; done
  python3 validate/gpu/probes/process_memory.py --cases "$cold" --warm-cases "$warm" --deadline "${2:-380}" \
    --cache-root /tmp/pm --out /tmp/pmwork --summary "$OUT/process_memory.jsonl"
  tar -C /tmp -czf "$OUT/pmwork.tgz" pmwork ;;
matrix2)   # run 13c: T = 4100 (not a multiple of 16: Triton specialises integer arguments on divisibility by 16, and
           # the stack frames differ), and the T = 4096 cases run 13a's deadline cut
  cold=""; warm=""
  for c in fla-report:32:16:16:4100 fla-report:64:16:16:4100 fla-report:128:16:16:4100 fla-report:256:16:16:4100 \
           fla-report:128:16:16:4096 fla-report:256:16:16:4096 fla-report-fwd:128:16:32:4100 fla-report-fwd:256:16:32:4100 \
           fla-gdn-fwd:128:16:32:4100 fla-gdn-fwd:256:16:32:4100 fla-plain:64:16:16:4100 fla-plain:128:16:16:4100; do
    cold="$cold;$c:cold"; warm="$warm;$c:warm"
  done
  python3 validate/gpu/probes/process_memory.py --cases "$cold" --warm-cases "$warm" --deadline "${2:-480}" \
    --cache-root /tmp/pm2 --out /tmp/pmwork2 --summary "$OUT/process_memory.jsonl"
  tar -C /tmp -czf "$OUT/pmwork2.tgz" pmwork2 ;;
edges)
  shift
  for line in "$@"; do eval "$line"; done ;;
*) echo "usage: $0 matrix [deadline] | edges 'probe command' ..." >&2; exit 1 ;;
esac

#!/bin/bash
# Run 20 (session 9, 2026-12-01): issue 21's 4-layer boundary and issue 22's Triton 3.9.0 on one warm H200, in
# consecutive device calls (a warm machine keeps /tmp 30 s after a call):
#   layer S   (carry .whl: fla-core, flash-linear-attention, livebytes only, and .t39 holding ONE of the three 40 MiB parts) append the
#             carried Triton 3.9.0 part to /tmp/t39.tar.xz (validate/data/plans/h200_run18_triton39.sh part), then the
#             4-layer KDA boundary probe at S tokens, cold (validate/data/plans/h200_run17_edges.sh layer S): plan's S*
#             232,448 (the replay fits) and ceil(1.01 S*) 234,773 (the replay runs out of memory in the first
#             steady call, kda.dg2).
#   gdn       (carry .whl and .t39 with the last part) append it, unpack Triton 3.9.0 and run h200_run18_triton39.sh's `gdn`: GDN fwd+bwd records and process
#             memory (issue 22 points 1 and 2).
#   trace     (no carry) GDN fwd+bwd allocation traces at the seven shapes run 6b traced GDN's forward at (issue 22
#             point 4; autotuning off, first config), then h200_run18_triton39.sh's `kda39` (point 5) in what is left.
set -u
here=$(dirname "$0")
case "${1:-}" in
layer) [ -n "${2:-}" ] || { echo "usage: $0 layer S" >&2; exit 1; }
  ls .t39/part_* > /dev/null 2>&1 && bash "$here/h200_run18_triton39.sh" part
  bash "$here/h200_run17_edges.sh" layer "$2" ;;
gdn) ls .t39/part_* > /dev/null 2>&1 && bash "$here/h200_run18_triton39.sh" part
  bash "$here/h200_run18_triton39.sh" install && bash "$here/h200_run18_triton39.sh" gdn ;;
trace)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/t39site:/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  timeout 240 python3 -m livebytes.validate.gpu.trace --impl fla-gdn@0.6.0 --out "$OUT/traces/fla-gdn_0.6.0" \
    --shapes "2,1030,1,2,64,64;2,2048,1,2,64,64;3,1030,1,2,64,64;2,1030,2,4,64,64;2,1030,1,4,64,64;2,1030,1,2,128,64;2,1030,1,2,64,128" \
    > "$OUT/trace_gdn.log" 2>&1
  tar -czf "$OUT/traces20.tgz" -C "$OUT" traces && rm -rf "$OUT/traces"
  KDA39_S=$((570 - SECONDS)) bash "$here/h200_run18_triton39.sh" kda39 ;;
*) echo "usage: $0 layer S | gdn | trace" >&2; exit 1 ;;
esac

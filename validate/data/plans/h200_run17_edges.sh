#!/bin/bash
# Run 17 (session 7, 2026-12-01; ran: `a 234367` (17a), `cold64 236711` (17b), `cold256 76672` (17c), `cold256 77439`
# (17d); records in validate/data/records/boundary/h200_run17*, validate/data/records/runs/run17/). Run 19 (session 8,
# 2026-12-01; ran: `fill64` (19a), `pocket64 76629` (19b), `layer 239232` (19c), `layer 215000` (19d); records in
# validate/data/records/boundary/h200_run19*, validate/data/records/runs/run19/).
# Ran as run 20 (session 9; validate/data/records/runs/run20/, via validate/data/plans/h200_run20.sh): `layer 232448`
# (plan's S*; the replay fits) and `layer 234773` (ceil(1.01 S*); the replay runs out of memory), one device call each
# (~300 s cold), carry .whl; then commit both probe files as h200_run20*_fla-kda-layer_L4_H32_D128_* and check
# tests/test_probe_replay.py.
# First written in session 6 for issue 18's edges that no device time was left for. Carry .whl (fla-core
# 0.6.0 and the livebytes wheel). One fresh process per value, empty TRITON_CACHE_DIR, the first call at the shape,
# then two steady calls (validate/gpu/probes/boundary_probe.py --no-warmup); each cold process takes about 300 s, so one
# or two per device call, in quick succession (the machine keeps /tmp 30 s after a call).
#   cold64 S   fla-kda@0.6.0 report D64 H128 at S tokens, cold; its filled cache stays in /tmp/tc64 for warm64.
#              plan (session 6): S* 234,367, ceil(1.01 S*) 236,711.
#   cold256 S  the same at D256 H96 (plan: S* 76,672, ceil(1.01 S*) 77,439; D256's frames are measured at H16 only:
#              the model assumes D256's largest for H96, named in plan's output).
#   frames64   the process-memory probe of report D64 H128 (T 4,096), cold then warm over its own cache: the tuned
#              configs' frames at D64 H128, which plan's warm answer needs (today it assumes the cold frames, 234,752,
#              which 1.01x would likely still fit). Commit its jsonl under validate/data/records/runs/run17/, add it to
#              validate/check/frames.py's MATRICES, regenerate (python -m livebytes.validate.check.frames), then plan
#              --triton-cache warm gives warm64's S.
#   warm64 S   report D64 H128 at S tokens over a copy of /tmp/tc64 (warm: the tuned configs only).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
probe() {   # $1 dim, $2 heads, $3 value, $4 state, $5 cache dir, $6 seconds (default 560)
  TRITON_CACHE_DIR="$5" timeout "${6:-560}" python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads "$2" --dim "$1" \
    --values "$3" --state "$4" --no-warmup --out "$OUT/fla-report_D$1_H$2_$4_$3"
}
# The warm chain over /tmp/tc64 (filled by cold64 at $1 tokens): the tuned configs' frames at that shape, plan's warm
# answer from them (the installed copy's frames regenerated with this file), l2norm tuned ahead at S and ceil(1.01 S)
# in a separate process, then one fresh warm process per value.
warmchain() {
  python3 validate/gpu/probes/process_memory.py --warm-cases "fla-report:64:128:128:$1:warm" --warm-over /tmp/tc64 \
    --filled-by "run 17a: validate/gpu/probes/boundary_probe.py --impl fla-report --dim 64 --heads 128 --values $1 --state cold --no-warmup" \
    --deadline 120 --cache-root /tmp/pm17 --out /tmp/pmwork17 --summary "$OUT/process_memory_17.jsonl" || return 1
  tar -C /tmp -czf "$OUT/kernels_17.tgz" pmwork17
  site=/tmp/site/livebytes
  mkdir -p $site/validate/data/records/runs/run17 && cp "$OUT/process_memory_17.jsonl" $site/validate/data/records/runs/run17/
  sed -i 's|"run16/process_memory_16b.jsonl")|"run16/process_memory_16b.jsonl", "run17/process_memory_17.jsonl")|' $site/validate/check/frames.py
  python3 -m livebytes.validate.check.frames || return 1
  /tmp/site/bin/livebytes plan --impl fla-kda@0.6.0 --gpu H200 --heads 128 --dim 64 --contract report --triton-cache warm \
    --json > "$OUT/plan_warm64.json" || return 1
  local s a
  s=$(python3 -c "import json; print(json.load(open('$OUT/plan_warm64.json'))['results'][0]['shape']['seq'])")
  a=$(( (s * 101 + 99) / 100 ))
  echo "warm plan: S* $s, ceil(1.01 S*) $a"
  rm -rf /tmp/tcw && cp -r /tmp/tc64 /tmp/tcw
  TRITON_CACHE_DIR=/tmp/tcw timeout 90 python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 128 --dim 64 \
    --pretune "$s,$a" --state warm --out "$OUT/fla-report_D64_H128_pretune" || return 1
  for v in $s $a; do
    d=$(mktemp -d /tmp/tcw.XXXX) && cp -r /tmp/tcw/. "$d"/ && probe 64 128 "$v" warm "$d" 120
  done
}
# pocket64, in two device calls in quick succession (the machine keeps /tmp 30 s after a call; session 8):
#   fill64: fill a D64 H128 cache cold at 1 x 8192 (a cold record of its own), tune l2norm ahead at every value into
#           /tmp/tcw;
#   pocket64 [cold256 S]: one fresh warm process per value over a copy of /tmp/tcw (the replay says 242,560, 243,500,
#           244,500 and 248,500 fail, 246,500 fits), each tarred as it ends; then, if given, D256 H96 cold at S.
POCKET="242560 243500 244500 246500 248500"
fill64() {
  rm -rf /tmp/tc64 && mkdir -p /tmp/tc64 && probe 64 128 8192 cold /tmp/tc64 380 || return 1
  rm -rf /tmp/tcw && cp -r /tmp/tc64 /tmp/tcw
  TRITON_CACHE_DIR=/tmp/tcw timeout 170 python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 128 --dim 64 \
    --pretune "${POCKET// /,}" --state warm --out "$OUT/fla-report_D64_H128_pretune"
}
pocket64() {
  [ -d /tmp/tcw ] || { echo "no /tmp/tcw: run fill64 first, within 30 s" >&2; return 1; }
  for v in $POCKET; do
    d=$(mktemp -d /tmp/tcw.XXXX) && cp -r /tmp/tcw/. "$d"/ && probe 64 128 "$v" warm "$d" 90
    tar -czf "$OUT/pocket64.tgz" -C "$OUT" $(cd "$OUT" && ls -d fla-report_D64_H128_warm_*)
  done
  rm -rf "$OUT"/fla-report_D64_H128_warm_*
}
case "${1:-}" in
fill64)  fill64 ;;
pocket64) pocket64; [ -n "${2:-}" ] && { d=$(mktemp -d /tmp/tc.XXXX) && probe 256 96 "$2" cold "$d" 400; } ;;
a)       rm -rf /tmp/tc64 && mkdir -p /tmp/tc64 && probe 64 128 "${2:-234367}" cold /tmp/tc64 400; warmchain "${2:-234367}" ;;
warmchain) warmchain "$2" ;;
cold64)  rm -rf /tmp/tc64 && mkdir -p /tmp/tc64 && probe 64 128 "$2" cold /tmp/tc64 ;;
cold256) d=$(mktemp -d /tmp/tc.XXXX) && probe 256 96 "$2" cold "$d" ;;
frames64)
  python3 validate/gpu/probes/process_memory.py --cases "fla-report:64:128:128:4096:cold" \
    --warm-cases "fla-report:64:128:128:4096:warm" --deadline 520 --cache-root /tmp/pm17 --out /tmp/pmwork17 \
    --summary "$OUT/process_memory_17.jsonl" && tar -C /tmp -czf "$OUT/kernels_17.tgz" pmwork17 ;;
warm64)  d=$(mktemp -d /tmp/tcw.XXXX) && cp -r /tmp/tc64/. "$d"/ && probe 64 128 "$2" warm "$d" ;;
layer)   TRITON_CACHE_DIR=$(mktemp -d /tmp/tcl.XXXX) timeout 570 python3 validate/gpu/probes/boundary_probe.py --impl fla-kda-layer \
           --heads 32 --dim 128 --hidden 2304 --layers 4 --values "$2" --state cold --no-warmup --out "$OUT/fla-kda-layer_L4_$2" ;;
*) echo "usage: $0 a [S] | warmchain S | fill64 | pocket64 [S256] | cold64 S | cold256 S | frames64 | warm64 S | layer S" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 22 (prepared in session 10, run in session 11: validate/data/records/runs/run22/README.md): what issue 22 still lacked
# after run 21 (validate/data/records/runs/run21/), on one
# warm H200 in consecutive calls (each within 30 s of the last, or /tmp and Triton are gone). Triton 3.9.0 travels as
# in run 21: `h200_run21.sh part x` (carry .whl and .t39 = part 1), `h200_run18_triton39.sh part` (carry .t39 = part
# 2), `h200_run21.sh install` (carry .whl and .t39 = part 3); then, each a call of its own, in this order:
#   kda39    (~350-580 s) issue 22 point 5: fla-kda@0.6.0 report H64 D128 1 x 8K and 2 x 8K, one cold process, under
#            3.9.0 (run 21f's first shape did not finish in 341 s; under 3.6.0 run 9a recorded both): records, then
#            compare autotuned_kernels, reserved (the L2-flush segments) and device_memory with run 9a's
#   gdnd64   (~450 s) the D64 GDN forward+backward record run 21d lost (1 x 8K H16/HV32 D64, and 2 x 8K), one cold
#            process, then GDN's process memory at D64, cold then warm over its own cache (point 2's other head dim)
#   gdnlayer (~300 s) the GDN-layer records (validate/data/plans/h200_v4_layers.json's GDN entry: 1 and 4 layers, H16/HV32
#            hidden 2048), cold
#   kdapm    (~360 s) point 5's process memory: fla-kda report H16 D128 and D64 T 4,096, cold then warm over its own
#            cache, under 3.9.0 (run 13's cases under 3.6.0); added in session 11 after run 22g asked the probe for
#            'fla-kda', a harness it does not have (the probe now refuses it)
# Every step packs what it wrote into one archive: record names hold '=' (hv=32), which the transfer refuses.
set -u
here=$(dirname "$0")
. "$here/t39_env.sh"
pack() { tar -czf "$OUT/$1.tgz" -C "$OUT" "$1" && rm -rf "${OUT:?}/$1"; }
case "${1:-}" in
kda39)
  t39
  timeout 580 python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_kda_t39.json --out "$OUT/kda39" --deadline 570 \
    > "$OUT/kda39.log" 2>&1; pack kda39 ;;
gdnd64)
  t39
  echo '[{"impl": "fla-gdn@0.6.0", "shapes": "1,8K,16,64,hv=32;2,8K,16,64,hv=32", "triton_cache": "cold"}]' > /tmp/gdn22.json
  timeout 300 python3 -m livebytes.validate.gpu.batch /tmp/gdn22.json --out "$OUT/gdn22" --deadline 290 > "$OUT/gdn22.log" 2>&1
  pack gdn22
  cases="fla-gdn:64:16:32:4096:cold"
  timeout 270 python3 validate/gpu/probes/process_memory.py --cases "$cases" --warm-cases "${cases//cold/warm}" \
    --deadline 260 --cache-root /tmp/pm22 --out /tmp/pmwork22 --summary "$OUT/process_memory_22.jsonl" > "$OUT/pm22.log" 2>&1
  tar -C /tmp -czf "$OUT/kernels_22.tgz" pmwork22 ;;
gdnlayer)
  t39
  python3 -c "import json; json.dump([g for g in json.load(open('validate/data/plans/h200_v4_layers.json')) if g['impl'].startswith('fla-gdn')], open('/tmp/gdnl22.json', 'w'))"
  timeout 560 python3 -m livebytes.validate.gpu.batch /tmp/gdnl22.json --out "$OUT/gdnl22" --deadline 550 > "$OUT/gdnl22.log" 2>&1
  pack gdnl22 ;;
kdapm)
  t39
  cases="fla-report:128:16:16:4096:cold;fla-report:64:16:16:4096:cold"
  timeout 440 python3 validate/gpu/probes/process_memory.py --cases "$cases" --warm-cases "${cases//cold/warm}" \
    --deadline 430 --cache-root /tmp/pm22r --out /tmp/pmwork22r --summary "$OUT/process_memory_22r.jsonl" > "$OUT/pm22r.log" 2>&1
  tar -C /tmp -czf "$OUT/kernels_22r.tgz" pmwork22r ;;
*) echo "usage: $0 kda39 | gdnd64 | gdnlayer | kdapm" >&2; exit 1 ;;
esac

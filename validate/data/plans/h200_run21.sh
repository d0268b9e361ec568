#!/bin/bash
# Run 21 (prepared in session 9, run in session 10: validate/data/records/runs/run21/README.md): what issue 22 still lacked,
# on a warm H200 in consecutive calls. Triton 3.9.0 travels as in run 20 (validate/data/plans/h200_run18_triton39.sh
# prepare: three 40 MiB parts, each carried as .t39 in its own call: keep them in .t39parts/ (git-ignored) and move the
# next one alone into .t39/ before each call; .whl holds fla-core, flash-linear-attention and livebytes only). A call
# must follow the last within 30 s, or the machine (and /tmp with the parts) is gone.
#   part  L   (carry .whl, .t39 = one part) append it to /tmp/t39.tar.xz, then the KDA-layer records at H16/HV32
#             hidden 2048 (validate/data/plans/h200_v4_layers_h16.json, one cold process, ~300 s; L: any second argument
#             skips the records and only appends, as run 21 did)
#   install   (carry .whl, .t39 = the last part) append, unpack (h200_run18_triton39.sh install)
#   gdnedge S (no carry) issue 22 point 3: fla-gdn@0.6.0 H16/HV32 D128 cold at S tokens, one fresh process, the
#             first call at the shape, then two steady calls (~215-235 s). Run 21: 918,912 (then plan's answer) failed
#             in its first call, which found dhu's held dv_local; plan's 895,488 fitted, 904,443 failed. Under the ptxas
#             of run 20 (TRITON_PTXAS_BLACKWELL_PATH: the process-memory data are of kernels compiled so).
#   gdnrest   (no carry) GDN records (equal heads H32 D128 8K and 32K, H16/HV32 D64) in one cold process; run 21d ran
#             these three instead as three fresh groups side by side, from an inline command that lost the D64 record
#             by not packing it, then the GDN-layer records (validate/data/plans/h200_v4_layers.json's GDN
#             entry), packed into records21.tgz: record names hold '=', which the transfer refuses
#   Left for a later run (each needs about 250-350 s cold): kda39 (h200_run18_triton39.sh kda39: its first shape did
#   not finish in 341 s under 3.9.0), the D64 GDN record, GDN's process memory at D64, the GDN-layer records.
set -u
here=$(dirname "$0")
. "$here/t39_env.sh"
case "${1:-}" in
part)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  bash "$here/h200_run18_triton39.sh" part || exit 1
  [ -n "${2:-}" ] && exit 0
  PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False timeout 540 \
    python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_layers_h16.json --out "$OUT/layers_h16" --deadline 530 \
    > "$OUT/layers_h16.log" 2>&1
  tar -czf "$OUT/layers21.tgz" -C "$OUT" layers_h16 && rm -rf "$OUT/layers_h16" ;;
install) bash "$here/h200_run18_triton39.sh" part && bash "$here/h200_run18_triton39.sh" install ;;
gdnedge) [ -n "${2:-}" ] || { echo "usage: $0 gdnedge S" >&2; exit 1; }
  t39
  TRITON_CACHE_DIR=$(mktemp -d /tmp/tcg.XXXX) timeout 570 python3 validate/gpu/probes/boundary_probe.py --impl fla-gdn \
    --heads 16 --v-heads 32 --dim 128 --values "$2" --state cold --no-warmup --out "$OUT/fla-gdn_H16_HV32_D128_$2" ;;
gdnrest)
  t39
  echo '[{"impl": "fla-gdn@0.6.0", "shapes": "1,8K,32,128;1,32K,32,128;1,8K,16,64,hv=32", "triton_cache": "cold"}]' > /tmp/gdn21.json
  timeout 300 python3 -m livebytes.validate.gpu.batch /tmp/gdn21.json --out "$OUT/gdn21" --deadline 290 > "$OUT/gdn21.log" 2>&1
  python3 -c "import json; json.dump([g for g in json.load(open('validate/data/plans/h200_v4_layers.json')) if g['impl'].startswith('fla-gdn')], open('/tmp/gdnl21.json', 'w'))"
  timeout 260 python3 -m livebytes.validate.gpu.batch /tmp/gdnl21.json --out "$OUT/gdn21" --deadline 250 > "$OUT/gdnl21.log" 2>&1
  tar -czf "$OUT/records21.tgz" -C "$OUT" gdn21 && rm -rf "$OUT/gdn21" ;;
*) echo "usage: $0 part [append-only] | install | gdnedge S | gdnrest" >&2; exit 1 ;;
esac

# Shared by the whole-model run plans (h200_run23.sh, h200_run25.sh; sourced, not run): results land under $W/<step>
# as they appear and are packed into $OUT/<step>.tgz every 30 s and at the end, so a killed command still returns them.
# The sourcing plan sets W (its work folder), cfg (the model configs) and, per step, STEP; DEADLINE bounds each probe.
pack() { tar -czf "$OUT/$1.tgz.part" -C "$W" "$1" 2>/dev/null && mv "$OUT/$1.tgz.part" "$OUT/$1.tgz"; }
packing() { while true; do sleep 30; pack "$1"; done; }
probe() {   # tag config mbs seq [flags...]: one cold process (an empty TRITON_CACHE_DIR of its own)
  local tag=$1 config=$2 mbs=$3 seq=$4; shift 4
  TRITON_CACHE_DIR=/tmp/tc_$tag timeout "${DEADLINE:-560}" python3 validate/gpu/probes/model_step.py --config "$cfg/$config.json" \
    --mbs "$mbs" --seq "$seq" --state cold --out "$W/$STEP" --tag "$tag" "$@" > "$W/$STEP/$tag.log" 2>&1
}

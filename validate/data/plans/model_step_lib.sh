# Shared by the whole-model run plans (h200_run23.sh onwards; sourced, not run): results land under $W/<step> as they
# appear and are packed into $OUT/<step>.tgz every 30 s and at the end, so a killed command still returns them.
# The sourcing plan sets W (its work folder), cfg (the model configs) and, per step, STEP; DEADLINE bounds each probe;
# PACK_EXCLUDE (e.g. '*.pickle') keeps a pattern out of the packs (an allocator snapshot travels on its own, gzipped,
# as it may pass what one returned file may hold: ``snapshot``).
pack() { tar ${PACK_EXCLUDE:+--exclude="$PACK_EXCLUDE"} -czf "$OUT/$1.tgz.part" -C "$W" "$1" 2>/dev/null \
  && mv "$OUT/$1.tgz.part" "$OUT/$1.tgz"; }
packing() { while true; do sleep 30; pack "$1"; done; }
probe() {   # tag config mbs seq [flags...]: one cold process (an empty TRITON_CACHE_DIR of its own)
  local tag=$1 config=$2 mbs=$3 seq=$4; shift 4
  TRITON_CACHE_DIR=/tmp/tc_$tag timeout "${DEADLINE:-560}" python3 validate/gpu/probes/model_step.py --config "$cfg/$config.json" \
    --mbs "$mbs" --seq "$seq" --state cold --out "$W/$STEP" --tag "$tag" "$@" > "$W/$STEP/$tag.log" 2>&1
}
snapshot() {   # tag: the probe's allocator snapshot (--history), gzipped into $OUT
  [ -f "$W/$STEP/$1.snapshot.pickle" ] && gzip -c "$W/$STEP/$1.snapshot.pickle" > "$OUT/$1.snapshot.pickle.gz"
}
case_run() {   # step tag config mbs seq [flags...]: one case in its own step folder, with the GPU's line, packed as it goes
  STEP=$1; local tag=$2; shift 2; mkdir -p "$W/$STEP"
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv > "$W/$STEP/gpu.csv"
  packing "$STEP" & local pk=$!
  probe "$tag" "$@"; echo "rc=$?" >> "$W/$STEP/$tag.log"
  kill $pk 2>/dev/null; pack "$STEP"; snapshot "$tag"
}
part() {   # one carried part of Triton 3.9.0 (.t39/, h200_run18_triton39.sh prepare) appended to what earlier calls left
  [ -d .t39 ] && cat .t39/part_* >> /tmp/t39.tar.xz; ls -la /tmp/t39.tar.xz
}

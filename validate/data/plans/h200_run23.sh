#!/bin/bash
# Run 23 (session 12, issue 32): whole-model training steps of flash-linear-attention 0.6.0's KDAForCausalLM on the H200,
# each a fresh cold process (an empty TRITON_CACHE_DIR of its own), measured by validate/gpu/probes/model_step.py: the first
# step (the process's first call), then two steady steps, peaks reset before each; every step's line lands in
# $OUT/models/<tag>.jsonl as it ends, the record in <tag>.json. Beside them, on this machine's CPU, the tracer traces the
# same configurations under the image's torch 2.11 (the records' torch): $OUT/traces/<tag>.json.gz.
#   install   the wheels in .whl/ (fla-core, flash-linear-attention, livebytes) into /tmp/site
#   records   four KDA configurations side by side (validate/data/model_configs/), then the traces
#   history   (session 14) k2-ckpt and k4-1.3b again, side by side, cold, with the allocator's event trace (--history):
#             their steady reserved missed by -64 and -264 MiB in run 23; the trace shows which block choice differs
#   heldout   (session 15) four KDA configurations no record had, side by side, cold, their predictions committed before
#             the run (validate/data/records/models/predictions/run26/): issue 32's held-out check
#   edge V [flags]  the 1.3B configuration (kda-1.3b, checkpointing, AdamW) at MBS 1 x V tokens, alone on the GPU,
#             cold; flags go to the probe (--history: the allocator's event trace as <tag>.snapshot.pickle)
# At most 8 files come back from $OUT: everything is written under /tmp/run23 as it appears and packed into
# $OUT/<step>.tgz every 30 s and at the end, so a killed command still returns what it had.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
cfg=validate/data/model_configs
W=/tmp/run23
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing, probe
trace() {   # tag config mbs seq [ckpt] [packed]: the tracer's spec for the same run, at the learning shapes
  python3 - "$@" <<'PY'
import gzip, json, subprocess, sys
tag, config, ckpt, packed = sys.argv[1], sys.argv[2], sys.argv[5] == "1", sys.argv[6] == "1"
from livebytes.lifetimes.traced.model import Request, canonical_config, trace_spec, layer_counts
req = Request(canonical_config(json.load(open(f"validate/data/model_configs/{config}.json"))), "H200", checkpoint=ckpt, packed=packed)
for n in layer_counts(req.depth):
    spec = trace_spec(req, n)
    p = subprocess.run([sys.executable, "-m", "livebytes.tracer", "-"], input=json.dumps(spec), capture_output=True, text=True)
    if p.returncode:
        print(p.stderr[-2000:], file=sys.stderr); continue
    with gzip.open(f"{sys.argv[7]}/{tag}_L{n}.json.gz", "wt") as fh:
        fh.write(p.stdout)
PY
}
case "${1:-}" in
install)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -c "import fla, transformers, torch, triton; print(torch.__version__, triton.__version__, transformers.__version__)" ;;
records)
  STEP=records; DEADLINE=${DEADLINE:-480}; mkdir -p "$W/records" "$W/traces"
  packing records & packing traces &
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$W/records/gpu.csv"
  probe k1-packed kda-h1024-l2-v32k 2 4096 --packed & p1=$!
  probe k2-ckpt kda-h2048-l4-v32k 1 16384 --checkpoint & p2=$!
  probe k3-v152k kda-h1536-l8-v152k 1 8192 & p3=$!
  probe k4-1.3b kda-1.3b 1 8192 --checkpoint & p4=$!
  ( trace k1-packed kda-h1024-l2-v32k 2 4096 0 1 "$W/traces"; trace k2-ckpt kda-h2048-l4-v32k 1 16384 1 0 "$W/traces"
    trace k3-v152k kda-h1536-l8-v152k 1 8192 0 0 "$W/traces"; trace k4-1.3b kda-1.3b 1 8192 1 0 "$W/traces" ) \
    > "$W/traces/trace.log" 2>&1 & pt=$!
  wait $p1 $p2 $p3 $p4; DEADLINE=1 true
  timeout 60 bash -c "while kill -0 $pt 2>/dev/null; do sleep 2; done"
  pack records; pack traces; kill %1 %2 2>/dev/null ;;
history)
  STEP=history; mkdir -p "$W/history"
  packing history &
  probe h-k2-ckpt kda-h2048-l4-v32k 1 16384 --checkpoint --history & p1=$!
  probe h-k4-1.3b kda-1.3b 1 8192 --checkpoint --history & p2=$!
  wait $p1 $p2
  pack history; kill %1 2>/dev/null ;;
heldout)
  STEP=heldout; mkdir -p "$W/heldout"
  packing heldout &
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$W/heldout/gpu.csv"
  probe ho1-v64k kda-h1536-l6-v64k 2 4096 & p1=$!
  probe ho2-ckpt32k kda-h2048-l12-v100k 1 32768 --checkpoint & p2=$!
  probe ho3-ckpt-mbs4 kda-h1024-l16-v32k 4 8192 --checkpoint & p3=$!
  probe ho4-v152k kda-h2048-l2-v152k 1 16384 & p4=$!
  wait $p1 $p2 $p3 $p4
  pack heldout; kill %1 2>/dev/null ;;
edge)
  STEP=edge; mkdir -p "$W/edge"
  packing edge &
  V=$2; shift 2
  probe "edge-1.3b-$V" kda-1.3b 1 "$V" --checkpoint "$@"
  pack edge; kill %1 2>/dev/null ;;
*) echo "usage: $0 install | records | history | heldout | edge V" >&2; exit 1 ;;
esac

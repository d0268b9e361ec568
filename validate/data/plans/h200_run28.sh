#!/bin/bash
# Run 28 (issue 32 point 3): whole-model training steps in fp32-amp on the H200: fp32 parameters, the forward and loss
# under torch.autocast("cuda", dtype=torch.bfloat16) (HF Trainer's bf16=True through accelerate), backward and AdamW
# outside it (fp32 gradients and states). Each a fresh cold process (an empty TRITON_CACHE_DIR of its own), measured by
# validate/gpu/probes/model_step.py --precision fp32-amp (protocol model-step-v1, as run 23's bf16 records): the first
# step, then two steady steps, peaks reset before each; lines land in $OUT/<step>.tgz as they appear. Beside them, on
# this machine's CPU, the tracer traces the same configurations under the image's torch 2.11 (the records' torch):
# its autocast emulation checks the policy table against torch 2.11's AutocastCUDA registrations there.
#   install   the wheels in .whl/ (fla-core, flash-linear-attention, livebytes) into /tmp/site (as run 23)
#   fp32amp   two KDA configurations side by side (kda-h1024-l2-v32k 1 x 8192; kda-h2048-l4-v32k --checkpoint
#             1 x 16384), cold, then their traces ($OUT/fp32amp.tgz: fp32amp/<tag>.json, traces/<tag>_L<n>.json.gz)
#   gdn       gdn-h1024-l2-v32k 1 x 8192 in fp32-amp, cold, under Triton 3.9.0 (fla-core 0.6.0 refuses the gated
#             backward on Hopper below 3.7.1): first h200_run18_triton39.sh prepare (here) | part | install (GPU), as
#             run 25 did; no trace (this CPU's tracer refuses GDN under the image's Triton 3.6.0 the same way)
# Then here: commit the records under validate/data/records/models/ (h200_run28_<tag>.json) and run
#   livebytes validate --from-records validate/data/records/models/
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
cfg=validate/data/model_configs
W=/tmp/run28
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing, probe
trace() {   # tag config ckpt packed outdir: the tracer's spec for the same run in fp32-amp, at the learning shapes
  python3 - "$@" <<'PY'
import gzip, json, subprocess, sys
tag, config, ckpt, packed, out = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1", sys.argv[5]
from livebytes.lifetimes.traced.model import Request, canonical_config, trace_spec, layer_counts
req = Request(canonical_config(json.load(open(f"validate/data/model_configs/{config}.json"))), "H200",
              precision="fp32-amp", checkpoint=ckpt, packed=packed)
for n in layer_counts(req.depth):
    p = subprocess.run([sys.executable, "-m", "livebytes.tracer", "-"], input=json.dumps(trace_spec(req, n)),
                       capture_output=True, text=True)
    if p.returncode:
        print(p.stderr[-2000:], file=sys.stderr); continue
    with gzip.open(f"{out}/{tag}_L{n}.json.gz", "wt") as fh:
        fh.write(p.stdout)
PY
}
case "${1:-}" in
install)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -c "import fla, transformers, torch, triton; print(torch.__version__, triton.__version__, transformers.__version__)" ;;
fp32amp)
  STEP=fp32amp; DEADLINE=${DEADLINE:-420}; mkdir -p "$W/fp32amp" "$W/traces"
  packing fp32amp & packing traces &
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$W/fp32amp/gpu.csv"
  probe a1-kda-8k kda-h1024-l2-v32k 1 8192 --precision fp32-amp & p1=$!
  probe a2-kda-ckpt kda-h2048-l4-v32k 1 16384 --checkpoint --precision fp32-amp & p2=$!
  ( trace a1-kda-8k kda-h1024-l2-v32k 0 0 "$W/traces"; trace a2-kda-ckpt kda-h2048-l4-v32k 1 0 "$W/traces" ) \
    > "$W/traces/trace.log" 2>&1 & pt=$!
  wait $p1 $p2
  timeout 120 bash -c "while kill -0 $pt 2>/dev/null; do sleep 2; done"
  pack fp32amp; pack traces; kill %1 %2 2>/dev/null ;;
gdn)
  export PYTHONPATH=/tmp/t39site:/tmp/site TRITON_PTXAS_BLACKWELL_PATH=/tmp/t39site/triton/backends/nvidia/bin/ptxas
  python3 -c "import triton; assert triton.__version__ == '3.9.0', triton.__version__" || exit 1
  STEP=gdn; DEADLINE=${DEADLINE:-540}; mkdir -p "$W/gdn"
  packing gdn &
  probe a3-gdn-8k gdn-h1024-l2-v32k 1 8192 --precision fp32-amp
  pack gdn; kill %1 2>/dev/null ;;
*) echo "usage: $0 install | fp32amp | gdn" >&2; exit 1 ;;
esac

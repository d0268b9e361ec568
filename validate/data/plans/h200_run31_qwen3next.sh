#!/bin/bash
# Run 31 (issue 36 point 1, first steps): transformers 5.17's Qwen3NextForCausalLM training steps on the H200, two small
# hybrid configurations (Gated DeltaNet layers, one full-attention layer, a mixture of experts in every block), bf16,
# AdamW, one sequence per batch, each a fresh cold process measured by validate/gpu/probes/model_step.py (protocol
# model-step-v1, as runs 23/25/28), with the allocator's event trace (--history: host-side only) and the SDPA kernel
# torch picks for the config's full attention (--sdpa-choice, asked after the steps). Predictions committed before the
# run: validate/data/records/models/predictions/run31/ (this tree's code).
#   q1  q3n-h1024-l4-e16-v32k (4 layers, full attention at layer 3, 16 experts top 2, head dim 128), 1 x 8192
#   q2  q3n-h2048-l2-d256-v32k (2 layers, full attention at layer 1, 8 experts top 2, head dim 256), 1 x 4096
# and (step `kimi`, added in session 18 with its predictions, the image's Triton 3.6.0) KimiLinearForCausalLM:
#   k1  kimi-h1024-l4-e16-v32k (4 layers: KDA x3 then MLA; layer 0 dense, then 16 experts top 2), 1 x 8192
#   k2  kimi-h2048-l2-e8-v32k (2 layers: KDA then MLA; layer 0 dense, layer 1 8 experts top 2), 1 x 16384
# What the run checks, beyond the peaks: (a) which SDPA kernel torch 2.11 runs (the tracer says cuDNN attention for
# both: cuDNN 9.19 > 9.15 on sm90 puts it first; head dim 256 within its sm90 limit from cuDNN 9.10); (b) the cuDNN
# graph workspaces, not modelled (sized by cuDNN's plan): the history shows each call's allocations; (c) what
# torch._grouped_mm allocates inside each call (not modelled); (d) causal_conv1d runs transformers' torch fallback
# (the image has no causal-conv1d package; the run's log says so).
# Triton 3.9.0 (fla-core 0.6.0 refuses the Gated DeltaNet backward on Hopper below 3.7.1) travels as in run 18/25/28:
#   here      h200_run18_triton39.sh prepare (the .t39 parts); .whl/ with fla-core 0.6.0, flash-linear-attention
#             0.6.0 and this tree's livebytes wheel (as run 23)
#   GPU       h200_run18_triton39.sh part (once per carried part) | install (carry .whl), then this script's steps:
#   records   q1 and q2 side by side, cold (about 2 GB and 3 GB at their peaks); $OUT/records.tgz
#   traces    the tracer on the GPU machine's CPU under the image's torch 2.11 (the records' torch), the spec of each
#             record's request (lifetimes.traced.model.trace_spec): $OUT/traces.tgz, for validate.check.store_traces
# Then here: commit the records as validate/data/records/models/h200_run31_<tag>.json, the traces under
# validate/data/records/models/traces/torch-2.11.0+cu130_triton-3.9.0/, and compare with the committed predictions.
set -u
. "$(dirname "$0")/t39_env.sh"           # t39: Triton 3.9.0 ahead of the image's, our wheels, the legacy ptxas
cfg=validate/data/model_configs
W=/tmp/run31
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing, probe
trace() {   # tag config: the tracer's specs for the record's request (bf16, AdamW, no checkpointing, not packed)
  python3 - "$@" <<'PY'
import gzip, json, subprocess, sys
tag, config, out = sys.argv[1], sys.argv[2], sys.argv[3]
from livebytes.lifetimes.traced.model import Request, canonical_config, layer_counts, trace_spec
req = Request(canonical_config(json.load(open(f"validate/data/model_configs/{config}.json"))), "H200")
for n in layer_counts(req.depth, "qwen3_next"):
    p = subprocess.run([sys.executable, "-m", "livebytes.tracer", "-"], input=json.dumps(trace_spec(req, n)),
                       capture_output=True, text=True)
    if p.returncode:
        print(p.stderr[-2000:], file=sys.stderr); continue
    with gzip.open(f"{out}/{tag}_L{n}.json.gz", "wt") as fh:
        fh.write(p.stdout)
PY
}
case "${1:-}" in
records)
  t39
  STEP=records; DEADLINE=${DEADLINE:-480}; mkdir -p "$W/records"
  packing records &
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$W/records/gpu.csv"
  probe q1-l4-8k q3n-h1024-l4-e16-v32k 1 8192 --history --sdpa-choice & p1=$!
  probe q2-d256-4k q3n-h2048-l2-d256-v32k 1 4096 --history --sdpa-choice & p2=$!
  wait $p1 $p2
  pack records; kill %1 2>/dev/null ;;
kimi)      # Triton 3.6.0 (the image's): install first (h200_run28.sh install)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  STEP=kimi; DEADLINE=${DEADLINE:-480}; mkdir -p "$W/kimi"
  packing kimi &
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$W/kimi/gpu.csv"
  probe k1-l4-8k kimi-h1024-l4-e16-v32k 1 8192 --history --sdpa-choice & p1=$!
  probe k2-l2-16k kimi-h2048-l2-e8-v32k 1 16384 --history --sdpa-choice & p2=$!
  wait $p1 $p2
  pack kimi; kill %1 2>/dev/null ;;
traces)
  t39
  STEP=traces; mkdir -p "$W/traces"
  packing traces &
  ( trace q1-l4-8k q3n-h1024-l4-e16-v32k "$W/traces"; trace q2-d256-4k q3n-h2048-l2-d256-v32k "$W/traces" ) \
    > "$W/traces/trace.log" 2>&1
  pack traces; kill %1 2>/dev/null ;;
*) echo "usage: $0 records | kimi | traces" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 32 (issue 36 point 2, prepared in the wt-fsdp session, not run): FSDP2 at world size 1 on the H200, through the
# code path a sharded run takes (torch.distributed with NCCL, one process, rank 0 of 1, MASTER_ADDR localhost):
# validate/probes/model_step.py --fsdp 1 builds the model as every model-step record does (protocol model-step-v1: on
# the CPU in bf16, moved, then fully_shard on each decoder block and on the root, AdamW on the sharded parameters), then
# the first step and two steady ones, peaks reset before each, cold (an empty TRITON_CACHE_DIR of its own), with the
# allocator's event trace (--history: host-side only; it also says which stream each block came from).
#   install   the wheels in .whl/ (fla-core, flash-linear-attention, this tree's livebytes) into /tmp/site (as run 28)
#   fsdp1     f1-kda-8k-fsdp1: kda-h1024-l2-v32k 1 x 8192, bf16, AdamW, --fsdp 1 --history; then c1-kda-8k: the same
#             step without FSDP (the control: the difference is FSDP2's buffers alone), one after the other
#   traces    the tracer on this machine's CPU under the image's torch 2.11 (the records' torch) for the same request
#             (bf16, AdamW, no checkpointing): $OUT/traces.tgz, for validate.store_traces
# Predictions committed before the run: validate/records/models/predictions/run32/ (this tree's code). What the run
# checks: torch 2.11's world-size-1 path (_fsdp_param_group.py:324, :368-391: no collective, the unsharded parameters
# copies of the shards), the unsharded gradients freed at each block's post-backward and the reduce-scatter input and
# output (_fsdp_collectives.py:522, :537), the root kept unsharded through the backward; and what is not modelled: the
# reduce-scatter stream's pool (reserved; the history names each block's stream), NCCL's memory outside PyTorch (the
# record's nonpytorch figure against the control's), fully_shard's copy at wrap time (the "before" figures).
# Then here: commit the records as validate/records/models/h200_run32_<tag>.json (the probe writes options.fsdp: the
# checker builds the --fsdp 1 model for it), the traces under validate/records/models/traces/torch-2.11.0+cu130_
# triton-3.6.0/ (validate.store_traces), and run  livebytes validate --from-records validate/records/models/
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
cfg=validate/model_configs
W=/tmp/run32
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing, probe
trace() {   # tag config outdir: the tracer's specs for the record's request (bf16, AdamW, no checkpointing)
  python3 - "$@" <<'PY'
import gzip, json, subprocess, sys
tag, config, out = sys.argv[1], sys.argv[2], sys.argv[3]
from livebytes.lifetimes.traced.model import Request, canonical_config, layer_counts, trace_spec
req = Request(canonical_config(json.load(open(f"validate/model_configs/{config}.json"))), "H200")
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
  python3 -c "import fla, transformers, torch, triton; print(torch.__version__, triton.__version__, transformers.__version__)"
  python3 -c "import torch.distributed as d; assert d.is_nccl_available(), 'no NCCL in this torch'" ;;
fsdp1)
  STEP=fsdp1; DEADLINE=${DEADLINE:-400}; mkdir -p "$W/fsdp1"
  packing fsdp1 &
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$W/fsdp1/gpu.csv"
  export MASTER_ADDR=localhost MASTER_PORT=29532      # rank 0 of 1: NCCL's store on this host
  probe f1-kda-8k-fsdp1 kda-h1024-l2-v32k 1 8192 --fsdp 1 --history
  probe c1-kda-8k kda-h1024-l2-v32k 1 8192
  pack fsdp1; kill %1 2>/dev/null ;;
traces)
  STEP=traces; mkdir -p "$W/traces"
  packing traces &
  trace f1-kda-8k kda-h1024-l2-v32k "$W/traces" > "$W/traces/trace.log" 2>&1
  pack traces; kill %1 2>/dev/null ;;
*) echo "usage: $0 install | fsdp1 | traces" >&2; exit 1 ;;
esac

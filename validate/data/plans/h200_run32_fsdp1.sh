#!/bin/bash
# Run 32 (issue 36 point 2; ran in session 18, its two probes side by side in one call: validate/data/records/runs/run32/): FSDP2 at world size 1 on the H200, through the
# code path a sharded run takes (torch.distributed with NCCL, one process, rank 0 of 1, MASTER_ADDR localhost):
# validate/gpu/probes/model_step.py --fsdp 1 builds the model as every model-step record does (protocol model-step-v1: on
# the CPU in bf16, moved, then fully_shard on each decoder block and on the root, AdamW on the sharded parameters), then
# the first step and two steady ones, peaks reset before each, cold (an empty TRITON_CACHE_DIR of its own), with the
# allocator's event trace (--history: host-side only; it also says which stream each block came from).
#   install   the wheels in .whl/ (fla-core, flash-linear-attention, this tree's livebytes) into /tmp/site (as run 28)
#   fsdp1     f1-kda-8k-fsdp1: kda-h1024-l2-v32k 1 x 8192, bf16, AdamW, --fsdp 1 --history; then c1-kda-8k: the same
#             step without FSDP (the control: the difference is FSDP2's buffers alone), one after the other
#   traces    validate.check.store_traces on the records, under the image's torch 2.11 (the records' torch): the store
#             packed into $OUT/traces.tgz (session 18 made them on a local torch 2.11 instead, the same module)
# Predictions committed before the run: validate/data/records/models/predictions/run32/ (this tree's code). What the run
# checks: torch 2.11's world-size-1 path (_fsdp_param_group.py:324, :368-391: no collective, the unsharded parameters
# copies of the shards), the unsharded gradients freed at each block's post-backward and the reduce-scatter input and
# output (_fsdp_collectives.py:522, :537), the root kept unsharded through the backward; and what is not modelled: the
# reduce-scatter stream's pool (reserved; the history names each block's stream), NCCL's memory outside PyTorch (the
# record's nonpytorch figure against the control's), fully_shard's copy at wrap time (the "before" figures).
# Then here: commit the records as validate/data/records/models/h200_run32_<tag>.json (the probe writes options.fsdp: the
# checker builds the --fsdp 1 model for it), the traces under validate/data/records/models/traces/torch-2.11.0+cu130_
# triton-3.6.0/ (validate.check.store_traces), and run  livebytes validate --from-records validate/data/records/models/
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
cfg=validate/data/model_configs
W=/tmp/run32
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing, probe
case "${1:-}" in
install)
  bash "$(dirname "$0")/h200_run28.sh" install
  python3 -c "import torch.distributed as d; assert d.is_nccl_available(), 'no NCCL in this torch'" ;;
fsdp1)
  STEP=fsdp1; DEADLINE=${DEADLINE:-400}; mkdir -p "$W/fsdp1"
  packing fsdp1 &
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$W/fsdp1/gpu.csv"
  export MASTER_ADDR=localhost MASTER_PORT=29532      # rank 0 of 1: NCCL's store on this host
  probe f1-kda-8k-fsdp1 kda-h1024-l2-v32k 1 8192 --fsdp 1 --history
  probe c1-kda-8k kda-h1024-l2-v32k 1 8192
  pack fsdp1; kill %1 2>/dev/null ;;
traces)   # the records' traces under the image's torch 2.11, written into this tree's store, packed
  STEP=traces; mkdir -p "$W/traces"
  python3 -m livebytes.validate.check.store_traces "$W"/fsdp1/*.json > "$W/traces/trace.log" 2>&1
  cp -r validate/data/records/models/traces "$W/traces/store"; pack traces ;;
*) echo "usage: $0 install | fsdp1 | traces" >&2; exit 1 ;;
esac

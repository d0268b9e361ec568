#!/bin/bash
# Issue 51 point 4: context and expert parallelism of a whole model's training step (lifetimes/traced/parallel.py),
# per rank, on nvidia-h100-x2 (or nvidia-h200-x2). NOT RUN YET: no multi-GPU machine has been lent since --cp/--ep
# landed, and the probe's --cp/--ep (below) is not written yet: the script refuses in one line until it is.
# Predictions committed before the run: validate/data/records/models/predictions/cp2/ (README there: the table).
#
# What it measures (protocol model-step-v1, each rank its own record, peaks reset before each of three steps):
#   cp   k-cp2-32k: flash-linear-attention's KDAForCausalLM kda-h1024-l2-v32k (2 KDA layers, no softmax attention),
#        1 x 32,768 tokens in all, bf16, AdamW, no checkpointing, CP 2 (no FSDP2: the parameters replicated): each rank
#        16,384 tokens, chunk_kda called with cp_context=fla.ops.cp.build_cp_context(cu_seqlens, group) (contiguous
#        layout); control k-cp1-32k: the same step on one rank (CP 1). What it checks: every traced buffer at S / C (the
#        activations and the loss halve), FLA CP's hm [HV, K, V+K] fp32, its all-gather and the merged initial state
#        (chunk_delta_h.py:98-123), per layer and pass; NCCL's memory outside PyTorch (nonpytorch figure).
#   mla  m-cp2-16k: transformers' KimiLinearForCausalLM kimi-h1024-l4-e16-v32k (3 KDA layers, 1 MLA, 16 experts top 2),
#        1 x 16,384 tokens, --checkpoint, CP 2: the KDA layers as above, the MLA's SDPA under torch's
#        context_parallel (_RotateMethod.ALL_GATHER, torch's default): K and V all-gathered; control m-cp1-16k.
#   ep   m-ep2-16k: the same Kimi config at 16,384 tokens a rank, --checkpoint, EP 2 (8 of 16 experts a rank,
#        torchtitan's ExpertParallel dispatch/combine all_to_all_single): the expert states halve.
# Then here: commit the records as validate/data/records/models/h100x2_cp_<tag>.rank<r>.json and compare against the
# predictions (livebytes validate --from-records); until then every --cp/--ep answer says "unvalidated".
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False NCCL_NVLS_ENABLE=0
cfg=validate/data/model_configs
PROBE="torchrun --standalone --nproc-per-node 2 validate/gpu/probes/model_step.py"
if ! python3 validate/gpu/probes/model_step.py --help 2>/dev/null | grep -q -- "--cp"; then
  echo "model_step.py has no --cp/--ep yet (issue 51 pt 4: the probe side is still to write); nothing run" >&2
  exit 1
fi
case "${1:-}" in
install) bash "$(dirname "$0")/h200_run28.sh" install ;;
cp)
  python3 validate/gpu/probes/model_step.py --config $cfg/kda-h1024-l2-v32k.json --seq 32768 --state cold \
      --out "$OUT/cp" --tag k-cp1-32k
  $PROBE --config $cfg/kda-h1024-l2-v32k.json --seq 32768 --cp 2 --state cold --out "$OUT/cp" --tag k-cp2-32k ;;
mla)
  python3 validate/gpu/probes/model_step.py --config $cfg/kimi-h1024-l4-e16-v32k.json --seq 16384 --checkpoint \
      --state cold --out "$OUT/mla" --tag m-cp1-16k
  $PROBE --config $cfg/kimi-h1024-l4-e16-v32k.json --seq 16384 --checkpoint --cp 2 --state cold --out "$OUT/mla" \
      --tag m-cp2-16k ;;
ep)
  $PROBE --config $cfg/kimi-h1024-l4-e16-v32k.json --seq 16384 --checkpoint --ep 2 --state cold --out "$OUT/ep" \
      --tag m-ep2-16k ;;
*) echo "usage: $0 install | cp | mla | ep" >&2; exit 1 ;;
esac

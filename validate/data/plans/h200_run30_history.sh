#!/bin/bash
# Run 30 (prepared in session 17, not run): the GPU allocator's event trace of run 28's two fp32-amp records that miss
# by the allocator's placement (validate/check/model_records.py NAMED_MISSES, PLACEMENT_UNTRACED): a2-kda-ckpt (reserved
# +2 MiB in the first step, -566,231,040 / -432,013,312 B in the steady ones) and a3-gdn-8k (1 MiB allocated after each
# step). Each fresh and cold, as run 28, with --history: the snapshot (<tag>.snapshot.pickle) replays through the
# allocator model with the GPU's segment addresses (tests/test_allocator_traces.py CASES): placement if every block
# then matches, else the buffer or rule that differs.
#   install   (carry .whl) as run 28
#   a2        kda-h2048-l4-v32k 1 x 16,384 --checkpoint --precision fp32-amp --history (~380 s cold)
#   a3        (after h200_run18_triton39.sh prepare | part x3 | install, as run 28's gdn) gdn-h1024-l2-v32k 1 x 8,192
#             --precision fp32-amp --history (~310 s cold)
# Then here: copy the snapshots beside run 25h's (validate/data/records/models/snapshots/), add them to CASES, and replace
# the named misses by what the replay shows.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
cfg=validate/data/model_configs
W=/tmp/run30
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing, probe
case "${1:-}" in
install) bash "$(dirname "$0")/h200_run28.sh" install ;;
a2)
  STEP=a2; DEADLINE=${DEADLINE:-540}; mkdir -p "$W/a2"; packing a2 &
  probe h-a2-kda-ckpt kda-h2048-l4-v32k 1 16384 --checkpoint --precision fp32-amp --history
  pack a2; kill %1 2>/dev/null ;;
a3)
  . "$(dirname "$0")/t39_env.sh"; t39
  STEP=a3; DEADLINE=${DEADLINE:-540}; mkdir -p "$W/a3"; packing a3 &
  probe h-a3-gdn-8k gdn-h1024-l2-v32k 1 8192 --precision fp32-amp --history
  pack a3; kill %1 2>/dev/null ;;
*) echo "usage: $0 install | a2 | a3" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 33 (issue 33 point 1, the frames grid): stack frames of fla-core 0.6.0's Triton 3.6.0 kernels for cases users ask
# and no data hold, compiled for sm90 on the GPU machine's CPU cores by validate/gpu/probes/cpu_frames.py (the same method
# and compiler as validate/data/records/runs/cpu_frames/; no GPU used: it runs beside a GPU measurement, on cores that
# measurement leaves idle). Each case is one process; whatever cases finish before DEADLINE come back
# ($OUT/frames.tgz: the per-candidate lines and summary.jsonl), the rest stay unbounded.
#   install   (carry .whl) as run 28
#   frames    JOBS cases side by side (default 12), DEADLINE seconds (default 480)
# Then here: validate/data/records/runs/cpu_frames/summary_g.jsonl (+ run_g.log, candidates_g.tgz), CPU_SUMMARIES in
# validate/check/frames.py, `python -m livebytes.validate.check.frames`.
set -u
W=/tmp/run33
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing
CASES=${CASES:-'fla-report:128:1:1;fla-report:128:2:2;fla-report:128:4:4;fla-report:128:12:12;fla-report:128:48:48;fla-report:64:8:8;fla-report:64:24:24;fla-report:256:32:32;fla-report:32:32:32;fla-report:32:64:64;fla-kda-layer:128:8:8;fla-kda-layer:128:12:12;fla-kda-layer:128:24:24;fla-kda-layer:128:64:64;fla-kda-layer:64:16:16;fla-kda-layer:256:16:16'}
case "${1:-}" in
install) bash "$(dirname "$0")/h200_run28.sh" install ;;
frames)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
  STEP=frames; mkdir -p "$W/frames"; packing frames &
  timeout "${DEADLINE:-480}" python3 validate/gpu/probes/cpu_frames.py --cases "$CASES" --out "$W/frames" \
    --jobs "${JOBS:-12}" --cache-dir /tmp/cpuf_cache > "$W/frames/run.log" 2>&1
  pack frames; kill %1 2>/dev/null ;;
*) echo "usage: $0 install | frames" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 36 (ran in session 20, folded in: runs/cpu_frames/README.md, summary_h): the frames grid continued from run 33: stack frames, and now each candidate's cubin and
# device-section sizes (cpu_frames.py's image_bytes / device_sections fields, for the module-memory rule), of fla-core
# 0.6.0's Triton 3.6.0 kernels at cases users ask and the data lack, compiled for sm90 on the GPU machine's 16 CPU cores
# by validate/gpu/probes/cpu_frames.py (no GPU used). Each case one process; what finishes before DEADLINE comes back.
#   all       install the wheels (.whl: fla-core, flash-linear-attention, livebytes; as run 28), then the cases
# Then here: validate/data/records/runs/cpu_frames/summary_h.jsonl (+ run_h.log, candidates_h.tgz), CPU_SUMMARIES in
# validate/check/frames.py, `python -m livebytes.validate.check.frames`.
set -u
W=/tmp/run36
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing
CASES=${CASES:-'fla-kda-layer:128:96:96;fla-kda-layer:128:128:128;fla-kda-layer:128:48:48;fla-kda-layer:128:4:4;fla-kda-layer:128:32:64;fla-kda-layer:64:32:32;fla-kda-layer:64:8:8;fla-kda-layer:256:8:8;fla-kda-layer:256:32:32;fla-report:128:40:40;fla-report:128:80:80;fla-report:128:32:64;fla-plain:128:8:8;fla-plain:128:32:32;fla-plain:128:64:64;fla-report-fwd:128:32:32;fla-report-fwd:128:96:96'}
case "${1:-}" in
all)
  bash "$(dirname "$0")/h200_run28.sh" install || exit 1
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
  STEP=frames; mkdir -p "$W/frames"; packing frames &
  timeout "${DEADLINE:-500}" python3 validate/gpu/probes/cpu_frames.py --cases "$CASES" --out "$W/frames" \
    --jobs "${JOBS:-16}" --cache-dir /tmp/cpuf_cache > "$W/frames/run.log" 2>&1
  pack frames; kill %1 2>/dev/null ;;
*) echo "usage: $0 all" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 38 (issue 33): `livebytes process measure` on the H200, the command that replaces a case's unbounded kernel
# modules by its own process (the case's first call alone on the GPU, cold in an empty Triton cache, then warm over it;
# validate/gpu/measure_process.py over validate/gpu/probes/process_memory.py), then `livebytes predict` at the case on
# the same machine, whose process memory must now say measured (on this machine). One case per call (a cold D256 case
# compiles and autotunes for minutes); what a step wrote lands in $OUT/<step>.tgz every 30 s and at the end.
#   STEP CASE_FLAGS...   install the wheels (.whl: fla-core, flash-linear-attention, livebytes; as run 28), measure
#                        the case (--keep: the probe's own files), then predict it at 1 x 8192 (table and --json)
# Then here: validate/data/records/runs/run38/ (the tgz unpacked), and the records' figures checked against the
# committed model (tests/test_process_measure.py).
set -u
W=/tmp/run38
. "$(dirname "$0")/model_step_lib.sh"     # pack, packing
STEP=${1:?usage: $0 STEP --impl KEY [--contract C] --head-dim D --num-heads H [--num-v-heads HV]}; shift
bash "$(dirname "$0")/h200_run28.sh" install || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site LIVEBYTES_CACHE_DIR=$W/cache PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
mkdir -p "$W/$STEP"; packing "$STEP" &
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv > "$W/$STEP/gpu.csv"
timeout "${DEADLINE:-540}" /tmp/site/bin/livebytes process measure "$@" --keep "$W/$STEP/probe" --json \
  > "$W/$STEP/measure.json" 2> "$W/$STEP/measure.err"; echo "rc=$?" >> "$W/$STEP/measure.err"
/tmp/site/bin/livebytes process list > "$W/$STEP/list.txt" 2>&1
/tmp/site/bin/livebytes predict "$@" --seq-len 8192 --json > "$W/$STEP/predict.json" 2> "$W/$STEP/predict.err"
COLUMNS=160 /tmp/site/bin/livebytes predict "$@" --seq-len 8192 > "$W/$STEP/predict.txt" 2>&1
pack "$STEP"; kill %1 2>/dev/null

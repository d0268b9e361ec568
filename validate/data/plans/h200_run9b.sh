#!/bin/bash
# Run 9b on the same machine (carry .bigB): the cuDNN libraries, then 5 kda_hopper_cuda and 3 kda_hopper forward shapes.
set -u
T0=$(date +%s.%N)
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
cat /tmp/cu13part_00 .bigB/cu13part_01 | tar -C /tmp/site -xJf - || echo "cu13 unpack failed"
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
T1=$(date +%s.%N)
/tmp/site/bin/livebytes validate --plan validate/data/plans/h200_v4_cudnn.json --out-dir "$OUT/cudnn" > "$OUT/cudnn.log" 2>&1
T2=$(date +%s.%N)
echo "{\"unpack_s\": $(python3 -c "print(round($T1 - $T0, 1))"), \"plan_s\": $(python3 -c "print(round($T2 - $T1, 1))")}" > "$OUT/seconds_9b.json"
tar -czf "$OUT/cudnn.tgz" -C "$OUT" cudnn && rm -rf "$OUT/cudnn"

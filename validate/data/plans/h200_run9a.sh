#!/bin/bash
# Run 9a, issue 11's budget from a cold machine (carry .whl and .bigA): install, then the report's 7 FLA shapes and
# 3 GVA shapes, warm from the committed autotune file (7 groups side by side, a fresh process per shape).
set -u
T0=$(date +%s.%N)
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
cp .bigA/cu13part_00 /tmp/
T1=$(date +%s.%N)
/tmp/site/bin/livebytes validate --plan validate/data/plans/h200_v4_fla.json --out-dir "$OUT/fla" > "$OUT/fla.log" 2>&1
T2=$(date +%s.%N)
echo "{\"install_s\": $(python3 -c "print(round($T1 - $T0, 1))"), \"plan_s\": $(python3 -c "print(round($T2 - $T1, 1))")}" > "$OUT/seconds_9a.json"
tar -czf "$OUT/fla.tgz" -C "$OUT" fla && rm -rf "$OUT/fla"

#!/bin/bash
# Run 7a on the H200 (carry .whl and .bigA): KDA allocator traces for `learn` (issue 13) beside the autotune
# capture of the report groups issue 11's 18-shape budget needs (issue 11), as parallel processes.
# The tracer takes each kernel's first config (no benchmarking, its own TRITON_CACHE_DIR); the capture autotunes cold.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
cp .bigA/cu13part_00 /tmp/ 2>/dev/null
ls /usr/bin/python3* /usr/local/bin/python3* > "$OUT/pythons.txt" 2>&1
mkdir -p "$OUT/traces" "$OUT/capture"
python3 -m livebytes.validate.gpu.trace --impl fla-kda@0.6.0 --contract report --out "$OUT/traces/fla-kda_0.6.0" \
  --shapes "2,1030,2,2,64,64;2,2048,2,2,64,64;3,1030,2,2,64,64;2,1030,4,4,64,64;2,1030,2,2,128,128" > "$OUT/traces/kda.log" 2>&1 &
python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_capture.json --out "$OUT/capture" --deadline 470 > "$OUT/capture.log" 2>&1
wait
tar -czf "$OUT/traces.tgz" -C "$OUT" traces && rm -rf "$OUT/traces"
tar -czf "$OUT/capture.tgz" -C "$OUT" capture && rm -rf "$OUT/capture"

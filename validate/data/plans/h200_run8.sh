#!/bin/bash
# Run 8 (carry .whl): autotune capture of the H16 groups (plain MBS 8 and the two GVA key sets); run 7a's
# capture process for them was killed at its deadline before it wrote its file (fixed: written after every shape).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_capture_h16.json --out "$OUT/capture" --deadline 520 > "$OUT/capture.log" 2>&1
tar -czf "$OUT/capture.tgz" -C "$OUT" capture && rm -rf "$OUT/capture"

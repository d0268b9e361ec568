#!/bin/bash
# Run 15 (prepared in session issue21, NOT RUN YET): issue 21's proof of the layer models on the H200. Carry .whl with
# the flash-linear-attention 0.6.0 and fla-core 0.6.0 wheels (the layers import einops and transformers: on the image).
#   records:  protocol-v4 records of fla-kda-layer@0.6.0 (Kimi-Linear's layer: hidden 2304, H32, K128, conv 4; and
#             H16 with and without grouped value heads), 1 and 4 layers, checkpointing on and off, cold, a fresh process
#             per shape (validate/data/plans/h200_v4_layers.json); the GDN group is declined on Triton 3.6.0 (its backward,
#             fla-core #640) and stays in the plan for a machine with Triton >= 3.7.1.
#   boundary: plan's S* for 4 KDA layers (hidden 2304, H32, K128), without and with checkpointing: S* must run and
#             1.01 S* run out of memory, each in a fresh process with an empty Triton cache (cold).
# Then: commit the records, check them with `livebytes validate --from-records` and add the boundary to docs/layers.md.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-deps --no-compile --target /tmp/site . || exit 1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
LB=/tmp/site/bin/livebytes

records() {
  $LB validate --plan validate/data/plans/h200_v4_layers.json --out-dir "$OUT/layers" > "$OUT/layers.log" 2>&1
  tar -czf "$OUT/layers.tgz" -C "$OUT" layers && rm -rf "$OUT/layers"
}

# one fresh process, cold: does MBS 1 x $1 tokens of 4 KDA layers (Kimi-Linear's layer) run; $2: --checkpoint or ""
try_once() {
  local dir; dir=$(mktemp -d /tmp/tc.XXXX)
  TRITON_CACHE_DIR="$dir" python3 - "$1" "$2" <<'PY' >> "$OUT/boundary.jsonl" 2>> "$OUT/boundary.err"
import json, sys, torch
from livebytes.estimator.shapes import Shape
from livebytes.validate.gpu.harnesses import make
seq, ckpt = int(sys.argv[1]), sys.argv[2] == "--checkpoint"
shape = Shape(1, seq, 32, 128, hidden=2304, layers=4, checkpoint=ckpt or None)
h = make("fla-kda-layer@0.6.0", "report", True, False)
out = {"seq": seq, "checkpoint": ckpt}
try:
    x = h.inputs(shape)
    h.step(x)
    torch.cuda.synchronize()
    out.update(fits=True)
except torch.OutOfMemoryError as e:
    out.update(fits=False, error=str(e).splitlines()[0])
out.update(max_allocated=torch.cuda.max_memory_allocated(), max_reserved=torch.cuda.max_memory_reserved())
print(json.dumps(out))
PY
  rm -rf "$dir"
}

boundary() {
  for ck in "" "--checkpoint"; do
    s=$($LB plan --impl fla-kda-layer@0.6.0 --solve seq --heads 32 --dim 128 --hidden 2304 --layers 4 $ck --json |
        python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['value'])")
    echo "{\"plan\": $s, \"checkpoint\": \"$ck\"}" >> "$OUT/boundary.jsonl"
    try_once "$s" "$ck"
    try_once "$(python3 -c "print(int($s * 1.01))")" "$ck"
  done
}

case "${1:-all}" in
records) records ;;
boundary) boundary ;;
all) records; boundary ;;
*) echo "usage: $0 [records|boundary|all]" >&2; exit 1 ;;
esac

#!/bin/bash
# Run 6b on the H200 (one 10-minute command), FLA (fla-core 0.6.0, Triton 3.6.0):
# phase 1, side by side: allocator traces for `learn` (KDA report contract, GDN forward; autotuning off),
#   and the cold-cache runs that need autotuning (a GVA group, GDN forward records). Their device_memory
#   figures count the other processes on the GPU (mem_get_info is device-wide): committed with that note.
# phase 2, one process at a time: protocol v4 records from the committed autotune file (warm).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
R="python3 -m livebytes.validate.gpu.runner"
mkdir -p "$OUT/traces" "$OUT/v4" "$OUT/v4par"
python3 -m livebytes.validate.gpu.trace --impl fla-kda@0.6.0 --contract report --out "$OUT/traces/fla-kda_0.6.0" \
  --shapes "2,1030,2,2,64,64;2,2048,2,2,64,64;3,1030,2,2,64,64;2,1030,4,4,64,64;2,1030,2,2,128,128" > "$OUT/traces/kda.log" 2>&1 &
python3 -m livebytes.validate.gpu.trace --impl fla-gdn-fwd@0.6.0 --out "$OUT/traces/fla-gdn-fwd_0.6.0" \
  --shapes "2,1030,1,2,64,64;2,2048,1,2,64,64;3,1030,1,2,64,64;2,1030,2,4,64,64;2,1030,1,4,64,64;2,1030,1,2,128,64;2,1030,1,2,64,128" > "$OUT/traces/gdn.log" 2>&1 &
timeout 300 $R --impl fla-kda@0.6.0 --contract plain --shapes "1,8K,16,128,hv=32;2,8K,16,128,hv=32" --triton-cache cold --out "$OUT/v4par" > "$OUT/v4par/gva.log" 2>&1 &
timeout 300 $R --impl fla-gdn-fwd@0.6.0 --shapes "1,8K,16,128,hv=32;2,8K,16,128,hv=32;1,32K,16,128,hv=32" --triton-cache cold --out "$OUT/v4par" > "$OUT/v4par/gdn.log" 2>&1 &
wait
echo "phase 1 done at $SECONDS s"
timeout 100 $R --impl fla-kda@0.6.0 --contract plain --shapes "1,8K,96,128;2,8K,96,128" --triton-cache warm --out "$OUT/v4"
timeout 100 $R --impl fla-kda@0.6.0 --contract report --shapes "1,8K,96,128;2,8K,96,128" --triton-cache warm --out "$OUT/v4"
timeout 80 $R --impl fla-kda-fwd@0.6.0 --contract plain --shapes "1,8K,96,128;2,8K,96,128" --triton-cache warm --out "$OUT/v4"
echo "phase 2 done at $SECONDS s"
tar -czf "$OUT/traces.tgz" -C "$OUT" traces && rm -rf "$OUT/traces"
tar -czf "$OUT/records.tgz" -C "$OUT" v4 v4par && rm -rf "$OUT/v4" "$OUT/v4par"

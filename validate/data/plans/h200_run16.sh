#!/bin/bash
# Run 16 (session 6; issues 20 and 21, with frames for issue 18): two device calls on one machine, each within the
# 64 MiB a call carries.
#   install  (carry .whl, .bigA): fla-core, flash-linear-attention 0.6.0, cuDNN frontend 1.32.0 and CuTeDSL, the
#            livebytes wheel into /tmp/site; the first part of the cu13 libraries to /tmp.
#   run      (carry .whl131, .bigB): nvidia-cudnn-frontend 1.31.0 into /tmp/site131 (its own target, ahead on the path
#            for the cuDNN part only), the cu13 libraries joined and unpacked over /tmp/site, then
#     1. issue 20: kda_hopper_cuda under 1.31.0 at three shapes (validate/data/plans/h200_v4_cudnn131.json, protocol v4,
#        a fresh process per shape), then plan's boundary for cudnn-kda-hopper-cuda@1.31.0 at H96, S* and
#        ceil(1.01 S*), default and expandable segments, one fresh process per value, alone on the GPU;
#     2. issue 21, side by side: the layer records (validate/data/plans/h200_v4_layers.json: a fresh process per shape,
#        each with its own empty Triton cache) and the process-memory probe of a KimiDeltaAttention layer (H32 D128
#        hidden 2304, T 4096) and of chunk_kda report D64 H128 (issue 18's D64 frames), cold then warm. The probe's
#        NVML figures are taken while other processes start and end: only its per-process facts (stack limit, loaded
#        cubins and their frames, memory_reserved) are read from this run.
#   boundary S [--checkpoint] (carry .whl): one fresh process, empty Triton cache, no warmup: 4 KDA layers (H32 D128,
#        hidden 2304) at S tokens, the first call and two steady calls (validate/gpu/probes/boundary_probe.py). Not run yet
#        (the session's device time was spent): plan's S* 239,232 and ceil(1.01 S*) 241,625 without checkpointing
#        (422,272 / 426,495 with), about 280 s each cold; commit the probe files to validate/data/records/boundary/.
set -u
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
# plan's 1.31.0 boundary at H96, S* and ceil(1.01 S*) at both allocator settings, one fresh process each, tarred
probes_131() {
  for conf in False:247466 False:249941 True:247476 True:249951; do
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:${conf%%:*} timeout 90 python3 validate/gpu/probes/boundary_probe.py \
      --impl kda_hopper_cuda --heads 96 --values ${conf##*:} --state n/a --no-warmup \
      --out "$OUT/probes131/kda_hopper_cuda_131_seq_${conf%%:*}_na_${conf##*:}" 2>> "$OUT/probes131.err" | cut -c1-200
  done
  tar -czf "$OUT/probes131.tgz" -C "$OUT" probes131 && rm -rf "$OUT/probes131"
}
case "${1:-}" in
install)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  cp .bigA/cu13part_00 /tmp/ && nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 ;;
run)
  T0=$(date +%s)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site131 .whl131/*.whl || exit 1
  cat /tmp/cu13part_00 .bigB/cu13part_01 | tar -C /tmp/site -xJf - || echo "cu13 unpack failed"
  (
    export PYTHONPATH=/tmp/site131:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
    python3 -c "import cudnn; assert cudnn.__version__ == '1.31.0', cudnn.__version__" || exit 1
    timeout 200 python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_cudnn131.json --out "$OUT/cudnn131" \
      --deadline 190 > "$OUT/cudnn131.log" 2>&1
    for conf in False:247466 False:249941 True:247476 True:249951; do
      PYTORCH_CUDA_ALLOC_CONF=expandable_segments:${conf%%:*} timeout 60 python3 validate/gpu/probes/boundary_probe.py \
        --impl kda_hopper_cuda --heads 96 --values ${conf##*:} --state n/a --no-warmup \
        --out "$OUT/kda_hopper_cuda_131_seq_${conf%%:*}_na_${conf##*:}" > /dev/null 2>> "$OUT/cudnn131_probes.err"
    done
  )
  T1=$(date +%s)
  export PYTHONPATH=/tmp/site
  left=$((575 - (T1 - T0)))
  timeout $left python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_layers.json --out "$OUT/layers" \
    --deadline $((left - 15)) > "$OUT/layers.log" 2>&1 &
  cases="fla-kda-layer:128:32:32:4096:cold;fla-report:64:128:128:4096:cold"
  timeout $left python3 validate/gpu/probes/process_memory.py --cases "$cases" --warm-cases "${cases//cold/warm}" \
    --deadline $((left - 60)) --cache-root /tmp/pm16 --out /tmp/pmwork16 --summary "$OUT/process_memory_16.jsonl" \
    > "$OUT/process_memory_16.log" 2>&1
  wait
  tar -C /tmp -czf "$OUT/pmwork16.tgz" pmwork16
  tar -czf "$OUT/records16.tgz" -C "$OUT" cudnn131 layers && rm -rf "$OUT/cudnn131" "$OUT/layers"
  echo "{\"cudnn_s\": $((T1 - T0)), \"total_s\": $(($(date +%s) - T0))}" > "$OUT/seconds_16.json" ;;
probes131)   # run 16b: the 1.31.0 boundary probes again, their folders tarred (run 16a's came back over the file count)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site131 .whl131/*.whl || exit 1
  export PYTHONPATH=/tmp/site131:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
  python3 -c "import cudnn; assert cudnn.__version__ == '1.31.0', cudnn.__version__" || exit 1
  probes_131 ;;
layers)   # run 16b, after probes131: run 16a's ten cold processes side by side did not finish a first call in 405 s
          # (each autotunes on the one GPU): the layer shapes in one process (cold first shape, then warm in-process),
          # beside the process-memory probe of one layer (cold, then warm over its cache)
  export PYTHONPATH=/tmp/site
  left=${2:-440}
  timeout $left python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_layers_shared.json --out "$OUT/layers" \
    --deadline $((left - 10)) > "$OUT/layers.log" 2>&1 &
  timeout $left python3 validate/gpu/probes/process_memory.py --cases "fla-kda-layer:128:32:32:4096:cold" \
    --warm-cases "fla-kda-layer:128:32:32:4096:warm" --deadline $((left - 40)) --cache-root /tmp/pm16 --out /tmp/pmwork16 \
    --summary "$OUT/process_memory_16b.jsonl" > "$OUT/process_memory_16b.log" 2>&1
  wait
  tar -C /tmp -czf "$OUT/pmwork16b.tgz" pmwork16
  tar -czf "$OUT/layers16b.tgz" -C "$OUT" layers && rm -rf "$OUT/layers" ;;
finish)   # run 16c, after install (a fresh machine): run 16a's cu13 parts were cut from an unfinished tar.xz, and
          # run 16b carried none, so 16b's 1.31.0 probes failed in CuTeDSL's import; here the parts are whole. Then the
          # three H16 layer shapes run 16b's deadline cut, in one process (cold first shape, then warm in-process).
  T0=$(date +%s)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site131 .whl131/*.whl || exit 1
  cat /tmp/cu13part_00 .bigB/cu13part_01 | tar -C /tmp/site -xJf - || echo "cu13 unpack failed"
  (
    export PYTHONPATH=/tmp/site131:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
    python3 -c "import cudnn; assert cudnn.__version__ == '1.31.0', cudnn.__version__" || exit 1
    probes_131
  )
  export PYTHONPATH=/tmp/site
  left=$((${2:-480} - ($(date +%s) - T0)))
  timeout $left python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_layers_h16.json --out "$OUT/layers" \
    --deadline $((left - 10)) > "$OUT/layers.log" 2>&1
  tar -czf "$OUT/layers16c.tgz" -C "$OUT" layers && rm -rf "$OUT/layers" ;;
boundary)
  export PYTHONPATH=/tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  dir=$(mktemp -d /tmp/tc.XXXX)
  TRITON_CACHE_DIR="$dir" timeout 570 python3 validate/gpu/probes/boundary_probe.py --impl fla-kda-layer --heads 32 --dim 128 \
    --hidden 2304 --layers 4 ${3:-} --values "$2" --state cold --no-warmup --out "$OUT/fla-kda-layer_L4_$2" ;;
*) echo "usage: $0 install | run | boundary S [--checkpoint]" >&2; exit 1 ;;
esac

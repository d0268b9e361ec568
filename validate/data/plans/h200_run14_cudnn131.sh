#!/bin/bash
# Run 14 (prepared for issue 20, not yet run): nvidia-cudnn-frontend 1.31.0 on the H200.
# 1. kda_hopper_cuda under the 1.31.0 wheel at the three shapes of h200_v4_cudnn.json's first group, protocol v4 (a fresh
#    process per shape: 2 warmup steps at 1x1024, 1 target warmup, 3 measured steps): 1.31.0's graph_workspace keeps
#    each graph's workspace on the graph, so the measured steps start holding the 1x1024 graph's and the target graph's
#    workspaces (the protocol's replay: +105,121,792 B at MBS 1 x 8K, H32 over 1.32.0's replay of the same protocol).
# 2. plan's boundary for cudnn-kda-hopper-cuda@1.31.0 at H96 (S* = 247,466; expandable segments 247,476) and
#    ceil(1.01 S*) (249,941; 249,951), each value in its own fresh process: in one process the first value's graph
#    would keep its 71 GiB workspace through the second.
# Set-up on this machine: .whl/ holds the livebytes wheel built from this branch (pip wheel --no-deps -w .whl .) and
# its dependencies as in run 9a; .whl131/ holds nvidia_cudnn_frontend-1.31.0-cp311-*.whl (pip download --no-deps
# nvidia-cudnn-frontend==1.31.0 -d .whl131; its own folder and target, so /tmp/site keeps 1.32.0); .bigA/.bigB the cu13
# libraries as in runs 9a/9b. Three device calls on one machine, each within the 64 MiB a call carries:
# `install` (carry .whl and .bigA), `install131` (carry .whl131), then `run` (carry .bigB).
set -u
case "${1:-}" in
install)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  cp .bigA/cu13part_00 /tmp/ ;;
install131)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site131 .whl131/*.whl || exit 1 ;;
run)
  cat /tmp/cu13part_00 .bigB/cu13part_01 | tar -C /tmp/site -xJf - || echo "cu13 unpack failed"
  # the 1.31.0 frontend first on the path: `cudnn` is 1.31.0's, the cuDNN libraries and the rest stay the site's
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site131:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
  python3 -c "import cudnn; assert cudnn.__version__ == '1.31.0', cudnn.__version__" || exit 1
  T0=$(date +%s.%N)
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False /tmp/site/bin/livebytes validate --plan validate/data/plans/h200_v4_cudnn131.json \
    --out-dir "$OUT/cudnn131" > "$OUT/cudnn131.log" 2>&1
  T1=$(date +%s.%N)
  for conf in False:247466 False:249941 True:247476 True:249951; do
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:${conf%%:*} timeout 150 python3 validate/gpu/probes/boundary_probe.py \
      --impl kda_hopper_cuda --heads 96 --values ${conf##*:} --state n/a --no-warmup \
      --out "$OUT/kda_hopper_cuda_131_seq_${conf%%:*}_na_${conf##*:}"
  done
  T2=$(date +%s.%N)
  echo "{\"plan_s\": $(python3 -c "print(round($T1 - $T0, 1))"), \"probes_s\": $(python3 -c "print(round($T2 - $T1, 1))")}" > "$OUT/seconds_13.json"
  tar -czf "$OUT/cudnn131.tgz" -C "$OUT" cudnn131 && rm -rf "$OUT/cudnn131" ;;
*) echo "usage: $0 install|install131|run" >&2; exit 1 ;;
esac

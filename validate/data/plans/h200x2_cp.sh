#!/bin/bash
# Issue 23: FLA 0.6.0's context parallelism (fla/ops/cp) on nvidia-h200-x2: protocol-v4 records per rank at W = 2,
# and one boundary. NOT RUN YET (the two-GPU kind was not lent when it was written): run it as the device command
#   bash validate/data/plans/h200x2_cp.sh records      (then: bash validate/data/plans/h200x2_cp.sh boundary)
# and, on one H200 (kind nvidia-h200), bash validate/data/plans/h200x2_cp.sh single (W = 1 through the same path)
# on kind nvidia-h200-x2, with the wheels under .whl/ as the other plans (h200_run13.sh) install them.
#   records:  3 shapes per implementation and layout, one torchrun (2 ranks, one process per GPU) per layout;
#             each rank writes $OUT/<case>/rank<r>/*.json (validate/gpu/cp_runner.py).
#   boundary: S* (the plan's answer for the runner's protocol: cold, after a 1 x 1024-token warmup, the worse of
#             the two ranks) runs on both ranks; 1.01 S* (rounded up to a multiple of 2) runs out of memory on one.
#   GDN: fla-core 0.6.0's gated chunk_bwd_dqkwg raises on Hopper with Triton >= 3.4.0 and < 3.7.1 (#640); the
#        H200 image has 3.6.0, so fla-gdn-cp records need Triton >= 3.7.1: the script says so and skips them.
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 here (the machine sets it too) and again in every rank (cp_runner).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site NCCL_NVLS_ENABLE=0
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi topo -m > "$OUT/nvidia-smi-topo.txt" 2>&1
CP="torchrun --standalone --nproc-per-node 2 -m livebytes.validate.gpu.cp_runner"
KDA_SHAPES="1,64K,16,128;1,256K,32,128;1,256K,96,128"       # totals; per rank 32K, 128K, 128K tokens
GDN_SHAPES="1,64K,16,128;1,256K,32,128;1,512K,32,128"
S_STAR=323242             # fla-kda-cp@0.6.0 report H96 D128 W=2 contiguous: planning.largest_running, tuned at 1 x 1024, both ranks
S_OVER=326476             # 1.01 S* = 326,474.42, rounded up to a multiple of 2 (the replay: out of memory at bwd.intra)
gdn_ok() { python3 -c "import triton, sys; v = tuple(map(int, triton.__version__.split('.')[:3])); sys.exit(0 if v >= (3, 7, 1) else 1)"; }
case "${1:-}" in
records)
  for layout in contiguous zigzag; do
    $CP --impl fla-kda-cp@0.6.0 --cp-layout $layout --shapes "$KDA_SHAPES" --triton-cache cold --out "$OUT/kda-$layout"
    if gdn_ok; then
      $CP --impl fla-gdn-cp@0.6.0 --cp-layout $layout --shapes "$GDN_SHAPES" --triton-cache cold --out "$OUT/gdn-$layout"
    else
      echo "fla-gdn-cp@0.6.0 $layout: skipped: Triton $(python3 -c 'import triton; print(triton.__version__)') < 3.7.1 (#640)" | tee -a "$OUT/skipped.txt"
    fi
  done ;;
boundary)   # one fresh torchrun per value: S* must run on both ranks, S_OVER must run out of memory on one
  $CP --impl fla-kda-cp@0.6.0 --cp-layout contiguous --shapes "1,$S_STAR,96,128" --triton-cache cold --out "$OUT/boundary-fits"
  $CP --impl fla-kda-cp@0.6.0 --cp-layout contiguous --shapes "1,$S_OVER,96,128" --triton-cache cold --timeout 120 \
      --out "$OUT/boundary-over" ;;
single)     # W = 1 through the same code path, on one H200 (kind nvidia-h200): the per-rank buffers' shapes, no peer
  for layout in contiguous zigzag; do
    torchrun --standalone --nproc-per-node 1 -m livebytes.validate.gpu.cp_runner --impl fla-kda-cp@0.6.0 --cp-layout $layout \
        --shapes "1,16K,16,128;1,64K,32,128;1,128K,32,128" --triton-cache cold --out "$OUT/kda-w1-$layout"
  done ;;
*) echo "usage: $0 records | boundary | single" >&2; exit 1 ;;
esac

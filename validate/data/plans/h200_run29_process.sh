#!/bin/bash
# Run 29 (prepared in session 16 for issue 33 point 1, not run): the process memory of the three layer cases whose
# stack frames were compiled for sm90 on the CPU (validate/data/records/runs/cpu_frames/summary_e.jsonl, summary_t39.jsonl)
# and whose modules are their family's figure, measured on the H200 one process at a time, alone on the GPU, with
# every loaded cubin's frame (validate/gpu/probes/process_memory.py): the GPU check of the CPU-derived limits and of the
# family modules figure at grouped value heads. One warm H200, consecutive calls (each within 30 s of the last).
#   install   (carry .whl: fla-core 0.6.0, flash-linear-attention 0.6.0, livebytes) into /tmp/site, as run 28
#   kdalayer  (image's Triton 3.6.0; `kdalayer 16:32 8:16`: both cases side by side in one probe, ~300 s) fla-kda-layer D128,
#             hidden 2304, T 4,096, cold then warm over its own cache. Predicted (estimator/process.py, cold):
#             H16/HV32 and H8/HV16 alike: limit 11,808 B (wy_dqkg), 552,402,944 + 243,335,168 + 2,917,138,432 =
#             3,712,876,544 B (tests/test_process_memory.py::test_issue_33s_cases_are_derived_and_measured).
#   gdnlayer  (Triton 3.9.0 through its legacy ptxas, as run 22: first `h200_run18_triton39.sh prepare` here, then
#             `h200_run21.sh part x`, `h200_run18_triton39.sh part`, `h200_run21.sh install` on the GPU; ~300 s)
#             fla-gdn-layer D128 H16/HV32, hidden 2304, T 4,096, cold then warm. Predicted cold: limit 21,888 B
#             (chunk_bwd_kernel_dqkwg with the layer's STATE_V_FIRST), 552,402,944 + 241,238,016 + 5,641,338,880 =
#             6,434,979,840 B (the modules are run 22f's 4-layer process's less that reservation, so the non-PyTorch
#             figure checks the modules across processes and the limit checks the frames).
# Ran in session 17 (validate/data/records/runs/run29/, README there): folded in as below, its modules kept as a check
# (validate/check/frames.py's MODULE_CHECKS; tests/test_process_memory.py::test_issue_33s_layer_cases_hold_on_the_h200).
# Then here: add $OUT/process_memory_29*.jsonl to validate/check/frames.py's MATRICES (3.6.0) and MATRICES_TRITON_39, run
# `python -m livebytes.validate.check.frames`; the GPU's frames replace the CPU-derived ones where both exist, and
# tests/test_process_memory.py's comparison tests (every matrix process within 64 MiB, its limit exact) cover them.
set -u
here=$(dirname "$0")
pm() {   # tag cases: the probe over one case's cold then warm process, each alone on the GPU
  timeout 560 python3 validate/gpu/probes/process_memory.py --cases "$2" --warm-cases "${2//cold/warm}" --deadline 480 \
    --cache-root "/tmp/pm$1" --out "/tmp/pmwork$1" --summary "$OUT/process_memory_$1.jsonl" > "$OUT/pm$1.log" 2>&1
  tar -C /tmp -czf "$OUT/kernels_$1.tgz" "pmwork$1"
}
case "${1:-}" in
install)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  PYTHONPATH=/tmp/site python3 -c "import fla, triton; print(fla.__version__, triton.__version__)" ;;
kdalayer)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  python3 -c "import triton; assert triton.__version__ == '3.6.0', triton.__version__" || exit 1
  shift; [ $# -gt 0 ] || { echo "usage: $0 kdalayer HEADS:V_HEADS [HEADS:V_HEADS ...]" >&2; exit 1; }
  tag=29k; cases=""
  for heads in "$@"; do tag="${tag}_${heads/:/_}"; cases="${cases:+$cases;}fla-kda-layer:128:${heads}:4096:cold"; done
  pm "$tag" "$cases" ;;   # several cases are side by side in one probe (its method: each exit's drop is its own)
gdnlayer)
  . "$here/t39_env.sh"; t39
  pm 29g "fla-gdn-layer:128:16:32:4096:cold" ;;
*) echo "usage: $0 install | kdalayer HEADS:V_HEADS... | gdnlayer" >&2; exit 1 ;;
esac

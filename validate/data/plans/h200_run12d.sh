#!/bin/bash
# Run 12d (2026-11-30, session 4): the three kda_hopper_cuda boundary probes again, now that the probe records
# memory_snapshot's segments, to check the whole-process replay's segment layout where no record held one (run 9c's
# 249,951 with expandable segments: the replay gives three large ranges, a per-trial replay gave one).
# Two device calls on one machine: `install` (carry .whl and .bigA), then `probe` (carry .bigB).
set -u
case "${1:-}" in
install)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  cp .bigA/cu13part_00 /tmp/ ;;
probe)
  cat /tmp/cu13part_00 .bigB/cu13part_01 | tar -C /tmp/site -xJf - || echo "cu13 unpack failed"
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
  # the lines of `python -m livebytes.validate.gpu.boundary --commands` for kda_hopper_cuda, with `timeout 150` added;
  # stdout (JSON lines, then nanobind's reference-leak warnings at exit) was not kept: probe.jsonl holds every line
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 validate/gpu/probes/boundary_probe.py --impl kda_hopper_cuda --heads 96 --values 247476,249951 --state n/a --no-warmup --out "$OUT/kda_hopper_cuda_seq_True_na"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False timeout 150 python3 validate/gpu/probes/boundary_probe.py --impl kda_hopper_cuda --heads 96 --values 247466,249941 --state n/a --no-warmup --out "$OUT/kda_hopper_cuda_seq_False_na"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False timeout 150 python3 validate/gpu/probes/boundary_probe.py --impl kda_hopper_cuda --heads 96 --values 7,8 --solve mbs --seq 32768 --state n/a --no-warmup --out "$OUT/kda_hopper_cuda_mbs_False_na" ;;
*) echo "usage: $0 install|probe" >&2; exit 1 ;;
esac

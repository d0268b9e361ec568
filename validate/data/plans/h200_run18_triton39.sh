#!/bin/bash
# Run 18 (prepared in session 6; its steps ran as run 20 in session 9, validate/data/records/runs/run20/README.md, which
# found the two fixes now in `install` and `gdn`/`kda39`: the AMD entry point, and TRITON_PTXAS_BLACKWELL_PATH set to
# the bundled legacy ptxas because `prepare` drops ptxas-blackwell, which Triton 3.9 uses for every arch >= 90; the
# process-memory data of run 20 are of kernels compiled so, keep it that way until ptxas-blackwell's are measured):
# issue 22, Gated DeltaNet's backward on the H200 under Triton 3.9.0, which
# fla-core 0.6.0 accepts on Hopper (it refuses 3.4-3.7.0, #640). The wheel (285,674,620 B) exceeds what a call carries:
#   prepare   (here, not on the GPU) download triton==3.9.0, drop what FLA never loads (the AMD backend, CUPTI and
#             libproton: the profiler's; ptxas-blackwell), repack as .t39/triton39.tar.xz and split it into 40 MiB
#             parts .t39/part_NN (run 20: three; 55 MB parts left no room beside the tree in a 64 MiB carry;
#             1,042,558,978 B unpacked -> 106,523,172 B of xz, about two minutes on two cores); then carry one part
#             per call AS .t39 (`part` reads .t39/ only): move the others out first.
#             torch 2.11 was built against Triton 3.6.0: FLA calls triton directly, and under 3.9.0 it ran (run 20).
#   part      (GPU, carry .t39) append the carried part(s) to /tmp/t39.tar.xz: consecutive calls, each within the 30 s
#             a warm machine keeps /tmp.
#   install   (GPU, carry .whl: fla-core 0.6.0, flash-linear-attention 0.6.0, livebytes) check and unpack the joined
#             archive into /tmp/t39site, ahead of the image's Triton 3.6.0 on PYTHONPATH.
#   gdn       (GPU) the GDN forward+backward records (validate/data/plans/h200_v4_gdn_bwd.json: H16/HV32 and equal heads,
#             D128 and D64, one process: cold first shape), then the process-memory probe of GDN fwd+bwd at D128 and
#             D64, cold then warm (frames for validate/check/frames.py); about 530 s.
#   kda39     (GPU) two KDA shapes already recorded under 3.6.0 (validate/data/plans/h200_v4_kda_t39.json), cold.
#   Then here: commit the records under validate/data/records/runs/run18/ with the Triton version they carry, add the
#   probe to validate/check/frames.py (a data file per Triton version: fla-core-0.6.0_triton-3.9.0_H200.json), plan the
#   boundary (fla-gdn@0.6.0 H16/HV32 D128, cold) and prove it in the next session with boundary_probe.py --impl fla-gdn.
set -u
case "${1:-}" in
prepare)
  d=$(mktemp -d) && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 -d "$d" triton==3.9.0 || exit 1
  mkdir -p "$d/x" .t39 && (cd "$d/x" && unzip -q "$d"/triton-3.9.0-*.whl && rm -rf triton/backends/amd \
    triton/backends/nvidia/lib/cupti triton/backends/nvidia/lib/cupti-blackwell triton/backends/nvidia/bin/ptxas-blackwell \
    triton/_C/libproton.so)
  tar -C "$d/x" -cf - . | xz -T2 -6 > .t39/triton39.tar.xz && (cd .t39 && split -b 40M -d -a 2 triton39.tar.xz part_ && rm triton39.tar.xz)
  grep -qx '/.t39/' .git/info/exclude || echo '/.t39/' >> .git/info/exclude
  ls -la .t39 ;;
part) cat .t39/part_* >> /tmp/t39.tar.xz && ls -la /tmp/t39.tar.xz ;;
install)
  xz -t /tmp/t39.tar.xz || exit 1
  mkdir -p /tmp/t39site && tar -C /tmp/t39site -xJf /tmp/t39.tar.xz || exit 1
  # run 20: the dist-info's entry point names the AMD backend `prepare` drops (import triton fails without this)
  sed -i '/amd/d' /tmp/t39site/triton-3.9.0.dist-info/entry_points.txt
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  PYTHONPATH=/tmp/t39site:/tmp/site python3 -c "import triton, fla; print(triton.__version__, fla.__version__)" ;;
gdn)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/t39site:/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  export TRITON_PTXAS_BLACKWELL_PATH=/tmp/t39site/triton/backends/nvidia/bin/ptxas   # run 20: see the header
  python3 -c "import triton; assert triton.__version__ == '3.9.0', triton.__version__" || exit 1
  timeout 330 python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_gdn_bwd.json --out "$OUT/gdn" --deadline 320 \
    > "$OUT/gdn.log" 2>&1
  cases="fla-gdn:128:16:32:4096:cold;fla-gdn:64:16:32:4096:cold"
  timeout 200 python3 validate/gpu/probes/process_memory.py --cases "$cases" --warm-cases "${cases//cold/warm}" \
    --deadline 190 --cache-root /tmp/pm18 --out /tmp/pmwork18 --summary "$OUT/process_memory_18.jsonl" > "$OUT/pm18.log" 2>&1
  tar -C /tmp -czf "$OUT/kernels_18.tgz" pmwork18
  tar -czf "$OUT/records18.tgz" -C "$OUT" gdn && rm -rf "$OUT/gdn" ;;
kda39)   # issue 22 point 5: two KDA shapes run 9a recorded under Triton 3.6.0, now under 3.9.0 (one process, cold)
  export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/t39site:/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
  export TRITON_PTXAS_BLACKWELL_PATH=/tmp/t39site/triton/backends/nvidia/bin/ptxas
  t=${KDA39_S:-540}   # seconds this step may take (run 20 gives it what its call leaves)
  timeout "$t" python3 -m livebytes.validate.gpu.batch validate/data/plans/h200_v4_kda_t39.json --out "$OUT/kda39" --deadline $((t - 10)) \
    > "$OUT/kda39.log" 2>&1
  tar -czf "$OUT/records18_kda.tgz" -C "$OUT" kda39 && rm -rf "$OUT/kda39" ;;
*) echo "usage: $0 prepare | part | install | gdn | kda39" >&2; exit 1 ;;
esac

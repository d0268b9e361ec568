#!/bin/bash
# Run 12c (2026-11-30, session 4, nvidia-h200-x2): the report contract's expandable-segments warm edge at plan's new
# answer. Run 12b ran out of memory at 172,819 in the second steady call (64 MiB short), where the replay then said
# "fits" (a 64 MiB request failed with 45.12 MiB free): its expandable segment had no address-range limit. With the limit (ExpandableSegment reserves 1.125x the
# device memory) the replay reproduces that failure to the byte and plan answers 172,800. GPU 0 runs the new
# answer and 1 % above it; GPU 1 runs 172,819 again, now with the allocator's segments recorded at the failure.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
: "${OUT:?run on the device machine}"
REAL_OUT=$OUT OUT=/tmp/run12c   # at most 8 files come back: all of it is packed into $OUT/run12c.tgz at the end
mkdir -p $OUT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core*.whl
python3 - <<'PY'   # validate/gpu/autotune.py's install(), Triton's files only: this probe imports nothing of livebytes
import json, pathlib
cache = json.loads(pathlib.Path("validate/data/autotune_configs/NVIDIA_H200_fla-0.6.0_triton-3.6.0.json").read_text())
for rel, content in cache["triton_files"].items():
    path = pathlib.Path("/tmp/tc_report") / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
PY
tunings() { find /tmp/tc_report -name '*.autotune.json' | sort > "$OUT/tunings_$1.txt"; wc -l < "$OUT/tunings_$1.txt"; }
echo "tuning files installed: $(tunings installed)"
# 172,800 and 172,819 share l2norm's token bucket (NB 254), 174,528 lies in NB 256
CUDA_VISIBLE_DEVICES=0 TRITON_CACHE_DIR=/tmp/tc_report python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --pretune 1024,172800,174528 --state warm --out "$OUT/fla-report_pretune_True" > "$OUT/pretune0.log" 2>&1
echo "after pretuning: $(tunings pretuned)"
CUDA_VISIBLE_DEVICES=0 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRITON_CACHE_DIR=/tmp/tc_report timeout 400 python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --values 172800,174528 --state warm --out "$OUT/fla-report_seq_True_warm_warmup" > "$OUT/probe0.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRITON_CACHE_DIR=/tmp/tc_report timeout 400 python3 validate/gpu/probes/boundary_probe.py --impl fla-report --heads 96 --values 172819 --state warm --out "$OUT/fla-report_seq_True_warm_warmup_172819" > "$OUT/probe1.log" 2>&1 &
wait
echo "after the probes: $(tunings probed)"
diff "$OUT/tunings_pretuned.txt" "$OUT/tunings_probed.txt" && echo "no kernel tuned in the probes' processes"
tail -n 3 "$OUT"/probe*.log | cut -c1-300
tar czf "$REAL_OUT/run12c.tgz" -C /tmp run12c

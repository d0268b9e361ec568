#!/bin/bash
# Run 27 (issue 34, point 4): a real out-of-memory snapshot beside livebytes' predicted one. timeline --out FILE.pickle
# of a shape the H200 does not hold now traces the verdict's run to the failing request and ends with PyTorch's `oom`
# trace event (estimator/snapshot.py, from CUDACachingAllocator.cpp and memory_snapshot.cpp read at the source); this
# run records the same process on the GPU: fla-kda@0.6.0 (report contract, recompute on) at 1 x 1M tokens, 96 heads,
# D128, a fresh cold process (an empty TRITON_CACHE_DIR), memory history recorded from before its inputs, the snapshot
# dumped in the OutOfMemoryError handler, as a user would.
#   install   the wheels in .whl/ (fla-core, livebytes) into /tmp/site, as run 23's
#   oom       the real snapshot ($OUT/real.pickle), livebytes' ($OUT/predicted.pickle) and $OUT/compare.json: each
#             trace's last event, the failing request's frames, the reserved bytes, device_free
# Expected (tests/test_feedback.py on the CPU): one `oom` event, last, size 25,769,803,776 B (q_normed, bf16
# [T, H, K]: 2^20 x 96 x 128 x 2 B) in l2norm_fwd, no `addr` key, reserved within the device. device_free depends on the
# process memory model (CUDA context, modules): compare.json shows both.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
case "${1:-}" in
install)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -c "import fla, torch, triton; print(torch.__version__, triton.__version__)" ;;
oom)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.csv"
  python3 - "$OUT" <<'PY'
import pickle, sys
from pathlib import Path

import torch

from livebytes.estimator.shapes import Shape
from livebytes.validate.gpu.harnesses import make
from livebytes.validate.gpu.triton_state import prepare_triton

out = Path(sys.argv[1])
prepare_triton("cold", out, None)                     # a fresh Triton cache: the first call autotunes, as predicted
h = make("fla-kda@0.6.0", "report", True, False)
torch.cuda.memory._record_memory_history(max_entries=200000)
try:
    x = h.inputs(Shape(1, 1 << 20, 96, 128))
    h.step(x)
    print("no out-of-memory: the prediction said there would be one")
except torch.cuda.OutOfMemoryError as err:
    print(str(err).splitlines()[0])
    torch.cuda.memory._dump_snapshot(str(out / "real.pickle"))
PY
  /tmp/site/bin/livebytes timeline --impl fla-kda@0.6.0 --seq 1M --heads 96 --out "$OUT/predicted.pickle"
  python3 - "$OUT" <<'PY'
import json, pickle, sys
from pathlib import Path
out = Path(sys.argv[1])
summary = {}
for name in ("real", "predicted"):
    path = out / f"{name}.pickle"
    if not path.exists():
        summary[name] = None
        continue
    snap = pickle.loads(path.read_bytes())
    events = snap["device_traces"][0] if snap["device_traces"] else []
    ooms = [e for e in events if e["action"] == "oom"]
    summary[name] = {"events": len(events), "oom_events": len(ooms),
                     "last": {k: v for k, v in events[-1].items() if k != "frames"} if events else None,
                     "oom_frames": [f"{f['filename']}:{f['line']}:{f['name']}" for f in ooms[-1]["frames"][:6]] if ooms else None,
                     "reserved_bytes": sum(s["total_size"] for s in snap["segments"]),
                     "allocated_bytes": sum(b["size"] for s in snap["segments"] for b in s["blocks"]
                                            if b["state"] == "active_allocated")}
(out / "compare.json").write_text(json.dumps(summary, indent=1))
print(json.dumps(summary, indent=1))
PY
  ;;
*) echo "usage: $0 install|oom" >&2; exit 1 ;;
esac

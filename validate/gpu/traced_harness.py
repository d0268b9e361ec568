"""A validator harness run on meta tensors through the tracer: the second source of a layer model's buffers.

``python -m livebytes.validate.gpu.traced_harness SPEC.json`` with SPEC {"impl": "fla-kda-layer@0.6.0", "device": "H200",
"shapes": ["1,8K,16,128,hidden=2048", ...], "steps": 3} prints one trace per shape in the tracer's format: the
harness's inputs (its ``.to("cuda")`` made meta), then ``steps`` runner steps (forward, backward with dO, release),
each a first call and then steady ones, as ``livebytes.lifetimes.traced`` reads them. The harness code is the GPU
runner's own (``harnesses/``), unchanged.
"""
from __future__ import annotations

import gc
import json
import sys
import warnings
from livebytes.tracer.launches import install as install_launches
from livebytes.tracer.recorder import Recorder
from livebytes.tracer.step import reset_library_caches
from livebytes.tracer.target import cuda_is_meta, install, meta_index_is_device_0
from livebytes.estimator.devices import get_device
from livebytes.estimator.shapes import parse_shape_list


def trace_harness(impl: str, shape, steps: int) -> dict:

    from .harnesses import make  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    reset_library_caches()
    gc.collect()
    rec = Recorder()
    install_launches(rec.launch)
    h = make(impl, "report", True, False)
    with cuda_is_meta(), rec.mode():
        rec.mark("harness", 0)
        x = h.inputs(shape)
        for step in range(steps):
            rec.mark("forward", step)
            o = h.step(x)
            rec.mark("zero_grad", step)
            del o
            h.release(x)
        rec.mark("end", steps)
        del x
        gc.collect()
    return {"mbs": shape.mbs, "seq": shape.seq, "shape": shape.record_dict(), "events": rec.events,
            "frames": rec.frame_table()}


def main(argv: list[str]) -> int:
    spec = json.loads(open(argv[0]).read())
    warnings.filterwarnings("ignore")
    install(get_device(spec["device"]))
    # deferred: fla is not in the core install (model/validate extras)
    import fla  # noqa: F401
    meta_index_is_device_0()
    traces = [trace_harness(spec["impl"], s, spec.get("steps", 3)) for s in parse_shape_list(";".join(spec["shapes"]))]
    json.dump({"format": 1, "impl": spec["impl"], "device": spec["device"], "traces": traces}, sys.stdout,
              separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

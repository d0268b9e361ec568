"""GPU tests: the runner against the models on a real device. Skipped without CUDA (CI has none);
what the GPU measured is committed under validate/data/records and re-checked by test_records.py."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

from livebytes.estimator.shapes import Shape  # noqa: E402  (after the CUDA skip)
from livebytes.validate.gpu.inputs import build_inputs, input_specs  # noqa: E402


def _blocks():
    """The allocator's segments as (segment size, [(block size, state), ...]), in address order."""
    return sorted((s["total_size"], [(b["size"], b["state"]) for b in s["blocks"]])
                  for s in torch.cuda.memory_snapshot())


def _v3_inputs(specs, seq):
    """v3: each input drawn on the CPU and copied to the GPU once."""
    out = {}
    for spec in specs:
        t = torch.empty(spec.dims, dtype=getattr(torch, spec.dtype))
        t.copy_(torch.arange(0, spec.dims[0], dtype=t.dtype) * seq) if spec.fill == "boundaries" else t.zero_()
        out[spec.name] = t.to("cuda")
    return out


@pytest.mark.parametrize("shape,contract", [(Shape(1, 8192, 96, 128), "plain"), (Shape(3, 5000, 32, 64), "report"),
                                            (Shape(1, 4096, 16, 128, v_heads=32), "plain")])
def test_v4_inputs_leave_v3s_allocator_state(shape, contract):
    specs = input_specs(shape, contract, True, batch_dim=True, cu_dtype="int64")
    torch.cuda.empty_cache()
    x = _v3_inputs(specs, shape.seq)
    v3 = _blocks()
    del x
    torch.cuda.empty_cache()
    x = build_inputs(specs, "cuda", shape.seq)
    assert _blocks() == v3
    del x
    torch.cuda.empty_cache()


def test_fla_small_shape_matches_its_replay(tmp_path):
    pytest.importorskip("fla")
    from livebytes.estimator import get_model
    from livebytes.estimator.replay import replay
    from livebytes.validate.gpu.environment import environment
    from livebytes.validate.gpu.harnesses import make
    from livebytes.validate.gpu.runner import RunContext, measure_shape

    h = make("fla-kda@0.6.0", "report", True, False)
    rec = measure_shape(h, Shape(1, 2048, 16, 64), environment(), RunContext("fresh-process", "expandable_segments:False", "n/a"))
    assert rec["finite"] and not rec["oom"]
    assert set(rec["seconds"]) >= {"setup", "compile", "measure", "total"}
    assert rec["device_memory"]["nonpytorch_before_bytes"] > 0
    expected = replay(get_model("fla-kda@0.6.0", "H200"), Shape(1, 2048, 16, 64)).peak_bytes
    assert abs(rec["peak_bytes"] - expected) <= 16 * 1024

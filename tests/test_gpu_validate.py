"""GPU tests: the runner against the models on a real device. Skipped without CUDA (CI has none);
what the GPU measured is committed under validate/records and re-checked by test_records.py."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_fla_small_shape_matches_its_replay(tmp_path):
    pytest.importorskip("fla")
    from livebytes.estimator import Shape, get_model
    from livebytes.estimator.replay import replay
    from livebytes.validate.runner import Harness, environment, measure_shape

    h = Harness("fla-kda@0.6.0", "report", True, False)
    rec = measure_shape(h, Shape(1, 2048, 16, 64), environment(), "fresh-process")
    assert rec["finite"] and not rec["oom"]
    expected = replay(get_model("fla-kda@0.6.0", "H200"), Shape(1, 2048, 16, 64)).peak_bytes
    assert abs(rec["peak_bytes"] - expected) <= 16 * 1024

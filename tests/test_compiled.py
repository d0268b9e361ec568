"""The compiled-model cache (estimator/cache.py, estimator/evaluation.py) answers exactly what the symbolic engine answers, and a
cache hit imports neither sympy nor the model modules."""
import os
import subprocess
import sys

import pytest

from livebytes.estimator import cache
from livebytes.estimator import get_model, predict
from livebytes.estimator.devices import get_device
from livebytes.estimator.registry import get_compiled, specs
from livebytes.estimator.replay import replay
from livebytes.estimator.shapes import Shape

SHAPES = [Shape(1, 8192, 96, 128), Shape(3, 5000, 32, 128), Shape(2, 1000, 16, 64), Shape(1, 131072, 128, 128),
          Shape(4, 2048, 8, 128, v_heads=32)]


def _cases():
    for s in specs():
        for shape in SHAPES:
            if not s.refuse(shape, get_device(s.default_device)) and (shape.hv == shape.heads or "gva" in s.options):
                yield s.key, shape


@pytest.mark.parametrize("key,shape", list(_cases()), ids=str)
def test_compiled_equals_the_engine_and_the_replay(key, shape):
    opts = {"gva": True} if shape.hv != shape.heads else {}
    model, cm = get_model(key, **opts), get_compiled(key, **opts)
    p, q = predict(model, shape), cm.predict(shape)
    assert (q.buffer_bytes, q.step_bytes, q.peak_index) == (p.buffer_bytes, p.step_bytes, p.peak_index)
    assert replay(cm, shape) == replay(model, shape)


def test_a_cache_hit_reads_the_same_functions_back():
    cm = get_compiled("cudnn-kda-frost@1.32.0")           # implemented function (piece budget) inside
    again = cache._from_disk(cache._to_disk(cm))
    for shape in (Shape(1, 8192, 16, 128), Shape(2, 65536, 4, 128), Shape(1, 131072, 96, 128)):
        assert again.predict(shape).step_bytes == cm.predict(shape).step_bytes


def test_a_function_reading_a_module_is_not_portable():
    def reads_a_module(x):
        return os.path.join(x, x)
    with pytest.raises(cache.NotPortable):
        cache.portable(reads_a_module)


def test_predict_from_a_warm_cache_imports_no_sympy(tmp_path):
    env = {**os.environ, "LIVEBYTES_CACHE_DIR": str(tmp_path)}
    code = ("import sys\nfrom livebytes.cli.app import main\n"
            "sys.argv = ['livebytes', 'predict', '--impl', 'fla-kda@0.6.0', '--seq', '8K', '--heads', '96', '--json']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('sympy' in sys.modules, 'livebytes.lifetimes.fla_kda' in sys.modules, file=sys.stderr)\n")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.stderr.split()[-2:] == ["True", "True"]       # cold cache: built through sympy
    assert second.stderr.split()[-2:] == ["False", "False"]    # warm cache: neither
    assert first.stdout == second.stdout


def test_an_unwritable_cache_is_no_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(blocker / "sub"))
    cm = cache.compiled_model("fla-kda@0.6.0", "H200", (("contract", "report"), ("forward_only", False), ("gva", False),
                                                           ("recompute", True)), build=lambda: get_model("fla-kda@0.6.0"))
    assert cm.predict(SHAPES[0]).peak_bytes == predict(get_model("fla-kda@0.6.0"), SHAPES[0]).peak_bytes


def test_one_timeline_for_both_views():
    """A built model and its compiled view share one live_range (estimator/timeline.py), and agree on every buffer."""
    from livebytes.estimator.buffers import LifetimeModel
    from livebytes.estimator.evaluation import CompiledModel, compile_model
    assert LifetimeModel.live_range is CompiledModel.live_range
    model = get_model("cudnn-kda-hopper-cuda@1.32.0", "H200")
    cm = compile_model(model)
    assert [model.live_range(b) for b in model.buffers] == [cm.live_range(b) for b in cm.buffers]

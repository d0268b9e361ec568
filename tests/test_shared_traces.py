"""Issue 50 point 5: a whole model's traces are keyed by what they depend on. The GPU enters a trace only through the
facts the tracer shows the library (``tracer.target.trace_facts``: compute capability, SM count, shared memory per
block, fla's 'NVIDIA H' name test), so a GPU with the same facts as one already traced answers from the cache.

Proved here on the real tracer (a tiny KDA config): the H100's traces read from the H200's cache entry are, byte for
byte, the traces a fresh tracer makes for the H100, and the B300's from the B200's the same; the model built from the
shared traces predicts what the freshly traced one does.
"""
import json

import pytest

from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import predict
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced import model as traced
from livebytes.lifetimes.traced.model import Request, canonical_config
from livebytes.tracer.target import trace_facts

TINY = {"model_type": "kda", "hidden_size": 256, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 64,
        "vocab_size": 1000}


def request(gpu: str) -> Request:
    return Request(canonical_config(dict(TINY)), gpu)


@pytest.fixture
def counted_tracers(monkeypatch):
    """``run_tracers`` counted: how many tracer processes each step of a test started."""
    started = []
    real = traced.run_tracers

    def run(specs):
        started.extend(spec["device"] for spec in specs)
        return real(specs)
    monkeypatch.setattr(traced, "run_tracers", run)
    return started


def test_facts_are_what_the_tracer_shows():
    """H100 and H200: sm90, 132 SMs, 232,448 B of shared memory per block, 'NVIDIA H...' both; B200 and B300: sm100,
    148 SMs, 232,448 B, neither named 'NVIDIA H'; the H20 is sm90 with 78 SMs: other facts, traced on its own."""
    h200, h100, h20 = (trace_facts(get_device(n)) for n in ("H200", "H100", "H20"))
    assert h100 == h200 == {"capability": [9, 0], "sm_count": 132, "shared_memory_per_block_optin": 232_448,
                            "named_hopper": True}
    assert trace_facts(get_device("B300")) == trace_facts(get_device("B200")) == {
        "capability": [10, 0], "sm_count": 148, "shared_memory_per_block_optin": 232_448, "named_hopper": False}
    assert h20 != h200 and h20["sm_count"] == 78


def test_keys_follow_the_facts_not_the_name():
    """The cache key of the H100's traces is the H200's; the H20's (78 SMs) and the B200's (sm100) are others. The
    specs the tracer is given still name the GPU asked for (a stored trace is found by its spec's digest)."""
    (h200_specs, h200), (h100_specs, h100) = traced._trace_key(request("H200")), traced._trace_key(request("H100"))
    assert h100 == h200
    assert [s["device"] for s in h100_specs] == ["H100"] and [s["device"] for s in h200_specs] == ["H200"]
    assert traced._trace_key(request("H20"))[1] != h200
    assert traced._trace_key(request("B200"))[1] != h200


def _fresh(monkeypatch, tmp_path, name: str):
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / name))


@pytest.mark.parametrize("first, second", [("H200", "H100"), ("B200", "B300")])
def test_shared_traces_are_the_fresh_traces(first, second, monkeypatch, tmp_path, counted_tracers):
    """``second``'s traces from ``first``'s cache entry (no tracer started) equal, byte for byte as JSON, a fresh trace
    of ``second`` in an empty cache; so do the peaks of the models built from them at two shapes."""
    _fresh(monkeypatch, tmp_path, "fresh")
    fresh = traced.traces(request(second))
    assert counted_tracers == [second]                  # 2 layers: one run, traced for the GPU asked for
    _fresh(monkeypatch, tmp_path, "shared")
    traced.traces(request(first))
    shared = traced.traces(request(second))
    assert counted_tracers == [second, first]           # the second GPU started no tracer
    assert json.dumps(shared, sort_keys=True) == json.dumps(fresh, sort_keys=True)
    device = get_device(second)
    from livebytes.lifetimes.traced.build import traced_model
    from livebytes.lifetimes.traced.calls import unify
    from livebytes.lifetimes.traced.symbolic import symbolic_call
    peaks = []
    for data in (fresh, shared):
        calls = [unify(t) for t in data["runs"][0]["traces"]]
        learn = [c for c in calls if (c.mbs, c.seq) in traced.LEARN]
        model = traced_model(symbolic_call(learn, request(second).config_dict), device.sm_count, device.arch, 0, device.max_threads_per_sm,
                             **traced.fields(request(second), device, data["versions"]))
        peaks.append([predict(model, Shape(mbs, seq, 2, 64)).peak_bytes for mbs, seq in ((1, 4096), (2, 8192))])
    assert peaks[0] == peaks[1] and min(peaks[0]) > 0

"""Issue 50 point 5: the compiled-model cache keys on what a build reads of the GPU (``devices.build_facts``), not its
name. Proved here: for every model a key alone builds, and a traced whole model (a tiny KDA config), the model built
for a GPU equals, field by field and compiled function by compiled function, the model built for another GPU of the
same facts, but for its ``device`` name; a GPU of other facts is another cache entry; and a second GPU's answer comes
from the first one's entry, named for the second."""
import pytest

from livebytes.estimator import cache
from livebytes.estimator.allocator import DEFAULT_CONF
from livebytes.estimator.compiled import compiled
from livebytes.estimator.devices import VERDICT_FIELDS, build_facts, get_device
from livebytes.estimator.registry import _build, get_compiled, keyed_specs, resolve_options, spec
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced.model import canonical_config, options_for

PAIRS = [("H200", "H100"), ("B200", "B300")]
TINY = {"model_type": "kda", "hidden_size": 256, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 64,
        "vocab_size": 1000}


SHAPES = [Shape(1, 8192, 32, 128), Shape(2, 5000, 16, 64), Shape(1, 65536, 8, 128, v_heads=16)]
FUNCTIONS = ("charged_fn", "requested_fn", "autotune_key_fn", "held_fn", "measured_fn")


def _content(key: str, gpu: str, options: dict) -> dict:
    """What the cache would store of ``key`` built for ``gpu`` but its device name: its fields, and each compiled
    function's values at ``SHAPES`` (sympy names each generated function by a counter: its code differs, not what it
    computes)."""
    cm = compiled(_build(key, gpu, resolve_options(spec(key), options)))
    stored = cache._to_disk(cm)["fields"]
    del stored["device"]
    for name in FUNCTIONS:
        fn = getattr(cm, name)
        stored[name] = None if fn is None else [[int(v) for v in fn(*s.values())] for s in SHAPES]
    return stored


def test_facts_leave_out_only_what_the_verdict_reads():
    """H100 and H200 share facts (sm90, 132 SMs, 232,448 B, 2,048 threads, 'NVIDIA H'), so do B200 and B300 (sm100, 148
    SMs); the H20 (78 SMs) and the A100 (sm80) do not; capacity and process memory are the verdict's, not facts."""
    assert build_facts(get_device("H100")) == build_facts(get_device("H200"))
    assert build_facts(get_device("B300")) == build_facts(get_device("B200"))
    assert build_facts(get_device("H20")) != build_facts(get_device("H200"))
    assert dict(build_facts(get_device("H200")))["sm_count"] == 132
    assert set(VERDICT_FIELDS) & {k for k, _ in build_facts(get_device("H200"))} == set()


@pytest.mark.parametrize("first, second", PAIRS)
@pytest.mark.parametrize("key", [s.key for s in keyed_specs()])
def test_kernel_models_of_equal_facts_are_equal(key, first, second):
    """Each kernel and layer model (default options) built for ``second`` is the one built for ``first``."""
    if spec(key).refuse_device and (spec(key).refuse_device(get_device(first)) or spec(key).refuse_device(get_device(second))):
        pytest.skip(f"{key} does not run on {first}/{second}")
    assert _content(key, second, {}) == _content(key, first, {})


def test_a_traced_model_of_equal_facts_is_equal():
    """The tiny KDA whole model built for the H100 is the H200's, compiled functions included."""
    key, options = options_for(canonical_config(dict(TINY)))
    assert _content(key, "H100", options) == _content(key, "H200", options)


def test_the_second_gpu_answers_from_the_first_ones_entry(tmp_path, monkeypatch):
    """In an empty cache: the H200's model is built and stored; the H100's is read from that entry (nothing built),
    named H100; the H20's (other facts) is built."""
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "c"))
    built = []
    real = cache.compiled

    def counted(model):
        built.append(model.device)
        return real(model)
    monkeypatch.setattr(cache, "compiled", counted)
    h200 = get_compiled("fla-kda@0.6.0", "H200")
    h100 = get_compiled("fla-kda@0.6.0", "H100")
    assert built == ["H200"]
    assert (h200.device, h100.device) == ("H200", "H100") and h100.identity == h200.identity != ""
    assert h100.buffers == h200.buffers
    h20 = get_compiled("fla-kda@0.6.0", "H20")
    assert built == ["H200", "H20"] and h20.identity not in ("", h200.identity)


def test_runs_are_kept_beside_the_entry(tmp_path, monkeypatch):
    """A verdict's runs under every placement (no limit) are kept on disk under the model's entry: asked again, or for
    another GPU of the same facts, no run is replayed and the verdict is the same figure for figure; a GPU of other
    facts (another entry) replays them."""
    from livebytes.estimator import capacity
    from livebytes.estimator.capacity import verdict
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("LIVEBYTES_WORKERS", "1")       # every replay in this process, where it is counted
    replays = []
    real = capacity.replay

    def counted(*a, **k):
        replays.append(k.get("capacity_bytes"))
        return real(*a, **k)
    monkeypatch.setattr(capacity, "replay", counted)
    shape = Shape(1, 8192, 16, 128)

    def judged(gpu: str):
        replays.clear()
        v = verdict(get_compiled("fla-kda@0.6.0", gpu), shape, get_device(gpu))
        return (v.allocated_peak_bytes, v.reserved_peak_bytes, v.band, v.oom), list(replays)
    first, made = judged("H200")
    assert made and all(c is None for c in made)         # the runs without a limit (no capacity), each replayed
    again, none = judged("H200")
    assert again == first and none == []
    h100, none = judged("H100")
    assert h100[:2] == first[:2] and none == []
    _, h20 = judged("H20")
    assert len(h20) == len(made)


@pytest.mark.parametrize("workers", ["2", "3"])
def test_runs_side_by_side_are_the_runs_one_by_one(workers, monkeypatch):
    """The placements' runs replayed by forked workers, a window at a time, are the runs of one process, placement by
    placement, and share a run between placements exactly as it does (``band_of`` counts the distinct ones)."""
    from livebytes.estimator.capacity import _replayed, _run_kwargs
    from livebytes.estimator.placement import placements
    model, shape = get_compiled("fla-kda@0.6.0", "H200"), Shape(1, 8192, 16, 128)
    kw = _run_kwargs(model, shape, DEFAULT_CONF, "cold")

    def figures(n: str) -> list:
        monkeypatch.setenv("LIVEBYTES_WORKERS", n)
        runs = _replayed(model, shape, kw, placements())
        shared = [next(i for i, (_, q) in enumerate(runs) if q is r) for _, r in runs]
        return [(p.name, r.reserved_peak_bytes, r.allocated_peak_bytes, r.peaks, r.segments) for p, r in runs] + [shared]
    assert figures(workers) == figures("1")

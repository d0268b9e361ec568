"""10,000 shapes in under a second on one core: `python -m pytest benchmarks --benchmark-only`.

A benchmark, not a timed test: it reports the time; CI does not run it (testpaths = tests)."""
from livebytes.estimator import get_model
from livebytes.estimator.planning import sweep

GRID = dict(mbs=[1, 2, 3, 4], seqs=[1024 * i for i in range(1, 26)], heads=[8 * i for i in range(1, 26)], dims=[64, 128, 192, 256])


def test_sweep_10000_shapes(benchmark):
    model = get_model("fla-kda@0.6.0")
    sweep(model, [1], [1024], [16], [128])          # compile the vectorised expressions once
    rows = benchmark(sweep, model, GRID["mbs"], GRID["seqs"], GRID["heads"], GRID["dims"])
    assert len(rows) == 10_000

import pytest

from livebytes.estimator import get_model, predict

GiB = 2**30


def peak(key, shape, device=None, **options):
    return predict(get_model(key, device, **options), shape)


@pytest.fixture
def predict_config_peak(tmp_path):
    """``livebytes predict --model CONFIG --json FLAGS``'s peak_bytes for a config given as a dict (written to
    ``tmp_path``): the traced models' tests compare one config's answers under two sets of flags."""
    import json

    from typer.testing import CliRunner

    from livebytes.cli.app import app

    def run(config: dict, *flags: str) -> int:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        r = CliRunner().invoke(app, ["predict", "--model", str(path), "--json", *flags])
        assert r.exit_code == 0, r.output
        (d,) = json.loads(r.stdout)["results"]
        return d["peak_bytes"]
    return run


@pytest.fixture(autouse=True, scope="session")
def _private_model_cache(tmp_path_factory):
    """Every test session compiles into its own model cache (estimator/cache.py), never the user's."""
    import os
    old = os.environ.get("LIVEBYTES_CACHE_DIR")
    os.environ["LIVEBYTES_CACHE_DIR"] = str(tmp_path_factory.mktemp("model-cache"))
    yield
    if old is None:
        os.environ.pop("LIVEBYTES_CACHE_DIR", None)
    else:
        os.environ["LIVEBYTES_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _no_alloc_conf_from_the_environment(monkeypatch):
    """A PYTORCH_(CUDA_)ALLOC_CONF in the shell that runs the tests would change every verdict (livebytes.choose reads
    it when --alloc-conf is not given): each test starts without them, a test that wants one sets it."""
    from livebytes.choose import ALLOC_CONF_VARIABLES
    for name in ALLOC_CONF_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def synthetic_kda_traces(tmp_path_factory):
    """Synthetic allocator traces of fla-kda@0.6.0 (report contract; learn/synthetic.py) at the learner's
    shapes, for the learn and drift commands."""
    import json

    from livebytes.learn.synthetic import synthetic_trace
    from tests.test_learn import KDA_SHAPES, OUTSIDE
    d = tmp_path_factory.mktemp("traces")
    model = get_model("fla-kda@0.6.0", contract="report")
    for i, shape in enumerate(KDA_SHAPES):
        (d / f"t{i}.json").write_text(json.dumps(synthetic_trace(model, shape, OUTSIDE)))
    return d

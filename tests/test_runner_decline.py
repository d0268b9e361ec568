"""The runner's refusals, without a GPU: FROST declines off Blackwell, the Hopper engines off sm90 (each
harness says what its library refuses; a model without a harness cannot be run)."""
from types import SimpleNamespace

import pytest

from livebytes.validate.gpu import environment
from livebytes.validate.gpu import harnesses


def fake_torch(capability, name="NVIDIA H200"):
    cuda = SimpleNamespace(is_available=lambda: True, get_device_capability=lambda i=0: capability,
                           get_device_name=lambda i=0: name)
    return SimpleNamespace(cuda=cuda)


@pytest.mark.parametrize("impl,capability,needle", [
    ("cudnn-kda-frost@1.32.0", (9, 0), "kda_frost runs only on Blackwell"),
    ("cudnn-kda-hopper-cuda@1.32.0", (10, 0), "runs only on Hopper (sm90)"),
    ("cudnn-kda-hopper@1.32.0", (10, 3), "runs only on Hopper (sm90)"),
    ("nobody@1", (9, 0), "no runner for nobody@1"),
])
def test_declines_with_the_reason(monkeypatch, impl, capability, needle):
    monkeypatch.setattr(environment, "_torch", lambda: fake_torch(capability))
    assert needle in harnesses.decline_reason(impl)


@pytest.mark.parametrize("impl,capability", [("cudnn-kda-frost@1.32.0", (10, 0)), ("cudnn-kda-hopper-cuda@1.32.0", (9, 0)),
                                             ("fla-kda@0.6.0", (9, 0))])
def test_runs_where_the_engine_exists(monkeypatch, impl, capability):
    monkeypatch.setattr(environment, "_torch", lambda: fake_torch(capability))
    monkeypatch.setattr(harnesses, "_installed", lambda kind: ("fla" if kind == "fla" else "cudnn", impl.split("@")[1]))
    assert harnesses.decline_reason(impl) is None


def test_a_model_of_another_version_than_installed_is_declined(monkeypatch):
    """Measuring fla-core 0.7.0 under the 0.6.0 model's name would mislabel the record."""
    monkeypatch.setattr(environment, "_torch", lambda: fake_torch((9, 0)))
    monkeypatch.setattr(harnesses, "_installed", lambda kind: ("fla", "0.7.0"))
    assert "models fla 0.6.0; this machine has fla 0.7.0" in harnesses.decline_reason("fla-kda@0.6.0")
    assert harnesses.decline_reason("fla-kda@07b80f27") == "no runner for fla-kda@07b80f27"   # a private snapshot


def test_no_cuda_is_one_clear_reason(monkeypatch):
    monkeypatch.setattr(environment, "cuda_available", lambda: False)
    assert harnesses.decline_reason("fla-kda@0.6.0").startswith("no CUDA device")

import pytest

from livebytes.estimator import Shape, get_model, predict

GiB = 2**30


@pytest.fixture(scope="session")
def gib():
    return GiB


def peak(key, shape, device=None, **options):
    return predict(get_model(key, device, **options), shape)

from livebytes.estimator import get_model, predict

GiB = 2**30


def peak(key, shape, device=None, **options):
    return predict(get_model(key, device, **options), shape)

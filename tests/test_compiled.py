"""The compiled-model cache (estimator/cache.py, estimator/evaluation.py) answers exactly what the symbolic engine answers, and a
cache hit imports neither sympy nor the model modules."""
import os
import subprocess
import sys

import pytest

from livebytes.estimator import cache
from livebytes.estimator import get_model, predict
from livebytes.estimator.devices import build_facts, get_device
from livebytes.estimator.registry import get_compiled, keyed_specs
from livebytes.estimator.replay import replay
from livebytes.estimator.shapes import Shape

H200_FACTS = build_facts(get_device("H200"))

SHAPES = [Shape(1, 8192, 96, 128), Shape(3, 5000, 32, 128), Shape(2, 1000, 16, 64), Shape(1, 131072, 128, 128),
          Shape(4, 2048, 8, 128, v_heads=32)]


def _cases():
    for s in keyed_specs():
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
    cm = cache.compiled_model("fla-kda@0.6.0", H200_FACTS, (("contract", "report"), ("forward_only", False), ("gva", False),
                                                           ("recompute", True)), build=lambda: get_model("fla-kda@0.6.0"), device="H200")
    assert cm.predict(SHAPES[0]).peak_bytes == predict(get_model("fla-kda@0.6.0"), SHAPES[0]).peak_bytes


def test_one_timeline_for_both_views():
    """A built model and its compiled view share one live_range (estimator/timeline.py), and agree on every buffer."""
    from livebytes.estimator.buffers import LifetimeModel
    from livebytes.estimator.compiler import compile_model
    from livebytes.estimator.evaluation import CompiledModel
    assert LifetimeModel.live_range is CompiledModel.live_range
    model = get_model("cudnn-kda-hopper-cuda@1.32.0", "H200")
    cm = compile_model(model)
    assert [model.live_range(b) for b in model.buffers] == [cm.live_range(b) for b in cm.buffers]


# ------------------------------------------------------------------ nobody else can make the cache run code (issue 33)

class _Planted:
    """A pickle that would create ``marker`` when loaded."""
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _entry_of_fla_kda_after_mkdir(d):
    """The one compiled-model entry of fla-kda@0.6.0 in the private folder ``d``, built there."""
    cache.private_dir()
    before = set(d.glob("*.entry"))
    cache.compiled_model("fla-kda@0.6.0", H200_FACTS, (("planted",),), build=lambda: get_model("fla-kda@0.6.0"), device="H200")
    (path,) = set(d.glob("*.entry")) - before
    return path


def _plant(path, payload: bytes):
    path.unlink()
    path.write_bytes(payload)
    path.chmod(0o600)


def _signed(d, payload: bytes) -> bytes:
    import hashlib
    import hmac
    return cache._MAGIC + hmac.new((d / cache._KEY_NAME).read_bytes(), payload, hashlib.sha256).digest() + payload


@pytest.mark.parametrize("forge", ["bare pickle", "our header, wrong signature", "signed, foreign class"])
def test_a_planted_entry_is_rebuilt_never_run(tmp_path, monkeypatch, forge):
    import pickle
    d = tmp_path / "cache"
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    path, marker = _entry_of_fla_kda_after_mkdir(d), tmp_path / "ran"
    hostile = pickle.dumps(_Planted(marker))
    _plant(path, {"bare pickle": hostile, "our header, wrong signature": cache._MAGIC + b"\0" * 32 + hostile,
                  "signed, foreign class": _signed(d, hostile)}[forge])
    cm = cache.compiled_model("fla-kda@0.6.0", H200_FACTS, (("planted",),), build=lambda: get_model("fla-kda@0.6.0"), device="H200")
    assert not marker.exists()
    assert cm.predict(SHAPES[0]).peak_bytes == predict(get_model("fla-kda@0.6.0"), SHAPES[0]).peak_bytes
    assert path.read_bytes().startswith(cache._MAGIC) and pickle.dumps(_Planted(marker)) not in path.read_bytes()


def test_a_wide_folder_is_refused_never_narrowed(tmp_path, monkeypatch):
    """Others may write it: no cache, and its mode is left as it is (it was narrowed to 0700; tests/test_folders.py)."""
    d = tmp_path / "cache"
    d.mkdir(mode=0o777)
    d.chmod(0o777)
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    assert cache.private_dir() is None and (d.stat().st_mode & 0o777) == 0o777


def test_a_symlinked_folder_is_not_used(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "cache"))
    assert cache.private_dir() is None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("whose", ["folder", "entry", "key"])
def test_anything_another_user_owns_is_never_loaded(tmp_path, monkeypatch, whose):
    d = tmp_path / "cache"
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    path = _entry_of_fla_kda_after_mkdir(d)
    os.chown({"folder": d, "entry": path, "key": d / cache._KEY_NAME}[whose], 4242, 4242)
    if whose == "folder":
        assert cache.private_dir() is None
    loaded = []
    monkeypatch.setattr(cache, "_from_disk", lambda data: loaded.append(data))
    cache.compiled_model("fla-kda@0.6.0", H200_FACTS, (("planted",),), build=lambda: get_model("fla-kda@0.6.0"), device="H200")
    assert loaded == []            # rebuilt: an entry signed under a key nobody else can plant is the only one read


def test_an_entry_of_ours_is_loaded(tmp_path, monkeypatch):
    """The check above can fail: the same path with nothing foreign loads from disk."""
    d = tmp_path / "cache"
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    _entry_of_fla_kda_after_mkdir(d)
    loaded = []
    real = cache._from_disk
    monkeypatch.setattr(cache, "_from_disk", lambda data: loaded.append(data) or real(data))
    cache.compiled_model("fla-kda@0.6.0", H200_FACTS, (("planted",),), build=lambda: get_model("fla-kda@0.6.0"), device="H200")
    assert len(loaded) == 1


def test_an_edited_device_table_is_another_cache_key(tmp_path, monkeypatch):
    """A model reads its device's facts (shared memory, SMs) from estimator/data/devices.json as it is built: an entry
    cached before the table changed must not answer after it."""
    before = cache.sources_digest()
    edited = tmp_path / "devices.json"
    edited.write_bytes(cache.DEVICES_TABLE.read_bytes().replace(b'"sm_count": 132', b'"sm_count": 114', 1))
    monkeypatch.setattr(cache, "DEVICES_TABLE", edited)
    cache.sources_digest.cache_clear()
    try:
        assert cache.sources_digest() != before
    finally:
        cache.sources_digest.cache_clear()


def test_a_folder_where_the_key_belongs_is_one_line_not_an_error(tmp_path, monkeypatch):
    """A folder named hmac.key (the key cannot be read or replaced): nothing kept is read or written, nothing raises
    (it was 'cannot use 3: Is a directory', exit 1), and the lists can say why (``signed_folder_problem``)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    assert cache.write_signed("measured_processes", "a", {"x": 1}) and cache.read_signed("measured_processes", "a")
    (d / cache._KEY_NAME).unlink()
    (d / cache._KEY_NAME).mkdir()
    (d / cache._KEY_NAME / "inside").write_text("keeps the folder from being removed")
    assert cache.read_signed("measured_processes", "a") is None and cache.signed_names("measured_processes") == []
    assert not cache.write_signed("measured_processes", "b", {"x": 2})
    assert cache.signed_folder_problem("measured_processes") == (
        f"{d / cache._KEY_NAME} is no file this user owns and it cannot be replaced: nothing kept is read or written")
    assert not list(d.glob("*.tmp"))                          # the new key's file, not left behind

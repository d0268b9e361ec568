"""Folders livebytes writes are made by it (one level, under a parent that exists) or refused; no folder's mode ever
changes (issue 50: ``LIVEBYTES_CACHE_DIR=/`` as root made ``/`` mode 0700, a 1777 folder lost its sticky bit, a 0777
folder became 0700, ``HOME=/nonexistent`` made ``/nonexistent/.cache/livebytes``).

Each case is planted in a temporary folder standing in for the real one (never ``/`` or a system folder), and checked
as this user (root, here) and as another user (a forked child that drops to uid 65534, where the tests run as root)."""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator import cache, folders

OTHER = 65534            # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's folder, or becoming one, needs root")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def shared_tmp():
    """A temporary folder every user may enter (0755; pytest's own are 0700), so another user's child can reach the
    cases planted in it."""
    with tempfile.TemporaryDirectory(prefix="livebytes-folders-") as d:
        os.chmod(d, 0o755)                 # our own temporary folder, made just above
        yield Path(d)


def _plant(root: Path, case: str) -> Path:
    """The folder of one case, planted in ``root``: its path (which may not exist)."""
    d = root / case.replace("/", "slash").replace(" ", "_")
    if case == "missing parent":
        return root / "nonexistent" / "cache"
    d.mkdir()
    mode = {"like /, 0755": 0o755, "sticky 1777": 0o1777, "open 0777": 0o777, "group-writable 0770": 0o770,
            "another user's": 0o700, "private 0700": 0o700}[case]
    os.chmod(d, mode)
    if case == "another user's":
        os.chown(d, OTHER, OTHER)
    return d


def _in_child_as(uid: int, fn) -> dict:
    """``fn()``'s JSON result, computed in a forked child that runs as ``uid`` (the cache's code already imported)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                                     # the child: drop to uid, answer, leave
        try:
            os.close(read)
            os.setgid(uid)
            os.setuid(uid)
            os.write(write, json.dumps(fn()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        text = fh.read()
    os.waitpid(pid, 0)
    return json.loads(text)


def _use_cache() -> dict:
    d = cache.private_dir()
    return {"dir": None if d is None else str(d), "refusal": cache.refusal()}


# (case, as root: used?, as another user: used?) and the words the refusal must hold
CASES = [("like /, 0755", True, False, "belongs to uid 0"),
         ("sticky 1777", False, False, "is writable by its group and every user (mode 1777"),
         ("open 0777", False, False, "is writable by its group and every user (mode 0777"),
         ("group-writable 0770", False, False, "is writable by its group (mode 0770"),
         ("another user's", False, True, f"belongs to uid {OTHER}, not to this user (uid 0)"),
         ("missing parent", False, False, "nonexistent does not exist")]


@as_root
@pytest.mark.parametrize("case, used_by_root, used_by_other, words", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("who", ["root", "another user"])
def test_the_cache_folder_is_used_as_it_is_or_refused_never_changed(shared_tmp, monkeypatch, case, used_by_root,
                                                                    used_by_other, words, who):
    d = _plant(shared_tmp, case)
    before = (_mode(d), os.lstat(d).st_uid) if d.exists() else None
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    cache.forget_refusal()
    got = _use_cache() if who == "root" else _in_child_as(OTHER, _use_cache)
    used = used_by_root if who == "root" else used_by_other
    assert ((_mode(d), os.lstat(d).st_uid) if d.exists() else None) == before      # no mode, no owner changed
    assert not (shared_tmp / "nonexistent").exists()                                # no parent made
    if used:
        assert got == {"dir": str(d), "refusal": None}
        return
    assert got["dir"] is None and "\n" not in got["refusal"]
    assert got["refusal"].startswith(f"the cache folder {d} is not used")
    if who == "another user" and case not in ("another user's", "missing parent"):
        words = f"belongs to uid 0, not to this user (uid {OTHER})"           # the owner is judged first: root's
    assert words in got["refusal"]
    assert got["refusal"].endswith("or set LIVEBYTES_CACHE_DIR to a folder of yours")


def test_the_root_like_folder_keeps_its_mode_and_a_private_one_is_used(tmp_path, monkeypatch):
    """The check above can fail: a 0755 folder of ours is used (entries 0600) and stays 0755 (``/`` became 0700)."""
    d = tmp_path / "like-root"
    d.mkdir()
    d.chmod(0o755)
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    assert cache.write_signed("measured_processes", "a", {"x": 1}) and cache.read_signed("measured_processes", "a") == {"x": 1}
    assert _mode(d) == 0o755 and _mode(d / "measured_processes") == 0o700 and _mode(d / cache._KEY_NAME) == 0o600


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_missing_leaf_is_made_0700_under_a_parent_that_exists(tmp_path, monkeypatch, umask):
    parent = tmp_path / "parent"
    parent.mkdir()
    parent.chmod(0o1777)
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(parent / "cache"))
    old = os.umask(umask)
    try:
        assert cache.private_dir() == parent / "cache"
    finally:
        os.umask(old)
    assert _mode(parent / "cache") == 0o700 and _mode(parent) == 0o1777


def test_the_default_folder_makes_dot_cache_in_a_home_that_exists_and_nothing_in_one_that_does_not(tmp_path, monkeypatch):
    monkeypatch.delenv("LIVEBYTES_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    assert cache.private_dir() == home / ".cache" / "livebytes"
    assert (_mode(home), _mode(home / ".cache"), _mode(home / ".cache" / "livebytes")) == (0o755, 0o700, 0o700)
    monkeypatch.setenv("HOME", str(tmp_path / "nonexistent"))
    cache.forget_refusal()
    assert cache.private_dir() is None and not (tmp_path / "nonexistent").exists()
    assert f"{tmp_path / 'nonexistent'} does not exist" in cache.refusal()


def test_xdg_cache_home_must_exist(tmp_path, monkeypatch):
    monkeypatch.delenv("LIVEBYTES_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.private_dir() is None and not (tmp_path / "xdg").exists()
    (tmp_path / "xdg").mkdir()
    assert cache.private_dir() == tmp_path / "xdg" / "livebytes" and _mode(tmp_path / "xdg" / "livebytes") == 0o700


@pytest.mark.parametrize("mode, read", [(0o750, True), (0o701, True), (0o755, True), (0o777, False), (0o770, False)])
def test_a_kept_record_subfolder_is_read_as_it_is_or_refused(tmp_path, monkeypatch, mode, read):
    """A subfolder of kept records nobody else may write is read (its mode untouched); one others may write is refused
    in one line (it was narrowed to 0700, as every folder was)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    assert cache.write_signed("measured_processes", "a", {"x": 1})
    (d / "measured_processes").chmod(mode)
    assert (cache.read_signed("measured_processes", "a") == {"x": 1}) is read
    assert _mode(d / "measured_processes") == mode
    problem = cache.signed_folder_problem("measured_processes")
    assert problem is None if read else problem == (
        f"nothing kept in {d / 'measured_processes'} is read: {d / 'measured_processes'} is writable by its group"
        f"{' and every user' if mode & 0o002 else ''} (mode {mode:04o}; if it is yours alone, chmod go-w {d / 'measured_processes'})")


def test_the_command_says_the_refusal_in_one_line_and_still_answers(tmp_path, monkeypatch):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    r = CliRunner().invoke(app, ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "96", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["results"]
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"warning: the cache folder {d} is not used") and f"chmod go-w {d}" in line
    assert _mode(d) == 0o777 and list(d.iterdir()) == []


@pytest.mark.parametrize("planted, problem", [
    ("missing", None), ("folder", None), ("file", "is not a folder"), ("missing parent", "livebytes makes only the folder itself")])
def test_an_output_folder_is_made_only_as_its_own_leaf(tmp_path, planted, problem):
    path = tmp_path / "nonexistent" / "out" if planted == "missing parent" else tmp_path / "out"
    if planted == "folder":
        path.mkdir()
        path.chmod(0o777)
    elif planted == "file":
        path.write_text("")
    got = folders.own_leaf(path)
    assert got is None if problem is None else problem in got
    assert not (tmp_path / "nonexistent").exists()
    if planted == "folder":
        assert _mode(path) == 0o777


@pytest.mark.parametrize("command", ["process", "frames", "predict"])
def test_a_refused_cache_is_one_warning_line_even_where_the_list_says_why(tmp_path, monkeypatch, command):
    d = tmp_path / "sticky"
    d.mkdir()
    d.chmod(0o1777)
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(d))
    args = [command, "list"] if command != "predict" else ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "96"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0
    (line,) = r.stderr.splitlines()
    assert f"the cache folder {d} is not used" in line and "(mode 1777;" in line and _mode(d) == 0o1777


def test_process_list_skips_a_signed_record_of_another_name(tmp_path, monkeypatch):
    """A record signed with this cache's key under a name with no '|' (no measured process's name): not listed (it was
    a ValueError traceback from measured_store.measured_cases)."""
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "cache"))
    assert cache.write_signed("measured_processes", "no bar here", {"x": 1})
    r = CliRunner().invoke(app, ["process", "list", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["results"] == [] and r.stderr == ""


def test_validate_makes_only_its_out_dir_never_its_parents(tmp_path):
    out = tmp_path / "nonexistent" / "out"
    r = CliRunner().invoke(app, ["validate", "--impl", "fla-kda@0.6.0", "--shapes", "seq_len=4096,num_heads=16",
                                 "--out-dir", str(out)])
    assert r.exit_code == 1 and not (tmp_path / "nonexistent").exists()
    assert r.stderr == (f"error: --out-dir {out}: not a folder we can write ({tmp_path / 'nonexistent'} does not exist: "
                        f"livebytes makes only the folder itself, not its parents (create {tmp_path / 'nonexistent'} first))\n")


def test_validate_refused_later_leaves_no_out_dir(tmp_path):
    """The parent exists, so --out-dir is taken; no CUDA GPU here refuses the run, and no folder is left behind."""
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["validate", "--impl", "fla-kda@0.6.0", "--shapes", "seq_len=4096,num_heads=16",
                                 "--out-dir", str(out)])
    assert r.exit_code == 1 and not out.exists()

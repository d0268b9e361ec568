"""Built models compiled once and kept on disk, so that a prediction needs no sympy.

Building a model and lambdifying its byte formulas costs ~0.2 s and importing sympy ~0.25 s; a cold
``livebytes predict`` should take well under half a second. A ``CompiledModel`` holds what a
prediction and an allocator replay need: the steps, each buffer's metadata (name, group, shape as
text, dtype, source, lifetime) and two compiled functions of (S, MBS, H, HV, DK, DV): the bytes the
allocator charges per buffer, and the bytes requested per allocation. The registry's specs are kept
the same way (``spec_index``), so a cache hit imports neither sympy nor the model modules.

Functions are stored as their code objects (``marshal``) with the globals they read (constants,
math functions, other such functions; closures' cell values), so the very code sympy generated
(and a model's own plan-choice functions, ``implemented_function``) runs again. A function that reads
anything else (a module, an object) is not portable: that entry is simply not cached.

Entries are keyed by the model key, device, options and a digest of every source file of the core
and the model packages plus the Python version; a stale or unreadable entry is rebuilt. The cache
lives in ``$LIVEBYTES_CACHE_DIR``, else ``$XDG_CACHE_HOME/livebytes``, else ``~/.cache/livebytes``;
when it cannot be written, nothing is cached and nothing fails (the command says why in one line: ``refusal``).

An entry holds code, so nobody else may be able to write one that is loaded: the folder is private (owned by this user,
no symlink, writable by nobody else: ``private_dir``; made 0700 by us, only its own levels, and never re-moded: a
folder that is not private is refused, ``folders.py``), every entry is a 0600 file of ours, signed with HMAC-SHA256 under a per-cache
secret kept beside it (``_hmac_key``), and its signature is checked before it is unpickled, by an unpickler that
builds only the entry's own classes. A foreign, tampered or unsigned file is rebuilt, never loaded.

Beside the entries, signed JSON records (``write_signed``, ``read_signed``, ``signed_names``): data kept across code
versions under a name in a private subfolder (the frames a user derived, ``frames_store``), signed with the same key,
never pickled; a foreign, tampered or unsigned record is never read.
"""
from __future__ import annotations

import builtins
import contextlib
import hashlib
import hmac
import io
import json
import marshal
import math
import os
import pickle
import secrets
import stat
import sys
import types
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from importlib.metadata import entry_points
from importlib.util import find_spec

from .compiled import compiled
from .evaluation import CompiledModel
from .folders import folder_problem, make_folders
from .groups import Group

FORMAT = 9   # 9: tensor on buffers; 8: shared_lambdify; 7: first_call and module on buffers;
#              2: autotuned kernels and their compiled key function; 3: their argument signature; 4: held_until_gc;
#              5: held_measured (where the failing-config rule was measured); 6: its compiled function (measured_fn)


class NotPortable(Exception):
    pass


# ------------------------------------------------------------------------------- portable functions

_CONSTANTS = (type(None), bool, int, float, str, bytes)


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _portable_value(value, depth: int = 0):
    if isinstance(value, _CONSTANTS):
        return ("const", value)
    if isinstance(value, (tuple, frozenset)) and all(isinstance(v, _CONSTANTS) for v in value):
        return ("const", value)
    if isinstance(value, types.BuiltinFunctionType) and getattr(math, value.__name__, None) is value:
        return ("math", value.__name__)
    if isinstance(value, types.FunctionType):
        return ("fn", portable(value, depth + 1))
    if isinstance(value, Group):
        return ("group", value.name)
    raise NotPortable(repr(value)[:80])


def portable(fn: types.FunctionType, depth: int = 0) -> tuple:
    """(code, globals read, closure values, defaults) of ``fn``; NotPortable when it reads anything else."""
    if depth > 8:
        raise NotPortable(f"{fn.__name__}: calls nested too deep (or recursive)")
    code = fn.__code__
    glob = {}
    for name in sorted(_names(code)):
        if name in fn.__globals__ and not (name in vars(builtins) and fn.__globals__[name] is vars(builtins)[name]):
            glob[name] = _portable_value(fn.__globals__[name], depth)
    cells = tuple(_portable_value(c.cell_contents, depth) for c in (fn.__closure__ or ()))
    defaults = tuple(_portable_value(d, depth) for d in (fn.__defaults__ or ()))
    return (marshal.dumps(code), fn.__name__, glob, cells, defaults)


def _restore_value(tagged):
    kind, value = tagged
    if kind == "const":
        return value
    if kind == "math":
        return getattr(math, value)
    if kind == "group":
        return Group[value]
    return restore(value)


def restore(p: tuple) -> types.FunctionType:
    code_bytes, name, glob, cells, defaults = p
    namespace = {"__builtins__": builtins}
    namespace.update({k: _restore_value(v) for k, v in glob.items()})
    closure = tuple(types.CellType(_restore_value(c)) for c in cells) or None
    return types.FunctionType(marshal.loads(code_bytes), namespace, name, tuple(_restore_value(d) for d in defaults) or None,
                              closure)


def _to_disk(cm: CompiledModel) -> dict:
    return {"fields": {k: getattr(cm, k) for k in ("key", "implementation", "version", "summary", "device", "options",
                                                    "steps", "buffers", "allocation_names", "autotuned")},
            "charged_fn": portable(cm.charged_fn), "requested_fn": portable(cm.requested_fn),
            "autotune_key_fn": None if cm.autotune_key_fn is None else portable(cm.autotune_key_fn),
            "held_fn": None if cm.held_fn is None else portable(cm.held_fn),
            "measured_fn": None if cm.measured_fn is None else portable(cm.measured_fn)}


def _from_disk(d: dict) -> CompiledModel:
    key_fn, held, measured = d.get("autotune_key_fn"), d.get("held_fn"), d.get("measured_fn")
    return CompiledModel(**d["fields"], charged_fn=restore(d["charged_fn"]), requested_fn=restore(d["requested_fn"]),
                         autotune_key_fn=None if key_fn is None else restore(key_fn),
                         held_fn=None if held is None else restore(held),
                         measured_fn=None if measured is None else restore(measured))


# ------------------------------------------------------------------------------------------ the cache

MAX_ENTRY_BYTES = 64 << 20   # the largest compiled model is ~1 MiB; anything far larger is not ours
_MAGIC = b"livebytes-cache-v1\n"
_KEY_NAME = "hmac.key"


_refusal: str | None = None   # why this process found the cache folder unusable (the CLI says it once, ``refusal``)


def _location() -> tuple[Path, tuple[str, ...]]:
    """The folder that must already exist and the folders below it that livebytes makes (each one level, 0700): the
    folder named by ``$LIVEBYTES_CACHE_DIR`` itself, else ``livebytes`` in ``$XDG_CACHE_HOME``, else ``.cache`` and
    ``livebytes`` in the home folder (``~/.cache`` made as the XDG base directory spec says: 0700, when missing; the
    home folder never). RuntimeError where no home folder is known."""
    if os.environ.get("LIVEBYTES_CACHE_DIR"):
        d = Path(os.environ["LIVEBYTES_CACHE_DIR"])
        return (d, ()) if d.name in ("", ".", "..") else (d.parent, (d.name,))
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]), ("livebytes",)
    return Path.home(), (".cache", "livebytes")


def cache_dir() -> Path:
    try:
        anchor, made = _location()
    except RuntimeError:
        return Path("~/.cache/livebytes")
    return anchor.joinpath(*made)


def _private_dir() -> tuple[Path | None, str | None]:
    """The cache folder, or None and why not in one line. Made where missing (only its own levels, under a folder that
    exists), never changed: one that is no real folder of this user's, or that others may write, is refused."""
    try:
        anchor, made = _location()
    except RuntimeError:
        return None, "the cache is not used: no home folder is known; set LIVEBYTES_CACHE_DIR to a folder of yours"
    d = anchor.joinpath(*made)
    problem = make_folders(anchor, made) or folder_problem(d)
    if problem is None:
        return d, None
    return None, (f"the cache folder {d} is not used (nothing is cached or read from it): {problem}; "
                  f"or set LIVEBYTES_CACHE_DIR to a folder of yours")


def private_dir() -> Path | None:
    """The cache folder, private the way ssh wants ``~/.ssh`` (a real folder owned by this user that nobody else may
    write: ``folders.folder_problem``), or None (no cache): the reason is kept for ``refusal``. Its mode is never
    changed, and only its own levels are ever made (``_location``)."""
    global _refusal
    d, problem = _private_dir()
    if problem is not None:
        _refusal = problem
    return d


def refusal() -> str | None:
    """Why this process found the cache folder unusable, in one line naming the folder and the fix, or None."""
    return _refusal


def forget_refusal() -> None:
    """Start a new command: a refusal seen by an earlier one (in this process) is not said again."""
    global _refusal
    _refusal = None


def _own_regular_file(fd: int, limit: int) -> bool:
    """An open file that this user owns, nobody else may write, and that is no larger than ``limit``."""
    st = os.fstat(fd)
    return (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not stat.S_IMODE(st.st_mode) & 0o022
            and st.st_size <= limit)


def _read_private(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` if it is a private regular file of ours (never through a symlink), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    if not _own_regular_file(fd, limit):        # checked on the open descriptor: a folder opens too, but is no file
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit + 1)


def _write_private(path: Path, data: bytes) -> None:
    """``data`` to ``path`` through a new 0600 file renamed into place (atomic; never follows a planted link)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _hmac_key(d: Path) -> bytes | None:
    """This cache's secret (32 random bytes, a 0600 file of ours in the private folder), made when missing or not ours.
    Entries are signed with it, so only a process of this user can write one that is ever loaded. None where no key
    can be made (something that is no file, say a folder, holds its name): nothing is then read or written signed."""
    key = _read_private(d / _KEY_NAME, 32)
    if key is not None and len(key) == 32:
        return key
    key = secrets.token_bytes(32)
    with contextlib.suppress(OSError):
        os.unlink(d / _KEY_NAME)
    try:
        _write_private(d / _KEY_NAME, key)
    except OSError:
        for stale in d.glob(f"{_KEY_NAME}.*.tmp"):          # the new key's file, left by the failed rename
            with contextlib.suppress(OSError):
                stale.unlink()
        return None
    return key


def _package_dirs() -> list[Path]:
    """The core and every package registered under the livebytes.models entry points, found without importing them."""
    dirs = [Path(__file__).parent]
    for ep in entry_points(group="livebytes.models"):
        found = find_spec(ep.value.split(":")[0])
        if found is not None and found.submodule_search_locations:
            dirs += [Path(p) for p in found.submodule_search_locations]
        elif found is not None and found.origin:
            dirs.append(Path(found.origin))
    return dirs


@lru_cache(maxsize=None)
def package_digest(package: str) -> str:
    """One installed package's Python sources (found without importing it): what a result cached on disk from its code
    depends on (the tracer's traces, the validator's judgements)."""
    h = hashlib.sha256()
    for folder in find_spec(package).submodule_search_locations:
        for path in sorted(Path(folder).glob("*.py")):
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:32]


@lru_cache(maxsize=1)
def sources_digest() -> str:
    """The sources a built model depends on: every Python file of the core and the model packages, and the device table
    (a model reads its device's facts, estimator/data/devices.json, as it is built)."""
    h = hashlib.sha256(f"{FORMAT} {sys.version}".encode())
    for d in _package_dirs():
        for path in sorted(d.rglob("*.py")) if d.is_dir() else [d]:
            h.update(str(path.name).encode())
            h.update(path.read_bytes())
    h.update(DEVICES_TABLE.read_bytes())
    return h.hexdigest()[:32]


DEVICES_TABLE = Path(__file__).parent / "data" / "devices.json"


class _EntryUnpickler(pickle.Unpickler):
    """Builds plain data and the few classes an entry holds; anything else (os.system, ...) is refused."""
    ALLOWED = {("livebytes.estimator.evaluation", "StepInfo"), ("livebytes.estimator.evaluation", "BufferInfo"),
               ("livebytes.estimator.evaluation", "AutotuneInfo"), ("livebytes.estimator.groups", "Group"),
               ("livebytes.estimator.replay", "Replay"), ("livebytes.estimator.allocator", "MappedRange")}

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not cache data")
        return super().find_class(module, name)


def _path(d: Path, *parts) -> Path:
    name = hashlib.sha256(repr((sources_digest(),) + parts).encode()).hexdigest()[:32]
    return d / f"{name}.entry"


def _read(*parts):
    """The entry stored under ``parts``, or None: missing, stale, truncated, unsigned, signed with another key, not ours
    or not private. Its signature is checked before a byte of it is unpickled."""
    d = private_dir()
    if d is None:
        return None
    try:
        blob = _read_private(_path(d, *parts), MAX_ENTRY_BYTES)
        if blob is None or not blob.startswith(_MAGIC):
            return None
        tag, payload = blob[len(_MAGIC):len(_MAGIC) + 32], blob[len(_MAGIC) + 32:]
        key = _hmac_key(d)
        if key is None or not hmac.compare_digest(tag, hmac.new(key, payload, hashlib.sha256).digest()):
            return None
        return _EntryUnpickler(io.BytesIO(payload)).load()
    except Exception:          # an unreadable entry is rebuilt
        return None


def _write(data, *parts) -> None:
    d = private_dir()
    if d is None:
        return
    key = _hmac_key(d)
    if key is None:
        return                 # no key can be made: nothing is kept
    try:
        payload = pickle.dumps(data)
        _write_private(_path(d, *parts), _MAGIC + hmac.new(key, payload, hashlib.sha256).digest() + payload)
    except OSError:
        pass                   # a read-only cache is no cache, not an error


def compiled_model(key: str, facts: tuple, options: tuple, build, device: str) -> CompiledModel:
    """The compiled model for (key, the device's build facts, resolved options) from disk, else ``build()`` (a
    LifetimeModel) compiled and stored; named for ``device`` (one entry serves every device of those facts,
    ``devices.build_facts``). Its ``identity`` names the entry (empty for a model whose functions are not portable)."""
    parts = ("model", key, facts, options)
    identity = hashlib.sha256(repr(parts).encode()).hexdigest()[:32]
    data = _read(*parts)
    if data is not None:
        try:
            return replace(_from_disk(data), device=device, identity=identity)
        except Exception:
            pass
    cm = compiled(build())
    try:
        _write(_to_disk(cm), *parts)
    except NotPortable:
        return cm
    return replace(cm, device=device, identity=identity)


def cached(parts: tuple, compute):
    """``compute()``'s picklable result from disk, keyed on ``parts`` and these sources (the model packages'),
    else computed and stored. A caller whose result depends on other code puts that code's digest in ``parts``."""
    data = _read("value", *parts)
    if data is not None:
        return data
    value = compute()
    _write(value, "value", *parts)
    return value


# ----------------------------------------------------------------------------------- the spec index

SPEC_FIELDS = ("key", "implementation", "version", "covers", "options", "default_device", "phase", "refusals", "shape_fields",
               "stacked", "counts", "caveat")
SPEC_FUNCTIONS = ("refuse", "refuse_device", "seq_multiple")


def read_spec_index() -> list[dict] | None:
    """The registry's specs as stored (fields and portable functions restored), or None."""
    data = _read("specs")
    if data is None:
        return None
    try:
        return [{**d["fields"], **{f: (restore(p) if p is not None else None) for f, p in d["functions"].items()}}
                for d in data]
    except Exception:
        return None


def write_spec_index(specs) -> None:
    try:
        data = [{"fields": {f: getattr(s, f) for f in SPEC_FIELDS},
                 "functions": {f: (portable(getattr(s, f)) if getattr(s, f, None) else None) for f in SPEC_FUNCTIONS}}
                for s in specs]
    except NotPortable:
        return
    _write(data, "specs")


# ------------------------------------------------------------------------------ signed JSON records

_SIGNED_MAGIC = b"livebytes-signed-json-v1\n"
MAX_SIGNED_BYTES = 4 << 20      # a derived-frames summary is a few KiB


def _signed_folder(folder: str, create: bool) -> Path | None:
    """``folder`` inside the private cache folder, itself private (ours, a real folder nobody else may write: it is
    made 0700 by us, never re-moded); None when it is not (``signed_folder_problem`` says why)."""
    d = private_dir()
    if d is None or not folder.isidentifier():
        return None
    if create and make_folders(d, (folder,)) is not None:
        return None
    return None if folder_problem(d / folder) else d / folder


def signed_folder_problem(folder: str) -> str | None:
    """Why nothing kept in the private ``folder`` can be read, in one line, or None: the cache folder or the subfolder
    not private to this user, or no key file to check signatures with (``_hmac_key``)."""
    d, problem = _private_dir()
    if d is None:
        return problem
    sub = d / folder
    if os.path.lexists(sub):
        problem = folder_problem(sub)
        if problem is not None:
            return f"nothing kept in {sub} is read: {problem}"
        if _hmac_key(d) is None:
            return f"{d / _KEY_NAME} is no file this user owns and it cannot be replaced: nothing kept is read or written"
    return None


def _signed_path(sub: Path, name: str) -> Path:
    return sub / f"{hashlib.sha256(name.encode()).hexdigest()[:32]}.json"


def _signed_payload(sub: Path, path: Path) -> dict | None:
    """The {"name", "value"} a signed file holds, or None: not ours, not private, unsigned or signed with another key."""
    blob = _read_private(path, MAX_SIGNED_BYTES)
    if blob is None or not blob.startswith(_SIGNED_MAGIC):
        return None
    tag, payload = blob[len(_SIGNED_MAGIC):len(_SIGNED_MAGIC) + 32], blob[len(_SIGNED_MAGIC) + 32:]
    key = _hmac_key(sub.parent)
    if key is None or not hmac.compare_digest(tag, hmac.new(key, payload, hashlib.sha256).digest()):
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    return data if isinstance(data, dict) and set(data) == {"name", "value"} else None


def write_signed(folder: str, name: str, value) -> bool:
    """``value`` (JSON data) kept under ``name`` in the private ``folder``, signed with this cache's key (JSON, never a
    pickle: a record read back is data, not code). False where the cache cannot be written (nothing fails)."""
    sub = _signed_folder(folder, create=True)
    if sub is None:
        return False
    payload = json.dumps({"name": name, "value": value}, sort_keys=True).encode()
    key = _hmac_key(sub.parent)
    if key is None:
        return False
    try:
        _write_private(_signed_path(sub, name), _SIGNED_MAGIC + hmac.new(key, payload, hashlib.sha256).digest() + payload)
    except OSError:
        return False
    return True


def read_signed(folder: str, name: str):
    """The value ``write_signed`` kept under ``name``, or None: missing, foreign, tampered or unsigned."""
    sub = _signed_folder(folder, create=False)
    if sub is None:
        return None
    data = _signed_payload(sub, _signed_path(sub, name))
    return data["value"] if data is not None and data["name"] == name else None


def signed_names(folder: str) -> list[str]:
    """The names of every valid signed record in ``folder`` (a foreign or tampered file is skipped), sorted."""
    sub = _signed_folder(folder, create=False)
    if sub is None:
        return []
    names = []
    for path in sorted(sub.glob("*.json")):
        data = _signed_payload(sub, path)
        if data is not None and _signed_path(sub, data["name"]) == path:
            names.append(data["name"])
    return sorted(names)

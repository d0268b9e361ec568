"""Folders livebytes writes: made by it, one level at a time, or refused; never a mode changed.

The tool makes only its own folders (the cache's ``livebytes``, a kept-record subfolder, an output folder named on the
command line) and each under a parent that already exists: a path whose parent is missing is refused, never made with
all its parents (``HOME=/nonexistent`` once made ``/nonexistent/.cache/livebytes``). It never changes the mode of any
folder (the cache once "narrowed" whatever folder it was given to 0700: ``/`` as root, a shared 1777 folder): a folder
that is not private enough is refused in one line naming it and the fix, as ssh refuses a ``~/.ssh`` with wrong modes.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path


def _who_may_write(mode: int) -> str:
    return " and ".join(who for who, bit in (("its group", stat.S_IWGRP), ("every user", stat.S_IWOTH)) if mode & bit)


def folder_problem(path: Path) -> str | None:
    """Why the existing ``path`` is no private folder of this user's, in words with the fix, or None. As ssh judges
    ``~/.ssh``: it must be a real folder (a symbolic link could be pointed elsewhere), owned by this user, and writable
    by nobody else (who could replace what is kept); read access for others is allowed (every file in it is 0600)."""
    try:
        st = os.lstat(path)
    except OSError as err:
        return f"{path} cannot be read ({err.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link (give the folder it points to instead)"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        return (f"{path} is writable by {_who_may_write(mode)} (mode {mode:04o}; "
                f"if it is yours alone, chmod go-w {path})")
    return None


def make_folders(anchor: Path, names: tuple[str, ...], mode: int = 0o700) -> str | None:
    """Make each of ``names`` in turn below ``anchor`` (``anchor/a``, then ``anchor/a/b``), one level each, with
    ``mode`` (narrowed by the umask); one that exists is left as it is. ``anchor`` must exist: neither it nor anything
    above it is ever made. Why not, in words, or None."""
    if not anchor.is_dir():
        return f"{anchor} does not exist" if not os.path.lexists(anchor) else f"{anchor} is not a folder"
    path = anchor
    for name in names:
        path = path / name
        try:
            path.mkdir(mode=mode)
        except FileExistsError:
            continue
        except OSError as err:
            return f"{path} cannot be made ({err.strerror})"
    return None


def leaf_problem(path: Path) -> str | None:
    """Why the folder ``path`` could not be used or made as its own leaf (never its parents), in words naming the fix,
    or None: it is a folder, or its parent is one. Nothing is made (a refusal later leaves no folder behind)."""
    path = Path(path)
    if path.name in ("", ".", ".."):              # '/', '.', 'a/..': the folder itself must exist
        return None if path.is_dir() else f"{path} is not a folder"
    if path.is_dir():
        return None
    if os.path.lexists(path):
        return f"{path} is not a folder"
    if not path.parent.is_dir():
        if os.path.lexists(path.parent):
            return f"{path.parent} is not a folder"
        return (f"{path.parent} does not exist: livebytes makes only the folder itself, not its parents "
                f"(create {path.parent} first)")
    return None


def own_leaf(path: Path, mode: int = 0o777) -> str | None:
    """Make the folder ``path`` (its parent must exist: ``leaf_problem``; mode 0777 narrowed by the umask, as ``mkdir``
    makes one), or leave it as it is when it is one already: why not, in words, or None."""
    path = Path(path)
    problem = leaf_problem(path)
    if problem is not None or path.is_dir():
        return problem
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        pass
    except OSError as err:
        return f"{path} cannot be made ({err.strerror})"
    return None

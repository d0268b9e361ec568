"""A traced model's bytes at the peak by module, as a reader scans them: repeated blocks grouped (``model.layers.0-23
(x24)``, as torchinfo folds a stack), the tree cut at a depth (``--depth``), and modules too small to matter folded
into their parent. Every figure a table prints is computed here; the renderer only formats the rows.

A module path's segments are its names with each index kept on its container (``model.layers.3.attn.q_proj`` ->
``model``, ``layers.3``, ``attn``, ``q_proj``). Depth 1 shows the first two segments (``model.embeddings``, a layer
``model.layers.3``, ``lm_head``), as ``prediction.module_key`` cuts a module with no stack; each depth more shows one
segment more (depth 2: a layer's children, ``attn`` and ``mlp``; depth 3: their projections). Siblings ``name.N`` whose
subtrees (to the depth shown) hold the same module names are one row, their bytes summed, each member's total given
as its low and high end; a row holding less than ``FOLD_BELOW`` is left out, its bytes counted in its parent's (at the
top, one row names how many were folded).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .groups import Group

NO_MODULE = "(none)"              # buffers of no module (prediction.NO_MODULE)
FOLD_BELOW = 1 << 20              # a row holding less than 1 MiB at the peak is folded into its parent
DEFAULT_DEPTH = 2                 # a layer's children (attn, mlp): the 24-layer 1.3B model's table fits one screen
MAX_RUNS = 3                      # index runs a grouped row's label spells out before eliding the middle ones


@dataclass(frozen=True)
class ModuleRow:
    """One row of the by-module table. ``label``: the module's name (a top row) or ``.child`` (a row under its parent,
    ``level`` levels down); ``members``: how many modules the row sums (``x24``), ``each``: the smallest and largest
    member's bytes when several; ``groups``: the row's bytes by storage group, the largest first; ``folded``: how
    many modules under ``FOLD_BELOW`` the row stands for (the top-level row of small modules only)."""
    label: str
    level: int
    bytes: int
    groups: tuple[tuple[Group, int], ...]
    members: int = 1
    each: tuple[int, int] | None = None
    folded: int = 0


@dataclass(frozen=True)
class ModuleView:
    """The rows, and what was left out of them: ``folded`` modules in rows under ``fold_below`` (their bytes counted
    in their parents' rows, or at the top in the last row's), at ``depth``; ``total``: every module's bytes."""
    rows: tuple[ModuleRow, ...]
    depth: int
    fold_below: int
    folded: int
    total: int


def segments(path: str) -> tuple[str, ...]:
    """``model.layers.3.attn`` -> ('model', 'layers.3', 'attn'): an index stays on its container; no path: (none)."""
    out: list[str] = []
    for part in (path.split(".") if path else [NO_MODULE]):
        if part.isdigit() and out:
            out[-1] += "." + part
        else:
            out.append(part)
    return tuple(out)


def _indexed(segment: str) -> tuple[str, int] | None:
    """``layers.3`` -> ('layers', 3); a segment with no index: None."""
    name, _, index = segment.rpartition(".")
    return (name, int(index)) if name and index.isdigit() else None


def index_text(indices: list[int]) -> str:
    """Indices as runs: 0-23; 0-2,4-6; more than ``MAX_RUNS`` runs: the first two, '..', the last (3,7,..,47)."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    words = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    if len(words) > MAX_RUNS:
        words = words[:2] + [".."] + words[-1:]
    return ",".join(words)


def _add(into: dict, groups: dict) -> None:
    for g, n in groups.items():
        into[g] = into.get(g, 0) + n


def _ordered(groups: dict) -> tuple[tuple[Group, int], ...]:
    """The groups holding bytes, the largest first (ties in ``Group`` order): a row's first figures are what it holds."""
    order = list(Group)
    return tuple(sorted(((g, n) for g, n in groups.items() if n), key=lambda gn: (-gn[1], order.index(gn[0]))))


class _Tree:
    """The cells (module paths cut to the depth), indexed once by every prefix: what it holds, its next segments and
    the module names under it (linear in the modules: a stack of 1,024 layers is thousands of paths)."""

    def __init__(self, by_module: dict, depth: int):
        self.cells: OrderedDict[tuple, dict] = OrderedDict()
        paths = [segments("" if path == NO_MODULE else path) for path in by_module]
        for key, groups in zip(paths, by_module.values()):
            _add(self.cells.setdefault(key[:depth + 1], {}), groups)
        self._groups: dict[tuple, dict] = {}
        self._children: dict[tuple, OrderedDict] = {}
        for key, groups in self.cells.items():
            for n in range(len(key) + 1):
                _add(self._groups.setdefault(key[:n], {}), groups)
                if n < len(key):
                    self._children.setdefault(key[:n], OrderedDict())[key[n]] = None
        below: dict[tuple, set] = {}
        for key in paths:
            for n in range(len(key) + 1):
                below.setdefault(key[:n], set()).add(key[n:])
        self._shape = {prefix: frozenset(names) for prefix, names in below.items()}

    def groups(self, prefix: tuple) -> dict:
        """What the modules under ``prefix`` (itself included) hold, by group."""
        return self._groups.get(prefix, {})

    def children(self, prefix: tuple) -> list[str]:
        """The next segments under ``prefix``, in the order the model holds them."""
        return list(self._children.get(prefix, ()))

    def shape(self, prefix: tuple) -> frozenset:
        """The module names under ``prefix``, to the leaves whatever the depth shown (its subtree's structure): what
        makes two stack members one row (a linear-attention layer and a full-attention one stay apart at depth 1)."""
        return self._shape.get(prefix, frozenset())


def _siblings(tree: _Tree, parents: list[tuple], names: list[str]) -> list[tuple[str, list[tuple], list[int]]]:
    """The rows ``names`` make under ``parents`` (every member of the parent's row): (label, members, indices); indexed
    siblings of one container and one subtree structure are one row, in the order their first member comes."""
    rows: list[tuple[str, list[tuple], list[int]]] = []
    at: dict = {}
    for name in names:
        members = [p + (name,) for p in parents if tree.groups(p + (name,))]
        ix = _indexed(name)
        if ix is None:
            rows.append((name, members, []))
            continue
        key = (ix[0], frozenset().union(*(tree.shape(m) for m in members)))
        if key in at:
            label, grouped, indices = rows[at[key]]
            rows[at[key]] = (label, grouped + members, indices + [ix[1]])
        else:
            at[key] = len(rows)
            rows.append((ix[0], members, [ix[1]]))
    return [(label if not indices else f"{label}.{index_text(indices)}" if len(indices) > 1 else f"{label}.{indices[0]}",
             members, indices) for label, members, indices in rows]


def _row(tree: _Tree, name: str, members: list[tuple], indices: list[int], level: int) -> ModuleRow:
    """One row: its members' bytes summed by group, and each member's total (its low and high end) when several
    (a grouped row's, and the rows under it: ``.attn`` under ``layers.0-23 (x24)`` sums 24 modules)."""
    groups: dict = {}
    for m in members:
        _add(groups, tree.groups(m))
    totals = [sum(tree.groups(m).values()) for m in members]
    return ModuleRow(name + (f" (x{len(indices)})" if len(indices) > 1 else ""), level, sum(groups.values()),
                     _ordered(groups), len(members), (min(totals), max(totals)) if len(members) > 1 else None)


def _rows(tree: _Tree, parents: list[tuple], level: int, fold_below: int, out: list[ModuleRow]) -> int:
    """The rows under ``parents`` (every member of the parent's row), appended to ``out``, each followed by its own;
    returns how many modules were folded (a row under ``fold_below``: its bytes stay in the parent's)."""
    folded = 0
    names = list(OrderedDict.fromkeys(n for p in parents for n in tree.children(p)))
    for label, members, indices in _siblings(tree, parents, names):
        row = _row(tree, "." + label, members, indices, level)
        if row.bytes < fold_below:
            folded += row.members
            continue
        out.append(row)
        folded += _rows(tree, members, level + 1, fold_below, out)
    return folded


def module_view(by_module: dict, depth: int = DEFAULT_DEPTH, fold_below: int = FOLD_BELOW) -> ModuleView:
    """The by-module rows of ``by_module`` (module path -> {Group: bytes} at the peak, ``Prediction.module_paths``):
    the top rows are each path's first two segments, the modules under them to ``depth`` (module doc); the top rows
    under ``fold_below`` are one last row, ``smaller modules``."""
    if depth < 1:
        raise ValueError(f"depth must be 1 or more, got {depth}")
    tree = _Tree(by_module, depth)
    out: list[ModuleRow] = []
    small: dict = {}
    folded = small_rows = 0
    tops = list(OrderedDict.fromkeys(key[:2] for key in tree.cells))
    for head in OrderedDict.fromkeys(t[:-1] for t in tops):      # (): a one-segment path (lm_head); ('model',): model.*
        for label, members, indices in _siblings(tree, [head], [t[-1] for t in tops if t[:-1] == head]):
            row = _row(tree, ".".join(head + (label,)), members, indices, 0)
            if row.bytes < fold_below:
                _add(small, dict(row.groups))
                small_rows += row.members
                continue
            out.append(row)
            folded += _rows(tree, members, 1, fold_below, out)
    if small_rows:
        label = f"{small_rows:,} smaller module{'s' if small_rows > 1 else ''}"
        out.append(ModuleRow(label, 0, sum(small.values()), _ordered(small), folded=small_rows))
    total = sum(sum(g.values()) for g in tree.cells.values())
    return ModuleView(tuple(out), depth, fold_below, folded + small_rows, total)

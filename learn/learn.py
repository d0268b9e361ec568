"""Learn a draft lifetime model from allocator traces at several shapes: exact arithmetic, never a fit.

1. Match: the k-th allocation from one site (innermost library frame ``file:function:line``) is the
   same buffer in every trace. A site with a different count somewhere is reported, not guessed.
2. Solve: each matched buffer's requested bytes, one exact integer per shape, must equal
   ``c * m`` (or ``c * m + c0``) for integers ``c > 0``, ``c0`` and a product ``m`` of factors: the
   shape symbols T, N, H, HV, K, V, at most one chunk count (per-sequence ``N*cdiv(T/N, c)`` or packed
   ``cdiv(T, c)``) and at most one tile count ``cdiv(K|V, b)``. Candidates are tried simplest first;
   the first complexity level with a solution wins, and two different solutions there are reported as
   ambiguous (the shapes do not identify the formula). Symbols equal in every trace are tied and
   written as one. A tile count is flagged: traces of one device cannot tell whether the library
   picks the tile from the device (the source decides).
3. Lifetimes: allocation and free positions of the first trace; the order of matched events must be
   the same in every trace, else that is reported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations

import sympy as sp

from .traces import TRACE_SYMBOLS, Allocation, SiteParts, Trace
from livebytes.estimator.symbols import DK, DV, HV, MBS, H, S, cdiv

CHUNKS = (16, 32, 64)
TILES = (16, 32, 64, 128)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def factor_values(shape: dict[str, int]) -> dict[str, int]:
    """Every candidate factor's value at one traced shape."""
    values = dict(shape)
    seq = shape["T"] // shape["N"]
    for c in CHUNKS:
        values[f"NT{c}"] = shape["N"] * _cdiv(seq, c)       # chunks per sequence, summed (packed kernels)
        values[f"cdiv(T,{c})"] = _cdiv(shape["T"], c)         # chunks of the packed tokens
    for b in TILES:
        values[f"cdiv(K,{b})"] = _cdiv(shape["K"], b)
        values[f"cdiv(V,{b})"] = _cdiv(shape["V"], b)
    return values


def _candidates(base: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Factor products, simplest first: plain monomials, then with a chunk count, then with a tile count."""
    chunks = [f"NT{c}" for c in CHUNKS] + [f"cdiv(T,{c})" for c in CHUNKS]
    tiles = [f"cdiv({s},{b})" for s in ("K", "V") for b in TILES]
    subsets = [combo for r in range(len(base) + 1) for combo in combinations(base, r)]
    out = [s for s in subsets]
    out += [s + (c,) for c in chunks for s in subsets]
    out += [s + (t,) for t in tiles for s in subsets]
    out += [s + (c, t) for c in chunks for t in tiles for s in subsets]
    return out


def complexity(term: tuple[str, ...], constant: bool) -> tuple[int, int, int, int]:
    tile = sum(1 for f in term if f.startswith(("cdiv(K", "cdiv(V")))
    chunk = sum(1 for f in term if f.startswith(("NT", "cdiv(T")))
    return (tile, chunk, int(constant), len(term))


def tied_groups(shapes: list[dict[str, int]]) -> list[tuple[str, ...]]:
    """Symbols whose values are equal in every trace, grouped (each group is one free variable)."""
    groups: list[list[str]] = []
    for s in TRACE_SYMBOLS:
        for g in groups:
            if all(sh[g[0]] == sh[s] for sh in shapes):
                g.append(s)
                break
        else:
            groups.append([s])
    return [tuple(g) for g in groups]


_CANDIDATES = sorted(_candidates(TRACE_SYMBOLS), key=lambda t: complexity(t, False))


@dataclass(frozen=True)
class SizeFormula:
    coefficient: int
    term: tuple[str, ...]
    constant: int = 0

    def value(self, factors: dict[str, int]) -> int:
        product = 1
        for f in self.term:
            product *= factors[f]
        return self.coefficient * product + self.constant

    def text(self) -> str:
        body = "*".join((str(self.coefficient),) + self.term) if self.coefficient != 1 or not self.term else "*".join(self.term)
        return body + (f" + {self.constant}" if self.constant > 0 else f" - {-self.constant}" if self.constant else "")

    @property
    def tiles(self) -> tuple[str, ...]:
        return tuple(f for f in self.term if f.startswith(("cdiv(K", "cdiv(V")))


def _fit_single(term, sizes, table) -> SizeFormula | None:
    products = [_product(term, t) for t in table]
    if sizes[0] % products[0]:
        return None
    c = sizes[0] // products[0]
    if c > 0 and all(c * p == s for p, s in zip(products, sizes)):
        return SizeFormula(c, term)
    return None


def _fit_affine(term, sizes, table) -> SizeFormula | None:
    """``c*m + c0`` with c0 != 0 (``[N + 1]`` boundaries): c from two shapes where m differs."""
    products = [_product(term, t) for t in table]
    other = next((i for i, p in enumerate(products) if p != products[0]), None)
    if not term or other is None:
        return None
    c = Fraction(sizes[other] - sizes[0], products[other] - products[0])
    if c.denominator != 1 or c <= 0:
        return None
    c0 = sizes[0] - int(c) * products[0]
    if c0 and all(int(c) * p + c0 == s for p, s in zip(products, sizes)):
        return SizeFormula(int(c), term, c0)
    return None


def _product(term, factors) -> int:
    out = 1
    for f in term:
        out *= factors[f]
    return out


def _tie(factor: str, ties: dict[str, str]) -> str:
    if factor.startswith("cdiv(") and factor[5:-1].split(",")[0] in ties:
        sym, b = factor[5:-1].split(",")
        return f"cdiv({ties[sym]},{b})"
    return ties.get(factor, factor)


def _canonical(formula: SizeFormula, ties: dict[str, str]) -> tuple:
    """Two solutions that differ only by tied symbols are the same solution."""
    return (formula.coefficient, formula.constant, tuple(sorted(_tie(f, ties) for f in formula.term)))


@dataclass(frozen=True)
class Solution:
    formula: SizeFormula | None
    alternatives: tuple[SizeFormula, ...] = ()

    @property
    def ambiguous(self) -> bool:
        return bool(self.alternatives)


def solve_sizes(sizes: list[int], shapes: list[dict[str, int]]) -> Solution:
    """The simplest exact formula for one buffer's bytes over the traced shapes (see module doc)."""
    ties = {member: g[0] for g in tied_groups(shapes) for member in g}
    table = [factor_values(s) for s in shapes]
    found: list[SizeFormula] = []
    level = None
    tried: set = set()
    for term in _CANDIDATES:
        if level is not None and complexity(term, False) > level:
            break
        canonical = tuple(sorted(_tie(f, ties) for f in term))
        if canonical in tried:       # the same values as a term already tried (tied symbols)
            continue
        tried.add(canonical)
        for fit in (_fit_single, _fit_affine):
            f = fit(term, sizes, table)
            if f is None:
                continue
            rank = complexity(f.term, bool(f.constant))
            if level is None or rank < level:
                level, found = rank, [f]
            elif rank == level and _canonical(f, ties) not in {_canonical(x, ties) for x in found}:
                found.append(f)
    if not found:
        return Solution(None)
    return Solution(found[0], tuple(found[1:]))


# ---------------------------------------------------------------------------------------------
# matching and lifetimes


def keyed(trace: Trace) -> list[tuple[tuple[str, int], Allocation]]:
    """(site, occurrence) for each allocation of a trace, in allocation order."""
    seen: dict[str, int] = {}
    out = []
    for a in trace.allocations:
        k = seen.get(a.site, 0)
        seen[a.site] = k + 1
        out.append(((a.site, k), a))
    return out


def _event_order(trace: Trace, keys: set) -> list[tuple[str, tuple]]:
    events = []
    for key, a in keyed(trace):
        if key in keys:
            events.append((a.position, "alloc", key))
            if a.freed_at is not None:
                events.append((a.freed_at, "free", key))
    return [(kind, key) for _, kind, key in sorted(events)]


@dataclass(frozen=True)
class LearnedBuffer(SiteParts):
    name: str
    site: str
    occurrence: int
    formula: SizeFormula | None
    alternatives: tuple[SizeFormula, ...]
    sizes: tuple[int, ...]          # per trace, in the learner's trace order
    allocated: int                  # allocation index among the matched buffers (first trace's order)
    freed_after: int | None         # index of the last matched allocation before its free; None: held to the end


@dataclass(frozen=True)
class Learned:
    impl: str
    traces: tuple[Trace, ...]
    buffers: tuple[LearnedBuffer, ...]
    ties: tuple[tuple[str, ...], ...]
    unexplained: tuple[str, ...] = field(default=())

    @property
    def shapes(self) -> list[dict[str, int]]:
        return [t.values for t in self.traces]


def _name(site: str, occurrence: int, count: int) -> str:
    file, function, line = site.rsplit(":", 2)
    stem = function.replace("<", "").replace(">", "") or file.rsplit("/", 1)[-1]
    return f"{stem}_L{line}" + (f"_{occurrence}" if count > 1 else "")


def _match(traces: list[Trace]) -> tuple[list[tuple[str, int]], list[str]]:
    """Keys present in every trace, in the first trace's order; and what could not be matched."""
    counts = [{} for _ in traces]
    for i, t in enumerate(traces):
        for (site, _), _a in keyed(t):
            counts[i][site] = counts[i].get(site, 0) + 1
    problems = []
    sites = sorted(set().union(*[set(c) for c in counts]))
    for site in sites:
        per = [c.get(site, 0) for c in counts]
        if len(set(per)) > 1:
            problems.append(f"{site}: {min(per)}..{max(per)} allocations across shapes "
                            f"({', '.join(f'{t.label()}: {n}' for t, n in zip(traces, per))}); the extra ones are not matched")
    keys = [key for key, _a in keyed(traces[0]) if all(key[1] < c.get(key[0], 0) for c in counts)]
    return keys, problems


def learn(traces: list[Trace]) -> Learned:
    """The draft: matched buffers with exact formulas and lifetimes, and every event it could not explain."""
    keys, problems = _match(traces)
    fixed = [s for s in TRACE_SYMBOLS if len({t.values[s] for t in traces}) == 1]
    if fixed:
        problems.append(f"{', '.join(fixed)} never vary across the traces: their powers are folded into the "
                        "coefficients, not identified")
    keyset = set(keys)
    orders = [_event_order(t, keyset) for t in traces]
    for t, order in zip(traces[1:], orders[1:]):
        if order != orders[0]:
            problems.append(f"event order at {t.label()} differs from {traces[0].label()}: lifetimes are the first trace's")
    shapes = [t.values for t in traces]
    by_key = [dict(keyed(t)) for t in traces]
    index = {key: i for i, key in enumerate(keys)}
    last_alloc = -1
    freed_after: dict[tuple, int | None] = {key: None for key in keys}
    for kind, key in orders[0]:
        if kind == "alloc":
            last_alloc = index[key]
        else:
            freed_after[key] = last_alloc
    per_site = {}
    for site, _ in keys:
        per_site[site] = per_site.get(site, 0) + 1
    buffers = []
    for key in keys:
        sizes = [b[key].size for b in by_key]
        sol = solve_sizes(sizes, shapes)
        if sol.formula is None:
            problems.append(f"{key[0]} #{key[1]}: sizes {sizes} are no integer combination of the candidate monomials")
        elif sol.ambiguous:
            problems.append(f"{key[0]} #{key[1]}: ambiguous: {sol.formula.text()} or "
                            f"{', '.join(a.text() for a in sol.alternatives)} fit every shape")
        buffers.append(LearnedBuffer(_name(key[0], key[1], per_site[key[0]]), key[0], key[1], sol.formula,
                                     sol.alternatives, tuple(sizes), index[key], freed_after[key]))
    return Learned(traces[0].impl, tuple(traces), tuple(buffers), tuple(tied_groups(shapes)), tuple(problems))


def device_dependent(b: LearnedBuffer) -> str | None:
    """Why a buffer's size may depend on the device: a tile count in its formula (traces of one device class
    cannot tell a fixed tile from one the library picks by device; the source decides)."""
    if b.formula is None or not b.formula.tiles:
        return None
    return (f"tile count {', '.join(b.formula.tiles)}: device-dependent if the library picks the tile from the device "
            f"(shared-memory class); read {b.site}")


# ---------------------------------------------------------------------------------------------
# formulas in the model symbols


def to_model_expr(formula: SizeFormula) -> sp.Expr:
    """The formula in the engine's symbols (S, MBS, H, HV, DK, DV)."""
    base = {"T": MBS * S, "N": MBS, "H": H, "HV": HV, "K": DK, "V": DV}
    expr = sp.Integer(formula.coefficient)
    for f in formula.term:
        if f in base:
            expr *= base[f]
        elif f.startswith("NT"):
            expr *= MBS * cdiv(S, int(f[2:]))
        else:
            sym, b = f[5:-1].split(",")
            expr *= cdiv(base[sym], int(b))
    return expr + formula.constant

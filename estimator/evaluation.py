"""A built model as evaluation needs it: the steps, each buffer's metadata (name, group, shape as text, dtype,
source, lifetime) and compiled byte functions of (S, MBS, H, HV, DK, DV) for the bytes the allocator charges per
buffer and the bytes requested per allocation (``compile_model``, through sympy.lambdify). Evaluating one needs no
sympy; ``cache.py`` keeps them on disk.
"""
from __future__ import annotations

from dataclasses import dataclass

from .groups import Group
from .shapes import Shape
from .timeline import Timeline


@dataclass(frozen=True)
class StepInfo:
    name: str
    phase: str
    source: str
    note: str = ""


@dataclass(frozen=True)
class BufferInfo:
    """A buffer's metadata: what tables and JSON show, and its lifetime."""

    name: str
    group: Group
    shape_str: str
    dtype: str
    source: str
    allocated_at: str
    freed_after: str | None
    carved_from: str | None
    cached: bool
    note: str = ""
    first_call: bool = False
    module: str = ""
    tensor: str = ""          # the tensor as the trace saw it (``buffers.Buffer.tensor``)

    def shape_text(self) -> str:
        return self.shape_str

    def tensor_text(self) -> str:
        return self.tensor or f"{self.shape_str} {self.dtype}"


@dataclass(frozen=True, eq=False)
class CompiledModel(Timeline):
    """What ``prediction.evaluate`` and ``replay`` need from a LifetimeModel, with compiled byte functions; its
    timeline (step positions, live ranges) is the LifetimeModel's own (``timeline.Timeline``)."""

    key: str
    implementation: str
    version: str
    summary: str
    device: str
    options: tuple
    steps: tuple
    buffers: tuple
    charged_fn: object        # (S, MBS, H, HV, DK, DV) -> bytes charged per buffer
    requested_fn: object      # (S, MBS, H, HV, DK, DV) -> bytes requested per allocation
    allocation_names: tuple
    autotuned: tuple = ()     # AutotuneInfo: autotuned kernels (estimator/autotune.py)
    autotune_key_fn: object = None   # (S, MBS, H, HV, DK, DV) -> every autotuned kernel's key values, in order
    held_fn: object = None    # (S, MBS, H, HV, DK, DV) -> whether each held_until_gc declaration applies, in order
    measured_fn: object = None   # (S, MBS, H, HV, DK, DV) -> (measured, held) per failing-config rule (autotune.py)

    def predict(self, shape: Shape):
        from .prediction import evaluate
        return evaluate(self, shape, self.charged_fn, self.live_ranges())


def shared_lambdify(exprs: list):
    """One function of (S, MBS, H, HV, DK, DV) -> the values of ``exprs``, compiled once per distinct expression (a
    stack of layers repeats a few hundred formulas over thousands of buffers)."""
    import sympy as sp

    from .symbols import SHAPE_SYMBOLS
    unique: dict = {}
    index = tuple(unique.setdefault(e, len(unique)) for e in exprs)
    fn = sp.lambdify(SHAPE_SYMBOLS, list(unique), modules="math")

    def values(S, MBS, H, HV, DK, DV, _fn=fn, _index=index):
        distinct = _fn(S, MBS, H, HV, DK, DV)
        return [distinct[i] for i in _index]
    return values


def _functions(model) -> tuple:
    """The two compiled functions of a LifetimeModel, through sympy.lambdify (math module)."""
    import sympy as sp

    from .engine import allocations, charged_bytes
    charged = charged_bytes(model)
    charged_fn = shared_lambdify([charged[b.name] for b in model.buffers])
    groups = allocations(model)
    requested = [sum((r.nbytes for r in regions), sp.Integer(0)) for regions in groups.values()]
    requested_fn = shared_lambdify(requested)
    return charged_fn, requested_fn, tuple(groups)


@dataclass(frozen=True)
class AutotuneInfo:
    kernel: str
    step: str
    key: tuple       # the key expressions as text (their number is what the compiled key function needs)
    signature: str = ""   # the argument set, where a model launches the kernel with two (buffers.Autotune)
    held_until_gc: tuple = ()   # buffers a failing config keeps alive until the next garbage collection
    held_when: str = "True"     # where configs fail, as a sympy expression's text
    held_measured: str | None = None   # where that was measured, in words (autotune.measured_text; "": never; None: no rule)


def compile_model(model) -> CompiledModel:
    from .autotune import _held_fn, _key_fn, _measured_fn, measured_text
    from .buffers import expr_text
    charged_fn, requested_fn, names = _functions(model)
    steps = tuple(StepInfo(s.name, s.phase, str(s.source) if s.source else "", s.note) for s in model.steps)
    buffers = tuple(BufferInfo(b.name, b.group, b.shape_text(), b.dtype, str(b.source), b.allocated_at, b.freed_after,
                               b.carved_from, b.cached, b.note, b.first_call, b.module, b.tensor) for b in model.buffers)
    autotuned = tuple(AutotuneInfo(a.kernel, a.step, tuple(expr_text(k) for k in a.key), a.signature, a.held_until_gc,
                                   expr_text(a.held_when), None if a.held_measured is None else measured_text(a.held_measured))
                      for a in model.autotuned)
    return CompiledModel(model.key, model.implementation, model.version, model.summary, model.device, model.options,
                         steps, buffers, charged_fn, requested_fn, names, autotuned,
                         _key_fn(model) if autotuned else None, _held_fn(model) if autotuned else None,
                         _measured_fn(model) if autotuned else None)

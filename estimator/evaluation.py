"""A built model as evaluation needs it: the steps, each buffer's metadata (name, group, shape as text, dtype,
source, lifetime) and compiled byte functions of (S, MBS, H, HV, DK, DV) for the bytes the allocator charges per
buffer and the bytes requested per allocation (built by ``compiler.compile_model``, through sympy.lambdify).
Evaluating one needs no sympy; ``cache.py`` keeps them on disk.
"""
from __future__ import annotations

from dataclasses import dataclass

from .groups import Group
from .prediction import evaluate
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
    measured_fn: object = None   # (S, MBS, H, HV, DK, DV) -> (measured, held) per failing-config rule (compiler.measured_fn)
    identity: str = ""        # the cache entry it came from (cache.compiled_model): what its runs are kept under

    def predict(self, shape: Shape):
        return evaluate(self, shape, self.charged_fn, self.live_ranges())


@dataclass(frozen=True)
class AutotuneInfo:
    kernel: str
    step: str
    key: tuple       # the key expressions as text (their number is what the compiled key function needs)
    signature: str = ""   # the argument set, where a model launches the kernel with two (buffers.Autotune)
    held_until_gc: tuple = ()   # buffers a failing config keeps alive until the next garbage collection
    held_when: str = "True"     # where configs fail, as a sympy expression's text
    held_measured: str | None = None   # where that was measured, in words (compiler.measured_text; "": never; None: no rule)

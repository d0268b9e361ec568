"""A prediction at a concrete shape: per-buffer bytes summed over each step's live set. No sympy here:
the byte functions come compiled (``compiler.compile_model``, or the disk cache: ``cache.py``), and the model
may be a ``LifetimeModel`` or a ``CompiledModel`` (the same steps and buffer metadata)."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

from .groups import Group
from .shapes import Shape


def allocations(model) -> OrderedDict[str, list]:
    """Buffers grouped by the allocation they live in (a standalone buffer is its own allocation)."""
    groups: OrderedDict[str, list] = OrderedDict()
    for b in model.buffers:
        groups.setdefault(b.carved_from or b.name, []).append(b)
    for name, regions in groups.items():
        lifetimes = {(r.allocated_at, r.freed_after) for r in regions}
        if len(lifetimes) != 1:
            raise ValueError(f"{model.key}: regions of allocation {name} have different lifetimes")
    return groups


@dataclass(frozen=True)
class Prediction:
    model: object                          # LifetimeModel or CompiledModel
    shape: Shape
    buffer_bytes: tuple[int, ...]          # per buffer, in model.buffers order
    step_bytes: tuple[int, ...]            # live bytes per step
    peak_index: int

    @property
    def peak_bytes(self) -> int:
        return self.step_bytes[self.peak_index]

    @property
    def peak_step(self):
        return self.model.steps[self.peak_index]

    def live_at(self, step: int) -> list[tuple]:
        index = self.model.step_positions()
        return [(b, n) for b, n in zip(self.model.buffers, self.buffer_bytes) if step in self.model.live_range(b, index)]

    @property
    def at_peak(self) -> list[tuple]:
        return self.live_at(self.peak_index)

    @cached_property
    def _group_step_bytes(self) -> dict[Group, list[int]]:
        """Each storage group's live bytes at every step, from one difference array per group (``step_totals``): a
        timeline asks for every step, and summing each step's live set was quadratic in a stack's layers."""
        members: dict[Group, tuple[list, list]] = {}
        for b, n, live in zip(self.model.buffers, self.buffer_bytes, self.model.live_ranges()):
            sizes, ranges = members.setdefault(b.group, ([], []))
            sizes.append(n)
            ranges.append(live)
        return {g: step_totals(sizes, ranges, len(self.model.steps)) for g, (sizes, ranges) in members.items()}

    def groups_at(self, step: int) -> OrderedDict[Group, int]:
        by_group = self._group_step_bytes
        return OrderedDict((g, by_group[g][step]) for g in Group if g in by_group and by_group[g][step])

    @property
    def groups(self) -> OrderedDict[Group, int]:
        return self.groups_at(self.peak_index)

    @property
    def modules(self) -> OrderedDict[str, OrderedDict[Group, int]]:
        """Bytes live at the peak by module (``module_key``: a layer's child, e.g. ``model.layers.3.attn``) and group,
        for models whose buffers name their module (traced models); buffers of no module under ``(none)``."""
        out: OrderedDict[str, OrderedDict[Group, int]] = OrderedDict()
        for b, n in self.at_peak:
            if n:
                groups = out.setdefault(module_key(getattr(b, "module", "") or ""), OrderedDict())
                groups[b.group] = groups.get(b.group, 0) + n
        return out if any(k != NO_MODULE for k in out) else OrderedDict()

    @property
    def module_paths(self) -> OrderedDict[str, OrderedDict[Group, int]]:
        """As ``modules``, by each buffer's whole module path (``model.layers.3.mlp.down_proj``): what
        ``module_view`` cuts to a depth; empty for a model whose buffers name no module."""
        out: OrderedDict[str, OrderedDict[Group, int]] = OrderedDict()
        for b, n in self.at_peak:
            if n:
                groups = out.setdefault(getattr(b, "module", "") or NO_MODULE, OrderedDict())
                groups[b.group] = groups.get(b.group, 0) + n
        return out if any(k != NO_MODULE for k in out) else OrderedDict()

    @property
    def forward_gradients(self) -> OrderedDict[str, int]:
        """Parameter gradients live at the peak that a forward step made, by module: a fused linear cross-entropy loss
        computes the LM head's weight gradient with the loss, chunk by chunk, before the backward starts
        (``traced.build.gradient_owner``)."""
        phase = {s.name: s.phase for s in self.model.steps}
        out: OrderedDict[str, int] = OrderedDict()
        for b, n in self.at_peak:
            if n and b.group is Group.PARAM_GRADS and phase.get(b.allocated_at) == "forward":
                key = getattr(b, "module", "") or NO_MODULE
                out[key] = out.get(key, 0) + n
        return out

    def forward_peak(self) -> tuple[int, int]:
        """(bytes, step index) of the largest live set among forward (and harness) steps."""
        idx = [i for i, s in enumerate(self.model.steps) if s.phase != "backward"]
        best = max(idx, key=lambda i: self.step_bytes[i])
        return self.step_bytes[best], best


NO_MODULE = "(none)"


def module_key(path: str) -> str:
    """A module path cut to what a reader tells apart: a stack's layer child (``model.layers.3.mlp.down_proj`` ->
    ``model.layers.3.mlp``), else two levels (``model.embeddings``, ``lm_head``)."""
    if not path:
        return NO_MODULE
    parts = path.split(".")
    if "layers" in parts:
        return ".".join(parts[:parts.index("layers") + 3])
    return ".".join(parts[:2])


def step_totals(sizes, ranges: list[range], steps: int) -> list[int]:
    """Live bytes at each step: each buffer's bytes over its live range (a difference array: linear in buffers and
    steps, for stacks of thousands of each)."""
    delta = [0] * (steps + 1)
    for nbytes, live in zip(sizes, ranges):
        if nbytes and live.start < live.stop:
            delta[live.start] += nbytes
            delta[live.stop] -= nbytes
    totals, running = [], 0
    for i in range(steps):
        running += delta[i]
        totals.append(running)
    return totals


def evaluate(model, shape: Shape, charged_fn, ranges: list[range]) -> Prediction:
    """``charged_fn(S, MBS, H, HV, DK, DV)``: bytes per buffer; ``ranges[b]``: the steps buffer b is live at."""
    per_buffer = tuple(int(v) for v in charged_fn(*shape.values()))
    totals = step_totals(per_buffer, ranges, len(model.steps))
    # first step reaching the maximum: where the peak is first hit
    peak = max(range(len(totals)), key=lambda i: (totals[i], -i))
    return Prediction(model, shape, per_buffer, tuple(totals), peak)

"""The one view of a model's timeline, shared by a built ``LifetimeModel`` and its ``CompiledModel``: step
positions, each buffer's live range and the live-set membership a prediction sums. No sympy here."""
from __future__ import annotations


class Timeline:
    """Mixed into every model view; needs ``steps`` (with ``name``) and ``buffers`` (with ``allocated_at``,
    ``freed_after`` and ``cached``)."""

    __slots__ = ()

    def step_index(self, name: str) -> int:
        for i, s in enumerate(self.steps):
            if s.name == name:
                return i
        raise KeyError(name)

    def live_range(self, buffer, index: dict[str, int] | None = None) -> range:
        """Steps at which ``buffer`` is live: from its allocation through ``freed_after`` inclusive (None: to
        the end); a cached buffer is kept by the library since an earlier call: live through the whole step; a
        first-call buffer is not made by a steady call: live nowhere.
        ``index``: step name -> position, when the caller has it (``step_positions``)."""
        if buffer.cached:
            return range(0, len(self.steps))
        if getattr(buffer, "first_call", False):
            return range(0)             # the steady call never makes it
        at = index.__getitem__ if index is not None else self.step_index
        start = at(buffer.allocated_at)
        stop = len(self.steps) if buffer.freed_after is None else at(buffer.freed_after) + 1
        return range(start, stop)

    def step_positions(self) -> dict[str, int]:
        return {s.name: i for i, s in enumerate(self.steps)}

    def live_ranges(self) -> list[range]:
        """Every buffer's ``live_range``, in ``buffers`` order."""
        index = self.step_positions()
        return [self.live_range(b, index) for b in self.buffers]

    @property
    def membership(self) -> list[list[bool]]:
        """``membership[b][i]``: buffer b live at step i (one range per buffer: a stack of layers has thousands of
        buffers and hundreds of steps)."""
        n, index = len(self.steps), self.step_positions()
        out = []
        for b in self.buffers:
            live = self.live_range(b, index)
            out.append([live.start <= i < live.stop for i in range(n)])
        return out

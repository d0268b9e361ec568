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

    def live_range(self, buffer) -> range:
        """Steps at which ``buffer`` is live: from its allocation through ``freed_after`` inclusive (None: to
        the end); a cached buffer is kept by the library since an earlier call: live through the whole step."""
        if buffer.cached:
            return range(0, len(self.steps))
        start = self.step_index(buffer.allocated_at)
        stop = len(self.steps) if buffer.freed_after is None else self.step_index(buffer.freed_after) + 1
        return range(start, stop)

    @property
    def membership(self) -> list[list[bool]]:
        """``membership[b][i]``: buffer b live at step i."""
        n = len(self.steps)
        return [[i in self.live_range(b) for i in range(n)] for b in self.buffers]

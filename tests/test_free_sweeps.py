"""Frees that come in a stretch over the layers are a sweep (``traced.layers``). When every parameter with a state sits
in a layer (LoRA's adapters: no embedding or head between them), AdamW's lists are dropped back to back: its sqrt
temporaries freed 2, 1, 0 (a Python list drops its items last first) and, with no free of another owner between, the
gradients zero_grad frees 0, 1, 2. The layer the two passes share was one block and the stretch no sweep (Kimi-Linear-
48B-A3B with --lora-rank failed its period check: "an event outside the layers refers to the middle layer of three");
the stretch is two sweeps, the shared layer's block cut where the next pass's operator starts.
"""
from types import SimpleNamespace

import pytest

from livebytes.lifetimes.traced.calls import FREE
from livebytes.lifetimes.traced.layers import Sweep, units


def free(layer: int | None, op: str) -> tuple:
    module = f"model.layers.{layer}.proj.lora_A.default" if layer is not None else "lm_head"
    return FREE, SimpleNamespace(module=module, op=op, phase="optimizer")


SQRT, MM = "aten._foreach_sqrt.default", "aten.mm.default"


@pytest.mark.parametrize("events,expected", [
    # one pass, two frees a layer: one sweep
    ([free(2, SQRT), free(2, SQRT), free(1, SQRT), free(0, SQRT)], [Sweep([[0, 1], [2], [3]], (2, 1, 0))]),
    # back to back, turning at layer 0: sqrt's 0-block ends where mm's begins
    ([free(2, SQRT), free(1, SQRT), free(0, SQRT), free(0, SQRT), free(0, MM), free(1, MM), free(2, MM), free(2, MM)],
     [Sweep([[0], [1], [2, 3]], (2, 1, 0)), Sweep([[4], [5], [6, 7]], (0, 1, 2))]),
    # separated by a free outside the layers (a full fine-tune's lm_head): two sweeps and the lone free, as before
    ([free(2, SQRT), free(1, SQRT), free(0, SQRT), free(None, SQRT), free(0, MM), free(1, MM), free(2, MM)],
     [Sweep([[0], [1], [2]], (2, 1, 0)), 3, Sweep([[4], [5], [6]], (0, 1, 2))]),
    # a turn with one operator throughout cannot be cut: the first pass takes the shared block, the rest stay lone
    ([free(2, SQRT), free(1, SQRT), free(0, SQRT), free(0, SQRT), free(1, SQRT)],
     [Sweep([[0], [1], [2, 3]], (2, 1, 0)), 4]),
])
def test_stretches_of_frees_are_sweeps(events, expected):
    assert units(events) == expected

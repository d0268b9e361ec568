"""The tracer's dispatch mode must not change what autograd allocates: its ``InputBuffer`` adds a second gradient for
the same input in place when it holds the first one alone (torch/csrc/autograd/input_buffer.cpp ``accumulate``); under
any dispatch mode ATen's ``isTensorSubclassLike`` is true, so without ``recorder.accumulates_in_place`` every
accumulation allocated (runs 23/25h: one extra [T, hidden] gradient per projection in each KDA layer's backward)."""
import pytest

torch = pytest.importorskip("torch")

from livebytes.tracer.recorder import Recorder  # noqa: E402


def _backward_adds(x_dims: tuple, users: int) -> int:
    """Allocations of ``aten.add.Tensor`` in the backward of ``users`` linears of one input."""
    rec = Recorder()
    x = torch.empty(*x_dims, device="meta", requires_grad=True)
    weights = [torch.empty(x_dims[-1], x_dims[-1], device="meta", requires_grad=True) for _ in range(users)]
    with rec.mode():
        outs = [torch.nn.functional.linear(x, w) for w in weights]
        total = outs[0].sum()
        for y in outs[1:]:
            total = total + y.sum()
        total.backward()
    return sum(1 for e in rec.events if e["e"] == "alloc" and e["op"] == "aten.add.Tensor" and e["phase"] == "backward")


@pytest.mark.parametrize("x_dims, users, adds", [
    ((8, 16), 4, 0),        # 2-D input: each gradient is an mm result the buffer alone holds: 3 in-place adds
    ((2, 8, 16), 4, 1),     # 3-D: the first gradient is a view of its mm result (shared storage): one new tensor,
                            # which the buffer then holds alone: 2 in place (the KDA layer's projections, runs 23/25h)
    ((2, 8, 16), 2, 1),     # one accumulation, onto a view: out of place
])
def test_autograd_accumulates_as_on_a_gpu(x_dims, users, adds):
    assert _backward_adds(x_dims, users) == adds


def _index_backward_allocs(rows: int, picked: int) -> list[int]:
    """Bytes of each allocation the backward of ``x[idx]`` makes (x [rows, 16] fp32, ``picked`` indices)."""
    rec = Recorder()
    x = torch.empty(rows, 16, device="meta", requires_grad=True)
    idx = torch.zeros(picked, dtype=torch.long, device="meta")
    with rec.mode():
        x[idx].sum().backward()
    return [e["bytes"] for e in rec.events if e["e"] == "alloc" and e["phase"] == "backward"]


def test_the_gradient_of_an_index_is_put_in_place_as_on_a_gpu():
    """``index_backward``: grad.new_zeros([64, 16]) then index_put_ into it. Hand arithmetic: the backward allocates
    sum's gradient expanded (no storage), ``new_zeros`` 64 x 16 x 4 = 4,096 B, and nothing for the put (in place); the
    out-of-place ``index_put`` a dispatch mode takes would add another 4,096 B."""
    allocs = _index_backward_allocs(64, 8)
    assert allocs.count(64 * 16 * 4) == 1, allocs


def test_logsigmoid_allocates_as_on_a_gpu():
    """``F.logsigmoid`` (GLA's gates): ``log_sigmoid_forward`` returns (result, buffer); CUDA's buffer is
    ``at::empty({0})`` (aten/src/ATen/native/cuda/Activation.cpp), the meta kernel's the input's size. Hand arithmetic:
    x [32, 64] bf16 = 4,096 B; the forward allocates the result, 4,096 B, and a 0-byte buffer (the meta kernel alone: a
    second 4,096 B, which run 46 a's trace held per layer until the backward: 8,388,608 B at [8,192, 512])."""
    rec = Recorder()
    x = torch.empty(32, 64, dtype=torch.bfloat16, device="meta", requires_grad=True)
    with rec.mode():
        torch.nn.functional.logsigmoid(x).sum().backward()
    forward = [e["bytes"] for e in rec.events if e["e"] == "alloc" and e["op"] == "aten.log_sigmoid_forward.default"]
    assert forward == [4_096, 0]

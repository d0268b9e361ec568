"""Protocol v4's input recipe on the CPU: the order, one allocation per input, no temporary outliving its
input's fill, temporaries bounded, the cache emptied after every fill that made some, GVA heads."""
import weakref

import pytest
from livebytes.estimator.shapes import Shape
from livebytes.validate.gpu import inputs as recipe

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402  (after importorskip)
from torch.utils._pytree import tree_leaves  # noqa: E402

GVA = Shape(2, 64, 2, 16, v_heads=4)


class Allocations(TorchDispatchMode):
    """Every tensor an op returns: (op name, weak reference, storage pointer, bytes)."""

    def __init__(self):
        super().__init__()
        self.made = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.made.append((str(func), weakref.ref(t), t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()))
        return out


@pytest.mark.parametrize("contract,grad,names", [
    ("report", True, ["q", "k", "v", "g", "beta", "A_log", "dt_bias", "cu_seqlens", "dO"]),
    ("plain", True, ["q", "k", "v", "g", "beta", "cu_seqlens", "dO"]),
    ("plain", False, ["q", "k", "v", "g", "beta", "cu_seqlens"]),
])
def test_inputs_in_v3_order(contract, grad, names):
    specs = recipe.input_specs(GVA, contract, grad, batch_dim=True, cu_dtype="int64")
    assert [s.name for s in specs] == names


def test_value_side_inputs_carry_the_value_heads():
    specs = {s.name: s for s in recipe.input_specs(GVA, "report", True, batch_dim=False, cu_dtype="int32")}
    T = 2 * 64                                               # MBS 2 x 64 tokens
    assert specs["q"].dims == specs["k"].dims == (T, 2, 16)  # H = 2
    assert specs["v"].dims == specs["dO"].dims == specs["g"].dims == (T, 4, 16)  # HV = 4, DV = DK = 16
    assert specs["beta"].dims == (T, 4)
    assert specs["A_log"].dims == (4,) and specs["dt_bias"].dims == (4 * 16,)
    assert specs["cu_seqlens"].dims == (3,)                  # MBS + 1 boundaries


@pytest.mark.parametrize("contract", ["report", "plain"])
def test_one_allocation_per_input_and_no_temporary_survives_its_fill(monkeypatch, contract):
    monkeypatch.setattr(recipe, "CHUNK_BYTES", 1024)        # force many chunks at this small shape
    specs = recipe.input_specs(GVA, contract, True, batch_dim=True, cu_dtype="int64")
    releases, done = [], []
    mode = Allocations()

    def after_each(name, tensor):
        inputs = {t.untyped_storage().data_ptr() for _, t in done} | {tensor.untyped_storage().data_ptr()}
        survivors = [op for op, ref, ptr, _ in mode.made if ref() is not None and ptr not in inputs]
        assert not survivors, f"{name}: temporaries still alive: {survivors}"
        done.append((name, tensor))

    with mode:
        x = recipe.build_inputs(specs, "cpu", seq=GVA.seq, seed=3, release=lambda: releases.append(1),
                                after_each=after_each)
    assert list(x) == [s.name for s in specs]
    empties = [op for op, *_ in mode.made if op.startswith("aten.empty")]
    assert len(empties) == len(specs)                       # exactly one allocation per input from the recipe
    assert len({t.untyped_storage().data_ptr() for t in x.values()}) == len(specs)
    temporaries = [nbytes for op, _, ptr, nbytes in mode.made
                   if ptr not in {t.untyped_storage().data_ptr() for t in x.values()}]
    # q/k: [rows, H=2, 1] fp32 norms of 1024 // (2*4) = 128 rows; g: [4 rows, HV=4, K=16] fp32 = 1024 B
    assert temporaries and max(temporaries) <= 1024
    # plain: q, k (l2norm) and g (logsigmoid) made temporaries, and each was followed by a cache release
    assert len(releases) == (3 if contract == "plain" else 0)


def test_plain_values_follow_the_contract():
    specs = recipe.input_specs(Shape(1, 256, 2, 32), "plain", True, batch_dim=False, cu_dtype="int32")
    x = recipe.build_inputs(specs, "cpu", seq=256)
    assert x["q"].requires_grad and not x["dO"].requires_grad and not x["cu_seqlens"].requires_grad
    x = {k: t.detach() for k, t in x.items()}
    norms = torch.linalg.vector_norm(x["q"].float(), dim=-1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-2)
    assert x["g"].dtype == torch.float32 and float(x["g"].max()) < 0 and float(x["g"].min()) >= -5.0
    assert 0 <= float(x["beta"].min()) and float(x["beta"].max()) < 1
    assert x["cu_seqlens"].tolist() == [0, 256] and x["cu_seqlens"].dtype == torch.int32


def test_same_seed_same_inputs_other_seed_other_inputs():
    specs = recipe.input_specs(Shape(1, 64, 2, 16), "report", True, batch_dim=True, cu_dtype="int64")
    a, b, c = (recipe.build_inputs(specs, "cpu", seq=64, seed=s) for s in (0, 0, 1))
    assert torch.equal(a["v"], b["v"]) and not torch.equal(a["v"], c["v"])

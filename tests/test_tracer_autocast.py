"""The tracer's CUDA autocast on meta tensors (``livebytes.tracer.autocast``): the same casts as torch's own kernels,
recorded by autograd, with the weight cache torch keeps.

Ground truth: torch's own ``AutocastCUDA`` kernels do run on FakeTensors of a fake CUDA device (``is_cuda()`` true),
forward only (autograd asks a CPU build for a CUDA device guard and aborts), so each case runs twice: torch's kernels on
fake CUDA tensors, the emulation on meta tensors, and the operators below autograd and their dtypes must agree.
"""
import contextlib
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from livebytes.tracer import autocast  # noqa: E402
from livebytes.tracer.recorder import Recorder  # noqa: E402

BF16 = torch.bfloat16


@pytest.fixture(autouse=True)
def cuda_for_autocast(monkeypatch):
    """What ``torch.autocast("cuda")`` asks of CUDA on this CPU build, answered as on a GPU (the emulation does the
    same while active; the fake-CUDA runs need it too)."""
    import torch.cuda.amp.common as common
    monkeypatch.setattr(common, "amp_definitely_not_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)


class Ops(TorchDispatchMode):
    """The operators below autograd, with their outputs' dtypes."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is not torch.ops.prim.device.default:
            outs = out if isinstance(out, (tuple, list)) else [out]
            self.seen.append((str(func), tuple(str(o.dtype) for o in outs if isinstance(o, torch.Tensor))))
        return out


def _cases(device: str) -> dict:
    """Calls of every policy (no views: a view of a fake CUDA tensor asks for a device guard)."""
    def f32(*s):
        return torch.empty(*s, device=device)

    def bf(*s):
        return torch.empty(*s, device=device, dtype=BF16)
    x, w, b, xb, lab = f32(2, 8), f32(4, 8), f32(4), bf(2, 8), torch.zeros(2, dtype=torch.long, device=device)
    return {
        "linear": lambda: F.linear(x, w, b), "linear_bf16_input": lambda: F.linear(xb, w),     # lower_precision_fp
        "matmul": lambda: x @ f32(8, 4), "bmm": lambda: torch.bmm(f32(1, 2, 8), f32(1, 8, 4)),
        "einsum": lambda: torch.einsum("ij,kj->ik", x, w),
        "exp": lambda: xb.exp(), "pow": lambda: xb.pow(2), "rsqrt": lambda: xb.rsqrt(),          # fp32
        "layer_norm": lambda: F.layer_norm(xb, (8,)), "softplus": lambda: F.softplus(xb),
        "logsumexp": lambda: xb.logsumexp(-1), "rms_norm": lambda: F.rms_norm(xb, (8,)),
        "sum": lambda: xb.sum(), "sum_dim": lambda: xb.sum(-1), "cumsum": lambda: xb.cumsum(-1),  # fp32_set_opt_dtype
        "sum_given_dtype": lambda: xb.sum(dtype=BF16), "softmax": lambda: F.softmax(xb, -1),
        "log_softmax": lambda: F.log_softmax(xb, -1), "cross_entropy": lambda: F.cross_entropy(F.linear(x, w), lab),
        "norm": lambda: xb.norm(), "norm_dim": lambda: torch.norm(xb, 2, -1),                     # fp32_append_dtype
        "addcmul": lambda: torch.addcmul(x, xb, xb), "index_put": lambda: x.index_put((lab,), bf(8)),   # promote
        "silu": lambda: F.silu(xb), "mul": lambda: x * xb, "mean": lambda: xb.mean(),             # not autocast
        "embedding": lambda: F.embedding(lab, w),
    }


CASES = list(_cases("meta"))


def _run(device: str, name: str, mode) -> list:
    with mode:
        fn = _cases(device)[name]
    ops = Ops()
    with mode, ops, torch.autocast("cuda", dtype=BF16):
        fn()
    return [s for s in ops.seen if not s[0].startswith(("aten.empty", "aten.zeros"))]


@pytest.mark.parametrize("name", CASES)
def test_casts_as_torchs_own_autocast(name):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with autocast.emulated():
        emulated = _run("meta", name, contextlib.nullcontext())
    torchs = _run("cuda", name, FakeTensorMode())
    assert emulated == torchs
    assert emulated                          # a case that runs nothing compares nothing


def test_linear_casts_then_runs_in_bf16():
    """The expected sequence spelled out once: input, weight, bias cast, then addmm in bf16."""
    with autocast.emulated():
        seen = _run("meta", "linear", contextlib.nullcontext())
    assert seen == [("aten._to_copy.default", ("torch.bfloat16",))] * 3 + [
        ("aten.t.default", ("torch.bfloat16",)), ("aten.addmm.default", ("torch.bfloat16",))]


# ------------------------------------------------------------------------------------ the policy table

HEADER = Path(torch.__file__).parent / "include" / "ATen" / "autocast_mode.h"
HEADER_LISTS = {"AT_FORALL_LOWER_PRECISION_FP": "lower_precision_fp", "AT_FORALL_FP32": "fp32",
                "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype", "AT_FORALL_PROMOTE": "promote"}


def _header_policies(text: str) -> dict:
    """Operator -> policy as the installed header's macro lists declare them."""
    out = {}
    for macro, policy in HEADER_LISTS.items():
        block = text.split(f"#define {macro}(_)", 1)[1].split("\n\n", 1)[0]
        for name, overload in re.findall(r"_\((\w+)(?:,\s*(\w+))?\)", block):
            out[f"{name}.{overload}" if overload else name] = policy
    block = text.split("#define AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(_)", 1)[1].split("\n\n", 1)[0]
    out.update({name: "fp32_append_dtype" for name in re.findall(r'"(norm\.\w+)"', block)})
    return out


@pytest.mark.skipif(not HEADER.exists(), reason="this torch ships no ATen headers")
def test_policy_table_is_the_installed_headers():
    declared = _header_policies(HEADER.read_text())
    assert len(declared) > 100                              # torch 2.13: 33 + 59 + 11 + 2 + 11 = 116
    assert {n: autocast.POLICIES[n] for n in declared} == declared


def test_every_operator_torch_autocasts_has_its_policy():
    """The installed torch's AutocastCUDA registrations (torch 2.13: 119, the header's 116 plus autocast_mode.cpp's
    cudnn_convolution, cudnn_convolution_transpose and the banned binary_cross_entropy) all have a policy."""
    policies = autocast.policies()
    assert set(policies) == set(autocast.registered_ops())
    assert "unknown" not in policies.values()
    assert policies["mm"] == "lower_precision_fp" and policies["sum"] == "fp32_set_opt_dtype"
    assert policies["binary_cross_entropy"] == "banned"


def test_an_operator_without_a_policy_refuses_the_trace_only_when_called(monkeypatch):
    """torch 2.11 on the H200 image also registers _cudnn_rnn and torchvision's ops (run 28's trace): a model that
    never calls such an operator is traced; one that does is refused, naming it."""
    monkeypatch.setattr(autocast, "POLICIES", {k: v for k, v in autocast.POLICIES.items() if k != "mm"})
    assert autocast.policies()["mm"] == "unknown"
    a = torch.empty(4, 4, device="meta")
    with autocast.emulated(), torch.autocast("cuda", dtype=torch.bfloat16):
        assert torch.exp(a).dtype == torch.float32                     # a known operator: traced as before
        with pytest.raises(autocast.AutocastUnknown, match="the model calls mm, which torch autocasts on CUDA"):
            torch.mm(a, a)


def test_the_emulation_leaves_torchs_kernels_as_they_were():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with autocast.emulated():
        pass
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::mm", "AutocastCUDA")
    assert _run("cuda", "exp", FakeTensorMode()) == [("aten._to_copy.default", ("torch.float32",)),
                                                     ("aten.exp.default", ("torch.float32",))]


# ------------------------------------------------------------------------------------ the weight cache, autograd

def _trace(x_grad: bool, uses: int, cache_enabled: bool = True, view: bool = False) -> Recorder:
    """``uses`` linears of one fp32 [256, 128] weight (a leaf requiring grad) on an fp32 [4, 128] input, in an autocast
    region, then the backward outside it."""
    rec = Recorder()
    w = torch.empty(256, 128, device="meta", requires_grad=True)
    x = torch.empty(4, 128, device="meta", requires_grad=x_grad)
    with autocast.emulated(rec.state), rec.mode():
        rec.mark("forward", 0)
        with torch.autocast("cuda", dtype=BF16, cache_enabled=cache_enabled):
            weight = w.t().t() if view else w
            loss = sum(F.linear(x, weight).sum() for _ in range(uses))
        rec.mark("backward", 0)
        loss.backward()
        rec.mark("end", 0)
    assert w.grad.dtype == torch.float32
    return rec


def _allocs(rec: Recorder, op: str) -> list[dict]:
    return [e for e in rec.events if e["e"] == "alloc" and e["op"] == op]


def _freed_in(rec: Recorder, alloc: dict) -> str:
    return next(e["phase"] for e in rec.events if e["e"] == "free" and e["id"] == alloc["id"])


@pytest.mark.parametrize("uses", [1, 3])
def test_a_weight_is_cast_once_per_region(uses):
    """autocast's cache: one bf16 copy of the weight (256 x 128 x 2 B = 65,536 B) however many linears use it; each
    use casts its input ([4, 128] fp32 -> 4 x 128 x 2 = 1,024 B)."""
    rec = _trace(x_grad=False, uses=uses)
    (copy,) = _allocs(rec, "autocast.linear.cached")
    assert (copy["bytes"], copy["dtype"], copy["phase"]) == (65_536, "bfloat16", "forward")
    assert [a["bytes"] for a in _allocs(rec, "autocast.linear")] == [1_024] * uses


@pytest.mark.parametrize("x_grad, freed", [
    (False, "forward"),     # nothing saves it (mm's weight is saved only for the input's gradient): the region's end
    (True, "backward"),     # saved for the input's gradient: held until the backward uses it
])
def test_the_cached_copy_lives_to_the_region_end_or_its_use(x_grad, freed):
    rec = _trace(x_grad=x_grad, uses=2)
    (copy,) = [a for a in _allocs(rec, "autocast.linear.cached") if a["shape"] == [256, 128]]
    assert _freed_in(rec, copy) == freed


def test_any_fp32_leaf_requiring_grad_is_cached():
    """torch caches by what a tensor is, not by its being a parameter: an input that is an fp32 leaf requiring grad is
    cast once too (4 x 128 x 2 B = 1,024 B), and the second linear casts nothing."""
    rec = _trace(x_grad=True, uses=2)
    assert [a["bytes"] for a in _allocs(rec, "autocast.linear.cached")] == [1_024, 65_536]
    assert _allocs(rec, "autocast.linear") == []


def test_without_the_cache_or_for_a_view_every_use_casts():
    assert len(_allocs(_trace(x_grad=False, uses=3, cache_enabled=False), "autocast.linear")) == 6   # 3 inputs, 3 weights
    assert len(_allocs(_trace(x_grad=False, uses=2, view=True), "autocast.linear")) == 4            # a view: no cache


def test_the_gradient_comes_back_to_fp32_through_the_casts_backward():
    """Autograd recorded the casts: the backward's ToCopyBackward0 makes the weight's fp32 gradient (256 x 128 x 4 B),
    as SumBackward0 returns the fp32 sum's gradient to the bf16 [4, 256] it summed (4 x 256 x 2 B)."""
    rec = _trace(x_grad=False, uses=1)
    casts = [(e["bytes"], e["dtype"], e["node"]) for e in _allocs(rec, "aten._to_copy.default") if e["phase"] == "backward"]
    assert casts == [(2_048, "bfloat16", "SumBackward0"), (131_072, "float32", "ToCopyBackward0")]


def test_a_checkpointed_recompute_runs_under_the_forwards_autocast():
    """Non-reentrant checkpointing recomputes under the forward's autocast state on the device its arguments are on:
    meta read as CUDA, so the recompute casts again (in the backward) and matches what the forward saved (else
    torch's own check refuses the recomputed tensors' dtypes)."""
    from torch.utils.checkpoint import checkpoint
    rec = Recorder()
    w = torch.empty(256, 128, device="meta", requires_grad=True)
    x = torch.empty(4, 128, device="meta", requires_grad=True)
    with autocast.emulated(rec.state), rec.mode():
        rec.mark("forward", 0)
        with torch.autocast("cuda", dtype=BF16):
            y = checkpoint(lambda t: F.linear(t, w).sum(), x, use_reentrant=False)
        rec.mark("backward", 0)
        y.backward()
    phases = [a["phase"] for a in _allocs(rec, "autocast.linear.cached") if a["shape"] == [256, 128]]
    assert phases == ["forward", "backward"]


def test_outputs_come_back_in_fp32_as_accelerate_converts_them():
    """accelerate's ``convert_to_fp32`` after the region: a bf16 tensor (an unfused loss's logits) is copied to fp32,
    an fp32 one (the loss) is kept as it is, in a ModelOutput, a tuple or a list alike."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    from livebytes.tracer.step import fp32_outputs
    loss, logits = torch.empty((), device="meta"), torch.empty(2, 8, 1000, device="meta", dtype=BF16)
    out = fp32_outputs(CausalLMOutputWithPast(loss=loss, logits=logits))
    assert type(out) is CausalLMOutputWithPast and out.loss is loss and out.logits.dtype == torch.float32
    assert out.past_key_values is None
    a, (b,) = fp32_outputs((logits, [logits]))
    assert a.dtype == b.dtype == torch.float32


def test_the_gpu_probe_converts_outputs_as_the_tracer_does():
    """validate/gpu/probes/model_step.py imports nothing of livebytes (it runs wherever the model does), so it carries its
    own copy of accelerate's fp32 conversion: the two function bodies must be the same code, docstrings and imports aside
    (the tracer's module imports torch and ``Mapping`` at its top, the probe inside the function)."""
    import ast
    from pathlib import Path

    from livebytes.tracer import step

    def body(source: str) -> str:
        fn = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "fp32_outputs")
        fn.body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
                   and not isinstance(s, (ast.Import, ast.ImportFrom))]
        return ast.dump(fn)
    probe = Path(__file__).resolve().parents[1] / "validate" / "gpu" / "probes" / "model_step.py"   # its source, read by path
    assert body(probe.read_text()) == body(Path(step.__file__).read_text())

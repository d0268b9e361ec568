"""The engine's arithmetic and invariants, on the registered models and on a hand-made one."""
import random

import pytest
from livebytes.estimator import Buffer, Group, LifetimeModel, Shape, Source, Step, get_model, predict, specs
from livebytes.estimator.allocator import allocated_block_bytes
from livebytes.estimator.engine import evaluate, peak_expression, step_expressions
from livebytes.estimator.symbols import H, MBS, S

SRC = Source("x.py", "f")


def toy(**kw):
    steps = (Step("a", "forward"), Step("b", "forward"), Step("c", "backward"))
    buffers = (
        Buffer("x", Group.INPUTS, (MBS * S, H), "bf16", SRC, "a"),                 # 2*T*H, whole step
        Buffer("t", Group.FORWARD, (MBS * S, H), "fp32", SRC, "a", "b"),           # 4*T*H, steps a..b
        Buffer("y", Group.STAGE, (MBS * S,), "fp32", SRC, "c"),                    # 4*T, step c
        Buffer("w1", Group.WORKSPACE, (100,), "uint8", SRC, "c", "c", "ws"),        # carved: 100 + 30 B
        Buffer("w2", Group.WORKSPACE, (30,), "uint8", SRC, "c", "c", "ws"),
    )
    return LifetimeModel("toy@1", "toy", "1", "", steps, buffers, **kw)


def test_allocator_rounds_to_512_byte_blocks():
    assert allocated_block_bytes(1) == 512
    assert allocated_block_bytes(512) == 512
    assert allocated_block_bytes(513) == 1024
    assert allocated_block_bytes(0) == 0


def test_toy_timeline_by_hand():
    p = predict(toy(), Shape(2, 1000, 3))             # T = 2000 tokens
    # x: 2000*3*2 = 12000 -> 12288; t: 24000 -> 24064; y: 8000 -> 8192; workspace 130 -> 512 (once)
    assert p.step_bytes == (12288 + 24064, 12288 + 24064, 12288 + 8192 + 512)
    assert p.peak_step.name == "a"
    charged = {b.name: n for b, n in zip(p.model.buffers, p.buffer_bytes)}
    assert charged["w1"] + charged["w2"] == 512        # a carved allocation is rounded once


def test_model_rejects_bad_lifetimes():
    with pytest.raises(ValueError):
        LifetimeModel("bad@1", "bad", "1", "", (Step("a", "forward"), Step("b", "forward")),
                      (Buffer("x", Group.INPUTS, (1,), "fp32", SRC, "b", "a"),))


MODELS = [(s.key, s.default_device) for s in specs()]
SHAPES = [Shape(1, 8192, 64), Shape(2, 8192, 96), Shape(3, 5000, 32, 128), Shape(1, 131072, 128)]


@pytest.mark.parametrize("key,device", MODELS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.label())
def test_breakdown_sums_to_peak_and_peak_bounds_every_step(key, device, shape):
    p = predict(get_model(key, device), shape)
    assert sum(p.groups.values()) == p.peak_bytes
    assert sum(n for _, n in p.at_peak) == p.peak_bytes
    assert all(p.peak_bytes >= s for s in p.step_bytes)
    fwd, _ = p.forward_peak()
    assert p.peak_bytes >= fwd


@pytest.mark.parametrize("key,device", MODELS)
def test_every_buffer_names_its_source_and_a_known_dtype(key, device):
    m = get_model(key, device)
    for b in m.buffers:
        assert b.source.file and b.source.function, b.name
        assert b.dtype in ("bool", "uint8", "int32", "int64", "bf16", "fp16", "fp32")


@pytest.mark.parametrize("key,device", MODELS)
def test_doubling_tokens_doubles_the_token_linear_buffers(key, device):
    """Every buffer with a token axis (MBS*S) doubles when MBS doubles, up to its 512-byte rounding."""
    m = get_model(key, device)
    a, b = Shape(2, 8192, 32, 128), Shape(4, 8192, 32, 128)
    pa, pb = predict(m, a), predict(m, b)
    for buf, na, nb in zip(m.buffers, pa.buffer_bytes, pb.buffer_bytes):
        if buf.shape and buf.shape[0] == MBS * S and buf.carved_from is None:
            assert nb == 2 * na, buf.name


@pytest.mark.parametrize("key,device", MODELS)
def test_symbolic_steps_equal_numeric_prediction(key, device):
    m = get_model(key, device)
    exprs = step_expressions(m)
    rng = random.Random(7)
    for _ in range(3):
        shape = Shape(rng.randint(1, 4), rng.choice([1000, 4096, 8192, 12345]), rng.choice([16, 32, 96]), 128)
        p = predict(m, shape)
        assert [evaluate(e, shape) for e in exprs] == list(p.step_bytes)
        assert evaluate(peak_expression(m), shape) == p.peak_bytes


def test_forward_plus_backward_holds_more_than_forward_only():
    shape = Shape(1, 8192, 64)
    full = predict(get_model("fla-kda@0.6.0"), shape).peak_bytes
    fwd = predict(get_model("fla-kda-fwd@0.6.0"), shape).peak_bytes
    assert full > fwd


def test_model_pages_are_generated_from_the_current_models(tmp_path):
    """docs/models/*.md are docgen's output; regenerate them (python -m livebytes.cli.docgen docs/models)."""
    from pathlib import Path

    from livebytes.cli.docgen import write_all
    docs = Path(__file__).resolve().parents[1] / "docs" / "models"
    if not docs.exists():
        pytest.skip("docs/ is not shipped with an installed package")
    for page in write_all(tmp_path):
        assert (docs / page.name).read_text() == page.read_text(), page.name


def test_grouped_value_heads_take_fla_gva_path():
    """HV = 2H: chunk_kda_bwd sums dq and dk over each pair of value heads into new [T, H, K] fp32 tensors,
    while the [T, HV, K] dq2 / dk2 are still referenced; everything value-side is HV-sized."""
    from livebytes.estimator.registry import shape_options
    shape = Shape(1, 8192, 16, 128, v_heads=32)
    assert shape_options("fla-kda@0.6.0", shape) == {"gva": True}
    gva = predict(get_model("fla-kda@0.6.0", gva=True), shape)
    step = gva.model.step_index("bwd.gva_reduce_q")
    live = {b.name: n for b, n in gva.live_at(step)}
    assert live["dq_heads"] == 8192 * 16 * 128 * 4 and live["dq2"] == 8192 * 32 * 128 * 4
    below = predict(get_model("fla-kda@0.6.0"), Shape(1, 8192, 16, 128)).peak_bytes
    above = predict(get_model("fla-kda@0.6.0"), Shape(1, 8192, 32, 128)).peak_bytes
    assert below < gva.peak_bytes < above       # q/k side at 16 heads, value side at 32


def test_models_without_gva_refuse_grouped_value_heads():
    from livebytes.estimator import LivebytesError
    from livebytes.estimator.registry import check_shape
    with pytest.raises(LivebytesError, match="equal head counts"):
        check_shape("cudnn-kda-hopper-cuda@1.32.0", Shape(1, 8192, 16, 128, v_heads=32))

"""The engine's arithmetic and invariants, on the registered models and on a hand-made one."""
import random

import pytest
from livebytes.estimator import Buffer, Group, LifetimeModel, Shape, Source, Step, get_model, keyed_specs, predict, specs
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


def _scratch(of: str, at: str) -> Buffer:
    return Buffer("s", Group.WORKSPACE, (8,), "fp32", SRC, at, at, scratch_of=of)


@pytest.mark.parametrize("buffers", [
    (_scratch("nothing", "c"),),                                                              # names no buffer
    (_scratch("y", "b"), Buffer("y", Group.STAGE, (1,), "fp32", SRC, "c")),                  # its output is at c
    (_scratch("y", "c"), Buffer("y", Group.STAGE, (1,), "fp32", SRC, "c")),                  # declared before it
], ids=["unknown", "other step", "before its output"])
def test_a_scratch_follows_its_output_at_its_step(buffers):
    with pytest.raises(ValueError, match="scratch of"):
        LifetimeModel("bad@1", "bad", "1", "", (Step("a", "forward"), Step("b", "forward"), Step("c", "backward")),
                      buffers)


MODELS = [(s.key, s.default_device) for s in keyed_specs()]
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


@pytest.mark.parametrize("n,multiple,expected", [(1, 256, 256), (256, 256, 256), (257, 256, 512), (0, 128, 0)])
def test_ceil_to_rounds_up_to_the_multiple(n, multiple, expected):
    from livebytes.estimator.declare import ceil_to
    assert ceil_to(n, multiple) == expected


def test_vectorised_function_evaluates_on_integers_and_arrays():
    import numpy as np
    import sympy as sp

    from livebytes.estimator.declare import vectorised
    f = vectorised("halve", lambda t: t // 2)
    expr = f(S) * 4                                   # 4 * (S // 2)
    assert sp.lambdify([S], expr, modules="math")(9) == 16
    assert list(sp.lambdify([S], expr, modules="numpy")(np.array([9, 10]))) == [16, 20]


def test_declaration_regions_share_one_allocation_and_inputs_skip_do_without_backward():
    from livebytes.estimator.declare import Contract, Declaration, Input
    contract = Contract("c", SRC, (Input("x", (MBS * S,), "fp32"), Input("dO", (MBS * S,), "fp32", backward_only=True)))
    d = Declaration()
    d.inputs(contract, backward=False)
    d.step("k", "forward")
    d.region("ws", "r1", Group.WORKSPACE, 100, SRC)
    d.region("ws", "r2", Group.WORKSPACE, 30, SRC)
    m = d.freeze(key="decl@1", implementation="decl", version="1", summary="")
    assert [b.name for b in m.buffers] == ["x", "r1", "r2"]
    p = predict(m, Shape(1, 1000, 1))
    # x: 1000 * 4 = 4000 -> 4096 B; the workspace 100 + 30 = 130 B -> one 512-byte block
    assert p.step_bytes == (4096, 4096 + 512)


def test_a_cache_key_needs_a_cached_buffer_and_cached_buffers_are_never_freed():
    steps = (Step("a", "forward"), Step("b", "forward"))
    with pytest.raises(ValueError, match="cache key"):
        LifetimeModel("bad@1", "bad", "1", "", steps, (Buffer("x", Group.SCRATCH, (1,), "fp32", SRC, "a", cache_key=(S,)),))
    with pytest.raises(ValueError, match="cannot be freed"):
        LifetimeModel("bad@1", "bad", "1", "", steps, (Buffer("x", Group.SCRATCH, (1,), "fp32", SRC, "a", "b", cached=True),))


def test_every_buffer_cites_a_line_of_the_pinned_library():
    """Sources carry the line number and the quoted line (inputs cite the entry point's signature)."""
    for s in keyed_specs():
        for b in get_model(s.key, s.default_device).buffers:
            assert b.source.line > 0 and b.source.quote, (s.key, b.name)


def test_every_released_version_has_a_harness_and_no_snapshot_does():
    from livebytes.validate.gpu.harnesses import harness_for, runnable
    assert harness_for("cudnn-kda-hopper@1.32.0").plan == "kda_hopper"
    # the report's private snapshots cannot be installed: running 0.6.0 under their names would mislabel records
    assert harness_for("fla-kda@07b80f27") is None and harness_for("cudnn-kda-frost@e0b4ce98") is None
    keys = {s.key for s in specs()}
    assert set(runnable()) <= keys                       # a harness serves registered models only
    assert {"fla-kda@0.6.0", "fla-kda-fwd@0.6.0", "fla-gdn@0.6.0", "fla-gdn-fwd@0.6.0", "cudnn-kda-frost@1.32.0",
            "cudnn-kda-hopper-cuda@1.32.0", "cudnn-kda-hopper@1.32.0"} <= set(runnable())


def test_no_model_module_names_a_validator_path():
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "lifetimes"
    named = [p.name for p in root.glob("*.py") if "runner" in p.read_text() or "livebytes.validate" in p.read_text()]
    assert not named


def test_no_function_in_the_models_is_over_60_lines():
    import ast
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "lifetimes"
    long = [f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in root.glob("*.py") for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 60]
    assert not long

"""The KimiDeltaAttention layer model (lifetimes/fla_kda_layer.py) and its stack (lifetimes/layer_stack.py): hand
arithmetic beside each expected number, the kernel's records inside the layer unchanged, and relational checks."""
import os
from pathlib import Path

import pytest

from livebytes.estimator.buffers import Group
from livebytes.estimator.declare import Declaration
from livebytes.estimator.compiler import charged_bytes
from livebytes.estimator.engine import evaluate, predict
from livebytes.estimator.errors import RefusedShapeError
from livebytes.estimator.registry import get_model, shape_options
from livebytes.estimator.shapes import Shape, parse_shape_list, shape_spec
from livebytes.lifetimes import fla_kda, fla_kda_layer
from livebytes.lifetimes.layer_stack import saved_set

HIDDEN = 2304                      # Kimi-Linear's published hidden size (config.json hidden_size)
SHAPE = Shape(1, 8192, 32, 128)    # T 8192, H = HV 32, K = V 128
T = 8192


def layer(layers=1, checkpoint=False, hidden=HIDDEN):
    return fla_kda_layer.build(hidden=hidden, layers=layers, checkpoint=checkpoint)


def nbytes(model, name, shape=SHAPE):
    return evaluate(next(b for b in model.buffers if b.name == name).nbytes, shape)


@pytest.mark.parametrize("name, expected", [
    ("q_proj.out", 8192 * 4096 * 2),               # Linear(2304 -> H*K 4096) output, T x 4096 bf16
    ("q_proj.weight", 4096 * 2304 * 2),            # [key_dim, hidden] bf16
    ("q_proj.weight.grad", 4096 * 2304 * 2),       # its gradient, the weight's shape and dtype
    ("g_proj.0.dinput", 8192 * 2304 * 2),          # an input gradient: T x hidden bf16 (the layer input's .grad)
    ("f_proj.0.out", 8192 * 128 * 2),              # the low-rank gate bottleneck: T x head_v_dim bf16
    ("g_proj.1.bias.grad", 4096 * 2),              # [value_dim] bf16
    # its sum over T = 8192 rows: 32 x 4 threads a CTA, each output split over 66 CTAs (cdiv(132 SMs x 16, grid 32)):
    ("g_proj.1.bias.grad.reduce_staging", 4096 * 66 * 32 * 4 * 4),   # outputs x CTAs x block.x x vec, fp32: 132 MiB
    ("g_proj.1.bias.grad.reduce_semaphores", 32 * 4),                # grid.x = 4096 / 4 / 32 int32
    ("q_conv1d.dw_sum.reduce_staging", 0),         # NT 128 rows over 4 warps: 32 values a thread < 256, one CTA
    ("q_conv1d.weight", 4096 * 1 * 4 * 2),         # [D, 1, W] bf16, W = 4
    ("q_conv1d.dw_partial", 128 * 4096 * 4 * 4),   # [B*NT, D, W] fp32, NT = 8192 / 64 = 128
    ("q_conv1d.dw_sum", 4096 * 4 * 4),             # its fp32 sum [D, W]
    ("o_norm.dw_partial", 132 * 128 * 4),          # [min(132 SMs, T*HV), V] fp32
    ("o_norm.rstd", 8192 * 32 * 4),                # [T*HV] fp32
    ("conv.chunk_indices", 128 * 2 * 8),           # [NT, 2] int64, the convolutions' own tensor_cache entry
    ("A_log", 32 * 4),                             # [HV] fp32
    ("dt_bias", 32 * 128 * 4),                     # [HV*K] fp32
])
def test_layer_buffers_by_hand(name, expected):
    assert nbytes(layer(), name) == expected


def test_the_kernels_records_appear_unchanged_inside_the_layer():
    """Every buffer the kernel model allocates (its caller's tensors aside) is in the layer as kda.NAME: the same
    shape, dtype, source and group; freed inside the kernel at the same step, renamed."""
    kernel = fla_kda.build(contract="report")
    mine = {b.name: b for b in layer().buffers}
    for b in kernel.buffers:
        if b.allocated_at == "harness.inputs":
            assert f"kda.{b.name}" not in mine      # the caller's tensors are the layer's buffers
            continue
        ours = mine[f"kda.{b.name}"]
        assert (ours.shape, ours.dtype, ours.source, ours.group, ours.cached) == (b.shape, b.dtype, b.source, b.group, b.cached)
        if b.freed_after is not None:
            assert ours.freed_after == f"kda.{b.freed_after}"
    steps = [s.name for s in layer().steps]
    assert [s for s in steps if s.startswith("kda.")] == [f"kda.{s.name}" for s in kernel.steps if s.name != "harness.inputs"]


def test_the_kernels_inputs_are_the_layers_buffers():
    """chunk_kda's q/k/v are the convolutions' outputs, g and beta the gate projections', dO the norm's input gradient;
    v, g and beta live until the kernel's backward returns (ChunkKDAFunction saves them, chunk.py:118-141)."""
    mine = {b.name: b for b in layer().buffers}
    assert mine["v_conv1d.out"].freed_after == "kda.bwd.return"
    assert mine["f_proj.1.out"].freed_after == "kda.bwd.return" and mine["b_proj.out"].freed_after == "kda.bwd.return"
    assert mine["o_norm.dx"].freed_after == "kda.bwd.return"
    assert mine["q_conv1d.out"].freed_after == "fwd.o_proj"          # the kernel keeps its L2-normalised copy instead
    assert mine["kda.o"].freed_after == "bwd.o_norm"                  # saved by FusedRMSNormGated as x


def test_the_layers_peak_is_the_kernels_plus_what_the_layer_holds_there():
    """At the kernel's peak step the layer holds the kernel's live buffers (its inputs being the layer's) and its own."""
    m = layer()
    p = predict(m, SHAPE)
    assert p.peak_step.name == "kda.bwd.intra_db_sum"
    kernel = predict(fla_kda.build(contract="report"), SHAPE)
    assert p.peak_bytes > kernel.peak_bytes


def saved_bytes(model, shape=SHAPE):
    charged = charged_bytes(model)
    return sum(evaluate(charged[b.name], shape) for b in saved_set(model, "o_proj.out"))


def per_layer_parameters(model, shape=SHAPE):
    charged = charged_bytes(model)
    return sum(evaluate(charged[b.name], shape) for b in model.buffers if b.group == Group.PARAMETERS)


def test_the_saved_set_by_hand():
    """What one layer keeps from its forward into its backward at T 8192, H = HV 32, K = V 128, hidden 2304: ten
    [T, 4096] bf16 tensors of 64 MiB (the q/k/v projections, the v convolution, the gate g, the kernel's normalised q
    and k and its output, g_proj's gate, the norm's output), Aqk and Akk [T, 32, 64] bf16 (32 MiB each), the two
    low-rank bottlenecks [T, 128] bf16 (2 MiB each), beta [T, 32] bf16 (0.5 MiB) and four [T*32] fp32 vectors (q and k
    rstd, the sigmoid of beta, the norm's rstd: 1 MiB each)."""
    mib = 2**20
    assert saved_bytes(layer()) == (10 * 64 + 2 * 32 + 2 * 2 + 0.5 + 4 * 1) * mib     # 712.5 MiB


def test_each_layer_adds_its_output_parameters_and_saved_set():
    """Without checkpointing the top layer's backward is the peak: each layer below adds its output (the next one's
    input, [T, hidden] bf16 = 8192 x 2304 x 2 = 37,748,736 B), its parameters and its saved set (712.5 MiB)."""
    one = layer()
    per_layer = T * HIDDEN * 2 + per_layer_parameters(one) + saved_bytes(one)
    peaks = [predict(layer(n), SHAPE).peak_bytes for n in (1, 2, 3, 4)]
    assert [b - a for a, b in zip(peaks, peaks[1:])] == [per_layer] * 3


def test_checkpointed_each_layer_adds_its_parameters_and_their_gradients():
    """With checkpointing the bottom layer's backward is the peak (its recompute's saved set, as one layer's): every
    layer above it has run its backward, so each adds its parameters and their gradients (79,045,632 B each at hidden
    2304: the bf16 weights, A_log and dt_bias fp32, and gradients of the same dtypes), its output and saved set gone.
    By hand: 39,514,240 bf16 values x 2 B + (32 + 4,096) fp32 x 4 B = 79,044,992 B, and the 512-B blocks add 640 B
    (A_log 128 -> 512 B, o_norm.weight 256 -> 512 B)."""
    params = per_layer_parameters(layer())
    assert params == 79_045_632
    peaks = [predict(layer(n, True), SHAPE) for n in (1, 2, 3, 4)]
    assert [b.peak_bytes - a.peak_bytes for a, b in zip(peaks, peaks[1:])] == [2 * params] * 3
    assert [p.peak_step.name for p in peaks] == ["kda.bwd.intra_db_sum"] + ["below1.kda.bwd.intra_db_sum"] * 3


@pytest.mark.parametrize("layers", [2, 4, 8])
def test_checkpointing_lowers_the_peak_by_the_saved_sets_and_outputs_less_the_gradients(layers):
    """full - checkpointed = (L - 1) x (saved set + output - parameters) - the recompute's cuBLASLt workspace
    (g_proj.1's biased GEMM then runs on autograd's thread too, 1,024 KiB): the two peaks lie at the top layer's
    backward and the bottom one's (the previous test). At 8K: (L - 1) x (747,110,400 + 37,748,736 - 79,045,632)."""
    full, ckpt = (predict(layer(layers, c), SHAPE).peak_bytes for c in (False, True))
    one = layer()
    assert full - ckpt == (layers - 1) * (saved_bytes(one) + T * HIDDEN * 2 - per_layer_parameters(one)) - 1024 * 1024
    assert ckpt < full


def test_checkpointing_one_layer_adds_the_backward_threads_cublaslt_workspace():
    """One layer alone: its backward (after the recompute) holds what the layer without checkpointing holds there, and
    the backward thread's cuBLASLt workspace (1,024 KiB), as run 16's two 1 x 8K records show: 2,680,648,192 B
    checkpointed, 2,679,596,544 B not (1,051,648 B apart: the workspace and the other shapes' cache entries)."""
    one, ckpt = (predict(layer(1, c), SHAPE).peak_bytes for c in (False, True))
    assert ckpt - one == 1024 * 1024


def test_the_closing_step_holds_every_layers_parameter_gradients():
    """After the stack's backward every layer's parameter gradients exist: four layers hold four times one layer's
    (the kernel's dA_log and ddt_bias among them)."""
    def grads(m):
        last, charged = len(m.steps) - 1, charged_bytes(m)
        return sum(evaluate(charged[b.name], SHAPE) for b in m.buffers if last in m.live_range(b)
                   and (b.group == Group.PARAM_GRADS or b.name.endswith(("dA_log", "ddt_bias"))))
    assert grads(layer(4)) == 4 * grads(layer(1))
    assert grads(layer(1)) > 2 * 4096 * 2304 * 2          # at least q_proj's and k_proj's weight gradients


KEPT_A_LAYER = 158_074_368   # one hidden-2304 layer's parameters and their gradients (test below)


def test_a_layers_parameters_and_gradients_are_what_every_layer_keeps_to_the_stacks_last_step():
    """The depth bound's per-layer figure: the parameters (79,045,632 B) and their gradients, the same less A_log's
    512-B block and dt_bias's 4,096 x 4 = 16,384 B (whose gradients are the kernel's dA_log and ddt_bias, another
    group): 79,045,632 + 79,028,736 = 158,074,368 B; four layers hold four times that at their last step."""
    from livebytes.estimator.compiler import compile_model
    from livebytes.estimator.registry import kept_weights_bytes
    assert kept_weights_bytes(compile_model(layer()), SHAPE) == KEPT_A_LAYER
    four = layer(4)
    last, charged = len(four.steps) - 1, charged_bytes(four)
    assert sum(evaluate(charged[b.name], SHAPE) for b in four.buffers if last in four.live_range(b)
               and b.group in (Group.PARAMETERS, Group.PARAM_GRADS)) == 4 * KEPT_A_LAYER


def test_a_stack_no_gpu_preset_holds_is_refused_before_it_is_built(monkeypatch):
    """B300's 287,428,771,840 B (the largest preset) hold 1,818 layers' 158,074,368 B (1,818 x = 287,379,201,024 B;
    1,819 x = 287,537,275,392 B): 1,819 layers are refused on any device, and no stack is built to say so; plan's layer
    search (depth=False) leaves it to the device."""
    from livebytes.estimator import registry
    from livebytes.estimator.devices import get_device
    built, real = [], registry._build
    monkeypatch.setattr(registry, "_build", lambda key, dev, options: built.append(dict(options)["layers"]) or real(key, dev, options))
    h100, key = get_device("H100"), "fla-kda-layer@0.6.0"
    registry.check_shape(key, Shape(1, 8192, 32, 128, hidden=HIDDEN, layers=1818), h100)
    with pytest.raises(registry.TooDeepError, match=r"1,819 layers: .* \(B300, 267.7 GiB: 1,818 such layers at most\)"):
        registry.check_shape(key, Shape(1, 8192, 32, 128, hidden=HIDDEN, layers=1819), h100)
    registry.check_shape(key, Shape(1, 8192, 32, 128, hidden=HIDDEN, layers=1819), h100, depth=False)
    assert set(built) <= {1}


def test_the_layer_fields_are_build_options_of_layer_models_only():
    shape = Shape(1, 8192, 32, 128, hidden=HIDDEN, layers=4, checkpoint=True)
    assert shape_options("fla-kda-layer@0.6.0", shape) == {"hidden": HIDDEN, "layers": 4, "checkpoint": True}
    with pytest.raises(RefusedShapeError, match="--checkpoint, --hidden-size, --num-hidden-layers describe a layer"):
        shape_options("fla-kda@0.6.0", shape)
    m = get_model("fla-kda-layer@0.6.0", "H200", **shape_options("fla-kda-layer@0.6.0", shape))
    assert dict(m.options)["layers"] == 4 and "4 KimiDeltaAttention layers" in m.summary


def test_layer_shapes_read_back():
    shape = parse_shape_list("1,8K,32,128,hidden=2304,layers=4,checkpoint=on,conv=4")[0]
    assert (shape.hidden, shape.layers, shape.checkpoint, shape.conv_size) == (2304, 4, True, 4)
    assert parse_shape_list(shape_spec(shape))[0] == shape
    assert Shape.from_dict(shape.as_dict()) == Shape.from_dict(shape.record_dict()) == shape   # the JSON's keys, the records'
    assert shape.as_dict() == {"batch_size": 1, "seq_len": 8192, "num_heads": 32, "head_dim": 128, "hidden_size": 2304,
                               "num_hidden_layers": 4, "checkpoint": True, "conv_size": 4}
    assert shape.record_dict() == {"mbs": 1, "seq": 8192, "heads": 32, "dim": 128, "hidden": 2304, "layers": 4,
                                   "checkpoint": True, "conv_size": 4}      # the records on disk keep their keys


def test_include_maps_every_input_and_frees_only_its_own_buffers():
    kernel = fla_kda.build(contract="report")
    d = Declaration()
    d.step("harness.inputs", "harness")
    with pytest.raises(ValueError, match="not mapped"):
        d.include(kernel, "kda", "forward", inputs={"q": "q"})
    inputs = {b.name: b.name for b in kernel.buffers if b.allocated_at == "harness.inputs"}
    with pytest.raises(ValueError, match="no buffers"):
        d.include(kernel, "kda", "forward", inputs, freed={"nonesuch": "x"})
    d.include(kernel, "kda", "forward", inputs)
    with pytest.raises(ValueError, match="mapped to no buffer"):
        d.freeze(key="k", implementation="i", version="v", summary="s")


# ---------------------------------------------------------------- the GatedDeltaNet layer: the same construction

def test_the_gdn_layers_kernel_is_the_gdn_kernel_model_for_the_layers_call():
    """fla_gdn.build(layer_call=True) is the Qwen3-Next records plus the in-kernel gate and beta sigmoid: the sigmoid's
    fp32 beta [T, HV] saved, db then fp32, gdn_gate_bwd's bf16 dg and its [cdiv(T, 32), HV] fp32 partials, and their sums'
    global-reduce staging (aten_reduce; fp32 sums accumulate in their outputs)."""
    from livebytes.lifetimes import fla_gdn
    plain, layer_call = fla_gdn.build(), fla_gdn.build(layer_call=True, sms=132, threads_per_sm=2048)
    added = {b.name for b in layer_call.buffers} - {b.name for b in plain.buffers}
    staging = {f"{x}.reduce_{part}" for x in ("dA_log", "ddt_bias") for part in ("staging", "semaphores")}
    assert added == {"A_log", "dt_bias", "beta_sigmoid", "dg_gate", "dA_log_part", "dt_bias_part", "dA_log", "ddt_bias",
                     "dbeta"} | staging
    m = {b.name: b for b in layer_call.buffers}
    shape = Shape(1, 8192, 16, 128, v_heads=32)
    assert evaluate(m["beta_sigmoid"].nbytes, shape) == 8192 * 32 * 4          # [T, HV] fp32
    assert evaluate(m["dA_log_part"].nbytes, shape) == 256 * 32 * 4            # [cdiv(8192, 32), HV] fp32
    assert m["db"].dtype == "fp32" and {b.name: b.dtype for b in plain.buffers}["db"] == "bf16"


def test_the_gdn_kernels_records_appear_unchanged_inside_its_layer():
    from livebytes.estimator.devices import get_device
    from livebytes.lifetimes import fla_gdn, fla_gdn_layer
    h200 = get_device("H200")
    kernel = fla_gdn.build(device=h200, layer_call=True)
    mine = {b.name: b for b in fla_gdn_layer.build(device=h200, hidden=2048).buffers}
    for b in kernel.buffers:
        if b.allocated_at != "harness.inputs" and b.name != "chunk_indices":     # a hit of the convs' entry (below)
            ours = mine[f"gdn.{b.name}"]
            assert (ours.shape, ours.dtype, ours.source, ours.group) == (b.shape, b.dtype, b.source, b.group)
    assert mine["a_proj.out"].freed_after == "gdn.bwd.return"      # saved by the kernel as g_input


def test_the_gdn_kernel_hits_the_convs_chunk_indices_where_kda_adds_its_own():
    """tensor_cache hits only on the same argument form: chunk_gated_delta_rule calls prepare_chunk_indices(cu_seqlens,
    chunk_size, cu_seqlens_cpu=...) as the convs do (chunk.py:291, ops.py:951): one [NT, 2] int64 entry a call; chunk_kda
    passes all three as keywords (kda/chunk.py:82): two. Run 22f's GDN-layer records (1 x 8K H16/HV32 D128, 1 and 4
    layers) were 2,560 B below the model that had two: 2,048 B (NT 128 x 2 x 8) and the warmup's 256-B entry the
    tensor_cache then keeps (one entry a call keeps three earlier ones) in a 512-B block; requested 2,304 B."""
    from livebytes.lifetimes import fla_gdn_layer, fla_kda_layer
    gdn = {b.name for b in fla_gdn_layer.build(hidden=2048).buffers if b.name.endswith("chunk_indices")}
    kda = {b.name for b in fla_kda_layer.build(hidden=2048).buffers if b.name.endswith("chunk_indices")}
    assert gdn == {"conv.chunk_indices"} and kda == {"conv.chunk_indices", "kda.chunk_indices"}


def test_a_hit_must_name_a_cached_buffer():
    from livebytes.estimator.declare import Declaration
    from livebytes.lifetimes import fla_gdn
    kernel = fla_gdn.build()
    inputs = {b.name: b.name for b in kernel.buffers if b.allocated_at == "harness.inputs"}
    with pytest.raises(ValueError, match=r"hits \['dh'\] are not cached buffers"):
        Declaration().include(kernel, "gdn", "forward", inputs, hits=("dh",))


@pytest.mark.parametrize("layers", [2, 4])
def test_gdn_checkpointing_lowers_the_peak_by_the_saved_sets_and_outputs_less_the_gradients(layers):
    """As the KDA layer's (no biased Linear in GatedDeltaNet: no cuBLASLt workspace on autograd's thread)."""
    from livebytes.estimator.devices import get_device
    from livebytes.lifetimes import fla_gdn_layer
    shape = Shape(1, 8192, 16, 128, v_heads=32)
    h200 = get_device("H200")
    full, ckpt = (predict(fla_gdn_layer.build(device=h200, gva=True, layers=layers, checkpoint=c), shape).peak_bytes
                  for c in (False, True))
    one = fla_gdn_layer.build(device=h200, gva=True)
    output = 8192 * 2048 * 2                  # [T, hidden] bf16, GatedDeltaNet's default hidden 2048
    assert full - ckpt == (layers - 1) * (saved_bytes(one, shape) + output - per_layer_parameters(one, shape))


def test_the_prepared_layer_plan_reads_and_keeps_the_layer_fields():
    """validate/data/plans/h200_v4_layers.json (its KDA entries ran as run 16; its GDN entry is run 21's,
    validate/data/plans/h200_run21.sh): every shape a fresh process, the layer fields kept."""
    from pathlib import Path

    from livebytes.validate.gpu.batch import expand, load_plan
    from livebytes.validate.gpu.harnesses import harness_for
    plan = Path(__file__).resolve().parents[1] / "validate" / "data" / "plans" / "h200_v4_layers.json"
    groups = expand(load_plan(plan))
    shapes = [parse_shape_list(g["shapes"])[0] for g in groups]
    assert len(groups) == 10 and all(s.hidden for s in shapes)
    assert {s.layers for s in shapes} == {1, 4} and {bool(s.checkpoint) for s in shapes} == {False, True}
    assert harness_for("fla-kda-layer@0.6.0").probe.cls == "KimiDeltaAttention"
    assert harness_for("fla-gdn-layer@0.6.0").probe.cls == "GatedDeltaNet"


@pytest.mark.parametrize("args, message", [
    (["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "32", "--hidden", "2304"], "--hidden-size describes a layer"),
    (["plan", "--impl", "fla-kda@0.6.0", "--solve", "layers", "--heads", "32"], "--num-hidden-layers describes a layer"),
    (["predict", "--impl", "fla-kda-layer@0.6.0", "--seq", "8K", "--heads", "32", "--layers", "0"], "--num-hidden-layers: must be positive"),
    # past the largest preset's memory in parameters and gradients alone: refused before the stack is built
    (["predict", "--impl", "fla-kda-layer@0.6.0", "--seq", "8K", "--heads", "16", "--layers", "1000000"],
     "1,000,000 layers: their parameters and gradients alone take"),
    (["sweep", "--impl", "fla-gdn-layer@0.6.0", "--seq", "8K", "--heads", "16", "--layers", "1M"], "1,048,576 layers"),
    (["plan", "--impl", "fla-kda-layer@0.6.0", "--heads", "16", "--layers", "100000", "--checkpoint"], "100,000 layers"),
])
def test_layer_flags_on_a_kernel_or_bad_are_one_error_line(args, message):
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 1, r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]


def test_plan_solves_for_layers_where_one_more_does_not_run():
    """plan --solve layers: the answer's stack runs on the H200 and one more layer does not (the full simulation)."""
    from livebytes.estimator.capacity import verdict
    from livebytes.estimator.devices import get_device
    from livebytes.estimator.planning import largest_running
    h200 = get_device("H200")
    base = Shape(1, 131072, 32, 128, hidden=HIDDEN, layers=1)

    def model_at(s):
        return fla_kda_layer.build(device=h200, hidden=HIDDEN, layers=s.layers)
    plan = largest_running(model_at(base), base, "layers", h200, model_at=model_at)
    assert plan.value == 8 and plan.at_value.fits and not plan.at_next.fits
    assert not verdict(model_at(Shape(1, 131072, 32, 128, hidden=HIDDEN, layers=9)), Shape(1, 131072, 32, 128, hidden=HIDDEN,
                       layers=9), h200).fits


FLA_SOURCES = Path(os.environ.get("LIVEBYTES_FLA_SOURCES", "/tmp/fla21/src"))   # the unpacked 0.6.0 wheels (fla/...)


def _cited(model):
    return [b.source for b in model.buffers] + [s.source for s in model.steps if s.source] + [a.source for a in model.autotuned]


@pytest.mark.parametrize("key", ["fla-kda-layer@0.6.0", "fla-gdn-layer@0.6.0"])
def test_every_layer_line_cited_reads_so_in_the_0_6_0_wheels(key):
    """Each FLA source of the layer's own records quotes its line (flash-linear-attention and fla-core 0.6.0 unpacked
    under $LIVEBYTES_FLA_SOURCES: pip download --no-deps flash-linear-attention==0.6.0 fla-core==0.6.0; unzip)."""
    if not (FLA_SOURCES / "fla" / "layers" / "kda.py").is_file():
        pytest.skip(f"no unpacked flash-linear-attention 0.6.0 under {FLA_SOURCES}")
    model = get_model(key, "H200", layers=2, checkpoint=True)
    wrong = []
    for s in dict.fromkeys(_cited(model)):
        if not s.file.startswith("fla/") or not s.quote or s.quote.endswith(")") and "..." in s.quote:
            continue
        line = (FLA_SOURCES / s.file).read_text().splitlines()[s.line - 1].strip()
        quote = s.quote.split("...")[0].rstrip()
        if not line.startswith(quote.replace('"', "'")) and not line.startswith(quote):
            wrong.append(f"{s.file}:{s.line} {s.quote!r} reads {line!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("key", ["fla-kda-layer@0.6.0", "fla-gdn-layer@0.6.0"])
def test_a_value_head_dim_above_512_is_refused_by_the_layers(key):
    """FusedRMSNormGated runs other (row) kernels above D = 512 (fused_norm_gate.py:482): not covered."""
    from livebytes.estimator.registry import check_shape
    check_shape(key, Shape(1, 8192, 4, 128, dim_v=512))
    with pytest.raises(RefusedShapeError, match="value head dims <= 512"):
        check_shape(key, Shape(1, 8192, 4, 128, dim_v=1024))


def test_at_short_sequences_the_bottom_layers_backward_is_the_peak():
    """16 layers at 512 tokens: every layer's parameter gradients (75.4 MiB) outweigh a layer's saved set (44.5 MiB),
    so the peak lies in the bottom layer's backward, which the stack declares step by step; at 1K the top layer's."""
    m = layer(16)
    assert predict(m, Shape(1, 512, 32, 128)).peak_step.name == "below1.kda.bwd.intra_db_sum"
    assert predict(m, Shape(1, 1024, 32, 128)).peak_step.name == "kda.bwd.intra_db_sum"
    assert not any("lower bound" in line for line in m.not_modelled)


def test_the_layers_kernel_autotunes_as_the_layer_calls_it():
    """safe_gate=False picks the token-parallel intra kernel (chunk_intra.py:869), state_v_first=True sets STATE_V_FIRST 1
    in four keys; the report contract's kernel model keeps the sub-chunk kernel and 0."""
    report = {(a.kernel, a.key) for a in fla_kda.build(contract="report").autotuned}
    mine = {(a.kernel, a.key) for a in layer().autotuned if a.step.startswith("kda.")}
    kernels = {k for k, _ in mine}
    assert "chunk_kda_fwd_kernel_intra_token_parallel" in kernels and "chunk_kda_fwd_kernel_intra_sub_chunk" not in kernels
    assert any(k == "chunk_gla_fwd_kernel_o" and key[2] == 1 for k, key in mine)
    assert any(k == "chunk_gla_fwd_kernel_o" and key[2] == 0 for k, key in report)


def _stack(module, layers, checkpoint):
    from livebytes.estimator.devices import get_device
    return module.build(device=get_device("H200"), layers=layers, checkpoint=checkpoint)


@pytest.mark.parametrize("checkpoint", [False, True], ids=["full", "checkpointed"])
@pytest.mark.parametrize("module,input_grad", [("kda", "g_proj.0.dinput"), ("gdn", "g_proj.dinput")])
def test_a_stack_is_its_one_layer_model_three_times(module, input_grad, checkpoint):
    """Three layers: 1 + 3 x (the one-layer model's steps - the inputs step); every buffer the layer allocates, once per
    layer (``below1.*``, ``below2.*``, the top's own names), a cached one once (layer 1 or the top's backward makes it);
    layer i's output lives until layer i+1's last backward step, its input gradient until layer i-1's first backward
    step (layer 1's is x.grad: to the end); the forward pass runs every layer's first pass before the backward pass."""
    from livebytes.lifetimes import fla_gdn_layer
    from livebytes.lifetimes.layer_stack import first_pass
    mod = fla_kda_layer if module == "kda" else fla_gdn_layer
    one, stack = _stack(mod, 1, checkpoint), _stack(mod, 3, checkpoint)
    assert len(stack.steps) == 1 + 3 * (len(one.steps) - 1)
    names = {b.name for b in stack.buffers}
    made = [b for b in one.buffers if b.allocated_at != "harness.inputs"]
    for b in made:
        copies = [n for n in (f"below1.{b.name}", f"below2.{b.name}", b.name) if n in names]
        assert len(copies) == (1 if b.cached else 3), (b.name, copies)
    buf = {b.name: b for b in stack.buffers}
    out = ("ckpt." if checkpoint else "") + "o_proj.out"
    last = one.steps[-1].name
    first_bwd = next(s.name for s in one.steps if s.phase == "backward")
    assert (buf[f"below1.{out}"].freed_after, buf[f"below2.{out}"].freed_after) == (f"below2.{last}", last)
    assert (buf[f"below1.{input_grad}"].freed_after, buf[f"below2.{input_grad}"].freed_after,
            buf[input_grad].freed_after) == (None, f"below1.{first_bwd}", f"below2.{first_bwd}")
    passes = first_pass(one, checkpoint)
    forward = [f"{p}{s.name}" for p in ("below1.", "below2.") for s in one.steps if s.name in passes]
    assert [s.name for s in stack.steps][1:1 + len(forward)] == forward


def test_a_first_pass_step_after_the_backward_began_is_refused():
    """first_pass is a prefix: a checkpointed layer's ``ckpt.`` step moved behind its recompute is refused, not
    silently run in the backward pass."""
    from types import SimpleNamespace

    from livebytes.lifetimes.layer_stack import first_pass
    one = _stack(fla_kda_layer, 1, True)
    steps = list(one.steps)
    i = next(k for k, s in enumerate(steps) if s.name.startswith("fwd.ckpt."))
    moved = SimpleNamespace(key=one.key, steps=tuple(steps[:i] + steps[i + 1:] + [steps[i]]))   # only its steps
    assert len(first_pass(one, True)) > 0
    with pytest.raises(ValueError, match="follow the backward's first step"):
        first_pass(moved, True)


@pytest.mark.parametrize("args, record", [
    # no layer flags: the layer's defaults (hidden 2048, one layer), as run 22f's record states them
    (["--impl", "fla-gdn-layer@0.6.0", "--heads", "16", "--v-heads", "32"], "fla-gdn-layer_0.6.0_1_8192_16_128_hv=32_hidden=2048_layers=1_"),
    (["--impl", "fla-kda-layer@0.6.0", "--heads", "32", "--hidden", "2304"], "fla-kda-layer_0.6.0_1_8192_32_128_hidden=2304_layers=1_2"),
])
def test_predict_quotes_a_layer_record_at_the_layers_defaults(args, record):
    import json

    from typer.testing import CliRunner

    from livebytes.cli.app import app
    r = json.loads(CliRunner().invoke(app, ["predict", "--seq", "8K", "--json", *args]).stdout)["results"][0]
    assert [m["record"][:len(record)] for m in r["measured"]] == [record]


@pytest.mark.parametrize("module", ["kda", "gdn"])
def test_a_layer_version_is_one_entry_of_its_table(module):
    """A version is data (lifetimes/fla_layer.py): an entry derived from a row with only ``version`` changed is registered
    under its own key and describes the same records, every step and buffer; the row's version is named once (the key,
    the implementation, what it covers and the first note all take it from the entry)."""
    from livebytes.lifetimes import fla_gdn_layer, fla_layer
    row = (fla_kda_layer if module == "kda" else fla_gdn_layer).LAYER
    example = row.derive(version="0.6.0+example")
    before, after = (fla_layer.build(r, layers=2, checkpoint=True) for r in (row, example))
    assert (after.key, after.version) == (f"fla-{module}-layer@0.6.0+example", "0.6.0+example")
    assert (after.steps, after.buffers, after.autotuned) == (before.steps, before.buffers, before.autotuned)
    assert after.implementation == f"FLA {row.cls} layer (flash-linear-attention 0.6.0+example)"
    assert example.covers.startswith(f"flash-linear-attention 0.6.0+example {row.cls} x L")
    assert after.notes[0].startswith(f"from flash-linear-attention 0.6.0+example fla/{row.file} and fla-core 0.6.0;")
    assert before.notes[0].startswith(f"from flash-linear-attention 0.6.0 fla/{row.file} and fla-core 0.6.0;")

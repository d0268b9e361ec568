"""ATen's leading-dim sum and its global-reduce staging (lifetimes/aten_reduce.py): setReduceConfig by hand at
the shapes the layer models sum, and where the buffers sit in the layer's timeline."""
import pytest

from livebytes.estimator.engine import evaluate
from livebytes.estimator.shapes import Shape
from livebytes.estimator import get_model
from livebytes.lifetimes import aten_reduce, fla_kda_layer

H200_SMS = 132
H200_THREADS = 2048    # maxThreadsPerMultiProcessor on compute capability 9.0


@pytest.mark.parametrize("rows, outputs, expected", [
    # block 32 x 4 (128 threads: 16 CTAs an SM, target grid 132 x 16 = 2112), vec 4, grid.x = outputs / 4 / 32;
    # values a thread = rows / 4 warps; CTAs an output = max(min(cdiv(2112, grid.x), cdiv(vpt, 16)), cdiv(vpt, 256))
    (8192, 4096, 4096 * 66 * 32 * 4),      # g_proj.1's bias at 8K: grid.x 32, vpt 2048, CTAs max(min(66, 128), 8) = 66
    (32768, 4096, 4096 * 66 * 32 * 4),     # at 32K: vpt 8192, max(min(66, 512), 32) = 66: the same 132 MiB
    (16384, 2048, 2048 * 132 * 32 * 4),    # 2 x 8K, H16: grid.x 16, vpt 4096, max(min(132, 256), 16) = 132
    (1024, 4096, 4096 * 16 * 32 * 4),      # the warmup's 1 x 1024: vpt 256, max(min(66, 16), 1) = 16: 32 MiB
    (256, 4096, 0),                        # kda_gate_bwd's dbias at 8K (NT = 8192 / 32): vpt 64 < 256, one CTA
    (3360, 16384, 16384 * 17 * 32 * 4),    # a conv's dw at 215,000 (NT 3360): grid.x 128, vpt 840, max(min(17, 53), 4)
    (132, 128, 0),                         # FusedRMSNormGated's [NS, V] partials: vpt 33
    # 4,097 outputs: vec 1 (4 and 2 do not divide it), block 32 x 16, grid.x cdiv(4097, 32) = 129, vpt 512,
    # CTAs max(min(cdiv(2112 // 4 ... = 4 CTAs an SM: 528 target, cdiv(528, 129) = 5), 32), 2) = 5
    (8192, 4097, 4097 * 5 * 32 * 1),
    (8192, 6, 0),                          # 6 outputs: vec 2, 3 columns; vpt 8192 / 128 = 64 < 256: one CTA
])
def test_staging_by_hand(rows, outputs, expected):
    assert aten_reduce.staging_elements(rows, outputs, H200_SMS, H200_THREADS) == expected


def test_semaphores_are_one_int_a_column_of_ctas_and_none_without_a_global_reduce():
    assert aten_reduce.semaphore_count(8192, 4096, H200_SMS, H200_THREADS) == 4096 // 4 // 32      # grid.x 32
    assert aten_reduce.semaphore_count(256, 4096, H200_SMS, H200_THREADS) == 0


def test_fewer_sms_split_into_fewer_ctas():
    """ctas_per_output follows the SM count (target grid = SMs x 16): 66 CTAs on 132 SMs, 33 on 66."""
    assert aten_reduce.staging_elements(8192, 4096, 66, H200_THREADS) * 2 == aten_reduce.staging_elements(8192, 4096, H200_SMS, H200_THREADS)


@pytest.mark.parametrize("threads, ctas", [
    # g_proj.1's bias at 8K on 128 SMs: block 32 x 4 (128 threads), grid.x 32, vpt 2048; blocks an SM = threads / 128,
    # CTAs an output = max(min(cdiv(128 x blocks, 32), cdiv(2048, 16) = 128), cdiv(2048, 256) = 8)
    (2048, 64),       # 16 blocks an SM: target grid 2048, cdiv(2048, 32) = 64
    (1536, 48),       # sm89 / sm120 (an RTX 4090's 128 SMs): 12 blocks an SM, target grid 1536, cdiv(1536, 32) = 48
])
def test_the_target_grid_follows_the_resident_threads_per_sm(threads, ctas):
    """setReduceConfig: blocks_per_sm = maxThreadsPerMultiProcessor / block threads; target grid = SMs x blocks_per_sm."""
    assert aten_reduce.staging_elements(8192, 4096, 128, threads) == 4096 * ctas * 32 * 4


def test_a_sum_to_one_value_is_refused():
    with pytest.raises(ValueError, match="fastest dim"):
        aten_reduce.leading_sum_config(8192, 1, H200_SMS, H200_THREADS)


def test_a_sum_to_one_value_stages_nothing_modelled():
    """The configuration refuses one output; the sizes count it as 0 bytes (ONE_OUTPUT_NOT_MODELLED says so)."""
    assert aten_reduce.staging_elements(32_768, 1, H200_SMS, H200_THREADS) == aten_reduce.semaphore_count(32_768, 1, H200_SMS, H200_THREADS) == 0


@pytest.mark.parametrize("tokens, expected", [
    # gdn_gate_bwd's [cdiv(T, 32), HV 32] fp32 partials: vec 4, dim0 8 -> block 8 x 16 (128 threads, target grid 2112),
    # grid.x 1; split over warps from 256 rows; CTAs from vpt = cdiv(rows, 16) >= 256, i.e. rows >= 4,081
    (8192, 0),                             # rows 256, vpt 16: one CTA
    (130_560, 0),                          # rows 4,080, vpt 255
    (130_561, 32 * 16 * 8 * 4 * 4),        # rows 4,081, vpt 256: CTAs max(min(2112, 16), 1) = 16: 65,536 B
    (1 << 20, 32 * 128 * 8 * 4 * 4),       # rows 32,768, vpt 2,048: max(min(2112, 128), 8) = 128: 524,288 B
])
def test_the_gdn_gate_gradients_sums_stage_from_130561_tokens(tokens, expected):
    """fla_gdn's layer call: dA.sum(0) and dbias.sum(0) (gate.py:229-230), each after its output and dying at its own
    step, the partial it sums alive beside it; the two stagings never overlap."""
    from livebytes.lifetimes import fla_gdn
    m = fla_gdn.build(layer_call=True, sms=H200_SMS, threads_per_sm=H200_THREADS)
    b = {x.name: x for x in m.buffers}
    shape = Shape(1, tokens, 16, 128, v_heads=32)
    for name, step, part in (("dA_log", "bwd.gate_dA_sum", "dA_log_part"), ("ddt_bias", "bwd.gate_dbias_sum", "dt_bias_part")):
        staging = b[f"{name}.reduce_staging"]
        assert evaluate(staging.nbytes, shape) == expected
        assert list(m.live_range(staging)) == [m.step_index(step)] and m.step_index(step) in m.live_range(b[part])
    assert evaluate(b["dA_log.reduce_semaphores"].nbytes, shape) == (4 if expected else 0)     # grid.x 1: one int32


def test_gdn_gate_sums_at_one_value_head_are_zero_and_said_so():
    """HV = 1 is a valid shape: [cdiv(T, 32), 1].sum(0) reduces to one value, a branch not modelled: 0 bytes, named."""
    from livebytes.lifetimes import fla_gdn
    m = fla_gdn.build(layer_call=True, sms=H200_SMS, threads_per_sm=H200_THREADS)
    staging = next(x for x in m.buffers if x.name == "dA_log.reduce_staging")
    assert evaluate(staging.nbytes, Shape(1, 1 << 20, 1, 128)) == 0
    assert any(n.startswith("HV = 1: ") and aten_reduce.ONE_OUTPUT_NOT_MODELLED in n for n in m.not_modelled)


def test_the_staging_follows_the_bias_gradient_and_dies_in_its_step():
    """gpu_reduce_kernel allocates after the sum's output and frees before it returns: the last allocations of
    g_proj.1's backward step, live at that step only."""
    m = fla_kda_layer.build(hidden=2304)
    step = "bwd.g_proj.1"
    made = [b.name for b in m.buffers if b.allocated_at == step]
    assert made[-2:] == ["g_proj.1.bias.grad.reduce_staging", "g_proj.1.bias.grad.reduce_semaphores"]
    assert made.index("g_proj.1.bias.grad") < made.index("g_proj.1.bias.grad.reduce_staging")
    staging = next(b for b in m.buffers if b.name == "g_proj.1.bias.grad.reduce_staging")
    assert list(m.live_range(staging)) == [m.step_index(step)]
    assert evaluate(staging.nbytes, Shape(1, 8192, 32, 128, hidden=2304)) == 138_412_032    # 132 MiB


@pytest.mark.parametrize("seq, heads, name, expected", [
    # kda_gate_bwd's dbias partials [cdiv(T, 32), H*K] fp32 summed over dim 0 (gate.py:320), H96 K128: 12,288 outputs,
    # grid.x = 12288 / 4 / 32 = 96, target grid 2112
    (8192, 96, "ddt_bias.reduce_staging", 0),                          # NT 256: 64 values a thread < 256, one CTA
    (32768, 96, "ddt_bias.reduce_staging", 12288 * 16 * 32 * 4 * 4),    # NT 1024: vpt 256, max(min(22, 16), 1) = 16 CTAs
    (32768, 96, "ddt_bias.reduce_semaphores", 96 * 4),                  # grid.x int32
    # dA partials [NT, H] fp32 (gate.py:319), H96: vec 4, block 24 -> 16 wide x 8 high (dim0 = 24 < 128: last_pow2 16)
    (32768, 96, "dA_log.reduce_staging", 0),                            # vpt = 1024 / 8 = 128 < 256, one CTA
])
def test_the_kda_gates_sums_stage_from_32k(seq, heads, name, expected):
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    (b,) = [b for b in model.buffers if b.name == name]
    assert evaluate(b.nbytes, Shape(1, seq, heads, 128)) == expected


def test_the_layers_kernel_sums_on_the_layers_device():
    """The layer passes its device to the chunk kernel inside: at 128K (NT 4,096, 1,024 values a thread) the gate's
    CTAs an output are cdiv(SMs x blocks an SM, grid.x 96), block 32 x 4: 16 blocks of 2048 resident threads, 22 on the
    H200's 132 SMs, 25 on the B300's 148 (cdiv(2,368, 96)); 12 blocks of 1536 on the RTX 4090's 128 SMs, cdiv(1,536, 96)
    = 16."""
    shape = Shape(1, 131072, 96, 128, hidden=2304)
    staging = {gpu: next(evaluate(b.nbytes, shape) for b in get_model("fla-kda-layer@0.6.0", gpu).buffers
                         if b.name == "kda.ddt_bias.reduce_staging") for gpu in ("H200", "B300", "RTX4090")}
    assert staging == {"H200": 12288 * 22 * 32 * 4 * 4, "B300": 12288 * 25 * 32 * 4 * 4, "RTX4090": 12288 * 16 * 32 * 4 * 4}


@pytest.mark.parametrize("rows, expected", [
    (262144, 262144),     # [262144, 4096] bf16: (2**30 - 1) x 2 = 2**31 - 2 <= INT32_MAX: one iterator
    (262145, 131073),     # one row more crosses: halved, the larger half ceil(262145 / 2)
    (453888, 226944),     # 1-layer plan answer: 453,888 x 4,096 x 2 B = 3.5 GiB, halved once
])
def test_a_sum_over_2_31_bytes_runs_halved_sub_iterators(rows, expected):
    assert aten_reduce.sub_iterator_rows(rows, 4096, 2) == expected


def test_many_rows_a_thread_split_into_more_ctas():
    """g_proj.1's bf16 bias gradient at plan's 4-layer answer 232,448 (1.9 GB: one iterator): vpt 232,448 / 4 =
    58,112, and cdiv(vpt, 256) = 227 CTAs wins over cdiv(2112, 32) = 66."""
    assert aten_reduce.staging_elements(232448, 4096, H200_SMS, H200_THREADS, 2) == 4096 * 227 * 32 * 4


def test_the_staging_above_2_31_bytes_is_the_largest_sub_iterators():
    """At 453,888 rows the sub-iterator has 226,944: vpt 56,736, CTAs cdiv(56736, 256) = 222 (not 444)."""
    assert aten_reduce.staging_elements(453888, 4096, H200_SMS, H200_THREADS, 2) == 4096 * 222 * 32 * 4


@pytest.mark.parametrize("in_elements, size, expected", [
    (262144 * 32 * 128, 2, 0),                       # GDN's dq at 262,144 tokens, HV32 K128: 2**30 bf16 fit
    (262145 * 32 * 128, 2, 262145 * 16 * 128),       # one token more: fp32 [T, H, K] accumulation, H16
    (262145 * 32 * 128, 4, 0),                       # fp32 in and out accumulates in the output
])
def test_a_bf16_sum_over_2_31_bytes_accumulates_in_fp32(in_elements, size, expected):
    assert aten_reduce.accumulation_elements(in_elements, in_elements // 2, size) == expected


def test_gdns_group_sums_hold_the_accumulation_beside_their_output():
    """fla-gdn@0.6.0, H16/HV32 K128 at 969,856 tokens (run 21's first plan, before this buffer): each of the three
    .sum(3) steps allocates 969,856 x 16 x 128 x 4 = 7,945,060,352 B after its output, freed in the step."""
    model = get_model("fla-gdn@0.6.0", "H200", gva=True)
    shape = Shape(1, 969856, 16, 128, 32)
    acc = {b.allocated_at: evaluate(b.nbytes, shape) for b in model.buffers if b.name.endswith("reduce_accumulation")}
    assert acc == dict.fromkeys(("bwd.dqkwg_sum_q", "bwd.dqkwg_sum_k", "bwd.wy_sum_k"), 969856 * 16 * 128 * 4)

"""Gated DeltaNet models (fla-core 0.6.0): hand arithmetic, the device-dependent dg tiles, refusals, run 20's records."""
from pathlib import Path

import pytest
from livebytes.estimator import Shape, get_model, predict
from livebytes.estimator.devices import Device, get_device
from livebytes.estimator.errors import RefusedShapeError
from livebytes.estimator.registry import check_shape, shape_options
from livebytes.lifetimes import fla_gdn

MiB = 2**20
QWEN_LIKE = Shape(1, 8192, 16, 128, v_heads=32)     # T 8192, H 16, HV 32, K = V = 128, NT 128


def test_forward_peak_by_hand():
    # at fwd.output, in MiB: inputs q, k 32 + 32, v 64, g 1, beta 0.5 = 129.5;
    # saved q/k normed 32 + 32, rstd 0.5 + 0.5, g cumsum 1, A [T, HV, 64] bf16 32 = 98;
    # forward w 64, u 64, h [128, 32, 128, 128] bf16 128, v_new 64, o 64 = 384.  611.5 MiB, plus 512-byte
    # blocks: cu_seqlens 512, chunk_indices [128, 2] int64 2048, seq_lens 512, chunk_offsets 512 = 3584 B
    p = predict(get_model("fla-gdn-fwd@0.6.0", gva=True), QWEN_LIKE)
    assert p.peak_bytes == int(611.5 * MiB) + 3584 and p.peak_step.name == "fwd.output"


def test_training_peaks_above_inference():
    opts = shape_options("fla-gdn@0.6.0", QWEN_LIKE)
    train = predict(get_model("fla-gdn@0.6.0", **opts), QWEN_LIKE).peak_bytes
    infer = predict(get_model("fla-gdn-fwd@0.6.0", **opts), QWEN_LIKE).peak_bytes
    assert train > infer


# a device no preset is: Ada's 99 KB of shared memory per block (CUDA C++ Programming Guide, compute capability 8.9)
ADA = Device("L40S", "sm89", 142, 48 * 2**30, "test device", shared_memory_per_block_optin=101_376,
             max_threads_per_sm=1536, process_memory="H200")


@pytest.mark.parametrize("device,dim,tiles", [
    (get_device("H200"), 128, 1),   # CONST_TILING 128: cdiv(128, 128)
    (get_device("H200"), 256, 2),   # cdiv(256, 128)
    (get_device("B300"), 256, 2),   # sm100: 227 KB per block, the hopper class
    (ADA, 128, 2),                  # Ada's class: CONST_TILING 64, cdiv(128, 64)
])
def test_dg_tiles_follow_the_shared_memory_class(device, dim, tiles):
    model = fla_gdn.build(device=device, gva=True)
    shape = Shape(1, 1024, 2, dim, v_heads=4)
    p = predict(model, shape)
    dg = dict(zip((b.name for b in model.buffers), p.buffer_bytes))["dg_tiles"]
    assert dg == tiles * 1024 * 4 * 4          # [NK, T, HV] fp32 (multiples of 512 already)


@pytest.mark.parametrize("smem,tiling", [
    (232_448, 128),     # the Hopper class (SMEM_HOPPER and up)
    (166_912, 128),     # the Ampere class: 128 as every input is bf16
    (101_376, 64),      # Ada's class
    (49_152, 32),       # below every class
])
def test_dqkwg_tiling_follows_the_devices_shared_memory(smem, tiling):
    """chunk_o.py:741-749 on the device's own figure (Device.shared_memory_per_block_optin), not its architecture."""
    assert fla_gdn.dqkwg_const_tiling(smem) == tiling


def test_key_dim_above_256_is_refused_with_the_library_reason():
    with pytest.raises(RefusedShapeError, match="256"):
        check_shape("fla-gdn@0.6.0", Shape(1, 1024, 2, 512))


def test_backward_is_labelled_with_what_runs_20_to_22_measured_and_what_they_did_not():
    """Measured with Triton 3.9.0 at D128 (run 20's three H16/HV32 records, run 21's two H32 and the boundary) and D64
    (run 22's two H16/HV32 and the process memory); other head dims not."""
    m = get_model("fla-gdn@0.6.0")
    assert "not measured" not in m.summary and "Triton 3.9.0 at D128 and D64" in m.summary, m.summary
    assert any("#640" in n for n in m.notes) and any("run 20" in n and "1 x 32K" in n for n in m.notes)
    assert any("run 21" in n and "equal heads" in n and "895,488" in n for n in m.notes)
    assert any("run 22" in n and "D64" in n and "678,232,064" in n for n in m.notes)
    assert any(n.startswith("not measured: head dims other than 64 and 128") for n in m.notes)
    assert not any("not measured: equal heads" in n or "the out-of-memory boundary" in n for n in m.notes)


RUN20 = sorted((Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "runs" / "run20").glob("fla-gdn_*.json"))


@pytest.mark.parametrize("path", RUN20, ids=lambda p: p.stem)
def test_run_20s_records_ran_the_backward_under_a_triton_fla_core_accepts_on_hopper(path):
    """fla-core 0.6.0 raises in chunk_bwd_dqkwg on Hopper with Triton >= 3.4.0 and < 3.7.1 (chunk_o.py:727): each
    fwd+bwd record ran 3.9.0, at the Qwen3-Next layout the notes name."""
    from livebytes.validate.check.records import load_file
    (r,) = load_file(path)
    assert (r.impl, r.data["triton"], r.gpu) == ("fla-gdn@0.6.0", "3.9.0", "H200") and not r.forward_only
    assert (r.shape.heads, r.shape.hv, r.shape.dim) == (16, 32, 128)


def test_run_20s_8k_peak_by_hand():
    """1 x 8K H16/HV32 D128 (run 20's first record): the peak is at bwd.wy_sum_k. In MiB, [T, H, K] bf16 = 32: q, k,
    q_normed, k_normed, dq_pre, dk_pre, dk2 (7 x 32); A [T, HV, 64] bf16 = 32; [T, HV, 128] bf16 = 64: v, dO, o, w, u,
    v_new, dv_dhu, dw, dk2_full, dv (10 x 64); h and dh [NT 128, HV, K, V] bf16 = 128 each; [T, HV] fp32 = 1: g, g_cumsum,
    dg_sum, dg2; 0.5: beta, q_rstd, k_rstd, db; plus cu_seqlens, seq_lens, chunk_offsets (512 B blocks) and
    chunk_indices (2,048 B). The record's measured figure is the replay's to the byte."""
    from livebytes.validate.check.compare import compare
    from livebytes.validate.check.records import load_file
    (r,) = load_file(next(p for p in RUN20 if "_1_8192_" in p.name))
    p = predict(get_model("fla-gdn@0.6.0", gva=True), QWEN_LIKE)
    mib = 7 * 32 + 32 + 10 * 64 + 2 * 128 + 4 * 1 + 4 * 0.5            # 1,158 MiB
    assert p.peak_step.name == "bwd.wy_sum_k" and p.peak_bytes == int(mib * MiB) + 3 * 512 + 2048
    checked = compare(r)
    assert checked.error_bytes == 0 and checked.requested_error == 0


KERNELS_20 = Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "runs" / "run20" / "kernels_20.tgz"


def test_dhus_config_that_never_loads_is_in_run_20s_cold_kernel_list():
    """Under Triton 3.9.0 at K = V = 128, dhu compiled 12 configs in run 20's cold process and loaded 11: the missing
    one (num_warps 4, num_stages 4, BV 64) fails to launch, which is what ``held_until_gc`` rests on."""
    import json
    import tarfile
    with tarfile.open(KERNELS_20) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("_cold.kernels.jsonl"))
        events = [json.loads(line) for line in tar.extractfile(member).read().decode().splitlines()]
    dhu = "chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64"
    compiled = {e["hash"]: e for e in events if e["event"] == "compile" and e["fn"] == dhu}
    loaded = {e["hash"] for e in events if e["event"] == "load" and e["name"] == dhu}
    never = [(e["num_warps"], e["num_stages"], e["constexprs"]["BV"]) for h, e in compiled.items() if h not in loaded]
    assert (len(compiled), len(loaded), never) == (12, 11, [(4, 4, 64)])


@pytest.mark.parametrize("device,dim,held", [
    (get_device("H200"), 128, True),    # measured: a config fails (run 20's kernel list; run 21c's probe)
    (get_device("H200"), 64, False),    # assumed to fit below K = 128, as KDA's variant
    (get_device("B300"), 128, False),   # off Hopper: not measured, none assumed
])
def test_dhu_holds_dv_local_until_the_next_compile_on_hopper_at_k128(device, dim, held):
    from livebytes.estimator.autotune import held_until_gc
    shape = Shape(1, 8192, 16, dim, v_heads=32)
    model = get_model("fla-gdn@0.6.0", device.name, gva=True)
    expected = {"bwd.dhu": ("dv_local",)} if held else {}
    assert held_until_gc(model, shape, ("bwd.dhu", "bwd.dqkwg")) == expected

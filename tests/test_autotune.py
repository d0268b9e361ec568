"""The declared autotune keys against what Triton tuned on the H200: the committed capture
(validate/data/autotune_configs/NVIDIA_H200_fla-0.6.0_triton-3.6.0.json, runs 7a/8, report contract, recompute on)
holds every key a cold process benchmarked, with the tensor arguments' dtypes Triton appends."""
import json
from pathlib import Path

import pytest
from livebytes.estimator import Shape, get_model
from livebytes.estimator.autotune import benchmarking_steps, tuning_keys

CAPTURE = Path(__file__).resolve().parents[1] / "validate" / "data" / "autotune_configs" / "NVIDIA_H200_fla-0.6.0_triton-3.6.0.json"
T_DEPENDENT = {"l2norm_fwd_kernel", "l2norm_bwd_kernel"}


def captured() -> dict[str, list[list]]:
    entries = json.loads(CAPTURE.read_text())["fla_configs"]
    return {k: [e["autotune_key"] for e in v["autotune_entries"].values()] for k, v in entries.items()}


def values(key: list) -> tuple:
    """The key=[...] values of a Triton key (flags as numbers), without the dtypes Triton appends."""
    return tuple(int(x) for x in key if not (isinstance(x, str) and x.startswith("torch.")))


def test_every_kernel_the_h200_tuned_is_declared_with_its_keys():
    """The fused inter/solve kernel's key starts H, HV, K: the capture's (H, HV) pairs at K = V = 128 are the shapes
    its runs tuned. At those shapes the report model's keys, T-independent ones, are exactly the captured ones."""
    cap = captured()
    pairs = sorted({values(k)[:2] for k in cap["chunk_kda_fwd_kernel_inter_solve_fused"]})
    assert (16, 64) in pairs and (96, 96) in pairs and len(pairs) == 7   # GVA and plain head counts both tuned
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    declared = {(kernel, key[:-1] if isinstance(key[-1], str) else key)
                for h, hv in pairs for kernel, key in tuning_keys(model, Shape(1, 1024, h, 128, v_heads=hv))
                if kernel not in T_DEPENDENT}
    measured = {(kernel, values(k)) for kernel, keys in cap.items() if kernel not in T_DEPENDENT for k in keys}
    assert declared == measured


def test_recompute_w_u_tunes_twice_per_shape():
    """recompute_w_u_fwd_kda_kernel: the forward passes q=None, the backward's recompute q: two dtype lists per key
    (10 and 12 tensors), so two benchmarks; the model tells them apart by signature."""
    cap = captured()["recompute_w_u_fwd_kda_kernel"]
    dtypes = {sum(isinstance(x, str) for x in k) for k in cap}
    assert dtypes == {10, 12} and len(cap) == 2 * len({values(k) for k in cap})
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    keys = [key for kernel, key in tuning_keys(model, Shape(1, 1024, 96)) if kernel == "recompute_w_u_fwd_kda_kernel"]
    assert [k[-1] for k in keys] == ["q=None, qg=None", "q, qg"] and keys[0][:-1] == keys[1][:-1]


@pytest.mark.parametrize("key, options, tuned_steps", [
    # report: 19 launches; l2norm fwd/bwd, gate cumsum, fwd_h each repeat a key: 15 benchmarks (fwd.intra has 2)
    ("fla-kda@0.6.0", {"contract": "report"}, 15),
    ("fla-kda@0.6.0", {"contract": "plain"}, 12),          # no l2norm, no gate: 15 - 2 - 1 (gate_bwd)
    ("fla-kda@0.6.0", {"contract": "report", "recompute": False}, 14),   # no backward recompute: one w_u variant
    ("fla-kda-fwd@0.6.0", {}, 7),
    ("fla-gdn@0.6.0", {}, 12),
    ("fla-gdn-fwd@0.6.0", {}, 6),
])
def test_a_cold_first_call_benchmarks_each_new_key_once(key, options, tuned_steps):
    model = get_model(key, "H200", **options)
    steps, tuned = benchmarking_steps(model, Shape(1, 1024, 32), frozenset())
    assert len(steps) == len(tuned) == tuned_steps
    assert benchmarking_steps(model, Shape(2, 512, 32), tuned)[0] == ()       # the same T = 1024 as two sequences: tuned
    later = benchmarking_steps(model, Shape(1, 100_000, 32), tuned)[0]         # 3.2M rows: NB 49, l2norm only
    l2norm = any(a.kernel.startswith("l2norm") for a in model.autotuned)       # report contract and GDN
    assert later == (("fwd.l2norm_q",) + (() if key.endswith("-fwd@0.6.0") else ("bwd.l2norm_q",)) if l2norm else ())


def test_gdn_wy_tile_follows_shared_memory():
    """prepare_wy_repr_bwd: CONST_TILING 64 from 102,400 B of shared memory per block, else 32: Hopper's 232,448,
    Ampere's (8.0) 166,912, Ada's 101,376 (CUDA C++ Programming Guide, per compute capability); the H200 preset's."""
    from livebytes.estimator.devices import get_device
    from livebytes.lifetimes.fla_gdn import wy_bwd_const_tiling
    assert (wy_bwd_const_tiling(232_448), wy_bwd_const_tiling(166_912), wy_bwd_const_tiling(101_376)) == (64, 64, 32)
    assert wy_bwd_const_tiling(get_device("H200").shared_memory_per_block_optin) == 64


def failing_configs() -> dict[str, int]:
    """Kernel -> configs whose benchmark failed (timings inf: OutOfResources) in the H200 capture (K = V = 128)."""
    files = json.loads(CAPTURE.read_text())["triton_files"]
    out: dict[str, int] = {}
    for path, content in files.items():
        timings = content["configs_timings"]
        kernel = path.rsplit("/", 1)[-1].removesuffix(".autotune.json")
        out[kernel] = max(out.get(kernel, 0), sum(1 for _, t in timings if t[0] == float("inf")))
    return out


def test_only_the_kernel_declared_with_held_arguments_has_failing_configs_on_the_h200():
    """held_until_gc rests on measured failures: bwd_dhu's 2 of 12 configs (inf), and no other kernel's."""
    failing = {k for k, n in failing_configs().items() if n}
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    assert failing == {a.kernel for a in model.autotuned if a.held_until_gc} == {"chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64"}
    assert failing_configs()["chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64"] == 2


@pytest.mark.parametrize("dim,held", [(128, {"bwd.dhu": ("dv_dAv",)}), (64, {})])
def test_held_arguments_apply_where_configs_fail(dim, held):
    from livebytes.estimator.autotune import held_until_gc
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    shape = Shape(1, 1024, 96, dim)
    steps, _ = benchmarking_steps(model, shape, frozenset())
    assert held_until_gc(model, shape, steps) == held
    assert held_until_gc(model, shape, ()) == {}          # warm: nothing benchmarks, nothing is held


def test_a_held_argument_must_be_freed_at_its_step():
    import dataclasses
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    wrong = tuple(dataclasses.replace(a, held_until_gc=("dh",)) if a.held_until_gc else a for a in model.autotuned)
    with pytest.raises(ValueError, match="not buffers freed at bwd.dhu"):
        dataclasses.replace(model, autotuned=wrong)


@pytest.mark.parametrize("contract", ["plain", "report"])
def test_the_committed_file_holds_a_tuning_of_every_kernel_each_contract_launches(contract):
    """A warm run must not benchmark (it would be recorded cold): the merge keeps what earlier captures held
    (the plain contract's token-parallel intra kernel came from run 6, the report groups from runs 7a and 8)."""
    files = json.loads(CAPTURE.read_text())["triton_files"]
    tuned = {path.rsplit("/", 1)[-1].removesuffix(".autotune.json") for path in files}
    model = get_model("fla-kda@0.6.0", "H200", contract=contract)
    assert {a.kernel for a in model.autotuned} <= tuned


def test_merging_into_the_committed_file_keeps_its_entries(tmp_path):
    from livebytes.validate.gpu.autotune import main
    committed = json.loads(CAPTURE.read_text())
    (tmp_path / CAPTURE.name).write_text(json.dumps(committed))
    one = dict(committed, triton_files={"new/key/x.autotune.json": {"configs_timings": []}}, fla_configs={})
    (tmp_path / "capture.json").write_text(json.dumps(one))
    assert main([str(tmp_path / "capture.json"), "--into", str(tmp_path)]) == 0
    merged = json.loads((tmp_path / CAPTURE.name).read_text())
    assert set(merged["triton_files"]) == set(committed["triton_files"]) | {"new/key/x.autotune.json"}

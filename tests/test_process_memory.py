"""What the non-PyTorch memory of an FLA process that autotuned is made of, re-checked from the committed
H200 records (validate/records/boundary/h200_run6a_*_cold_values.jsonl).

The driver reserves local memory for every thread that can be resident, sized by the per-thread stack
limit (cudaLimitStackSize); launching a kernel that needs more local memory than the limit raises the
limit, and the reservation stays. Autotuning launches every candidate config, including ones that spill
registers, so a cold process keeps the largest candidate's stack for the rest of its life."""
import json
from pathlib import Path

import pytest

from livebytes.estimator.devices import get_device

BOUNDARY = Path(__file__).resolve().parents[1] / "validate" / "records" / "boundary"
THREADS_PER_SM = 2048     # sm90: maximum resident threads per multiprocessor (CUDA occupancy limits)
MIB = 2**20


def stages(name: str) -> dict:
    return {d["stage"]: d for d in map(json.loads, (BOUNDARY / name).read_text().splitlines())}


@pytest.mark.parametrize("name", ["h200_run6a_fla-kda-plain_H96_default_cold_values.jsonl"])
def test_the_cold_residue_is_the_stack_reservation(name):
    s = stages(name)
    before, after = s["context"]["stack_limit_bytes"], s["warmup_1x1024"]["stack_limit_bytes"]
    assert (before, after) == (1024, 14464)            # autotuning raised the per-thread stack limit
    reset = s["reset_stack"]
    assert reset["ok"] and reset["stack_limit_bytes"] == 1024
    freed = reset["nonpytorch_before_bytes"] - reset["nonpytorch_bytes"]      # 4,291,624,960 - 657,260,544
    reservation = (after - before) * get_device("H200").sm_count * THREADS_PER_SM   # 13,440 x 132 x 2,048
    assert reservation == 3_633_315_840
    assert freed == 3_634_364_416
    assert 0 <= freed - reservation <= 2 * MIB         # the driver maps it in 2 MiB pages


def test_a_warm_process_keeps_a_small_stack():
    """Loaded from the autotune cache, only the chosen configs run: the limit grows to 1,440 B, not 14,464."""
    s = stages("h200_run6a_fla-kda-plain_H96_default_warm_values.jsonl")
    assert s["warmup_1x1024"]["stack_limit_bytes"] == 1440
    cold = stages("h200_run6a_fla-kda-plain_H96_default_cold_values.jsonl")
    warm_extra = s["warmup_1x1024"]["nonpytorch_after_bytes"] - s["context"]["nonpytorch_bytes"]   # 211,812,352
    cold_extra = cold["warmup_1x1024"]["nonpytorch_after_bytes"] - cold["context"]["nonpytorch_bytes"]
    assert warm_extra < cold_extra - 3_000_000_000


RUNS = Path(__file__).resolve().parents[1] / "validate" / "records" / "runs"
AUTOTUNE = Path(__file__).resolve().parents[1] / "validate" / "autotune_configs" / "NVIDIA_H200_fla-0.6.0_triton-3.6.0.json"


def cubins(contract: str) -> list[dict]:
    """Run 12's ``cuobjdump -res-usage`` of every compiled candidate in a cold process's Triton cache."""
    rows = map(json.loads, (RUNS / "run12" / "cubin_usage.jsonl").read_text().splitlines())
    return [r for r in rows if f"fla-{contract}_seq_False_cold_answer" in r["folder"]]


def stack_limit(per_thread_stack: int) -> int:
    """The driver raises cudaLimitStackSize to the kernel's stack frame, in 16-byte units (14,456 -> 14,464)."""
    return 16 * -(-per_thread_stack // 16)


@pytest.mark.parametrize("contract", ["plain", "report"])
def test_the_cold_limit_is_the_most_spilling_candidate(contract):
    """14,464 B: chunk_kda_bwd_kernel_wy_dqkg_fused's 2-warp candidate with a 14,456-byte stack frame, the largest of
    every candidate either contract compiles (run 12, both cold processes at the shape measured 14,464)."""
    top = max(cubins(contract), key=lambda r: r["STACK"])
    assert (top["name"], top["num_warps"], top["STACK"]) == ("chunk_kda_bwd_kernel_wy_dqkg_fused", 2, 14_456)
    assert stack_limit(top["STACK"]) == 14_464 == stages(f"h200_run12_fla-kda-{contract}_H96_default_cold_firstcall_answer.jsonl"
                                                         )["value"]["first_call"]["stack_limit_bytes"]


def test_the_warm_limit_is_the_chosen_wy_dqkg_config():
    """Warm, only the tuned configs launch. At H96 wy_dqkg's best is BK 64, BV 64, 4 warps, 3 stages (the committed
    tuning); of its two 4-warp 3-stage cubins the BV-64 one has the smaller shared memory (49,152 B) and a 1,440-byte
    stack: the limit both warm contracts measured (run 6a plain, run 12b report)."""
    tunings = json.loads(AUTOTUNE.read_text())["triton_files"]
    tuning = next(v for k, v in tunings.items() if "wy_dqkg" in k and v["key"][1] == 96)
    best = min(tuning["configs_timings"], key=lambda ct: ct[1])[0]
    assert (best["kwargs"], best["num_warps"], best["num_stages"]) == ({"BK": 64, "BV": 64}, 4, 3)
    same = sorted((r["shared"], r["STACK"]) for r in cubins("report")
                  if r["name"] == "chunk_kda_bwd_kernel_wy_dqkg_fused" and (r["num_warps"], r["num_stages"]) == (4, 3))
    assert same == [(49_152, 1_440), (90_240, 2_000)]
    assert stack_limit(same[0][1]) == 1_440
    report = stages("h200_run12b_fla-kda-report_H96_default_warm_values.jsonl")
    assert report["warmup_1x1024"]["stack_limit_bytes"] == 1_440


def test_a_mis_keyed_warm_process_keeps_l2norm_bwds_largest_candidate():
    """Run 12's "warm" report processes benchmarked l2norm_bwd_kernel (a key missing on disk): the limit rose to
    5,552 B, that kernel's most-spilling candidate (1 warp, a 5,544-byte frame), 1,111,490,560 B more outside PyTorch
    than the warm process, which is the (5,552 - 1,440) x 132 x 2,048 = 1,111,621,632 B reservation within 1 MiB."""
    top = max((r for r in cubins("report") if r["name"] == "l2norm_bwd_kernel"), key=lambda r: r["STACK"])
    assert (top["num_warps"], top["STACK"], stack_limit(top["STACK"])) == (1, 5_544, 5_552)
    mis = {d["stage"]: d for d in map(json.loads, (RUNS / "run12" / "fla-kda-report_H96_default_l2norm-bwd-untuned_values.jsonl"
                                                   ).read_text().splitlines())}
    warm = stages("h200_run12b_fla-kda-report_H96_expandable_warm_values.jsonl")
    assert mis["warmup_1x1024"]["stack_limit_bytes"] == 5_552
    extra = mis["warmup_1x1024"]["nonpytorch_after_bytes"] - warm["warmup_1x1024"]["nonpytorch_after_bytes"]
    reservation = (5_552 - 1_440) * get_device("H200").sm_count * THREADS_PER_SM
    assert extra == 1_111_490_560 and abs(extra - reservation) <= MIB

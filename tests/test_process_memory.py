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


def test_the_warm_limit_is_wy_dqkgs_smallest_frame():
    """Warm, only the tuned configs launch. Every wy_dqkg candidate has a stack frame of at least 1,440 B, and every
    other kernel's candidates at most 928 B (l2norm_bwd's spilling ones aside, which its tuned config is not: a warm
    report process measured 1,440). So a warm process's limit is the tuned wy_dqkg config's frame, 1,440 B, as both
    contracts measured (run 6a plain, run 12b report). Which config that is (BK 64, BV 64, 4 warps, 3 stages at H96 in
    the committed tuning) cuobjdump's listing cannot say: it holds no constexprs; of the two 4-warp 3-stage cubins the
    one with 1,440 B has the smaller shared memory, as BV 64 would."""
    rows = cubins("report")
    wy = [r["STACK"] for r in rows if r["name"] == "chunk_kda_bwd_kernel_wy_dqkg_fused"]
    others = [r["STACK"] for r in rows if r["name"] not in ("chunk_kda_bwd_kernel_wy_dqkg_fused", "l2norm_bwd_kernel")]
    assert min(wy) == 1_440 and max(others) == 928
    report = stages("h200_run12b_fla-kda-report_H96_default_warm_values.jsonl")
    plain = stages("h200_run6a_fla-kda-plain_H96_default_warm_values.jsonl")
    assert report["warmup_1x1024"]["stack_limit_bytes"] == plain["warmup_1x1024"]["stack_limit_bytes"] == 1_440


def test_a_mis_keyed_warm_process_keeps_l2norm_bwds_largest_candidate():
    """Run 12's "warm" report processes benchmarked l2norm_bwd_kernel (a key missing on disk): the limit rose to
    5,552 B, that kernel's most-spilling candidate (1 warp, a 5,544-byte frame). Above its CUDA context it held
    1,323,302,912 B, every warm process (plain run 6a, report run 12b on either GPU) 211,812,352 B: 1,111,490,560 B
    more, where the reservation grew by (5,552 - 1,440) x 132 x 2,048 = 1,111,621,632 B. The 131,072 B it holds less
    than that is not explained (the driver's bookkeeping of local memory is not modelled; the cold reset released
    the product plus 1 MiB)."""
    top = max((r for r in cubins("report") if r["name"] == "l2norm_bwd_kernel"), key=lambda r: r["STACK"])
    assert (top["num_warps"], top["STACK"], stack_limit(top["STACK"])) == (1, 5_544, 5_552)

    def above_context(d: dict) -> int:
        return d["warmup_1x1024"]["nonpytorch_after_bytes"] - d["context"]["nonpytorch_bytes"]
    mis = {d["stage"]: d for d in map(json.loads, (RUNS / "run12" / "fla-kda-report_H96_default_l2norm-bwd-untuned_values.jsonl"
                                                   ).read_text().splitlines())}
    warm = [stages(f"h200_run12b_fla-kda-report_H96_{conf}_warm_values.jsonl") for conf in ("default", "expandable")]
    warm.append(stages("h200_run6a_fla-kda-plain_H96_default_warm_values.jsonl"))
    assert mis["warmup_1x1024"]["stack_limit_bytes"] == 5_552
    assert {above_context(w) for w in warm} == {211_812_352} and above_context(mis) == 1_323_302_912
    reservation = (5_552 - 1_440) * get_device("H200").sm_count * THREADS_PER_SM
    assert (above_context(mis) - 211_812_352, reservation) == (1_111_490_560, 1_111_621_632)

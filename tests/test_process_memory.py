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

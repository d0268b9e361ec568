"""The out-of-memory boundary: allocator rules by hand, reserved bytes against the records, the known H200
outcomes, the boundary plan and records, the planner's speed, the CLI keys and the generated doc tables."""
import json
import math
import time
from pathlib import Path

import pytest
from livebytes.cli.app import app
from livebytes.cli.capacity_doc import regenerate
from livebytes.estimator import Shape, get_model, rounding
from livebytes.estimator import allocator as A
from livebytes.estimator.allocator import (
    AllocatorConf,
    AllocatorOutOfMemory,
    CachingAllocator,
    expandable_address_space,
    parse_alloc_conf,
)
from livebytes.estimator.capacity import process_memory, verdict
from livebytes.estimator.devices import get_device
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.planning import largest_running
from livebytes.estimator.replay import replay
from livebytes.validate.gpu import boundary
from livebytes.validate.check import protocol
from livebytes.validate.check.compare import earlier_shapes, model_at, model_of
from livebytes.validate.check.records import load_records
from livebytes.process_words import assumptions_words
from typer.testing import CliRunner

MiB, GiB = 2**20, 2**30
H200 = get_device("H200")
ROOT = Path(__file__).parent.parent


def gib2(nbytes: int) -> str:
    """PyTorch's format_size for >= 1 GiB: two decimals of GiB."""
    return f"{nbytes / GiB:.2f}"


# ------------------------------------------------------------------------------ allocator rules by hand

def test_rounding_rule_lives_apart_from_the_simulator():
    assert A.round_size is rounding.round_size and rounding.round_size(1) == 512 and rounding.round_size(513) == 1024


@pytest.mark.parametrize("text,expandable", [(None, False), ("", False), ("expandable_segments:True", True),
                                             ("expandable_segments:False", False)])
def test_alloc_conf_parses_pytorch_syntax(text, expandable):
    assert parse_alloc_conf(text).expandable_segments is expandable


@pytest.mark.parametrize("text", ["max_split_size_mb:128", "expandable_segments:yes", "roundup_power2_divisions:4"])
def test_alloc_conf_refuses_what_is_not_modelled(text):
    with pytest.raises(LivebytesError):
        parse_alloc_conf(text)


def test_release_cached_blocks_and_retry_then_out_of_memory():
    """capacity 100 MiB: 50 + 40 MiB segments; the 40 is freed (cached); 44 MiB cannot be cudaMalloc'd
    (90 + 44 > 100), release_cached_blocks gives the free 40 MiB segment back and the retry succeeds
    (reserved 50 + 44 = 94); then 10 MiB: 94 + 10 > 100 with nothing to release -> OOM, free 6 MiB."""
    alloc = CachingAllocator(capacity_bytes=100 * MiB)
    alloc.malloc(50 * MiB)
    alloc.free(alloc.malloc(40 * MiB))
    assert alloc.reserved == 90 * MiB
    alloc.malloc(44 * MiB)
    assert alloc.reserved == 94 * MiB and alloc.peak_reserved == 94 * MiB
    with pytest.raises(AllocatorOutOfMemory) as err:
        alloc.malloc(10 * MiB)
    oom = err.value.oom
    assert (oom.tried_bytes, oom.allocated_bytes, oom.reserved_bytes, oom.free_bytes) == (10 * MiB, 94 * MiB, 94 * MiB, 6 * MiB)


def test_tried_bytes_is_the_segment_size():
    """A 3 MiB request asks cudaMalloc for a 20 MiB segment (get_allocation_size); 10 MiB + 1 B rounds to 10 MiB + 512
    then to 12 MiB (2 MiB multiples)."""
    assert A.segment_size(3 * MiB) == 20 * MiB and A.segment_size(rounding.round_size(10 * MiB + 1)) == 12 * MiB
    with pytest.raises(AllocatorOutOfMemory) as err:
        CachingAllocator(capacity_bytes=10 * MiB).malloc(3 * MiB)
    assert err.value.oom.tried_bytes == 20 * MiB and err.value.oom.request_bytes == 3 * MiB


def test_expandable_segments_map_pages_and_unmap_them():
    """5 MiB maps one 20 MiB page (15 MiB left free, next to unmapped space); 30 MiB extends that free block by one
    more page: 40 MiB reserved, where separate segments take 20 + 30 = 50 MiB. empty_cache unmaps it all."""
    es = CachingAllocator(AllocatorConf(True))
    a, b = es.malloc(5 * MiB), es.malloc(30 * MiB)
    assert es.reserved == 40 * MiB and es.allocated == 35 * MiB
    plain = CachingAllocator()
    plain.malloc(5 * MiB), plain.malloc(30 * MiB)
    assert plain.reserved == 50 * MiB
    es.free(a), es.free(b)
    es.empty_cache()
    assert es.reserved == 0 and es.peak_reserved == 40 * MiB


def test_expandable_oom_unmaps_free_pages_before_giving_up():
    """capacity 60 MiB: 20 MiB allocated and 20 MiB freed (two pages mapped); 30 MiB more needs 2 pages:
    40 + 40 > 60 fails, release unmaps the free page, 20 + 40 <= 60 maps. Without expandable segments the
    same sequence holds two 20 MiB segments and the retry frees the free one: the same 20 + 30 MiB."""
    es = CachingAllocator(AllocatorConf(True), capacity_bytes=60 * MiB)
    es.malloc(20 * MiB)
    es.free(es.malloc(20 * MiB))
    es.malloc(30 * MiB)
    assert es.reserved == 20 * MiB + 40 * MiB and es.allocated == 50 * MiB


# ------------------------------------------------------------------------------ replay speed

def test_replay_compiles_once_and_takes_under_5_ms():
    model = get_model("fla-kda@0.6.0")
    replay(model, Shape(1, 8192, 96))
    t0 = time.perf_counter()
    for s in range(20):
        replay(model, Shape(1, 8192 + 64 * s, 96))
    assert (time.perf_counter() - t0) / 20 < 0.005


# ------------------------------------------------------------------------------ reserved against the records

CONTROLLED = [r for r in load_records() if r.origin == "measured" and not r.oom and not r.history_dependent]
def rid(r):
    return f"{r.path.stem}:{r.impl}:{r.options.get('contract', '')}:{r.shape.label()}"


def protocol_replay(r):
    """The record's process: the protocol's history (warmup and earlier shapes' leftovers), then this shape."""
    return protocol.protocol_replay(model_of(r), r.shape, protocol.version_of(r.protocol), earlier_shapes(r),
                                    r.total_memory, r.data.get("triton_cache"), model_at(r))[0]


def protocol_verdict(model, shape, *args):
    """The validator's process: its warmup at MBS 1 x 1024 came first (and autotuned, when cold)."""
    return verdict(model, shape, H200, *args, prelude=protocol.prelude(model, shape), protocol=True,
                   tuned_at_tokens=protocol.WARMUP_TOKENS)


# Run 16's KimiDeltaAttention records replay their allocated and requested peaks to the byte; their reserved peaks
# since the validator's warmup benchmarks as the cold process did (protocol.process_benchmarks: the backward thread's
# cuBLAS workspace splits a freed 256 MiB L2-flush segment, which it then pins across empty_cache): before that the
# replay reserved 16, 20, 48, 26 and 12 MiB less and 14 and 38 MiB more. The 8K records' last 4 MiB was g_proj.1's
# bias-gradient sum: ATen's global reduce stages 132 MiB through the allocator (lifetimes/aten_reduce.py), a segment the
# later transients reuse in place of a 128 MiB one. 32K x 4 checkpointed's last 2 MiB: each earlier call runs the
# harness's model (compare.model_at: the warmup one layer of hidden 2048, the earlier shapes their own stacks), not the
# record's. Left: 8K x 4 layers 2 MiB more, one small-pool segment (20 where the CPU trace of the whole run-16b process
# has 19): the warmup's small blocks lie as the trace's, but from the first measured call on the small leftovers
# (chunk indices, cu_seqlens) sit in other segments than the trace's (not modelled: the first call's tensor_cache-miss
# temporaries, the stack's parameter order); the record's own stack in every call hid it. Strict, so a fix shows.
RESERVED_MISSES = {
    ("fla-kda-layer@0.6.0", "batch_size=1, seq_len=8K, num_heads=32, head_dim=128, hidden_size=2304, num_hidden_layers=4"):
        "small-pool placement: the earlier calls' small leftovers sit in other segments than the process's (the first "
        "call's tensor_cache-miss temporaries and the stack's parameter order are not modelled): one 2 MiB segment more",
}


def reserved_case(r):
    reason = RESERVED_MISSES.get((r.impl, r.shape.label()))
    return pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else r


@pytest.mark.parametrize("r", [reserved_case(r) for r in CONTROLLED], ids=rid)
def test_reserved_matches_every_controlled_record(r):
    """max_memory_reserved of every measured step, to the byte: the warmup replayed whole (protocol.prelude)."""
    assert list(protocol_replay(r).reserved_peaks) == r.data["reserved_bytes"]


# ------------------------------------------------------------------------------ the known H200 outcomes

def fla_plain():
    return get_model("fla-kda@0.6.0", "H200", contract="plain")


def test_fla_plain_175000_goes_out_of_memory_with_pytorchs_figures():
    v = protocol_verdict(fla_plain(), Shape(1, 175_000, 96))
    assert not v.fits and v.oom.first_call and (v.oom.step, v.oom.buffer) == ("bwd.intra", "dg2")
    f = v.oom.figures
    assert (gib2(f.tried_bytes), gib2(f.allocated_bytes)) == ("8.01", "128.57")   # "Tried to allocate 8.01 GiB", "128.57 GiB"


def test_fla_plain_175000_reserved_but_unallocated():
    """That run's process had not autotuned in-process (warm figure, 0.712 GiB outside PyTorch): its first call fits,
    leaving the first call's cached blocks; the next call fails at dg2 with 4.70 GiB of them unusable. With the cold
    process's 4.0 GiB the first call itself fails, after release_cached_blocks, with 0.70 GiB."""
    v = protocol_verdict(fla_plain(), Shape(1, 175_000, 96), AllocatorConf(False), "warm")
    f = v.oom.figures
    assert not v.oom.first_call and v.oom.buffer == "dg2"
    assert (gib2(f.tried_bytes), gib2(f.allocated_bytes), gib2(f.reserved_bytes - f.allocated_bytes)) == ("8.01", "128.57", "4.70")


def test_fla_plain_178365_with_expandable_segments_still_goes_out_of_memory():
    assert not protocol_verdict(fla_plain(), Shape(1, 178_365, 96), AllocatorConf(True)).fits


def test_hopper_cuda_247577_goes_out_of_memory():
    assert not protocol_verdict(get_model("cudnn-kda-hopper-cuda@1.32.0"), Shape(1, 247_577, 96)).fits


def test_hopper_cuda_247577_fails_at_the_workspace():
    """"Tried to allocate 71.02 GiB": the carved backward workspace, with cuDNN's measured process memory."""
    v = protocol_verdict(get_model("cudnn-kda-hopper-cuda@1.32.0"), Shape(1, 247_577, 96))
    assert gib2(v.oom.figures.tried_bytes) == "71.02" and v.oom.buffer == "bwd_workspace"


def test_run1_h128_out_of_memory_figures():
    """Run 1 (report contract, 1 x 128K x H128): "Tried to allocate 8.00 GiB ... Process 452 has 3.99 GiB memory in use.
    Including non-PyTorch memory, this process has 128.32 GiB ... 124.28 GiB is allocated by PyTorch, and 65.88 MiB is
    reserved but unallocated": this process held 128.32 - 124.28 - 0.06 = 3.97 GiB outside PyTorch and another process
    3.99 GiB, so the allocator could reserve total - 7.96 GiB. The failing request and the allocated bytes agree."""
    capacity = H200.capacity_bytes - round((128.32 - 124.28 - 65.88 / 1024 + 3.99) * GiB)
    model, shape = get_model("fla-kda@0.6.0", "H200", contract="report"), Shape(1, 131072, 128)
    r = replay(model, shape, capacity_bytes=capacity, history=protocol.history(model, shape), empty_cache_after_warmup=False)
    assert (gib2(r.oom.figures.tried_bytes), gib2(r.oom.figures.allocated_bytes)) == ("8.00", "124.28")


def test_process_memory_cold_warm_and_not_measured():
    """The model's figures at the probes' case (FLA report H96 D128: run 12's 4,291,624,960 B cold, runs 6a/12b's
    764,215,296 B warm), cuDNN's one measured figure, a library not listed (context only) and another GPU (labelled)."""
    model, shape = get_model("fla-kda@0.6.0", "H200", contract="report"), Shape(1, 164_053, 96)
    cold, warm = process_memory(H200, model, "cold", shape), process_memory(H200, model, "warm", shape)
    assert (cold.bytes, warm.bytes) == (4_291_624_960, 764_215_296) and not assumptions_words(cold) and not assumptions_words(warm)
    cudnn = process_memory(H200, get_model("cudnn-kda-hopper-cuda@1.32.0", "H200"), "cold", shape)
    assert cudnn.bytes == 669_843_456 and cudnn.context.bytes == 552_402_944
    assert "not measured" in assumptions_words(process_memory(H200, "newlib-kda@1.0"))[0]   # no library entry: context only
    assert all("its error on this GPU not measured" in a or "H200's" in a
               for a in assumptions_words(process_memory(get_device("B300"), get_model("fla-kda@0.6.0", "B300"), "cold",
                                                         shape)))


# ------------------------------------------------------------------------------ plan and the boundary

@pytest.mark.parametrize("case", boundary.CASES, ids=lambda c: f"{c.impl}:{c.contract}:{c.solve}:{c.alloc_conf}:{c.cache_label}")
def test_plan_answer_runs_the_next_does_not_quickly(case):
    """Under 2 s of CPU for a kernel; a stack of L layers replays about L layers' steps (205 for the 4-layer case, 52 for one): 8 s."""
    t0 = time.process_time()
    r = largest_running(boundary.model_of(case), case.base, case.solve, H200, parse_alloc_conf(case.alloc_conf),
                        case.triton_cache, tuned_at_tokens=case.tuned_at_tokens)
    assert time.process_time() - t0 < (8 if case.base.layers else 2)
    assert r.at_value.fits and not r.at_next.fits and r.next_value == r.value + 1
    assert r.at_value.device_need_bytes <= H200.capacity_bytes


def test_boundary_plan_file_is_what_plan_answers_today():
    assert boundary.PLAN_PATH.read_text() == boundary.render(boundary.groups())
    for g in json.loads(boundary.PLAN_PATH.read_text()):
        b = g["boundary"]
        if b["role"] != "answer":
            assert b["expected"] == "oom"


BOUNDARY_RECORDS = [r for r in load_records() if "allocator_conf" in r.data and "triton_cache" in r.data]


@pytest.mark.parametrize("r", BOUNDARY_RECORDS, ids=rid)
def test_boundary_record_agrees_with_the_simulation(r):
    """Fit where it fit, out of memory where it ran out, and the failing request equal to PyTorch's figure; the
    process memory is the record's own measurement where it has one."""
    model = get_model(r.impl, r.gpu or None, **r.options)
    conf = parse_alloc_conf(r.data["allocator_conf"])
    nonpytorch = r.data.get("device_memory", {}).get("nonpytorch_after_bytes")
    if nonpytorch is None:
        cache = r.data["triton_cache"] if r.data["triton_cache"] in ("cold", "warm") else "cold"
        nonpytorch = process_memory(H200, r.impl, cache).bytes
    run = replay(model, r.shape, conf=conf, capacity_bytes=H200.capacity_bytes - nonpytorch,
                 history=protocol.history(model, r.shape))
    assert (run.oom is not None) == r.oom
    if r.oom:
        assert run.oom.figures.tried_bytes == r.data["oom_figures"]["tried_bytes"]


# ------------------------------------------------------------------------------ CLI and docs

def test_predict_json_reports_the_three_levels_and_the_verdict():
    out = CliRunner().invoke(app, ["predict", "--impl", "fla-kda@0.6.0", "--contract", "plain", "--seq", "175000",
                                   "--heads", "96", "--json"])
    assert out.exit_code == 0, out.output
    (d,) = json.loads(out.output)["results"]
    assert d["reserved_peak_bytes"] >= d["allocated_peak_bytes"] >= d["peak_bytes"]
    assert d["device_need_bytes"] == d["reserved_peak_bytes"] + d["process_memory"]["bytes"]
    assert d["oom"]["buffer"] == "dg2" and d["alloc_conf"] == "expandable_segments:False"


def test_plan_json_names_the_failing_allocation_above():
    out = CliRunner().invoke(app, ["plan", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--solve", "mbs", "--seq", "32K",
                                   "--alloc-conf", "expandable_segments:True", "--json"])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.stdout)["results"]
    assert row["at_value"]["fits"] and row["at_next"]["oom"]["tried_bytes"] > 0


@pytest.mark.parametrize("args", [["--alloc-conf", "max_split_size_mb:64"], ["--triton-cache", "lukewarm"]])
def test_bad_options_are_one_line_exit_1(args):
    out = CliRunner().invoke(app, ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "32", *args])
    assert out.exit_code == 1 and out.output.count("\n") == 1 and out.output.startswith("error:")


def test_planning_doc_tables_come_from_the_simulation():
    text = (ROOT / "docs" / "planning.md").read_text()
    assert "<!-- capacity:fit -->" in text and "<!-- capacity:longest -->" in text
    assert regenerate(text) == text


def test_one_percent_above_is_what_the_plan_file_runs():
    for g in json.loads(boundary.PLAN_PATH.read_text()):
        b = g["boundary"]
        value = int(g["shapes"].split(",")[0 if b["solve"] == "mbs" else 1])
        assert value == (b["plan_value"] if b["role"] == "answer" else math.ceil(b["plan_value"] * 1.01))


# The H200 boundary probes (validate/data/records/boundary/README.md): largest S (or MBS) that ran, smallest that went out
# of memory, bisected in one process (a first call and two steady calls per trial). plan's answer must lie in between.
PROBES = [
    (("fla-kda@0.6.0", "plain", "seq", 1, 8192), "expandable_segments:False", "tuned at 1024", 168_156, 168_437),
    (("fla-kda@0.6.0", "plain", "seq", 1, 8192), "expandable_segments:False", "warm", 172_281, 172_562),
    (("fla-kda@0.6.0", "plain", "seq", 1, 8192), "expandable_segments:True", "warm", 177_937, 178_218),
    (("cudnn-kda-hopper-cuda@1.32.0", None, "mbs", 1, 32768), "expandable_segments:False", "cold", 7, 8),
]


@pytest.mark.parametrize("case,conf,cache,largest_fit,smallest_oom", PROBES)
def test_plan_lies_between_the_probes_fit_and_oom(case, conf, cache, largest_fit, smallest_oom):
    impl, contract, solve, mbs, seq = case
    model = get_model(impl, "H200", **({"contract": contract} if contract else {}))
    tuned_at = protocol.WARMUP_TOKENS if cache == "tuned at 1024" else None    # the probe's process warmed up first
    r = largest_running(model, Shape(mbs, seq, 96), solve, H200, parse_alloc_conf(conf),
                        "cold" if tuned_at else cache, tuned_at_tokens=tuned_at)
    assert largest_fit <= r.value < smallest_oom


# ------------------------------------------------------------------------------ expandable segments' address range

MiB = 2**20


def test_an_expandable_segment_runs_out_of_address_range():
    """A 100 MiB device: the large pool's segment reserves 6 pages of 20 MiB (1.125 x 100 MiB, rounded up). 60 + 40 MiB
    map pages 0-4; freeing the 60 MiB and emptying the cache leaves a 3-page hole before the 40 MiB block; 80 MiB fits
    neither the hole nor the one page left at the end, so a new segment is reserved (unbounded: the same one grows)."""
    assert expandable_address_space(100 * MiB, small=False) == 6 * 20 * MiB
    bases = []
    for total in (100 * MiB, None):
        alloc = CachingAllocator(AllocatorConf(True), device_total_bytes=total)
        first, second = alloc.malloc(60 * MiB), alloc.malloc(40 * MiB)
        alloc.free(first)
        alloc.empty_cache()
        bases.append((second.base, alloc.malloc(80 * MiB).base))
    (kept, moved), (same, grown) = bases
    assert moved != kept and grown == same


def test_a_wholly_unmapped_expandable_segment_is_released():
    """``release_blocks`` → ``release_expandable_segment``: with nothing mapped left, the segment's address range goes
    back; the next request reserves a new one (the model puts it above)."""
    alloc = CachingAllocator(AllocatorConf(True), device_total_bytes=100 * MiB)
    block = alloc.malloc(40 * MiB)
    alloc.free(block)
    alloc.empty_cache()
    assert alloc.reserved == 0 and not alloc._unmapped[False]
    assert alloc.malloc(40 * MiB).base > block.base

"""Every trial of every committed H200 boundary probe (validate/data/records/boundary/*.jsonl), replayed with its whole
process in one allocator (``probe_replay.simulate``): fits or out of memory as measured, in the same phase, with
PyTorch's figures, and every completed phase's max_allocated / max_reserved to the byte."""
import dataclasses
import json
from pathlib import Path

import pytest
from livebytes.estimator import Shape, get_model
from livebytes.estimator.autotune import TRITON_L2_FLUSH_BYTES, benchmarking_steps, tuning_keys
from livebytes.estimator.devices import get_device
from livebytes.estimator.planning import largest_running
from livebytes.estimator.replay import replay, request_sizes
from livebytes.estimator.allocator import expandable_address_space, parse_alloc_conf
from livebytes.validate.check.probe_replay import (
    PHASES,
    load_probe,
    measured_segments,
    probe_files,
    simulate,
    simulated_segments,
    unwound_bytes,
)
from livebytes.validate.check.protocol import WARMUP_TOKENS, held_before

TRACES = Path(__file__).resolve().parents[1] / "validate" / "data" / "traces" / "process"

MiB = 2**20
SIMULATED = {path.name: simulate(load_probe(path)) for path in probe_files()}
TRIALS = [(name, s) for name, sims in SIMULATED.items() for s in sims]
# Where the replay misses a measurement: not explained yet. Strict: a fix shows as XPASS. Per file, per check.
# None now: run 19's layer boundary (4 KDA layers, 215,000 and 239,232 tokens) missed 1,500 MiB reserved while the layers
# below the top were declared by what they leave alive; step by step (lifetimes/layer_stack.py) both replay to the byte.
KNOWN_MISSES: dict[str, dict[str, str]] = {}


def known(items, check: str):
    """Parametrize values, this check's known misses marked strictly expected to fail."""
    return [pytest.param(i, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[i[0]][check]))
            if check in KNOWN_MISSES.get(i[0], {}) else i for i in items]


def ids(item):
    return f"{item[0].removesuffix('.jsonl')}:{item[1].trial.label}"


def cold_warmup(name, sim):
    """The process's first call with a cold Triton cache: every declared autotuned kernel benchmarks there."""
    return sim.trial.stage == "warmup_1x1024" and load_probe(sim_path(name)).triton_cache == "cold"


def sim_path(name):
    return next(p for p in probe_files() if p.name == name)


COLD_WARMUPS = [n for n, sims in SIMULATED.items() if load_probe(sim_path(n)).triton_cache == "cold"
                and sims[0].trial.stage == "warmup_1x1024"]     # a cold process whose first call was at 1 x 1024
COLD_AT_THE_SHAPE = [n for n, sims in SIMULATED.items() if load_probe(sim_path(n)).triton_cache == "cold"
                     and sims[0].trial.stage == "value" and "_run12_" in n]   # ... whose first call was the value (run 12)
COLD_AT_THE_SHAPE_13 = [n for n, sims in SIMULATED.items() if load_probe(sim_path(n)).triton_cache == "cold"
                        and sims[0].trial.stage == "value" and "_run13" in n]  # run 13: forward-only, D64


def test_every_probe_file_is_replayed():
    assert len(SIMULATED) == len(probe_files()) >= 9 and len(TRIALS) >= 40


@pytest.mark.parametrize("item", known(TRIALS, "verdict"), ids=ids)
def test_verdict_phase_and_pytorchs_figures(item):
    name, sim = item
    m = sim.trial.measured
    assert sim.fits == m["fits"]
    if not m["fits"]:
        f, observer, unwind = sim.run.oom.figures, m["oom_observer"][0], m["after_unwind"]
        assert sim.oom_phase == m["oom_phase"]
        assert (f.tried_bytes, f.free_bytes) == (observer["tried_bytes"], observer["device_free"])
        dropped = unwound_bytes(load_probe(sim_path(name)).model(), sim.trial.shape, sim.run.oom.step,   # engine's
                                sim.run.oom.buffer)
        assert (f.allocated_bytes - dropped, f.reserved_bytes) == (unwind["allocated"], unwind["reserved"])


@pytest.mark.parametrize("item", known(TRIALS, "phases"), ids=ids)
def test_every_completed_phase_to_the_byte(item):
    name, sim = item
    m = sim.trial.measured
    done = [p for p in PHASES if p in m]
    assert [sim.phase(p) for p in done] == [(m[p]["max_allocated"], m[p]["max_reserved"]) for p in done]


@pytest.mark.parametrize("name", COLD_WARMUPS)
def test_cold_warmup_peak_is_bwd_intras_benchmark(name):
    """The cold first call's allocated peak is chunk_kda_bwd_intra's autotuning: the steady peak is reached at db_sum
    (T x H fp32 = 1024 x 96 x 4 = 393,216 B), one allocation after the kernel whose benchmark holds 256 MiB more."""
    sim = SIMULATED[name][0]
    model = load_probe(sim_path(name)).model()
    db_sum = request_sizes(model, sim.trial.shape)["db_sum"]
    assert db_sum == 1024 * 96 * 4
    assert sim.trial.measured["first_call"]["max_allocated"] == sim.run.peaks[1] - db_sum + TRITON_L2_FLUSH_BYTES


def test_l2norm_token_bucket_by_hand():
    """NB = cdiv(T*H, 2048*32): 1024 x 96 = 98,304 rows -> 2; 163,413 x 96 = 15,687,648 rows -> 240 (new: benchmarks)."""
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    assert tuning_keys(model, Shape(1, 1024, 96, 128))[0] == ("l2norm_fwd_kernel", (128, 2))
    _, tuned = benchmarking_steps(model, Shape(1, 1024, 96, 128), frozenset())
    assert benchmarking_steps(model, Shape(1, 163_413, 96, 128), tuned)[0] == ("fwd.l2norm_q", "bwd.l2norm_q")
    assert benchmarking_steps(model, Shape(1, 1365, 96, 128), tuned)[0] == ()    # 131,040 rows -> NB 2: tuned
    plain = get_model("fla-kda@0.6.0", "H200", contract="plain")   # no l2norm: nothing of its depends on T
    _, tuned = benchmarking_steps(plain, Shape(1, 1024, 96), frozenset())
    assert benchmarking_steps(plain, Shape(1, 163_413, 96), tuned) == ((), tuned)


@pytest.mark.parametrize("name", COLD_WARMUPS)
def test_a_failing_config_keeps_dv_until_the_next_compile(name):
    """chunk_gated_delta_rule_bwd_kernel_dhu has configs that fail on the H200 (OutOfResources): the traceback cycle keeps
    dAv's dv (which bwd.dhu drops) until wy_dqkg's compile collects it. Freed at bwd.dhu instead, the report contract's
    cold first call reserves one 256 MiB flush segment less than measured; the plain contract's layout does not care."""
    sim = SIMULATED[name][0]
    probe = load_probe(sim_path(name))
    model = probe.model()
    dhu = next(a for a in model.autotuned if a.step == "bwd.dhu")
    undeclared = dataclasses.replace(model, autotuned=tuple(dataclasses.replace(a, held_until_gc=()) if a is dhu else a
                                                            for a in model.autotuned))
    at_dhu = replay(undeclared, sim.trial.shape, warm_steps=0, measured_steps=3, empty_cache_after_warmup=False,
                    benchmarks=sim.benchmarks)
    first = sim.trial.measured["first_call"]
    assert sim.phase("first_call") == (first["max_allocated"], first["max_reserved"])
    missing = 0 if probe.impl == "fla-plain" else TRITON_L2_FLUSH_BYTES
    assert (at_dhu.peaks[0], at_dhu.reserved_peaks[0]) == (first["max_allocated"], first["max_reserved"] - missing)


def test_the_process_trace_frees_dv_inside_the_next_compile():
    """Run 11's whole-process trace (cold report process, H200): dAv's dv is freed while wy_dqkg's JIT parses its
    source (a garbage collection), after wy_dqkg's own allocations and before its benchmark's flush segment."""
    trace = json.loads((TRACES / "process_trace_fla-kda_0.6.0_report_1x1024x96x128.json").read_text())
    entries = trace["entries"]
    dv = next(e for e in entries if e["action"] == "alloc" and e["frames"][0].startswith("chunk_bwd.py:356:"))
    freed = next(i for i, e in enumerate(entries) if e["action"] == "free_requested" and e["addr"] == dv["addr"])
    assert any(f.startswith("ast.py") for f in entries[freed]["frames"][:2])
    assert any("chunk_kda_bwd_wy_dqkg_fused" in f for f in entries[freed]["frames"])
    flush = next(i for i, e in enumerate(entries) if i > freed and e["action"] == "segment_alloc")
    assert any("chunk_kda_bwd_wy_dqkg_fused" in f for f in entries[flush]["frames"])


def test_report_cold_oom_is_the_l2_flush_segment():
    """Without the two benchmarks the report trial at 163,413 would fit (7.47 MB to spare at the reserved peak); the
    256 MiB segment pushes the first call over the capacity, release_cached_blocks runs, and steady_1 fails."""
    sim = SIMULATED["h200_run6a_fla-kda-report_H96_default_cold_values.jsonl"][1]
    probe = load_probe(sim_path("h200_run6a_fla-kda-report_H96_default_cold_values.jsonl"))
    capacity = probe.total_bytes - sim.trial.measured["nonpytorch_after_bytes"]
    plain = replay(probe.model(), sim.trial.shape, warm_steps=0, measured_steps=3, empty_cache_after_warmup=False,
                   history=held_before(probe.model(), [Shape(1, 1024, 96, 128)], sim.trial.shape),
                   capacity_bytes=capacity)
    assert plain.oom is None and 0 < capacity - plain.reserved_peaks[0] < 8 * MiB
    assert sim.benchmarks == ("fwd.l2norm_q", "bwd.l2norm_q") and sim.oom_phase == "steady_1"


def test_cudnn_probe_history_explains_the_bisection():
    """The bisecting process held earlier trials' plan caches (5 fp32 states, 6 MiB each, per fitted shape; the two
    forward ones of a shape whose backward workspace failed): it failed at 247,265, where a fresh process runs."""
    sims = SIMULATED["h200_cudnn-kda-hopper-cuda_H96_default.jsonl"]
    at = next(s for s in sims if s.trial.shape.seq == 247_265)
    assert not at.fits
    r = largest_running(get_model("cudnn-kda-hopper-cuda@1.32.0", "H200"), Shape(1, 8192, 96), "seq", get_device("H200"))
    assert r.value >= 247_265 and r.at_value.fits


def test_plan_report_cold_is_below_the_measured_oom():
    """Run 6a: the report contract at 163,413 (the old S*) ran out of memory in a process that warmed up at 1 x 1024
    (cold-after-warmup); S* of such a process lies below, within 1 %."""
    r = largest_running(get_model("fla-kda@0.6.0", "H200", contract="report"), Shape(1, 8192, 96), "seq", get_device("H200"),
                        tuned_at_tokens=WARMUP_TOKENS)
    assert 163_413 * 0.99 <= r.value < 163_413


SEGMENTED = [(n, s) for n, s in TRIALS if s.trial.measured.get("segments_at_oom") or s.trial.measured.get("segments_at_end")]


@pytest.mark.parametrize("item", known(SEGMENTED, "segments"), ids=ids)
def test_the_allocators_segments_to_the_byte(item):
    """Where the probe recorded ``memory_snapshot``'s segments, the replay holds the same mapped ranges: sizes,
    allocated bytes, and offsets inside the first expandable reservation. The snapshot at an out-of-memory error is
    taken after it unwound: the autograd engine's pending gradients (``unwound_bytes``) are gone from their segments."""
    name, sim = item
    total = load_probe(sim_path(name)).total_bytes
    replayed, measured = simulated_segments(sim.run.segments, total), measured_segments(sim.trial, total)
    dropped = (unwound_bytes(load_probe(sim_path(name)).model(), sim.trial.shape, sim.run.oom.step, sim.run.oom.buffer)
               if sim.run.oom else 0)
    assert [(r[0], r[1], r[3]) for r in replayed] == [(m[0], m[1], m[3]) for m in measured]     # kind, size, offset
    gone = [r[2] - m[2] for r, m in zip(replayed, measured) if r[2] != m[2]]
    assert all(g > 0 for g in gone) and sum(gone) == dropped


def test_an_error_in_the_backward_drops_the_engines_pending_gradient():
    """Run 19c: 4 KDA layers at 239,232 ran out of memory in the top layer's chunk_kda backward (dg2); what the probe
    read after the error unwound is the replay's figure at the failure less the top layer's input gradient, which the
    engine held for the layer below (g_proj.0.dinput, [T, hidden] bf16 = 239,232 x 2304 x 2 = 1,102,381,056 B); the
    kernel's dO (o_norm.dx), handed to the failing Function, stays."""
    name = "h200_run19c_fla-kda-layer_L4_H32_D128_default_cold_firstcall_answer.jsonl"
    (sim,) = SIMULATED[name]
    assert (sim.run.oom.step, sim.run.oom.buffer) == ("kda.bwd.intra", "kda.dg2")
    model = load_probe(sim_path(name)).model()
    assert unwound_bytes(model, sim.trial.shape, "kda.bwd.intra") == 239_232 * 2304 * 2
    assert sim.run.oom.figures.allocated_bytes - 239_232 * 2304 * 2 == sim.trial.measured["after_unwind"]["allocated"]
    kernel = get_model("fla-kda@0.6.0", "H200", contract="report")     # a bare kernel: its dO is the caller's
    assert unwound_bytes(kernel, Shape(1, 8192, 96, 128), "bwd.intra") == 0


def test_d64s_segments_lie_in_the_drivers_order():
    """Run 13d (D64 H128, 240,000): new cudaMalloc segments go below the earlier ones (allocator.cuda_malloc_address),
    so among the equal-size free blocks best fit takes the newest; with that the first steady call's dg2 fails as
    measured. Bottom up, the GPU's 22 lowest segments are the replay's, size and allocated bytes; above them the GPU put
    the 118 and 256 MiB segments in a free range near the top, which the replay does not model."""
    name = "h200_run13d_fla-kda-report_H128_D64_default_cold_firstcall_240000.jsonl"
    (sim,) = SIMULATED[name]
    measured = [(s["total_size"], s["allocated_size"]) for s in sorted(sim.trial.measured["segments_at_oom"],
                                                                         key=lambda s: s["address"]) if s["segment_type"] == "large"]
    replayed = [(r.size, r.allocated) for r in sorted(sim.run.segments, key=lambda r: r.addr) if not r.small]
    assert len(measured) == len(replayed) == 31 and measured[:22] == replayed[:22]
    assert measured[2] == replayed[2] == (7_864_320_000, 3_932_160_000)    # the 7.32 GiB segment holding 3.66 GiB
    assert sim.oom_phase == "steady_1" and sim.run.oom.figures.tried_bytes == 7_864_320_000


def test_segments_are_recorded_at_both_allocator_settings():
    """Run 12c's two report processes (each a 1 x 1024 warmup, then 172,800 and 174,528, or 172,819) and run 12d's
    three kda_hopper_cuda ones (247,476 / 249,951 expandable, 247,466 / 249,941 and MBS 7 / 8 at 32K default), before
    run 13's, run 16c's, run 17's, run 19's, run 20's and run 21's processes (every later probe records them)."""
    run12 = [(n, s) for n, s in SEGMENTED if n.split("_")[1] in ("run12c", "run12d")]
    assert {n.split("_")[1] for n, _ in SEGMENTED} - {"run12c", "run12d"} == {
        "run13b", "run13d", "run16c", "run17a", "run17b", "run17c", "run17d", "run19a", "run19b", "run19c", "run19d",
        "run20a", "run20b", "run21c", "run21e", "run21f"}
    SEGMENTED_12 = run12
    assert sorted(s.trial.shape.seq for _, s in SEGMENTED_12) == [1024, 1024, 32_768, 32_768, 172_800, 172_819, 174_528,
                                                               247_466, 247_476, 249_941, 249_951]
    assert {load_probe(sim_path(n)).allocator_conf for n, _ in SEGMENTED_12} == {"expandable_segments:True",
                                                                              "expandable_segments:False"}


def test_a_later_trial_maps_around_what_earlier_trials_keep():
    """Run 12d, expandable, 249,951 after 247,476 in one process: the first trial's plan-cache entries keep their pages
    mapped, so the failing trial's blocks map around them: three large ranges (37,056,675,840 B at 0, 36,888,903,680 B
    at 42,656,071,680, 20,971,520 B at 149,401,108,480), as the whole-process replay has them."""
    name, sim = next((n, s) for n, s in SEGMENTED if s.trial.shape.seq == 249_951)
    total = load_probe(sim_path(name)).total_bytes
    measured = [m for m in measured_segments(sim.trial, total) if m[0] == "large"]
    assert [(m[1], m[3]) for m in measured] == [(37_056_675_840, 0), (36_888_903_680, 42_656_071_680),
                                                (20_971_520, 149_401_108_480)]
    probe = load_probe(sim_path(name))      # the trial alone, the earlier trial's entries put into an empty allocator
    alone = replay(probe.model(), sim.trial.shape, warm_steps=0, measured_steps=3, empty_cache_after_warmup=False,
                   history=held_before(probe.model(), [Shape(1, 247_476, 96, 128)], sim.trial.shape),
                   conf=parse_alloc_conf(probe.allocator_conf),
                   capacity_bytes=total - sim.trial.measured["nonpytorch_after_bytes"], device_total_bytes=total)
    assert len([r for r in alone.segments if not r.small]) == 1 and alone.oom is not None


def test_a_second_expandable_reservation_at_172819():
    """Run 12c: at 172,819 the report contract's large expandable segment ran out of address range (1.125 x
    150,109,880,320 B = 168,873,615,360 B, rounded up to 8,053 pages of 20 MiB): its last mapped range lies in a new
    reservation, above (measured 168,913,010,688 B past the first range's start)."""
    sim = next(s for n, s in SEGMENTED if s.trial.shape.seq == 172_819)
    large = [r for r in sim.run.segments if not r.small]
    assert expandable_address_space(150_109_880_320, small=False) == 20 * 2**20 * 8053 == 168_883_650_560
    assert large[-1].base != large[0].base and all(r.base == large[0].base for r in large[:-1])
    measured = [m for m in measured_segments(sim.trial, 150_109_880_320) if m[0] == "large"]
    assert measured[-2][3] is not None and measured[-1][3] is None


@pytest.mark.parametrize("name", COLD_AT_THE_SHAPE)
def test_a_first_call_at_the_shape_benchmarks_every_declared_kernel(name):
    """Run 12: one fresh process per value, empty Triton cache, no warmup: every declared autotuned launch benchmarks in
    that first call, once per key (fwd.intra launches two tuned kernels; the report's q and k share l2norm's key, so
    l2norm benchmarks once each way). 12 keys plain, 15 report; the replay of these first calls is byte-exact above."""
    sim = SIMULATED[name][0]
    both = ("fwd.gate_cumsum", "fwd.intra", "fwd.intra", "fwd.w_u", "fwd.delta_h", "fwd.output",
            "bwd.w_u", "bwd.dAv", "bwd.dhu", "bwd.wy_dqkg", "bwd.intra", "bwd.dg_cumsum")
    report = ("fwd.l2norm_q", *both, "bwd.gate_bwd", "bwd.l2norm_q")
    assert sim.benchmarks == (report if "report" in name else both)
    assert sim.trial.measured["first_call"]["stack_limit_bytes"] == 14_464


@pytest.mark.parametrize("name", COLD_AT_THE_SHAPE_13)
def test_run13s_first_calls_benchmark_every_declared_kernel_and_raise_the_predicted_limit(name):
    """Run 13 (forward-only H16/HV32 D128, report D64 H128): the first call benchmarks every declared autotuned launch once
    per key, and the stack limit it leaves is the process-memory model's (1,024 B forward: no candidate spills past the
    default; 18,592 B at D64: wy_dqkg's most-spilling candidate, 18,584 B)."""
    from livebytes.estimator.capacity import cold_benchmarks
    from livebytes.estimator.process.memory import process_memory
    sim, probe = SIMULATED[name][0], load_probe(sim_path(name))
    model = probe.model()
    assert sim.benchmarks == cold_benchmarks(model, sim.trial.shape, "cold") and len(sim.benchmarks) >= 5
    predicted = process_memory(get_device("H200"), model, "cold", sim.trial.shape)
    m = sim.trial.measured
    if "first_call" in m:           # a first call that ran out of memory records no phase
        assert m["first_call"]["stack_limit_bytes"] == predicted.stack_limit_bytes
    assert m["nonpytorch_after_bytes"] == predicted.bytes


def test_cold_at_the_shape_covers_answer_and_above_for_both_contracts():
    assert sorted(n.split("_H96")[0].split("run12_")[1] + n.rsplit("_", 1)[1] for n in COLD_AT_THE_SHAPE) == [
        "fla-kda-plainabove.jsonl", "fla-kda-plainanswer.jsonl", "fla-kda-reportabove.jsonl", "fla-kda-reportanswer.jsonl"]


RUN12 = Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "runs" / "run12"
UNTUNED = sorted(RUN12.glob("*_l2norm-bwd-untuned_values.jsonl"))


@pytest.mark.parametrize("path", UNTUNED, ids=lambda p: p.name)
def test_run12s_mis_keyed_warm_processes_benchmarked_l2norm_bwd(path):
    """Run 12 pretuned l2norm with a bf16 gradient; chunk_kda hands l2norm_bwd an fp32 one, and Triton's key holds the
    arguments' dtypes, so those "warm" processes benchmarked l2norm_bwd_kernel at each token bucket. Replayed with only
    that kernel missing on disk, every trial holds to the byte, PyTorch's failing figures included."""
    probe = load_probe(path)
    sims = simulate(probe, missing_on_disk=frozenset({"l2norm_bwd_kernel"}))
    assert len(sims) == 3 and [s.benchmarks for s in sims] == [("bwd.l2norm_q",)] * 3
    for sim in sims:
        m = sim.trial.measured
        assert sim.fits == m["fits"]
        assert [sim.phase(p) for p in PHASES if p in m] == [(m[p]["max_allocated"], m[p]["max_reserved"]) for p in PHASES if p in m]
        if not m["fits"]:
            assert (sim.run.oom.figures.tried_bytes, sim.run.oom.figures.free_bytes) == (
                m["oom_observer"][0]["tried_bytes"], m["oom_observer"][0]["device_free"])
    as_if_warm = simulate(probe)       # every key on disk: no L2-flush segment, which the measured reserved peaks hold
    assert any(w.phase(p) != (w.trial.measured[p]["max_allocated"], w.trial.measured[p]["max_reserved"])
               for w in as_if_warm for p in PHASES if p in w.trial.measured and w.phase(p) is not None)


def test_an_error_in_a_sums_scratch_drops_the_sums_output():
    """Run 21c: GDN at 918,912 ran out of memory allocating the WY dk's group-sum accumulation buffer; the sum's own
    bf16 output, which ATen allocated first and never handed to Python, died as the error unwound:
    918,912 x 16 x 128 x 2 = 3,763,863,552 B between the replay's figure at the failure and the probe's after-error one."""
    name = "h200_run21c_fla-gdn_H16_HV32_D128_default_cold_firstcall_918912.jsonl"
    (sim,) = SIMULATED[name]
    assert (sim.run.oom.step, sim.run.oom.buffer) == ("bwd.wy_sum_k", "dk2.reduce_accumulation")
    model = load_probe(sim_path(name)).model()
    assert unwound_bytes(model, sim.trial.shape, "bwd.wy_sum_k", "dk2.reduce_accumulation") == 918_912 * 16 * 128 * 2
    assert unwound_bytes(model, sim.trial.shape, "bwd.wy_sum_k") == 0          # no failing buffer named: no op's
    assert unwound_bytes(model, sim.trial.shape, "bwd.wy_sum_k", "dk2") == 0   # the output itself: nothing before it
    assert sim.run.oom.figures.allocated_bytes - 918_912 * 16 * 128 * 2 == sim.trial.measured["after_unwind"]["allocated"]


def test_a_failing_semaphore_request_drops_the_sums_output_and_its_staging():
    """The GDN layer's dA_log gradient, an fp32 sum over [cdiv(T, 32), HV] partials (fp32: no accumulation buffer): a
    failing semaphore request drops the [HV] fp32 output and the staging before it, a failing staging the output alone.
    By hand at 1 x 256K, HV 32 on the H200: output 32 x 4 = 128 B -> one 512-byte block; staging 131,072 B (a global
    reduce over 8,192 rows: ``aten_reduce``, tests/test_aten_reduce.py); 512 + 131,072 = 131,584."""
    model = get_model("fla-gdn-layer@0.6.0", "H200", gva=True, hidden=2048, layers=1)
    shape = Shape(1, 262_144, 16, 128, 32, hidden=2048, layers=1)
    sizes = request_sizes(model, shape)
    assert (sizes["gdn.dA_log"], sizes["gdn.dA_log.reduce_staging"]) == (128, 131_072)
    step = next(b.allocated_at for b in model.buffers if b.name == "gdn.dA_log")
    assert unwound_bytes(model, shape, step, "gdn.dA_log.reduce_semaphores") == 131_584
    assert unwound_bytes(model, shape, step, "gdn.dA_log.reduce_staging") == 512


def test_gdns_boundary_needs_dhus_held_dv_local():
    """Without dhu's held dv_local (a failing config's traceback, ``held_until_gc``) the replay fits run 21c's 918,912,
    which ran out of memory on the H200: the rule is what makes the verdict."""
    name = "h200_run21c_fla-gdn_H16_HV32_D128_default_cold_firstcall_918912.jsonl"
    probe = load_probe(sim_path(name))
    model = probe.model()
    bare = dataclasses.replace(model, autotuned=tuple(dataclasses.replace(a, held_until_gc=()) for a in model.autotuned))
    object.__setattr__(probe, "model", lambda: bare)     # this probe's process, replayed with the bare model
    (held,), (free,) = SIMULATED[name], simulate(probe)
    assert held.run.oom is not None and not held.trial.measured["fits"]
    assert free.run.oom is None

"""The validator's pure parts on the CPU: record I/O (atomic, append-only, every old layout), protocol
versions as integers, shape strings with value heads, plans and the runner command, OOM figures, the
autotune cache, and the runner's bookkeeping."""
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import (
    Shape,
    parse_shape_list,
    shape_list_spec,
    shape_spec,
)
from livebytes.validate.gpu import autotune
from livebytes.validate.gpu import batch
from livebytes.validate.gpu import oom
from livebytes.validate.check import records as rec
from livebytes.validate.check.compare import compare
from livebytes.validate.gpu.session import summarize


def new_record(**over):
    data = {"impl": "fla-kda@0.6.0", "shape": {"mbs": 1, "seq": 8192, "heads": 16, "dim": 128, "v_heads": 32},
            "protocol": {"name": "kda-report-v4", "version": 4}, "allocator_conf": "expandable_segments:False",
            "triton_cache": "warm", "device_memory": {"nonpytorch_before_bytes": 1, "nonpytorch_after_bytes": 2,
                                                      "reserved_peak_bytes": 3},
            "seconds": {"setup": 1.0, "compile": 2.0, "measure": 3.0, "total": 6.0}, "oom": False,
            "peak_bytes": 100, "date": "2026-01-01T00:00:00+00:00", "device": {"name": "NVIDIA H200", "preset": "H200"}}
    return {**data, **over}


# ---------------------------------------------------------------- shapes

@pytest.mark.parametrize("text,shape", [
    # one syntax: key=value with the JSON's shape keys (batch_size 1, head_dim 128 unless given), in any order
    ("seq_len=8K,num_heads=16,head_dim=128,num_v_heads=32,batch_size=1", Shape(1, 8192, 16, 128, v_heads=32)),
    ("num_heads=8, seq_len=4K, batch_size=2", Shape(2, 4096, 8, 128)),
    ("seq_len=8K,num_heads=16,expand_v=0.5", Shape(1, 8192, 16, 128, dim_v=64)),           # 128 x 0.5, as FLA's layers
    ("seq_len=5000,num_heads=32,head_dim=64,head_v_dim=32,batch_size=3", Shape(3, 5000, 32, 64, dim_v=32)),
    # the old positional form, an alias
    ("1,8K,16,128,hv=32", Shape(1, 8192, 16, 128, v_heads=32)),
    ("2,4K,8", Shape(2, 4096, 8, 128)),
    ("1,8K,16,128,hv=32,dv=64", Shape(1, 8192, 16, 128, v_heads=32, dim_v=64)),
    ("3,5000,32,64,dv=32", Shape(3, 5000, 32, 64, dim_v=32)),
    ("1,8K,16,num_v_heads=32", Shape(1, 8192, 16, 128, v_heads=32)),          # the two mixed: positional first
])
def test_shape_strings_round_trip_value_heads(text, shape):
    assert parse_shape_list(text) == [shape]
    assert parse_shape_list(shape_spec(shape)) == [shape]
    assert shape_spec(shape).startswith(f"batch_size={shape.mbs},seq_len={shape.seq},num_heads={shape.heads},")


@pytest.mark.parametrize("shape,label", [
    (Shape(1, 8192, 96), "batch_size=1, seq_len=8K, num_heads=96, head_dim=128"),
    (Shape(3, 5000, 16, 64, v_heads=32, dim_v=32),
     "batch_size=3, seq_len=5000, num_heads=16, head_dim=64, num_v_heads=32, head_v_dim=32"),
    (Shape(1, 131072, 32, 128, hidden=2304, layers=4, checkpoint=True, conv_size=4),
     "batch_size=1, seq_len=128K, num_heads=32, head_dim=128, hidden_size=2304, num_hidden_layers=4, checkpoint=on, "
     "conv_size=4"),
])
def test_a_shapes_label_is_its_shape_string_in_the_jsons_names(shape, label):
    """Tables and messages name a shape as the shape string does (the JSON's keys, tokens as 8K), so a label pastes
    back into --shapes."""
    assert shape.label() == label and parse_shape_list(label) == [shape]


def test_a_label_leaves_out_value_heads_and_dims_equal_to_the_query_keys():
    assert Shape(1, 8192, 16, 128, v_heads=16, dim_v=128).label() == "batch_size=1, seq_len=8K, num_heads=16, head_dim=128"


@pytest.mark.parametrize("text,needle", [
    ("1,8K,16,128,hv=24", "multiple of heads"), ("1,8K,hv=32,16", "expected key=value fields"),
    ("1,8K", "or the old positional MBS,SEQ,HEADS or MBS,SEQ,HEADS,DIM"),
    ("1,8K,16,128,hq=2", "unknown or repeated"), ("1,8K,16,128,hv=32,hv=64", "unknown or repeated"), ("", "no shapes"),
    ("seq_len=8K,num_heads=16,num_v_heads=32,hv=32", "unknown or repeated field 'hv'"),     # an alias of a key given
    ("num_heads=16", "seq_len= is missing"), ("seq_len=8K,batch_size=2", "num_heads= is missing"),
    ("seq_len=8K,num_heads=16,expand_v=2,head_v_dim=64", "head_v_dim= or expand_v=, not both"),
    ("seq_len=8K,num_heads=16,expand_v=1/3", "42.6667 is not a whole value head dimension"),
])
def test_bad_shape_strings(text, needle):
    with pytest.raises(LivebytesError, match=needle):
        parse_shape_list(text)


# ---------------------------------------------------------------- records

@pytest.mark.parametrize("protocol,version", [
    ({"name": "kda-report-v3"}, 3), ({"name": "kda-report-v10"}, 10), ({"name": "kda-report-v4", "version": 4}, 4),
    ("fresh process per backend/shape", 0), ({"name": "something else"}, 0),
])
def test_protocol_version_is_an_integer(protocol, version):
    assert rec.Record(Path("x"), {"impl": "a", "protocol": protocol}).protocol_version == version


def test_v10_sorts_after_v3_where_names_do_not():
    # as strings "kda-report-v10" < "kda-report-v3": why names are never compared
    old, new = (rec.Record(Path(n), {"impl": "a", "protocol": {"name": n}}) for n in ("kda-report-v3", "kda-report-v10"))
    assert rec.best([new, old]) is new and rec.best([old, new]) is new


def test_every_committed_record_has_a_protocol_version():
    measured = [r for r in rec.load_records() if r.origin == "measured"]
    from livebytes.validate.check.protocol import PROTOCOLS
    assert {r.protocol_version for r in measured} == set(PROTOCOLS) == {1, 2, 3, 4}


def test_typed_fields_of_a_format_2_record(tmp_path):
    path = rec.write_record(tmp_path, new_record())
    (r,) = rec.load_file(path)
    assert r.record_format == 2 and r.protocol_version == 4 and r.shape.hv == 32
    assert r.device_memory == rec.DeviceMemory(1, 2, 3)
    assert r.seconds == rec.Seconds(1.0, 2.0, 3.0, 6.0) and r.seconds_total == 6.0
    assert r.triton_cache == "warm" and r.allocator_conf == "expandable_segments:False"


def test_write_is_atomic_and_never_overwrites(tmp_path):
    first = rec.write_record(tmp_path, new_record())
    second = rec.write_record(tmp_path, new_record(peak_bytes=200))      # same impl, shape, date, pid
    assert first != second and first.exists() and second.exists()
    assert [r.peak_bytes for r in rec.load_file(first)] == [100]         # the first measurement is kept
    assert [r.peak_bytes for r in rec.load_file(second)] == [200]
    assert not list(tmp_path.glob(".tmp-*"))                              # no temporary left behind
    assert "hv-32" in first.name and "=" not in first.name      # run 21d: the transfer refused a name with '='


def test_a_crash_during_a_write_leaves_no_partial_file(tmp_path, monkeypatch):
    kept = rec.write_record(tmp_path, new_record())

    def crash(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        rec.write_record(tmp_path, new_record(peak_bytes=5))
    assert sorted(tmp_path.iterdir()) == [kept]


@pytest.mark.parametrize("data,missing", [
    (new_record(), []),
    ({k: v for k, v in new_record().items() if k != "device_memory"}, ["device_memory"]),
    (new_record(oom=True), ["oom_message", "oom_figures", "oom_step"]),
])
def test_writer_refuses_a_record_without_the_required_fields(tmp_path, data, missing):
    assert rec.missing_fields(data) == missing
    if missing:
        with pytest.raises(LivebytesError, match=missing[0]):
            rec.write_record(tmp_path, data)


@pytest.mark.parametrize("layout", ["records", "list", "single", "jsonl"])
def test_every_old_layout_loads(tmp_path, layout):
    shape = {"mbs": 1, "seq": 1024, "heads": 2}
    items = [{"impl": "a", "n": 1, "shape": shape, "peak_bytes": 1}, {"impl": "b", "n": 2, "shape": shape, "peak_bytes": 2}]
    path = tmp_path / ("r.jsonl" if layout == "jsonl" else "r.json")
    text = {"records": json.dumps({"run": 1, "records": items}), "list": json.dumps(items),
            "single": json.dumps(items[0]), "jsonl": "\n".join(map(json.dumps, items)) + "\n"}[layout]
    path.write_text(text)
    assert [r.data["n"] for r in rec.load_file(path)] == ([1] if layout == "single" else [1, 2])


def test_records_from_loads_that_file_and_nothing_else(tmp_path):
    committed = rec.records_from("h200_run5_fla-core-0.6.0.json")
    assert len(committed) == 5 and {r.path.parent for r in committed} == {rec.RECORDS_DIR}
    copy = tmp_path / "h200_run5_fla-core-0.6.0.json"
    data = json.loads((rec.RECORDS_DIR / copy.name).read_text())
    data["records"] = data["records"][:1]
    data["records"][0]["peak_bytes"] = 1
    copy.write_text(json.dumps(data))
    (tampered,) = rec.records_from(str(copy))
    assert tampered.path == copy and tampered.peak_bytes == 1
    assert not compare(tampered).passed


def test_runs_folders_load_but_live_dumps_do_not(tmp_path):
    rec.write_record(tmp_path / "runs" / "run6", new_record())
    (tmp_path / "live").mkdir()
    (tmp_path / "live" / "x.json").write_text(json.dumps({"impl": "a", "blocks": []}))
    assert [r.impl for r in rec.load_records(tmp_path)] == ["fla-kda@0.6.0"]


# ---------------------------------------------------------------- plans

def test_fresh_groups_expand_per_shape_keeping_value_heads():
    group = batch.check_group({"impl": "fla-kda@0.6.0", "shapes": "1,8K,16,128,hv=32;2,4K,16", "fresh": True})
    assert [g["shapes"] for g in batch.expand([group])] == [
        "batch_size=1,seq_len=8192,num_heads=16,head_dim=128,num_v_heads=32", "batch_size=2,seq_len=4096,num_heads=16,head_dim=128"]


def test_session_and_plans_share_one_runner_command(tmp_path):
    group = {"impl": "fla-kda@0.6.0", "shapes": shape_list_spec(parse_shape_list("1,8K,16,128,hv=32")),
             "contract": "plain", "forward_only": False, "no_recompute": True, "fresh": True, "triton_cache": "cold",
             "alloc_conf": "expandable_segments:True"}
    cmd = batch.runner_command(group, tmp_path)
    assert cmd[cmd.index("--shapes") + 1] == "batch_size=1,seq_len=8192,num_heads=16,head_dim=128,num_v_heads=32"
    assert cmd[cmd.index("--mode") + 1] == "fresh-process" and "--no-recompute" in cmd and "--forward-only" not in cmd
    assert cmd[cmd.index("--triton-cache") + 1] == "cold"
    assert cmd[cmd.index("--alloc-conf") + 1] == "expandable_segments:True"


def test_committed_plans_still_load():
    plans = sorted((Path(batch.__file__).parents[1] / "data" / "plans").glob("*.json"))
    runner_plans = [p for p in plans if p.name != "h200_boundary.json"]
    assert runner_plans and all(batch.load_plan(p) for p in runner_plans)


def test_the_boundary_plan_is_refused_by_the_batch_driver_and_names_the_probe():
    """Side by side, each process would see the others' memory: a boundary is measured one process at a time."""
    with pytest.raises(LivebytesError, match="boundary_probe.py"):
        batch.load_plan(Path(batch.__file__).parents[1] / "data" / "plans" / "h200_boundary.json")


def test_the_boundary_commands_run_every_case_at_plans_answer_and_one_percent_above():
    from livebytes.validate.gpu.boundary import CASES, answer, commands, probe_flags
    lines = commands()
    first_calls = [c for c in CASES if c.impl.startswith("fla-") and (c.cache_label == "cold" or c.no_warmup)]   # a process per value
    warm_report = [c for c in CASES if c.contract == "report" and c.triton_cache == "warm"]    # + l2norm's pretuning
    assert len(lines) == len(CASES) + len(first_calls) + len(warm_report) and first_calls and warm_report
    for case in warm_report:        # l2norm's key is a token bucket: tuned at the warmup's 1,024 tokens and both values
        assert any(f"--pretune 1024,{answer(case)},{-(-answer(case) * 101 // 100)} " in line for line in lines)
    for case in CASES:
        value, above = answer(case), -(-answer(case) * 101 // 100)
        if case in first_calls:
            assert sum(f"--values {v} " in line and "--no-warmup" in line for v in (value, above) for line in lines) == 2
        else:
            assert any(f"--values {value},{above}" in line for line in lines), value
    cold_dirs = [line.split("TRITON_CACHE_DIR=")[1].split()[0] for line in lines if "--no-warmup" in line and "--state cold" in line]
    assert len(cold_dirs) == len(set(cold_dirs)) == 2 * len([c for c in first_calls if c.cache_label == "cold"])
    for case in warm_report:        # each pretuning at its own head count and head dim
        assert any(f"--heads {case.base.heads}{probe_flags(case)} --pretune" in line for line in lines)
    cold_first = [("--state cold" in line) for line in lines]
    assert cold_first == sorted(cold_first, reverse=True)     # the cold processes fill the Triton cache first


def test_summary_counts():
    c = [SimpleNamespace(measured=1, passed=True), SimpleNamespace(measured=1, passed=False),
         SimpleNamespace(measured=None, passed=True), SimpleNamespace(measured=None, passed=False)]
    s = summarize(c, 12.5)
    assert (s.passed, s.failed, s.out_of_memory, s.device_seconds) == (1, 2, 2, 12.5)  # an unpredicted OOM fails


# ---------------------------------------------------------------- validate's steps, as the library gives them

def test_measured_records_of_one_model_say_how_many_they_leave_out():
    """validate --from-records all --impl K: K's records, and a note counting the others (every measured record is
    one model's or another's)."""
    from livebytes.validate.gpu import session
    every, none_left = session.measured_records("all")
    mine, notes = session.measured_records("all", "cudnn-kda-hopper@1.32.0")
    assert none_left == [] and {r.impl for r in mine} == {"cudnn-kda-hopper@1.32.0"}
    assert notes == [f"--impl cudnn-kda-hopper@1.32.0: re-checking its {len(mine)} of the {len(every)} measured records "
                     f"in all; the other {len(every) - len(mine)} are other models'"]
    with pytest.raises(LivebytesError, match="no measured records in 'h200_run5_fla-core-0.6.0.json' for fla-gdn@0.6.0"):
        session.measured_records("h200_run5_fla-core-0.6.0.json", "fla-gdn@0.6.0")


def test_judge_all_tells_each_record_and_names_a_record_it_cannot_judge():
    from livebytes.validate.gpu import session
    records, _ = session.measured_records("h200_run5_fla-core-0.6.0.json")       # run 5: five fla-kda records
    told = []
    comparisons = session.judge_all(records, 0.001, lambda *step: told.append(step))
    assert [c.record for c in comparisons] == records and all(c.passed for c in comparisons)
    assert told == [(n, 5, r.path.name) for n, r in enumerate(records, 1)]
    from dataclasses import replace
    unknown = replace(records[0], data={**records[0].data, "impl": "no-such@1"})
    with pytest.raises(LivebytesError, match=f"^{records[0].path}: unknown implementation 'no-such@1'"):
        session.judge(unknown, 0.001)


# ---------------------------------------------------------------- out of memory

MESSAGE = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which "
           "1.23 GiB is free. Including non-PyTorch memory, this process has 138.57 GiB memory in use.\nsecond line")


@pytest.mark.parametrize("text,expected", [
    (MESSAGE, 2 * 2**30), ("Tried to allocate 512.00 MiB.", 512 * 2**20), ("Tried to allocate 20.00 KiB", 20480),
    ("Tried to allocate 1.50 GiB", 3 * 2**29), ("no figure", None),
])
def test_tried_bytes_from_the_message(text, expected):
    assert oom.tried_bytes_from_message(text) == expected


def test_observer_figures_are_exact_and_preferred():
    observer = oom.OomObserver()
    observer(0, 2147483648 + 2 * 2**20, 150109880320, 1320000000)
    figures = oom.oom_figures(MESSAGE, observer.last, allocated=10, reserved=20, free=30, total=40)
    assert figures["tried_bytes"] == 2147483648 + 2 * 2**20 and figures["tried_bytes_source"] == "observer"
    assert oom.oom_figures(MESSAGE, None, 10, 20, 30, 40)["tried_bytes"] == 2 * 2**30
    assert oom.first_line(MESSAGE).endswith("138.57 GiB memory in use.")


# ---------------------------------------------------------------- autotune cache

def test_autotune_file_is_keyed_by_gpu_fla_and_triton():
    assert autotune.cache_file_name("NVIDIA H200", "0.6.0", "3.6.0") == "NVIDIA_H200_fla-0.6.0_triton-3.6.0.json"


def test_fla_key_hash_matches_fla_serialisation():
    import hashlib
    key = (64, 128, "torch.bfloat16")
    assert autotune.fla_key_hash(key) == hashlib.md5(b'[64,128,"torch.bfloat16"]').hexdigest()


def test_capture_install_and_detect_in_process_tuning(tmp_path):
    cold = tmp_path / "cold"
    (cold / "ABC").mkdir(parents=True)
    (cold / "ABC" / "chunk_kda_bwd_kernel.autotune.json").write_text(json.dumps({"key": [1], "configs_timings": []}))
    (cold / "ABC" / "chunk_kda_bwd_kernel.cubin").write_text("binary")          # compiled kernels are not kept
    cfg = SimpleNamespace(kwargs={"BK": 32}, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, ir_override=None)
    captured = autotune.capture(cold, [("chunk_kda_bwd_kernel", {(64, "torch.bfloat16"): cfg})], {"fla": "0.6.0"})
    assert list(captured["triton_files"]) == ["ABC/chunk_kda_bwd_kernel.autotune.json"]
    entry = captured["fla_configs"]["chunk_kda_bwd_kernel"]["autotune_entries"][autotune.fla_key_hash([64, "torch.bfloat16"])]
    assert entry["config"]["num_warps"] == 4 and entry["config"]["kwargs"] == {"BK": 32}
    warm, fla = tmp_path / "warm", tmp_path / "fla"
    installed = autotune.install(json.loads(json.dumps(captured)), warm, fla)
    assert autotune.autotuned_kernels(warm, installed) == []
    (warm / "XYZ").mkdir()
    (warm / "XYZ" / "l2norm_fwd_kernel.autotune.json").write_text("{}")          # tuned in the process
    assert autotune.autotuned_kernels(warm, installed) == ["l2norm_fwd_kernel"]
    assert json.loads((fla / "chunk_kda_bwd_kernel.json").read_text())["kernel_name"] == "chunk_kda_bwd_kernel"


@pytest.mark.parametrize("mode,fla_mode", [("warm", "strict"), ("cold", "disabled")])
def test_cache_environment(tmp_path, mode, fla_mode):
    env = autotune.environment(mode, tmp_path / "t", tmp_path / "f")
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "t") and env["FLA_CACHE_MODE"] == fla_mode
    assert ("FLA_CONFIG_DIR" in env) == (mode == "warm")


# ---------------------------------------------------------------- runner bookkeeping (imports no torch)

def test_runner_bookkeeping(tmp_path):
    from livebytes.validate.gpu import runner
    from livebytes.validate.gpu.triton_state import triton_state
    assert runner.nonpytorch_bytes(free=100, total=1000, reserved=300) == 600      # 1000 - 100 - 300
    s = runner.seconds_of(total=60.0, compile_s=40.0, measure_s=5.0, lock_wait=3.0)
    assert s == {"setup": 12.0, "compile": 40.0, "measure": 5.0, "total": 60.0, "lock_wait": 3.0}  # 60-40-5-3
    ctx = runner.RunContext("fresh-process", "expandable_segments:False", "warm", triton_dir=tmp_path, installed=set())
    assert triton_state(ctx)["triton_cache"] == "warm"
    (tmp_path / "k.autotune.json").write_text("{}")
    assert triton_state(ctx) == {"triton_cache": "cold", "triton_cache_requested": "warm",
                                       "autotuned_kernels": ["k"]}
    assert triton_state(runner.RunContext("m", "c", "n/a")) == {"triton_cache": "n/a"}


def test_alloc_conf_must_precede_torch():
    from livebytes.validate.gpu.environment import apply_alloc_conf
    env = {}
    apply_alloc_conf("expandable_segments:False", env, modules={})
    assert env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}
    apply_alloc_conf("expandable_segments:False", env, modules={"torch": object()})   # same: fine
    with pytest.raises(LivebytesError, match="already imported"):
        apply_alloc_conf("expandable_segments:True", env, modules={"torch": object()})


def test_captures_of_several_processes_merge():
    a = {"gpu": "H200", "fla": "0.6.0", "triton": "3.6.0", "triton_files": {"A/k.autotune.json": {"n": 1}},
         "fla_configs": {"k": {"kernel_name": "k", "autotune_entries": {"h1": {"n": 1}}}}}
    b = {**a, "triton_files": {"B/k.autotune.json": {"n": 2}, "A/k.autotune.json": {"n": 9}},
         "fla_configs": {"k": {"kernel_name": "k", "autotune_entries": {"h2": {"n": 2}, "h1": {"n": 9}}}}}
    m = autotune.merge([a, b])
    assert m["triton_files"] == {"A/k.autotune.json": {"n": 1}, "B/k.autotune.json": {"n": 2}}   # the first capture wins
    assert m["fla_configs"]["k"]["autotune_entries"] == {"h1": {"n": 1}, "h2": {"n": 2}}
    with pytest.raises(ValueError, match="different GPUs or versions"):
        autotune.merge([a, {**b, "triton": "3.7.1"}])


def _boundary_probe():
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "validate" / "gpu" / "probes" / "boundary_probe.py"   # its source, read by path
    spec = importlib.util.spec_from_file_location("boundary_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)        # imports torch only when a probe runs
    return module


def test_the_probes_bisection_closes_on_the_edge_and_writes_every_trial():
    """fits below 1,000: [900, 1,100] halves to 1,000 / 1,012 (mid 1000 fits, 1050, 1025, 1012 do not: 4 trials)."""
    bp = _boundary_probe()
    args = bp.parser().parse_args(["--impl", "fla-report", "--state", "cold", "--out", "x", "--lo", "900", "--hi", "1100",
                                   "--step", "16"])
    lines: list = []
    bp.bisect(args, lambda v: {"fits": v <= 1000}, lines.append)
    assert [d["value"] for d in lines[:-1]] == [1000, 1050, 1025, 1012]
    assert lines[-1] == {"stage": "result", "solve": "seq", "largest_fit": 1000, "smallest_oom": 1012}


def test_a_layer_probe_records_its_stack_and_a_kernel_probe_none():
    bp = _boundary_probe()
    layer = bp.parser().parse_args(["--impl", "fla-kda-layer", "--state", "cold", "--out", "x", "--layers", "4"])
    kernel = bp.parser().parse_args(["--impl", "fla-report", "--state", "cold", "--out", "x"])
    assert bp.layer_of(layer) == {"hidden": 2304, "layers": 4, "checkpoint": False, "conv_size": 4}
    assert bp.layer_of(kernel) is None
    from livebytes.validate.check.probe_records import model_of
    assert model_of("fla-kda-layer", {"fla": "0.6.0", "layer": bp.layer_of(layer)}) == (
        "fla-kda-layer@0.6.0", {"hidden": 2304, "layers": 4, "checkpoint": False, "conv_size": 4})

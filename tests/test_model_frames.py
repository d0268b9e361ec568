"""A whole model's stack limit derived on the CPU (issue 48 point 1): every Triton kernel its traced step launches
compiled for sm90, the largest frame the driver's limit (estimator/process/model_frames.py, loo.derived_model_rows,
memory._model_limit_derived)."""
import ast
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from livebytes.estimator.devices import get_device
from livebytes.estimator.process import loo, model_frames
from livebytes.estimator.process.memory import process_memory
from livebytes.estimator.process.driver import driver_stack_limit
from livebytes.estimator.process.status import Kind
from livebytes.process_words import status_words
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced.presets import config_of
from livebytes.validate.check.frames import _model_case, model_build

H200 = get_device("H200")
MIB = 2**20


def entry(frames: dict, **over) -> dict:
    return {"case": "fla-kda-model:- D128 H32 HV32", "mbs": 1, "seq": 32_768, "architecture": "abc", "precision": "bf16",
            "packed": False, "triton": "3.6.0", "frames": frames, "partial": False, "measured_limit_bytes": 14_528,
            **over}


def test_a_steps_frame_is_its_largest_kernels():
    step = model_frames.step_of("r/x.json", entry({"l2norm_bwd_kernel": 5_544, "wy_fused": 14_456, "conv": 0}))
    assert (step.frame, step.kernel, step.tokens, step.name) == (14_456, "wy_fused", 32_768, "x")


def test_a_partial_or_empty_derivation_is_never_read():
    assert model_frames.step_of("r/x.json", entry({"wy": 14_456}, partial=True)) is None
    assert model_frames.step_of("r/x.json", entry({})) is None


def test_a_step_is_found_by_its_build_and_length_only():
    steps = model_frames.steps_in({"records": {"r/a.json": entry({"wy": 14_456}),
                                               "r/b.json": entry({"wy": 16_312}, seq=467_490)}})
    assert model_frames.for_step("abc", "bf16", False, 1, 32_768, "3.6.0", steps).frame == 14_456
    assert model_frames.for_step("abc", "bf16", False, 1, 467_490, "3.6.0", steps).frame == 16_312
    assert model_frames.for_step("abc", "bf16", False, 1, 16_384, "3.6.0", steps) is None      # another length
    assert model_frames.for_step("abc", "fp32-amp", False, 1, 32_768, "3.6.0", steps) is None  # other dtypes
    assert model_frames.for_step("abc", "bf16", False, 1, 32_768, "3.9.0", steps) is None      # another Triton
    assert model_frames.for_records(("r/a.json", "r/b.json"), "3.6.0", steps).frame == 16_312


def test_a_derived_row_by_hand():
    """Frame 14,456 B -> limit 14,464 (16-byte rounding); measured 14,528. 14,464 x 270,336 = 3,910,139,904 B = 1,864.5
    pages -> 1,865; 14,528 x 270,336 = 3,927,441,408 B = 1,872.75 -> 1,873: 8 pages, 16 MiB low."""
    steps = model_frames.steps_in({"records": {"r/a.json": entry({"wy": 14_456})}})
    row, = loo.derived_model_rows("fla-core-0.6.0_triton-3.6.0_H200.json", H200, steps)
    assert (row.committed, row.estimated, row.error) == (14_528, 14_464, -8 * 2 * MIB)
    assert (row.kind, row.case, row.tokens) == ("whole-model limit, derived", "fla-kda-model:- D128 H32 HV32", 32_768)
    assert loo.derived_model_rows("fla-core-0.6.0_triton-3.9.0_H200.json", H200, steps) == []


def _model(architecture: str):
    return SimpleNamespace(key="fla-kda-model@0.6.0", autotuned=(), options={
        "architecture": architecture, "layers": 32, "optimizer": "adamw", "precision": "bf16", "packed": False})


@pytest.fixture
def one_step(monkeypatch):
    steps = model_frames.steps_in({"records": {"r/a.json": entry({"wy": 14_456})}})
    monkeypatch.setattr(model_frames, "steps", lambda: steps)
    loo.rows.cache_clear()          # the leave-one-out rows read the steps: none kept from this stand-in
    yield
    loo.rows.cache_clear()


def test_a_derived_step_decides_the_models_limit(one_step):
    """A KDA model at a head count its process data never measured (H24; run 39 a measured H32, and a length measured
    wins over a derivation) at its derived length: 14,464 B, derived, no leave-one-out margin; 14,464 x 270,336 ->
    1,865 pages less the default limit's 132 (1,024 B x 270,336 = 276,824,064 B = 132 pages) = 1,733 pages."""
    p = process_memory(H200, _model("abc"), "cold", Shape(1, 32_768, 24, 128))
    assert (p.stack_limit_bytes, p.stack.kind, p.stack.margin) == (14_464, Kind.DERIVED, 0)
    assert p.stack.bytes == (1_865 - 132) * 2 * MIB
    warm = process_memory(H200, _model("abc"), "warm", Shape(1, 32_768, 24, 128))
    assert (warm.stack_limit_bytes, warm.stack.kind) == (14_464, Kind.BOUNDED)


def test_another_build_or_length_is_not_derived(one_step):
    """Another build at H24 (no process ran H24): the whole-model rule, its high end 281,018,368 B counted. The derived
    build at a shorter length: its 32,768-token step's limit (14,456 -> 14,464 B), estimated as a length between
    measured ones is (never short over the committed points: margin 0); above its longest derived length, the rule."""
    other = process_memory(H200, _model("other"), "cold", Shape(1, 32_768, 24, 128))
    assert (other.stack.kind, other.stack.margin) == (Kind.ESTIMATED, 281_018_368)
    shorter = process_memory(H200, _model("abc"), "cold", Shape(1, 16_384, 24, 128))
    assert (shorter.stack.kind, shorter.stack_limit_bytes, shorter.stack.margin) == (Kind.ESTIMATED, 14_464, 0)
    assert "at 32,768 tokens (a), the next longer length derived" in status_words(shorter.stack.status)
    longer = process_memory(H200, _model("abc"), "cold", Shape(1, 65_536, 24, 128))
    assert (longer.stack.kind, longer.stack.margin) == (Kind.ESTIMATED, 281_018_368)


def test_the_next_longer_derived_step_is_the_shortest_above():
    steps = model_frames.steps_in({"records": {"r/a.json": entry({"wy": 14_456}),
                                               "r/b.json": entry({"wy": 16_312}, seq=467_490),
                                               "r/c.json": entry({"wy": 1}, architecture="other", seq=65_536)}})
    assert model_frames.next_longer("abc", "bf16", False, 8_192, "3.6.0", steps).frame == 14_456
    assert model_frames.next_longer("abc", "bf16", False, 32_768, "3.6.0", steps).frame == 16_312   # strictly above
    assert model_frames.next_longer("abc", "bf16", False, 467_490, "3.6.0", steps) is None
    assert model_frames.next_longer("abc", "bf16", True, 8_192, "3.6.0", steps) is None            # not packed


def test_a_measured_length_wins_over_a_derivation(one_step, monkeypatch):
    """H32 at 32,768 tokens is run 39 a's measured point (14,528 B, build 590025360c2b, 32 layers): at that build the
    derivation (14,464 here) does not replace it."""
    steps = model_frames.steps_in({"records": {"r/a.json": entry({"wy": 14_456}, architecture="590025360c2b")}})
    monkeypatch.setattr(model_frames, "steps", lambda: steps)
    p = process_memory(H200, _model("590025360c2b"), "cold", Shape(1, 32_768, 32, 128))
    assert (p.stack_limit_bytes, p.stack.kind) == (14_528, Kind.MEASURED)


def test_another_builds_measured_length_gives_way_to_this_builds_derivation(one_step):
    """Run 39 a measured H32 at 32,768 tokens at another build (590025360c2b); build "abc"'s own step, derived at that
    length, decides: 14,464 B, derived (before: 14,528, unbounded: "which bounds nothing")."""
    p = process_memory(H200, _model("abc"), "cold", Shape(1, 32_768, 32, 128))
    assert (p.stack_limit_bytes, p.stack.kind, p.stack.margin) == (14_464, Kind.DERIVED, 0)


def test_the_rounding_is_the_drivers():
    assert [driver_stack_limit(f) for f in (14_456, 14_464, 0)] == [14_464, 14_464, 1_024]


def test_the_committed_derivations_are_their_records():
    """Every committed derivation names a record of this repository, its case key and build as the process data name
    them, the limit that record measured, and its frames from the record's Triton."""
    root = Path(__file__).resolve().parents[1]
    data = json.loads(model_frames.DATA.read_text())
    assert data["records"]
    for path, e in data["records"].items():
        if "#" in path:         # a step no GPU ran (a preset at a length): its config, read as --model reads it
            config, shape = path.split("#")
            record = {"config": json.loads(config_of(config)), "options": {"precision": e["precision"]},
                      "steps": [{}], "shape": dict(zip(("mbs", "seq"), map(int, shape.split("x")))),
                      "versions": {"triton": e["triton"]}}
        else:
            record = json.loads((root / path).read_text())
        options = record.get("options", {})
        assert e["case"] == _model_case(record["config"], options)
        assert e["architecture"] == model_build(record["config"], options)["architecture"]
        assert e["measured_limit_bytes"] == record["steps"][0].get("stack_limit_bytes")
        assert (e["mbs"], e["seq"]) == (record["shape"]["mbs"], record["shape"]["seq"])
        assert e["triton"] == record["versions"]["triton"] and not e["partial"]


def test_run_39_a_is_derived_exactly():
    """Run 39 a (the 7B-class KDA model, H32 D128, 32,768 tokens, Triton 3.6.0): its step's largest frame is
    swiglu_fwdbwd_kernel's 14,520 B -> 14,528 B by the driver's 16-byte rounding, the limit the H100 measured."""
    step = model_frames.for_records(("validate/data/records/runs/run39/a/a-kda7b-32k.json",), "3.6.0")
    assert (step.frame, step.kernel, step.measured) == (14_520, "swiglu_fwdbwd_kernel", 14_528)
    assert driver_stack_limit(step.frame) == 14_528


def test_every_committed_derivation_is_its_records_limit():
    """Every derived step's largest frame, rounded up to 16 B by the driver, is the limit its record measured after the
    first step: one record per committed whole-model point and build, Triton 3.6.0 and 3.9.0 (the latter compiled by
    the bundled legacy ptxas, as the GPU runs were); run 46's three (GLA, KDA D64, DeltaNet) and run 47's KDA D64 H24
    derived before they ran."""
    measured = [s for s in model_frames.steps() if s.measured is not None]
    off = [(s.name, s.frame, s.measured) for s in measured if driver_stack_limit(s.frame) != s.measured]
    assert len(measured) == 40 and off == []


def test_the_long_sequence_limit_is_an_int64_specialisation():
    """The 1.3B KDA model (intermediate size 5,632): fla's swiglu_fwdbwd_kernel takes T = x.numel() as a plain integer.
    At 32,768 tokens T = 184,549,376 (int32): 15,272 B; at 467,490 tokens T = 2,632,903,680 > 2**31 = 2,147,483,648
    (int64): 16,312 B, which sets the step's limit, 16,320 B as measured."""
    short = model_frames.for_records(("validate/data/records/models/h200_run26_ho2-ckpt32k.json",), "3.6.0")
    long = model_frames.for_records(("validate/data/records/models/h200_run27_edge-1.3b-467490.json",), "3.6.0")
    assert 32_768 * 5_632 < 2**31 < 467_490 * 5_632
    assert (short.kernel, short.frame, long.kernel, long.frame) == ("swiglu_fwdbwd_kernel", 15_272,
                                                                    "swiglu_fwdbwd_kernel", 16_312)
    assert (driver_stack_limit(short.frame), long.measured) == (15_280, 16_320)


def _target_setup_calls(path) -> set[str]:
    """The ``livebytes.tracer.target`` functions a file calls by name (``install``, ``meta_*``)."""
    tree = ast.parse(Path(path).read_text())
    names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
             and n.module.endswith("target") for a in n.names}
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in names}


def test_the_probe_sets_up_meta_tensors_as_the_tracers_process_does():
    """The probe traces the step in its own process: every target shim the tracer's process installs must be its too
    (without ``meta_autocast_is_cuda`` peft's expert LoRA stopped the Qwen3-Next LoRA step mid-trace: 856 B, not
    21,064)."""
    root = Path(__file__).parents[1]
    tracer = _target_setup_calls(root / "tracer" / "__main__.py")
    assert {"install", "meta_autocast_is_cuda", "meta_index_is_device_0", "meta_runs_gpu_packages"} <= tracer
    assert tracer <= _target_setup_calls(root / "validate" / "gpu" / "probes" / "model_frames.py")


def _deriver():
    """validate/gpu/derive_model_frames.py, loaded by its path (a script, not a module of the package)."""
    path = Path(__file__).parents[1] / "validate" / "gpu" / "derive_model_frames.py"
    spec = importlib.util.spec_from_file_location("derive_model_frames", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv, said", [
    (["--config", "no-such-preset", "--seq-len", "8192"], "error: --config no-such-preset: no such preset; presets: "),
    (["--config", "/etc/hostname", "--seq-len", "8192"], "error: --config /etc/hostname: a preset's name or a config "
                                                         "file inside this repository"),
    (["--config", "kimi-linear-small"], "error: give record files, or --config with --seq-len above 0"),
    ([], "error: give record files, or --config with --seq-len above 0")])
def test_the_deriver_refuses_a_bad_step_in_one_line(argv, said, tmp_path):
    """Nothing is compiled or written for a step it cannot key or read (no interpreter is asked: --python false)."""
    with pytest.raises(SystemExit) as stop:
        _deriver().main([*argv, "--python", "false", "--out", str(tmp_path), "--data", str(tmp_path / "d.json")])
    assert str(stop.value).startswith(said) and "\n" not in str(stop.value)
    assert not (tmp_path / "d.json").exists()


def test_a_presets_step_is_keyed_by_its_name_and_shape():
    assert _deriver().config_key("kimi-linear-48b-a3b", 1, 32_768) == "kimi-linear-48b-a3b#1x32768"
    preset_file = Path(__file__).parents[1] / "lifetimes" / "traced" / "presets" / "kimi-linear-small.json"
    assert _deriver().config_key(str(preset_file), 2, 8_192) == "lifetimes/traced/presets/kimi-linear-small.json#2x8192"

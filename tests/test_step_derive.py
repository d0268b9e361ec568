"""A whole model's step derived on demand (issue 48 point 1, "off the grid, derive on demand"): ``livebytes frames derive
--model CONFIG --seq-len N`` runs the model-frames probe on the user's config (faked here: a real derivation takes
minutes), keeps the entry signed in the private cache (``estimator/process/model_frames.py``: ``save_here``,
``steps_here``), and every later answer of that build at that length takes its stack limit from it: a config the
whole-model rule estimated, and a family no process ran (no stack counted before)."""
import json
import subprocess
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from livebytes.estimator.devices import get_device
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.process import model_frames
from livebytes.estimator.process.memory import process_memory
from livebytes.estimator.process.status import Kind
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced.presets import config_of
from livebytes.process_words import assumptions_words, status_words
from livebytes.validate.check.frames import model_build
from livebytes.validate.gpu import derive_model_frames

H200 = get_device("H200")
MIB = 2**20
PTXAS = "ptxas (Cuda compilation tools, release 12.8, V12.8.93)"
KIMI_SMALL = model_build(json.loads(config_of("kimi-linear-small")), {})["architecture"]     # af24e2c5c9f2


def entry(frames: dict, **over) -> dict:
    return {"case": "fla-kda-model:- D128 H24 HV24", "architecture": "mine", "mbs": 1, "seq": 8_192,
            "precision": "bf16", "packed": False, "checkpoint": False, "triton": "3.6.0", "ptxas": PTXAS,
            "frames": frames, "partial": False, "measured_limit_bytes": None, **over}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test its own cache folder (nothing derived here reaches another test); Python's installed versions as the
    3.6.0 machine reports them."""
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(derive_model_frames, "inspect", lambda python: {"triton": "3.6.0", "fla": "0.6.0", "gpu": None})
    return tmp_path / "cache"


def _model(key: str, architecture: str = "mine", **options):
    return SimpleNamespace(key=key, autotuned=(), options={
        "architecture": architecture, "layers": 4, "optimizer": "adamw", "precision": "bf16", "packed": False,
        **options})


def test_a_step_derived_here_is_read_after_the_committed_ones():
    assert model_frames.save_here("mine.json#1x8192", entry({"wy": 14_456, "conv": 0}))
    (step,) = model_frames.steps_here()
    assert (step.record, step.frame, step.kernel, step.ptxas, step.here) == ("mine.json#1x8192", 14_456, "wy", PTXAS, True)
    assert model_frames.known()[-1] == step and step not in model_frames.known(here=False)
    assert model_frames.for_step("mine", "bf16", False, 1, 8_192, "3.6.0", model_frames.known()) == step
    assert model_frames.for_step("mine", "bf16", False, 1, 8_192, model_frames.ANY, model_frames.known()) == step
    assert model_frames.for_step("mine", "bf16", False, 1, 8_192, "3.9.0", model_frames.known()) is None


@pytest.mark.parametrize("bad", [entry({"wy": 1}, partial=True), entry({}), entry({"wy": -1}), entry({"wy": 1.5}),
                                 {k: v for k, v in entry({"wy": 1}).items() if k != "ptxas"}])
def test_a_partial_or_malformed_step_is_refused(bad):
    with pytest.raises(ValueError, match="not a complete derived step"):
        model_frames.save_here("x#1x1", bad)
    assert model_frames.steps_here() == ()


def test_two_configs_of_one_name_keep_their_own_steps_and_a_second_derivation_replaces():
    """Every HF checkpoint's config is ``config.json``: the store keys a step by its build and shape, not its name."""
    model_frames.save_here("config.json#1x8192", entry({"wy": 14_456}, architecture="a"))
    model_frames.save_here("config.json#1x8192", entry({"wy": 19_376}, architecture="b"))
    assert sorted((s.architecture, s.frame) for s in model_frames.steps_here()) == [("a", 14_456), ("b", 19_376)]
    model_frames.save_here("other.json#1x8192", entry({"wy": 15_000}, architecture="a"))
    assert sorted((s.record, s.frame) for s in model_frames.steps_here()) == [("config.json#1x8192", 19_376),
                                                                               ("other.json#1x8192", 15_000)]


def test_a_tampered_step_is_never_read(private_cache):
    model_frames.save_here("mine.json#1x8192", entry({"wy": 14_456}))
    (path,) = private_cache.rglob(f"{model_frames.FOLDER}/*.json")
    path.write_bytes(path.read_bytes().replace(b"14456", b"14000"))
    assert model_frames.steps_here() == ()


def test_an_estimated_limit_names_the_command_that_derives_the_step():
    """A KDA model at H24 (no process ran it) of a build nothing derived: the whole-model rule, estimated, and the
    line that replaces it (batch and checkpointing as asked; bf16 said by leaving --precision out)."""
    p = process_memory(H200, _model("fla-kda-model@0.6.0"), "cold", Shape(1, 8_192, 24, 128))
    assert p.stack.kind is Kind.ESTIMATED
    assert status_words(p.stack.status).endswith("livebytes frames derive --model CONFIG --seq-len 8192")
    two = process_memory(H200, _model("fla-kda-model@0.6.0", checkpoint=True), "cold", Shape(2, 8_192, 24, 128))
    assert status_words(two.stack.status).endswith("--seq-len 8192 --batch-size 2 --checkpoint")
    packed = process_memory(H200, _model("fla-kda-model@0.6.0", packed=True), "cold", Shape(2, 8_192, 24, 128))
    assert "frames derive --model" not in status_words(packed.stack.status)     # the deriver traces unpacked steps


def test_a_step_derived_here_decides_the_models_limit_and_says_where():
    """The same case once derived here: 14,456 -> 14,464 B, derived on this machine, no leave-one-out margin; the
    record checks (``derived_frames=False``) read the committed data only and keep the estimate."""
    model_frames.save_here("mine.json#1x8192", entry({"wy": 14_456}))
    p = process_memory(H200, _model("fla-kda-model@0.6.0"), "cold", Shape(1, 8_192, 24, 128))
    assert (p.stack_limit_bytes, p.stack.kind, p.stack.margin) == (14_464, Kind.DERIVED, 0)
    assert status_words(p.stack.status) == f"derived (on this machine, Triton 3.6.0, {PTXAS})"
    assert "derived on this machine (derived_model_frames in the private cache: mine.json#1x8192" in p.stack.source
    committed_only = process_memory(H200, _model("fla-kda-model@0.6.0"), "cold", Shape(1, 8_192, 24, 128),
                                    derived_frames=False)
    assert committed_only.stack.kind is Kind.ESTIMATED


def test_a_family_no_process_ran_takes_its_derived_step():
    """fla's RetNet model (no process data list it; GLA and DeltaNet are listed since run 46 measured them): before, no
    stack at all ("counted as the context only") and the line that derives it; after, a derived frame of 24,168 B (run
    46 c's DeltaNet figure) -> limit 24,176: x 270,336 = 6,535,643,136 B =
    3,116.5 pages -> 3,117, less the default limit's 132 = 2,985 pages = 6,259,998,720 B, derived; the modules still
    not measured (said)."""
    model = _model("fla-retnet-model@0.6.0", "dn")
    before = process_memory(H200, model, "cold", Shape(1, 8_192, 8, 128))
    assert before.stack.bytes == 0
    words = " ".join(assumptions_words(before))
    assert "counted as the context only" in words and "livebytes frames derive --model CONFIG --seq-len 8192" in words
    model_frames.save_here("dn.json#1x8192", entry({"chunk_bwd_kernel_dqkwg": 24_168}, architecture="dn",
                                                   case="fla-retnet-model:- D128 H8 HV8"))
    after = process_memory(H200, model, "cold", Shape(1, 8_192, 8, 128))
    assert (after.stack_limit_bytes, after.stack.bytes, after.stack.kind) == (24_176, 6_259_998_720, Kind.DERIVED)
    assert after.bytes == after.context.bytes + 6_259_998_720
    words = " ".join(assumptions_words(after))
    assert "modules are not measured" in words and "context only" not in words
    h100 = process_memory(get_device("H100"), model, "cold", Shape(1, 8_192, 8, 128))
    assert h100.stack.kind is Kind.ESTIMATED and "off the H200" in status_words(h100.stack.status)


def summary(frames=None, **over) -> dict:
    """The probe's summary line of a finished derivation."""
    frames = frames or {"chunk_kda_bwd_kernel_wy_dqkg_fused": 19_376, "l2norm_fwd_kernel": 512}
    return {"tag": "step", "frames": frames, "largest_frame_bytes": max(frames.values()), "compiled": 352,
            "counted": 352, "seconds": 71.2, "target": "cuda sm90", "triton": "3.6.0", "fla": "0.6.0", "ptxas": PTXAS,
            **over}


class FakeProbe:
    """process_group.run for the probe: prints ``line`` as its summary; keeps each command and its environment."""
    def __init__(self, line: dict | None, returncode: int = 0):
        self.line, self.returncode, self.calls = line, returncode, []

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        out = json.dumps(self.line) + "\n" if self.line is not None else ""
        return subprocess.CompletedProcess(argv, self.returncode, out, "Traceback ...\nRuntimeError: boom\n")


def test_derive_here_runs_the_probe_on_the_step_and_keeps_it(monkeypatch):
    probe = FakeProbe(summary())
    monkeypatch.setattr(derive_model_frames.process_group, "run", probe)
    found = derive_model_frames.derive_here("kimi-linear-small", 1, 8_192, workers=3)
    assert (found["record"], found["stack_limit_bytes"], found["stored"]) == ("kimi-linear-small#1x8192", 19_376, True)
    assert (found["architecture"], found["case"]) == (KIMI_SMALL, "kimi-linear-model:- D192 H32 HV32")
    (argv, kwargs), = probe.calls
    assert argv[-2:] == ["--workers", "3"] and kwargs["env"]["CUDA_VISIBLE_DEVICES"] == ""   # 3.6.0: no legacy ptxas
    (step,) = model_frames.steps_here()
    assert (step.architecture, step.seq, step.frame) == (KIMI_SMALL, 8_192, 19_376)


@pytest.mark.parametrize("line, code, said", [
    (summary(error="RuntimeError: unsupported scalarType"), 1, "did not reach its end on the CPU (RuntimeError: "
                                                               "unsupported scalarType)"),
    (None, 1, "did not reach its end on the CPU (RuntimeError: boom)"),
    (summary(), 1, "did not reach its end on the CPU (RuntimeError: boom)"),     # a summary, then a failed exit
    (summary(frames={"x": 0}) | {"frames": {}}, 0, "did not reach its end"),      # nothing counted
    # the tracer's known refusals read as predict says them, not as a raw assertion
    (summary(error="AssertionError: Only support CUDA/NPU/XPU tensors"), 1,
     "FLA's FusedCrossEntropyLoss (the config's fuse_cross_entropy"),
    (summary(ptxas="ptxas-blackwell"), 0, None),                # 3.6.0: the ptxas is not checked
])
def test_derive_here_refuses_a_step_not_traced_to_its_end(monkeypatch, line, code, said):
    monkeypatch.setattr(derive_model_frames.process_group, "run", FakeProbe(line, returncode=code))
    if said is None:
        assert derive_model_frames.derive_here("kimi-linear-small", 1, 8_192)["stored"]
        return
    with pytest.raises(LivebytesError) as err:
        derive_model_frames.derive_here("kimi-linear-small", 1, 8_192)
    assert str(err.value).startswith("kimi-linear-small#1x8192: ") and said in str(err.value)
    assert "\n" not in str(err.value) and model_frames.steps_here() == ()


def test_triton_39_compiles_with_the_legacy_ptxas_and_checks_it(monkeypatch):
    monkeypatch.setattr(derive_model_frames, "inspect", lambda python: {"triton": "3.9.0", "fla": "0.6.0", "gpu": None})
    probe = FakeProbe(summary(triton="3.9.0", ptxas="ptxas-blackwell"))
    monkeypatch.setattr(derive_model_frames.process_group, "run", probe)
    with pytest.raises(LivebytesError, match="sm90 compiled by ptxas-blackwell"):
        derive_model_frames.derive_here("qwen3-next-small", 1, 8_192)
    assert "--legacy-ptxas" in probe.calls[0][0]


@pytest.mark.parametrize("config, precision, said", [
    ("kimi-linear-small", "fp16", "precision 'fp16': one of bf16, fp32-amp"),
    ("no-such-preset", "bf16", "no-such-preset"),
])
def test_derive_here_refuses_before_compiling(monkeypatch, config, precision, said):
    probe = FakeProbe(summary())
    monkeypatch.setattr(derive_model_frames.process_group, "run", probe)
    with pytest.raises(LivebytesError, match=said):
        derive_model_frames.derive_here(config, 1, 8_192, precision=precision)
    assert probe.calls == []


def test_a_timeout_is_one_line(monkeypatch):
    def late(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
    monkeypatch.setattr(derive_model_frames.process_group, "run", late)
    with pytest.raises(LivebytesError, match="did not finish within 5 s"):
        derive_model_frames.derive_here("kimi-linear-small", 1, 8_192, timeout=5)


def _cli(*args):
    from livebytes.cli.app import app
    return CliRunner().invoke(app, list(args))


def test_the_command_derives_a_step_lists_it_and_the_answer_reads_it(monkeypatch):
    """kimi-linear-small at 12,288 tokens: no process ran that length (the next longer one measured decides,
    estimated); derived here, its own step decides (the probe's frame 19,376 B stands in)."""
    model, shape = _model("kimi-linear-model@5.17.0", KIMI_SMALL), Shape(1, 12_288, 32, 192)
    assert process_memory(H200, model, "cold", shape).stack.kind is Kind.ESTIMATED
    monkeypatch.setattr(derive_model_frames.process_group, "run", FakeProbe(summary()))
    result = _cli("frames", "derive", "--model", "kimi-linear-small", "--seq-len", "12K", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["results"]
    assert (row["case"], row["largest_frame_bytes"], row["triton"]) == ("kimi-linear-small#1x12288", 19_376, "3.6.0")
    listed = json.loads(_cli("frames", "list", "--json").output)["results"]
    assert [r["case"] for r in listed] == ["kimi-linear-small#1x12288"]
    p = process_memory(H200, model, "cold", shape)
    assert (p.stack_limit_bytes, p.stack.kind) == (19_376, Kind.DERIVED)


@pytest.mark.parametrize("args, message", [
    (("frames", "derive", "--model", "kimi-linear-small"), "--seq-len is required"),
    (("frames", "derive", "--model", "kimi-linear-small", "--seq-len", "8K", "--num-heads", "8"),
     "--num-heads has no effect with frames derive --model"),
    (("frames", "derive", "--impl", "fla-kda@0.6.0", "--num-heads", "56", "--seq-len", "8K"),
     "--seq-len has no effect without --model"),
    (("frames", "list", "--model", "kimi-linear-small"), "--model has no effect with frames list"),
    (("frames", "derive", "--model", "kimi-linear-small", "--seq-len", "0"), "error: "),
    (("frames", "derive", "--model", "kimi-linear-small", "--seq-len", "8K", "--precision", "fp8"), "fp8"),
])
def test_the_command_refuses_in_one_line(args, message):
    result = _cli(*args)
    assert result.exit_code in (1, 2)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output


def test_the_api_call_refuses_a_dict_config():
    from livebytes.frames import derive_model_frames
    with pytest.raises(LivebytesError, match="a preset's name or a config file's path"):
        derive_model_frames({"model_type": "kda"}, seq_len=8192)


def test_a_step_under_a_triton_its_answers_do_not_read_is_refused_before_compiling(monkeypatch):
    """kimi-linear-small's answers read Triton 3.6.0's kernels: a 3.9.0 derivation would never be read."""
    monkeypatch.setattr(derive_model_frames, "inspect", lambda python: {"triton": "3.9.0", "fla": "0.6.0", "gpu": None})
    probe = FakeProbe(summary(triton="3.9.0"))
    monkeypatch.setattr(derive_model_frames.process_group, "run", probe)
    with pytest.raises(LivebytesError, match="the installed Triton is 3.9.0; answers of kimi-linear-model@5.17.0 read "
                                             "Triton 3.6.0's kernels"):
        derive_model_frames.derive_here("kimi-linear-small", 1, 8_192)
    assert probe.calls == []


def test_a_liger_or_packed_step_is_neither_offered_nor_read_from_this_machine():
    """The deriver traces the unpacked step with the model's own loss: a step derived here says nothing of Liger's
    kernels, and no command is offered that could not derive the asked step."""
    model_frames.save_here("mine.json#1x8192", entry({"wy": 14_456}))
    shape = Shape(1, 8_192, 24, 128)
    liger = process_memory(H200, _model("fla-kda-model@0.6.0", loss="liger"), "cold", shape)
    assert liger.stack.kind is Kind.ESTIMATED and "frames derive --model" not in status_words(liger.stack.status)
    plain = process_memory(H200, _model("fla-kda-model@0.6.0", loss="default"), "cold", shape)
    assert plain.stack.kind is Kind.DERIVED


def test_an_unlisted_familys_missing_stack_is_unbounded_not_measured():
    before = process_memory(H200, _model("fla-gsa-model@0.6.0", "g"), "cold", Shape(1, 4_096, 4, 128))
    assert (before.stack.bytes, before.stack.kind) == (0, Kind.UNBOUNDED)
    assert status_words(before.stack.status).startswith("unbounded: its step's Triton kernels' frames neither "
                                                        "measured nor derived: no stack counted; derive")
    # derived at 8,192 tokens only: a shorter step takes it, estimated (the length tier's words)
    model_frames.save_here("g.json#1x8192", entry({"swiglu_fwdbwd_kernel": 14_520}, architecture="g",
                                                  case="fla-gsa-model:- D128 H4 HV4"))
    shorter = process_memory(H200, _model("fla-gsa-model@0.6.0", "g"), "cold", Shape(1, 4_096, 4, 128))
    assert (shorter.stack_limit_bytes, shorter.stack.kind) == (14_528, Kind.ESTIMATED)


def test_the_record_checks_never_read_this_machines_steps(monkeypatch):
    """validate/check/model_records.py asks the committed model only (``derived_frames=False``)."""
    from livebytes.validate.check import model_records
    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs.get("derived_frames", True))
        raise RuntimeError("stop")
    monkeypatch.setattr(model_records, "process_memory", spy)
    with pytest.raises(RuntimeError, match="stop"):
        model_records._process_checks({"triton_cache": "cold"}, None, None, H200, None, "x")
    assert seen == [False]

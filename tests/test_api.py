"""``import livebytes``: the Python API (issue 34). Its answers are the command line's --json, its keywords the HF/FLA
names, its version the installed one; the alloc conf comes from the environment when not given."""
import doctest
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import livebytes
from livebytes.cli.app import app
from livebytes.choose import alloc_conf_of
from livebytes.estimator.errors import LivebytesError, UsageProblem

ROOT = Path(__file__).parent.parent
GiB = 2**30


def cli_json(args: list[str]) -> dict:
    r = CliRunner().invoke(app, args + ["--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_version_is_the_installed_distributions():
    """pyproject.toml's version, as pip installed it (not a second copy in the source)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert livebytes.__version__ == re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)


def test_the_issues_acceptance_line():
    """``python -c "import livebytes; print(livebytes.predict('fla-kda@0.6.0', seq_len=8192, num_heads=96).fits)"``"""
    assert livebytes.predict("fla-kda@0.6.0", seq_len=8192, num_heads=96).fits is True


# (API call, its arguments, the command line that must print the same JSON, which part of that JSON to_dict() is)
SAME_AS_CLI = {
    "predict": (livebytes.predict, ("fla-kda@0.6.0",), dict(seq_len="8K", num_heads=96),
                ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "96"], "result"),
    "predict-oom": (livebytes.predict, ("fla-kda@0.6.0",), dict(seq_len=262144, num_heads=128),
                    ["predict", "--impl", "fla-kda@0.6.0", "--seq", "256K", "--heads", "128"], "result"),
    "predict-layer": (livebytes.predict, ("fla-kda-layer@0.6.0",),
                      dict(seq_len=8192, num_heads=32, hidden_size=2304, num_hidden_layers=2, checkpoint=True),
                      ["predict", "--impl", "fla-kda-layer@0.6.0", "--seq", "8K", "--heads", "32", "--hidden", "2304",
                       "--layers", "2", "--checkpoint"], "result"),
    "compare": (livebytes.compare, (["fla-kda@0.6.0", "cudnn-kda-hopper@1.32.0"],), dict(seq_len=8192, num_heads=32),
                ["compare", "--impl", "fla-kda@0.6.0", "--impl", "cudnn-kda-hopper@1.32.0", "--seq", "8K", "--heads", "32"],
                "document"),
    "plan-budget": (livebytes.plan, ("fla-kda@0.6.0",), dict(budget="80GiB"),
                    ["plan", "--impl", "fla-kda@0.6.0", "--budget", "80GiB"], "document"),
    "plan-device": (livebytes.plan, ("cudnn-kda-hopper-cuda@1.32.0",), dict(solve="mbs", seq_len="32K"),
                    ["plan", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--solve", "mbs", "--seq", "32K"], "document"),
    "plan-layers": (livebytes.plan, ("fla-kda-layer@0.6.0",), dict(solve="num_hidden_layers", seq_len="128K", num_heads=32,
                                                                    hidden_size=2304, budget="40GiB"),
                    ["plan", "--impl", "fla-kda-layer@0.6.0", "--solve", "num_hidden_layers", "--seq-len", "128K",
                     "--num-heads", "32", "--hidden-size", "2304", "--budget", "40GiB"], "document"),
    "predict-expand-v": (livebytes.predict, ("fla-gdn@0.6.0",), dict(seq_len=8192, num_heads=16, num_v_heads=32, expand_v=2),
                         ["predict", "--impl", "fla-gdn@0.6.0", "--seq-len", "8K", "--num-heads", "16", "--num-v-heads",
                          "32", "--expand-v", "2"], "result"),
    "sweep": (livebytes.sweep, ("fla-kda@0.6.0",), dict(seq_len="8K..16K", num_heads=[32], gpu="H200"),
              ["sweep", "--impl", "fla-kda@0.6.0", "--seq", "8K..16K", "--heads", "32", "--gpu", "H200"], "document"),
}


@pytest.mark.parametrize("name", SAME_AS_CLI)
def test_to_dict_is_the_cli_json(name):
    """A single answer's to_dict() is its object in ``results``, a collection's the whole document; the warnings too."""
    call, args, kwargs, cli, part = SAME_AS_CLI[name]
    answer, printed = call(*args, **kwargs), cli_json(cli)
    assert answer.to_dict() == (printed["results"][0] if part == "result" else printed)
    assert list(answer.warnings) == printed["warnings"]


def test_explain_is_the_cli_json(tmp_path):
    """The predicted process's own snapshot (timeline --out), explained by the API and by the command alike."""
    pytest.importorskip("torch")
    target, shape = tmp_path / "p.pickle", ["--seq", "8K", "--heads", "8"]
    assert CliRunner().invoke(app, ["timeline", "--impl", "fla-kda@0.6.0", *shape, "--out", str(target)]).exit_code == 0
    answer = livebytes.explain(target, "fla-kda@0.6.0", seq_len=8192, num_heads=8)
    assert answer.to_dict() == cli_json(["explain", str(target), "--impl", "fla-kda@0.6.0", *shape])["results"][0]
    assert answer.unexplained_bytes == 0


def test_explain_reads_no_allocator_configuration(tmp_path, monkeypatch):
    """explain judges nothing, so an allocator setting the simulation does not model, left in the environment by the run
    that took the snapshot, is not refused there (resolve read it for every query once explain went through it: the
    refusal named --alloc-conf, a flag explain has not)."""
    pytest.importorskip("torch")
    target, shape = tmp_path / "p.pickle", ["--seq", "8K", "--heads", "8"]
    assert CliRunner().invoke(app, ["timeline", "--impl", "fla-kda@0.6.0", *shape, "--out", str(target)]).exit_code == 0
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
    assert livebytes.explain(target, "fla-kda@0.6.0", seq_len=8192, num_heads=8).unexplained_bytes == 0
    with pytest.raises(livebytes.LivebytesError, match="max_split_size_mb"):       # a verdict still refuses it
        livebytes.predict("fla-kda@0.6.0", seq_len=8192, num_heads=8)


def test_the_fields_are_the_json_keys():
    """The typed fields a script reads hold what to_dict() holds (an out-of-memory: fits false, the oom object)."""
    answer = livebytes.predict("fla-kda@0.6.0", seq_len="256K", num_heads=128)
    data = answer.to_dict()
    assert (answer.fits, answer.oom, answer.reserved_peak_bytes, answer.headroom_bytes) == (
        False, data["oom"], data["reserved_peak_bytes"], data["headroom_bytes"])
    answer.to_dict()["fits"] = True            # a copy: the frozen answer does not change
    assert answer.to_dict() == data


@pytest.mark.parametrize("call, args", [
    (livebytes.predict, ("fla-kda@0.6.0",)), (livebytes.compare, (["fla-kda@0.6.0"],)),
    (livebytes.plan, ("fla-kda@0.6.0",)), (livebytes.sweep, ("fla-kda@0.6.0",)),
])
def test_an_unknown_keyword_names_the_accepted_ones(call, args):
    """``seq=`` (the CLI's flag name) is not a keyword: refused, naming ``seq_len`` among those it takes."""
    with pytest.raises(TypeError, match=r"unexpected keyword argument seq \(did you mean seq_len\?\); it takes: .*seq_len"):
        call(*args, seq=8192, num_heads=96)


@pytest.mark.parametrize("kwargs, refused", [
    (dict(seq_len=8192), "num_heads is required"),
    (dict(seq_len=8192, num_heads=96, optimizer="sgd"), "optimizer has no effect for a kernel"),
])
def test_a_missing_or_meaningless_keyword_is_one_error(kwargs, refused):
    with pytest.raises(livebytes.ArgumentError, match=refused):
        livebytes.predict("fla-kda@0.6.0", **kwargs)


def test_a_whole_models_config_fixes_its_heads():
    """A config dict is a whole model: num_heads is its config's, refused before anything is traced."""
    with pytest.raises(livebytes.ArgumentError, match="num_heads has no effect for a whole model"):
        livebytes.predict({"model_type": "kda", "hidden_size": 2048}, seq_len=8192, num_heads=16)


@pytest.mark.parametrize("flag, environ, expected", [
    (None, {}, ("expandable_segments:False", "default")),
    (None, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, ("expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF")),
    # both set: PyTorch reads PYTORCH_ALLOC_CONF first
    (None, {"PYTORCH_ALLOC_CONF": "expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"},
     ("expandable_segments:True", "PYTORCH_ALLOC_CONF")),
    # the flag (alloc_conf=) overrides the environment
    ("expandable_segments:False", {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}, ("expandable_segments:False", "--alloc-conf")),
])
def test_the_alloc_conf_and_where_it_came_from(flag, environ, expected):
    conf = alloc_conf_of(flag, environ)
    assert (conf.text, conf.source) == expected


@pytest.mark.parametrize("environ, match", [
    ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}, "PYTORCH_CUDA_ALLOC_CONF .from the environment.*max_split_size_mb"),
    ({"PYTORCH_ALLOC_CONF": "expandable_segments:True,expandable_segments:False"},
     "PYTORCH_ALLOC_CONF .from the environment.*expandable_segments given more than once"),
])
def test_a_bad_environment_alloc_conf_names_its_variable(environ, match):
    """A bad value (exit 1), not a usage error (exit 2): no flag was misused."""
    with pytest.raises(LivebytesError, match=match) as raised:
        alloc_conf_of(None, environ)
    assert not isinstance(raised.value, UsageProblem)


def test_the_environments_alloc_conf_reaches_the_answer(monkeypatch):
    """Set in the environment only: the API's answer, the CLI's JSON and its human output all say where it came from."""
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    answer = livebytes.predict("fla-kda@0.6.0", seq_len=8192, num_heads=96)
    assert (answer.alloc_conf, answer.alloc_conf_source) == ("expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF")
    args = ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "96"]
    assert cli_json(args)["results"][0]["alloc_conf_source"] == "PYTORCH_CUDA_ALLOC_CONF"
    human = " ".join(CliRunner().invoke(app, args, terminal_width=200).stdout.split())
    assert "expandable_segments:True (read from PYTORCH_CUDA_ALLOC_CONF)" in human


def test_predicts_human_output_starts_with_its_sentence():
    """fla-kda@0.6.0 at 8K, H96 on the H200: allocated 7,341,658,112 B = 6.84 GiB, reserved 8,277,458,944 B = 7.71 GiB,
    to spare 137,540,796,416 B = 128.10 GiB (one decimal)."""
    out = CliRunner().invoke(app, ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "96"],
                             terminal_width=200).stdout
    assert out.splitlines()[0] == "fits: peak 6.8 GiB allocated, 7.7 GiB reserved, 128.1 GiB to spare on the H200"


@pytest.mark.parametrize("fields, sentence", [
    # need above the device: headroom -2.5 GiB, so 2.5 GiB more than it has
    (dict(fits=False, headroom_bytes=-5 * GiB // 2, allocated_peak_bytes=150 * GiB, reserved_peak_bytes=151 * GiB,
          oom={"step": "bwd.dh"}),
     "runs out of memory at bwd.dh: needs 2.5 GiB more than the H200 has (peak 150.0 GiB allocated, 151.0 GiB "
     "reserved on a device without a limit)"),
    # need below the device (1 GiB to spare) and yet a 3 GiB request finds only 0.5 GiB free: fragmentation
    (dict(fits=False, headroom_bytes=GiB, oom={"step": "fwd.h", "tried_bytes": 3 * GiB, "free_bytes": GiB // 2}),
     "runs out of memory at fwd.h: tried to allocate 3.0 GiB with 0.5 GiB free on the H200"),
])
def test_the_out_of_memory_sentence(fields, sentence):
    assert livebytes.Prediction(_data={}, device="H200", **fields).summary == sentence


def test_the_api_doc_runs():
    """docs/api.md's examples are doctests: they run here (kernel models only: fast)."""
    failed, tried = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False,
                                     optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failed == 0


@pytest.mark.parametrize("call", ["predict", "derive_frames", "measure_process"])
@pytest.mark.parametrize("sizes, message", [
    ({"num_heads": True}, "num_heads: True is not a positive integer"),      # True was 1 head (predict: AttributeError)
    ({"num_heads": 0}, "num_heads: must be positive, got 0"),
    ({"num_heads": 8, "head_dim": -1}, "head_dim: must be positive, got -1"),  # it said 'dim must be ...'
    ({"num_heads": "8x"}, "num_heads: '8x' is not a positive integer")])
def test_a_bad_size_is_refused_by_its_keyword(call, sizes, message):
    """Refused in one line, named as the call's keyword, before anything compiles or measures."""
    import livebytes
    from livebytes.frames import derive_frames
    from livebytes.process import measure_process
    run = {"predict": lambda **kw: livebytes.predict("fla-kda@0.6.0", seq_len=4096, **kw),
           "derive_frames": lambda **kw: derive_frames("fla-kda@0.6.0", **kw),
           "measure_process": lambda **kw: measure_process("fla-kda@0.6.0", **kw)}[call]
    with pytest.raises(livebytes.LivebytesError, match=f"^{message}"):
        run(**sizes)


@pytest.mark.parametrize("name, function", [("frames", "derive_frames"), ("process", "measure_process")])
def test_the_documented_modules_are_attributes_after_import_livebytes(name, function):
    """docs/api.md is titled `import livebytes`: livebytes.process raised AttributeError until imported by name (a
    fresh interpreter: in this one another test may have imported the submodule, which sets the attribute anyway)."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", f"import livebytes; print(callable(livebytes.{name}.{function}))"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr[-300:]

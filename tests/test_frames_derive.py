"""Frames derived on demand (issue 33 point 1): the CPU compile probe run as a subprocess for one case
(``validate/gpu/derive_frames.py``, faked here: a real compile takes minutes), its summary kept signed in the private
cache (``estimator/process/frames_store.py`` over ``cache.write_signed``), and the process-memory model preferring the committed
data, then the derived frames, then the estimate from the nearest committed cases."""
import json
import os
import sys
from pathlib import Path

import pytest

from livebytes.estimator import cache
from livebytes.estimator.process import frames_store
from livebytes.estimator.devices import get_device
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.process.memory import process_memory
from livebytes.estimator.process.driver import stack_reservation_bytes
from livebytes.estimator.registry import get_model
from livebytes.estimator.shapes import Shape
from livebytes.validate.check.frames import LEGACY_PTXAS
from livebytes.validate.gpu import derive_frames
from livebytes.process_words import assumptions_words, status_words

H200 = get_device("H200")
DATA_36 = "process/fla-core-0.6.0_triton-3.6.0_H200.json"
CASE = "fla-kda:report D128 H56 HV56"          # neither logged nor compiled in the committed data
SHAPE = Shape(1, 8192, 56, 128)
# a stand-in for the probe's summary at that case: D128 H24's committed frames (every kernel the model launches),
# wy_dqkg 14,456 B -> limit 14,464 B: x 270,336 = 3,910,139,904 B = 1,864.5 pages of 2 MiB -> 1,865 - 132 = 1,733 pages
# = 3,634,364,416 B
FRAMES = json.loads((Path(__file__).resolve().parents[1] / "estimator" / "data" / "process" /
                     "fla-core-0.6.0_triton-3.6.0_H200.json").read_text())["frames"]["cold"]["fla-kda:report D128 H24 HV24"]


def summary(key: str = CASE, **changes) -> dict:
    return {"case": {"key": key}, "key": key, "frames": FRAMES, "compiled": 204, "counted": 202, "seconds": 180.0,
            "target": "cuda sm90 (GPUTarget('cuda', 90, 32))", "triton": "3.6.0", "fla": "0.6.0", "torch": "2.13.0",
            "python": "3.11", "ptxas": "ptxas (Cuda compilation tools, release 12.8, V12.8.93)", **changes}


INSTALLED = {"triton": "3.6.0", "fla": "0.6.0", "gpu": None}     # what ``derive_frames.inspect`` reports: no GPU needed
ASK_THAT_PYTHON = derive_frames.inspect                           # the real inspection (the fixture fakes it)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test its own cache folder: nothing derived here reaches another test or the user's cache; the installed
    versions asked before a compile are the 3.6.0 machine's (a test of another asks with ``ask=``)."""
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(derive_frames, "inspect", lambda python: dict(INSTALLED))
    return tmp_path / "cache"


class FakeProbe:
    """subprocess.run for the probe: writes ``lines`` to ``--out``/summary.jsonl as the probe would; keeps the command."""
    def __init__(self, *lines: dict, returncode: int = 0):
        self.lines, self.returncode, self.commands = lines, returncode, []

    def __call__(self, command, **kwargs):
        self.commands.append(command)
        out = Path(command[command.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.jsonl").write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return __import__("subprocess").CompletedProcess(command, self.returncode, "", "ptxas fatal: the last line\n")


# ------------------------------------------------------------------------------------- the signed store

def test_a_signed_record_reads_back_and_lists_by_name():
    assert cache.write_signed("derived_frames", "a|b c", {"x": [1, 2]})
    assert cache.read_signed("derived_frames", "a|b c") == {"x": [1, 2]}
    assert cache.read_signed("derived_frames", "other") is None
    assert cache.signed_names("derived_frames") == ["a|b c"]


def test_a_tampered_or_foreign_record_is_never_read(private_cache):
    cache.write_signed("derived_frames", "n", {"frames": 1})
    (path,) = (private_cache / "derived_frames").glob("*.json")
    blob = path.read_bytes()
    path.write_bytes(blob.replace(b'"frames": 1', b'"frames": 9'))          # the payload changed, the tag not
    assert cache.read_signed("derived_frames", "n") is None and cache.signed_names("derived_frames") == []
    path.write_bytes(blob)
    assert cache.read_signed("derived_frames", "n") == {"frames": 1}
    os.chmod(path, 0o666)                                                   # writable by others: not ours alone
    assert cache.read_signed("derived_frames", "n") is None
    os.chmod(path, 0o600)
    (private_cache / "hmac.key").write_bytes(b"\0" * 32)                    # another key: every signature fails
    os.chmod(private_cache / "hmac.key", 0o600)
    assert cache.read_signed("derived_frames", "n") is None


def test_a_record_is_json_not_a_pickle(private_cache):
    cache.write_signed("derived_frames", "n", {"k": "v"})
    (path,) = (private_cache / "derived_frames").glob("*.json")
    assert json.loads(path.read_bytes().split(b"\n", 1)[1][32:]) == {"name": "n", "value": {"k": "v"}}
    assert oct(os.stat(path).st_mode & 0o777) == "0o600" and oct(os.stat(path.parent).st_mode & 0o777) == "0o700"


def test_the_store_refuses_a_summary_of_a_call_that_raised():
    with pytest.raises(ValueError, match="not a complete summary"):
        frames_store.save(DATA_36, summary(error="RuntimeError: Triton >= 3.4.0 and < 3.7.1 on Hopper"))
    with pytest.raises(ValueError, match="not a complete summary"):
        frames_store.save(DATA_36, summary(frames={}))
    assert frames_store.derived_cases() == []


# ------------------------------------------------------------------------------------- the estimator reads it

def test_the_estimate_then_the_derived_frames():
    """Before: the estimate from the committed D128 report cases, H1's 14,528 B the largest (14,528 x 270,336 =
    3,927,441,408 B -> 1,873 - 132 pages = 3,651,141,632 B), its high end counted by the verdict. After a derive: the
    case's own 14,464-B limit's 3,634,364,416 B, derived (on this machine, Triton 3.6.0), raised where wy_dqkg first
    launches, and no margin."""
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    before = process_memory(H200, model, "cold", SHAPE)
    assert (before.stack_limit_bytes, before.stack.bytes) == (14_528, 3_651_141_632) and before.stack.margin > 0
    assert status_words(before.stack.status).startswith("estimated: stack frames not measured or derived")
    assert frames_store.save(DATA_36, summary())
    after = process_memory(H200, model, "cold", SHAPE)
    assert status_words(after.stack.status) == "derived (on this machine, Triton 3.6.0)"
    assert (after.stack_limit_bytes, after.stack.bytes) == (14_464, 3_634_364_416) == (14_464, stack_reservation_bytes(14_464, H200))
    assert after.growth == (("bwd.wy_dqkg", 3_634_364_416),)
    assert not any("stack reservation" in a for a in assumptions_words(after)) and after.stack.margin == 0
    assert "derived on this machine" in after.stack.source


def test_a_derived_case_bounds_its_warm_process_and_keeps_its_triton():
    """Warm: the tuned configs are among the derived candidates: bounded by them (14,464 B). Another Triton's data file
    does not see it (the 3.9.0 file at the same case stays estimated, from its own D128 report cases: 14,544 B)."""
    frames_store.save(DATA_36, summary())
    model = get_model("fla-kda@0.6.0", "H200", contract="report")
    warm = process_memory(H200, model, "warm", SHAPE)
    assert warm.stack_limit_bytes == 14_464 and status_words(warm.stack.status).startswith("bounded: tuned configs' frames not measured")
    under_39 = process_memory(H200, model, "cold", SHAPE, triton="3.9.0")
    assert under_39.stack_limit_bytes == 14_544 and status_words(under_39.stack.status).startswith("estimated: ")


def test_committed_frames_win_over_derived_ones():
    """A record under a committed case's name is never read: D128 H16 stays the GPU's 14,392 B -> 14,400."""
    frames_store.save(DATA_36, summary("fla-kda:report D128 H16 HV16", frames={"chunk_kda_bwd_kernel_wy_dqkg_fused": 99_000}))
    p = process_memory(H200, get_model("fla-kda@0.6.0", "H200", contract="report"), "cold", Shape(1, 8192, 16, 128))
    assert p.stack_limit_bytes == 14_400 and status_words(p.stack.status) == "derived"


def test_the_list_names_each_derived_case():
    frames_store.save(DATA_36, summary())
    assert frames_store.derived_cases() == [{"data_file": DATA_36, "case": CASE, "triton": "3.6.0",
                                             "ptxas": "ptxas (Cuda compilation tools, release 12.8, V12.8.93)",
                                             "largest_frame_bytes": 14_456}]


# ------------------------------------------------------------------------------------- derive: the subprocess

def test_derive_runs_the_probe_for_the_one_case_and_stores_it():
    probe = FakeProbe(summary())
    got = derive_frames.derive("fla-kda@0.6.0", SHAPE, "3.6.0", {"contract": "report"}, run=probe)
    (command,) = probe.commands
    assert command[:2] == [sys.executable, str(derive_frames.PROBE)]
    assert command[command.index("--cases") + 1] == "fla-report:128:56:56" and "--legacy-ptxas" not in command
    assert got["stored"] and got["data_file"] == DATA_36 and got["frames"] == FRAMES
    assert frames_store.lookup(DATA_36, CASE)["frames"] == FRAMES


@pytest.mark.parametrize("key,options,shape,text", [
    ("fla-gdn@0.6.0", {}, Shape(1, 4096, 24, 64, 48), "fla-gdn:64:24:48"),
    ("fla-gdn-layer@0.6.0", {}, Shape(1, 4096, 12, 64, 24), "fla-gdn-layer:64:12:24"),
    ("fla-kda-fwd@0.6.0", {"contract": "plain"}, Shape(1, 4096, 40, 128), "fla-plain-fwd:128:40:40")])
def test_each_family_maps_to_the_probes_case(key, options, shape, text):
    assert derive_frames.probe_case(key, options, shape) == text


def test_triton_39_compiles_with_the_bundled_legacy_ptxas():
    """Under 3.9.0 the probe gets --legacy-ptxas (the H200 runs' compiler), and a summary of another ptxas is refused."""
    shape = Shape(1, 4096, 40, 128)
    key = "fla-gdn:- D128 H40 HV40"
    probe = FakeProbe(summary(key, triton="3.9.0", ptxas=LEGACY_PTXAS))
    t39 = {**INSTALLED, "triton": "3.9.0"}
    got = derive_frames.derive("fla-gdn@0.6.0", shape, "3.9.0", run=probe, ask=lambda python: t39)
    assert "--legacy-ptxas" in probe.commands[0] and got["data_file"] == "process/fla-core-0.6.0_triton-3.9.0_H200.json"
    with pytest.raises(LivebytesError, match="not the H200 runs'"):
        derive_frames.derive("fla-gdn@0.6.0", shape, "3.9.0", ask=lambda python: t39,
                             run=FakeProbe(summary(key, triton="3.9.0", ptxas="ptxas-blackwell (13.0)")))


@pytest.mark.parametrize("key,options,shape,triton,line,message", [
    # the committed data hold it: nothing to derive
    ("fla-kda@0.6.0", {"contract": "report"}, Shape(1, 4096, 16, 128), "3.6.0", None, "already hold its frames"),
    # no probe for these
    ("fla-kda@0.6.0", {"contract": "plain", "gva": True}, Shape(1, 4096, 16, 128, 32), "3.6.0", None, "derives no such case"),
    ("fla-kda-cp@0.6.0", {}, SHAPE, "3.6.0", None, "derives no such case"),
    # a Triton the data lack
    ("fla-kda@0.6.0", {"contract": "report"}, SHAPE, "3.7.1", None, "no process-memory data for Triton"),
    # the installed Triton is not the asked one
    ("fla-kda@0.6.0", {"contract": "report"}, SHAPE, "3.6.0", summary(triton="3.7.1"), "the installed Triton is 3.7.1"),
    ("fla-kda@0.6.0", {"contract": "report"}, SHAPE, "3.6.0", summary(fla="0.5.0"), "the installed fla-core is 0.5.0"),
    # the library refused the call: the kernels before it only
    ("fla-kda@0.6.0", {"contract": "report"}, SHAPE, "3.6.0", summary(error="RuntimeError: no"), "refused the call"),
    # another case's line only
    ("fla-kda@0.6.0", {"contract": "report"}, SHAPE, "3.6.0", summary("fla-kda:report D128 H41 HV41"), "wrote no summary")])
def test_derive_refuses_in_one_line(key, options, shape, triton, line, message):
    probe = FakeProbe(*([line] if line else []))
    with pytest.raises(LivebytesError, match=message) as err:
        derive_frames.derive(key, shape, triton, options, run=probe)
    assert "\n" not in str(err.value)
    assert frames_store.derived_cases() == []
    if line is None:
        assert probe.commands == []             # refused before any compile


@pytest.mark.parametrize("found, message", [
    ({**INSTALLED, "triton": "3.9.0"}, "the installed Triton is 3.9.0, not 3.6.0: derive with --triton 3.9.0 where the "
                                      "data hold it, or under a Python whose Triton is 3.6.0 \\(the API's python=\\)"),
    ({**INSTALLED, "fla": "0.5.0"}, "the installed fla-core is 0.5.0; these data are fla-core 0.6.0's")])
def test_the_installed_versions_are_asked_before_the_compile(found, message):
    """Another Triton installed was refused after minutes of compiling (6 min 20 s, a reviewer's run); now before."""
    probe = FakeProbe(summary())
    with pytest.raises(LivebytesError, match=message):
        derive_frames.derive("fla-kda@0.6.0", SHAPE, "3.6.0", {"contract": "report"}, run=probe, ask=lambda p: found)
    assert probe.commands == []


def test_a_python_that_is_not_there_is_one_line():
    with pytest.raises(LivebytesError, match="^cannot run the Python '/nonexistent/python': No such file"):
        ASK_THAT_PYTHON("/nonexistent/python")


def test_a_probe_that_failed_says_its_last_line():
    with pytest.raises(LivebytesError, match="the CPU compile probe failed \\(ptxas fatal: the last line\\)"):
        derive_frames.derive("fla-kda@0.6.0", SHAPE, "3.6.0", {"contract": "report"}, run=FakeProbe(returncode=1))


def test_the_label_names_the_command_that_derives_the_case():
    """The bound's words end with the command ``livebytes frames derive`` (the lead's) runs; a family the probe cannot
    compile or measure says the bound stands."""
    kda = process_memory(H200, get_model("fla-kda@0.6.0", "H200", contract="plain", gva=True), "cold",
                         Shape(1, 8192, 40, 128, 80))
    assert status_words(kda.stack.status).endswith("no probe of this tool compiles or measures this case (validate/gpu/probes/"
                                     "cpu_frames.py and process_memory.py run FLA's kernels and layers alone, the plain "
                                     "contract without grouped value heads only), so the bound stands")
    gdn = process_memory(H200, get_model("fla-gdn@0.6.0", "H200", gva=True), "cold", Shape(1, 8192, 40, 128, 80))
    assert status_words(gdn.stack.status).endswith("livebytes frames derive --impl fla-gdn@0.6.0 --head-dim 128 --num-heads 40 "
                                     "--num-v-heads 80 --triton 3.9.0")


# ------------------------------------------------------------------------------------- the API the command calls

def test_the_api_call_derives_with_the_models_default_contract_and_triton():
    """fla-kda@0.6.0's default contract is report and its default Triton 3.6.0: the command needs neither flag."""
    from livebytes.frames import derive_frames_at, derived_frames
    answer = derive_frames_at("fla-kda@0.6.0", SHAPE, run=FakeProbe(summary()))
    assert (answer.case, answer.triton, answer.stack_limit_bytes, answer.reservation_bytes) == (CASE, "3.6.0", 14_464,
                                                                                                 3_634_364_416)
    assert answer.to_dict()["frames"] == FRAMES and answer.stored
    assert [d["case"] for d in derived_frames()] == [CASE]


@pytest.mark.skipif(not os.environ.get("LIVEBYTES_REAL_DERIVE"), reason="a real CPU compile takes minutes: set "
                    "LIVEBYTES_REAL_DERIVE=1 (needs triton 3.6.0 and fla-core 0.6.0)")
def test_a_real_derive_of_the_smallest_case():
    """The forward-only GDN at D32 H8 (no grouped value heads): its six kernels compile in about a minute; l2norm and
    the forward's h kernel stay under the 1,024-B default at D32 (H16/HV32's committed frames: 0 and 16 B)."""
    from livebytes.frames import derive_frames
    answer = derive_frames("fla-gdn-fwd@0.6.0", num_heads=8, head_dim=32, triton="3.6.0")
    assert answer.case == "fla-gdn-fwd:- D32 H8 HV8" and len(answer.frames) == 6 and answer.stack_limit_bytes == 1024


def test_the_record_checks_read_the_committed_model_only():
    """``validate --from-records`` judges the committed model: frames a user derived do not move a named miss. Run 6's
    warm plain forward at H96 (its frames never compiled: bounded, named at its exact difference) still passes with a
    derived stand-in kept for its case, which the estimator itself then reads."""
    from livebytes.validate.check import compare as cmp
    from livebytes.validate.check.records import RECORDS_DIR, load_file
    fwd = json.loads((Path(__file__).resolve().parents[1] / "estimator" / "data" / "process" /
                      "fla-core-0.6.0_triton-3.6.0_H200.json").read_text())["frames"]["cold"]["fla-kda-fwd:plain D128 H16 HV16"]
    frames_store.save(DATA_36, summary("fla-kda-fwd:plain D128 H96 HV96", frames=fwd))
    record = load_file(RECORDS_DIR / "runs" / "run6" / "fla-kda-fwd_0.6.0_1_8192_96_128_2026-11-30T061154Z_1498.json")[0]
    assert cmp.compare(record).passed
    model = get_model("fla-kda-fwd@0.6.0", "H200", contract="plain")
    mine, committed = (process_memory(H200, model, "warm", Shape(1, 8192, 96, 128), derived_frames=d) for d in (True, False))
    assert mine.stack_limit_bytes == 1_024 and status_words(committed.stack.status).startswith("estimated: ")
    assert committed.stack_limit_bytes < 524_288        # the committed cases' estimate, never CUDA's cap


# ------------------------------------------------------------------------------------- the command (cli/commands/frames.py)

def _cli(*args: str):
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    return CliRunner().invoke(app, list(args))


def test_the_labels_command_derives_through_the_cli_and_the_answer_then_says_derived(monkeypatch):
    """The bound's words name ``livebytes frames derive ...``; that line, run as it stands (the probe faked), keeps the
    case, ``frames list`` shows it, and the next answer at the case takes its frames: limit 14,464 B, 3,634,364,416 B
    reserved (the arithmetic above), derived on this machine instead of bounded."""
    probe = FakeProbe(summary())
    monkeypatch.setattr(derive_frames.process_group, "run", probe)
    before = process_memory(H200, get_model("fla-kda@0.6.0", "H200"), "cold", SHAPE)
    line = status_words(before.stack.status).rsplit(": ", 1)[1]
    assert line == "livebytes frames derive --impl fla-kda@0.6.0 --contract report --head-dim 128 --num-heads 56 --triton 3.6.0"
    result = _cli(*line.split()[1:], "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["results"]
    assert (row["case"], row["largest_frame_bytes"]) == (CASE, 14_456)
    listed = json.loads(_cli("frames", "list", "--json").output)["results"]
    assert [r["case"] for r in listed] == [CASE]
    after = process_memory(H200, get_model("fla-kda@0.6.0", "H200"), "cold", SHAPE)
    assert status_words(after.stack.status).startswith("derived (on this machine, Triton 3.6.0")
    assert (after.stack_limit_bytes, after.stack.bytes) == (14_464, 3_634_364_416)
    answer = " ".join(_cli("predict", "--impl", "fla-kda@0.6.0", "--head-dim", "128", "--num-heads", "56",
                           "--seq-len", str(SHAPE.seq)).output.split())
    assert "stack reservation: derived (on this machine, Triton 3.6.0)" in answer      # in words, not only in --json


@pytest.mark.parametrize("args,code,message", [
    (("frames", "lst"), 2, "the action is derive or list, not 'lst'"),
    (("frames", "list", "--impl", "fla-kda@0.6.0"), 2, "--impl has no effect with frames list"),
    (("frames", "derive", "--num-heads", "8"), 2, "--impl and --num-heads are required"),
    (("frames", "derive", "--impl", "fla-kda@0.6.0", "--num-heads", "0"), 1, ""),
    (("frames", "derive", "--impl", "fla-kda@0.6.0", "--num-heads", "96"), 1, "already hold its frames"),
    (("frames", "derive", "--impl", "fla-kda@0.6.0", "--num-heads", "56", "--triton", "9.9.9"), 1, ""),
])
def test_the_command_refuses_in_one_line(args, code, message):
    result = _cli(*args)
    assert result.exit_code == code
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output

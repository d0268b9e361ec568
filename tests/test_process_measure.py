"""A case's process measured on the user's GPU: the process-memory probe run as a subprocess for that one case, cold
then warm (``validate/gpu/measure_process.py``, faked here: a real run needs the GPU and takes minutes), each reading
checked and kept signed in the private cache (``estimator/process/measured_store.py`` over ``cache.write_signed``), and the
process-memory model then taking the case's own context, modules and stack reservation on that GPU instead of the
family's unbounded module figure (``estimator/process/memory.py``'s ``process_memory``)."""
import datetime
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from livebytes.estimator import cache
from livebytes.estimator.process import measured_store
from livebytes.estimator.devices import get_device
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.process.memory import process_memory
from livebytes.estimator.process.driver import stack_reservation_bytes
from livebytes.estimator.registry import get_model
from livebytes.estimator.shapes import Shape
from livebytes.validate.gpu import measure_process
from livebytes.estimator.process.status import Kind
from livebytes.process_words import assumptions_words, status_words

H200, H100 = get_device("H200"), get_device("H100")
DATA_36 = "process/fla-core-0.6.0_triton-3.6.0_H200.json"
CASE = "fla-kda@0.6.0:report D256 H16 HV16"  # the store's key (the model's full key); no committed process measured it
SHAPE = Shape(1, 4096, 16, 256)         # the command's default length: one sequence of 4,096 tokens
COMMAND = ("livebytes process measure --impl fla-kda@0.6.0 --contract report --head-dim 256 --num-heads 16 "
           "--triton 3.6.0")
TODAY = datetime.date.today().isoformat()

CONTEXT = 552_402_944                        # the H200's committed context, read again in the process
# cold: the case's committed frames' limit, 14,912 B: x 270,336 resident threads = 4,031,250,432 B = 1,922.25 pages of
# 2 MiB -> 1,923, less the default 1,024-B limit's 132 (1,024 x 270,336 = 276,824,064 B = 132 pages) = 1,791 pages
COLD_LIMIT, COLD_RESERVATION = 14_912, 3_755_999_232             # 1,791 x 2,097,152
COLD_MODULES = 104_857_600                                        # 100 MiB
COLD_NONPYTORCH = 4_413_259_776              # 552,402,944 + 3,755,999,232 + 104,857,600
# warm: the tuned configs only, 1,440 B: x 270,336 = 389,283,840 B = 185.6 pages -> 186 - 132 = 54 pages
WARM_LIMIT, WARM_RESERVATION = 1_440, 113_246_208                 # 54 x 2,097,152
WARM_MODULES = 94_371_840                                         # 90 MiB
WARM_NONPYTORCH = 760_020_992                # 552,402,944 + 113,246,208 + 94,371,840
FIGURES = {"cold": (COLD_LIMIT, COLD_RESERVATION, COLD_MODULES, COLD_NONPYTORCH),
           "warm": (WARM_LIMIT, WARM_RESERVATION, WARM_MODULES, WARM_NONPYTORCH)}
BASELINE = {"baseline_nvml_used_bytes": 0}
INSTALLED = {"triton": "3.6.0", "fla": "0.6.0", "gpu": "NVIDIA H200"}   # what ``measure_process.inspect`` reports


def row(state: str, **changes) -> dict:
    """One process's summary line as the probe writes it (validate/gpu/probes/process_memory.py's ``run_group``): the
    case, the worker's readings, the ALONE reading (the one process of its group) and the NVML drop at its exit."""
    limit, _, _, nonpytorch = FIGURES[state]
    tag = f"fla-report_D256_H16_HV16_T4096_{state}"
    reserved = 1_447_034_880
    return {"case": {"impl": "fla-report", "forward_only": False, "dim": 256, "heads": 16, "v_heads": 16, "tokens": 4096,
                     "state": state, "tag": tag, "cache_dir": "/tmp/pm/caches/tc_fla-report_D256_H16_HV16_T4096"},
            "context_stack_limit_bytes": 1024, "context_nonpytorch_bytes": CONTEXT, "gpu": "NVIDIA H200",
            "first_call_seconds": 312.4, "stack_limit_bytes": limit, "reserved_bytes": reserved,
            "allocated_bytes": 0, "torch": "2.13.0", "triton": "3.6.0", "fla": "0.6.0",
            "in_process_alone": {"nonpytorch_bytes": nonpytorch, "reserved_bytes": reserved},
            "footprint_bytes": nonpytorch + reserved, "nonpytorch_bytes": nonpytorch, **changes}


def record(state: str = "cold", **changes) -> dict:
    """The store's record of ``row(state)`` (what ``checked_record`` keeps)."""
    limit, _, _, nonpytorch = FIGURES[state]
    return {"key": CASE, "device": "H200", "gpu": "NVIDIA H200", "state": state, "triton": "3.6.0", "fla": "0.6.0",
            "torch": "2.13.0", "measured_on": TODAY, "tokens": 4096, "context_bytes": CONTEXT,
            "nonpytorch_bytes": nonpytorch, "stack_limit_bytes": limit, **changes}


def kda(device: str = "H200"):
    return get_model("fla-kda@0.6.0", device, contract="report")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test its own cache folder (nothing measured here reaches another test or the user's cache), and no real
    probe: ``measure``'s runner where none is given (``subprocess.run``) fails the test if anything calls it."""
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "cache"))

    def no_real_probe(command, **kwargs):
        pytest.fail(f"the real process-memory probe was started: {command}")
    monkeypatch.setitem(measure_process.measure.__kwdefaults__, "run", no_real_probe)
    monkeypatch.setattr(measure_process, "inspect", lambda python: dict(INSTALLED))   # the H200 machine's versions
    monkeypatch.setattr(measure_process, "measured_on", lambda: TODAY)    # a run across midnight keeps one day
    return tmp_path / "cache"


class FakeProbe:
    """subprocess.run for the probe: writes ``lines`` to ``--out``/process_memory.jsonl (and a worker's stderr file) as
    the probe would; keeps the command. ``lines`` None: the probe wrote no summary at all."""
    def __init__(self, *lines: dict | None, returncode: int = 0, stderr: str = "torch.OutOfMemoryError: the last line\n"):
        self.lines, self.returncode, self.stderr, self.commands = lines, returncode, stderr, []

    def __call__(self, command, **kwargs):
        self.commands.append(command)
        out = Path(command[command.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "fla-report_D256_H16_HV16_T4096_cold.stderr").write_text("autotuning 96 configs\n")
        if self.lines != (None,):
            (out / "process_memory.jsonl").write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return subprocess.CompletedProcess(command, self.returncode, "", self.stderr)


def measured(probe, key: str = "fla-kda@0.6.0", shape=SHAPE, triton: str = "3.6.0", options=None, **kwargs):
    return measure_process.measure(key, shape, triton, {"contract": "report"} if options is None else options,
                                   run=probe, **kwargs)


# ------------------------------------------------------------------------------------- the signed store

def test_a_measured_process_saves_reads_back_and_lists():
    assert measured_store.save(DATA_36, record("cold"))
    assert measured_store.lookup("H200", DATA_36, "cold", CASE) == record("cold")
    # another state, another GPU, another data file, another case: none kept
    assert measured_store.lookup("H200", DATA_36, "warm", CASE) is None
    assert measured_store.lookup("H100", DATA_36, "cold", CASE) is None
    assert measured_store.lookup("H200", "process/fla-core-0.6.0_triton-3.9.0_H200.json", "cold", CASE) is None
    assert measured_store.lookup("H200", DATA_36, "cold", "fla-kda:report D256 H32 HV32") is None
    assert measured_store.measured_cases() == [{**record("cold"), "data_file": DATA_36}]


def test_a_tampered_or_foreign_record_is_never_read(private_cache):
    measured_store.save(DATA_36, record("cold"))
    (path,) = (private_cache / measured_store.FOLDER).glob("*.json")
    blob = path.read_bytes()
    path.write_bytes(blob.replace(b'"nonpytorch_bytes": 4413259776', b'"nonpytorch_bytes": 552402944'))   # tag not
    assert measured_store.lookup("H200", DATA_36, "cold", CASE) is None and measured_store.measured_cases() == []
    path.write_bytes(blob)
    assert measured_store.lookup("H200", DATA_36, "cold", CASE) == record("cold")
    os.chmod(path, 0o666)                                                   # writable by others: not ours alone
    assert measured_store.lookup("H200", DATA_36, "cold", CASE) is None
    os.chmod(path, 0o600)
    (private_cache / "hmac.key").write_bytes(b"\0" * 32)                    # another key: every signature fails
    os.chmod(private_cache / "hmac.key", 0o600)
    assert measured_store.lookup("H200", DATA_36, "cold", CASE) is None and measured_store.measured_cases() == []


def test_a_signed_record_of_another_state_under_this_name_is_not_read():
    """Signed by us, but the warm process under the cold name: the record's own identity must be the name's."""
    name = measured_store.record_name("H200", DATA_36, "cold", CASE)
    assert cache.write_signed(measured_store.FOLDER, name, record("warm"))
    assert measured_store.lookup("H200", DATA_36, "cold", CASE) is None and measured_store.measured_cases() == []


@pytest.mark.parametrize("bad", [
    {k: v for k, v in record().items() if k != "torch"},               # a field missing
    {k: v for k, v in record().items() if k != "stack_limit_bytes"},   # a figure missing
    record(context_bytes=-1),                                          # no byte count
    record(tokens=True),                                               # a bool is an int to Python, no count
    record(stack_limit_bytes=14_912.0),                                # a float
    record(stack_limit_bytes=None),                                    # not read (no cuda-bindings)
    record(nonpytorch_bytes=CONTEXT - 1),                              # less than the context it holds
    {**record(), "state": "hot"}])
def test_the_store_refuses_an_incomplete_record(bad):
    with pytest.raises(ValueError, match="not a complete record of a measured process"):
        measured_store.save(DATA_36, bad)
    assert measured_store.measured_cases() == []


# ------------------------------------------------------------------------------------- measure: the subprocess

def test_before_measuring_the_modules_are_unbounded_and_name_the_command():
    p = process_memory(H200, kda(), "cold", SHAPE)
    assert status_words(p.modules.status).startswith("estimated: not measured for fla-kda (report contract) at head_dim=256 num_heads=16")
    assert status_words(p.modules.status).endswith(f"; measure the case's process on the GPU itself (minutes): {COMMAND}")
    assert status_words(p.context.status) == "measured" and not status_words(p.stack.status).startswith("measured (on this machine")


@pytest.mark.parametrize("key,options,shape", [
    # the probe runs no such case: no command to name
    ("fla-kda@0.6.0", {"contract": "plain", "gva": True}, Shape(1, 8192, 40, 128, 80)),
    ("fla-kda-cp@0.6.0", {}, SHAPE)])
def test_a_case_the_probe_cannot_run_names_no_command(key, options, shape):
    p = process_memory(H200, get_model(key, "H200", **options), "cold", shape)
    # fla-kda-cp: no module figure of its family: the library's largest, unbounded
    assert p.modules.kind in (Kind.ESTIMATED, Kind.UNBOUNDED)
    assert "livebytes process measure" not in status_words(p.modules.status)


def test_measure_runs_the_probe_for_the_case_cold_then_warm_and_keeps_both():
    probe = FakeProbe(BASELINE, row("cold"), row("warm"))
    got = measured(probe)
    (command,) = probe.commands
    assert command[:2] == [sys.executable, str(measure_process.PROBE)]
    arg = {flag: command[command.index(flag) + 1] for flag in ("--cases", "--warm-cases", "--deadline")}
    assert arg == {"--cases": "fla-report:256:16:16:4096:cold", "--warm-cases": "fla-report:256:16:16:4096:warm",
                   "--deadline": "1500"}     # the cold call's: 1,800 s in all less AFTER_COLD's 300 for the rest
    assert Path(command[command.index("--cache-root") + 1]).parent == Path(command[command.index("--out") + 1]).parent
    assert [{k: r[k] for k in ("state", "data_file", "stored")} for r in got] == [
        {"state": "cold", "data_file": DATA_36, "stored": True}, {"state": "warm", "data_file": DATA_36, "stored": True}]
    assert [measured_store.lookup("H200", DATA_36, s, CASE) for s in ("cold", "warm")] == [record("cold"), record("warm")]


def test_the_commands_cases_are_the_probes_own():
    """The probe's own parser (``parse_cases``) takes the cases the command line names, at the asked dims, cold then
    warm over one Triton cache folder (the warm group runs only over a folder a finished cold case filled)."""
    spec = importlib.util.spec_from_file_location("process_memory_probe", measure_process.PROBE)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    cold, warm = measure_process.probe_cases("fla-gdn@0.6.0", {"gva": True}, Shape(1, 8192, 24, 64, 48))
    (c,), (w,) = probe.parse_cases(cold, "/r"), probe.parse_cases(warm, "/r")
    assert (c["impl"], c["dim"], c["heads"], c["v_heads"], c["tokens"], c["state"]) == ("fla-gdn", 64, 24, 48, 8192, "cold")
    assert w["state"] == "warm" and w["cache_dir"] == c["cache_dir"]


@pytest.mark.parametrize("key,options,shape,case", [
    ("fla-kda@0.6.0", {"contract": "report"}, SHAPE, "fla-report:256:16:16:4096"),
    ("fla-kda-fwd@0.6.0", {"contract": "plain"}, Shape(1, 4096, 40, 128), "fla-plain-fwd:128:40:40:4096"),
    ("fla-gdn-layer@0.6.0", {}, Shape(1, 4096, 12, 64, 24), "fla-gdn-layer:64:12:24:4096"),
    # the shape's tokens, one sequence: 2 x 8,192 runs as 16,384; a layer's build options last
    ("fla-gdn@0.6.0", {"gva": True}, Shape(2, 8192, 16, 128, 32), "fla-gdn:128:16:32:16384"),
    ("fla-kda-layer@0.6.0", {"hidden": 2048, "layers": 2, "checkpoint": True, "conv_size": 4},
     Shape(1, 4096, 16, 128), "fla-kda-layer:128:16:16:4096:{state}:hidden=2048,layers=2,checkpoint=1,conv_size=4")])
def test_each_family_maps_to_the_probes_case_at_its_tokens(key, options, shape, case):
    expected = tuple(case.format(state=state) if "{state}" in case else f"{case}:{state}" for state in ("cold", "warm"))
    assert measure_process.probe_cases(key, options, shape) == expected


def test_the_estimator_then_takes_the_measured_process():
    """Cold: context 552,402,944, modules 104,857,600, the 14,912-B limit's 3,755,999,232 B (the arithmetic above),
    each measured on this machine; the reservation still grows where the frames raise it (their limit is the measured
    one). Warm reads the warm record: the 1,440-B limit's 113,246,208 B and 94,371,840 B of modules, from the call's
    start (where the limit rises to 1,440 B is not known: the frames' bound is 14,912)."""
    before = process_memory(H200, kda(), "cold", SHAPE)
    measured(FakeProbe(BASELINE, row("cold"), row("warm")))
    cold, warm = (process_memory(H200, kda(), state, SHAPE) for state in ("cold", "warm"))
    assert (cold.context.bytes, cold.modules.bytes, cold.stack.bytes, cold.stack_limit_bytes) == (
        CONTEXT, COLD_MODULES, COLD_RESERVATION, COLD_LIMIT)
    assert COLD_RESERVATION == stack_reservation_bytes(COLD_LIMIT, H200)
    assert cold.bytes == COLD_NONPYTORCH and cold.growth == before.growth and sum(b for _, b in cold.growth) == COLD_RESERVATION
    assert (warm.context.bytes, warm.modules.bytes, warm.stack.bytes, warm.stack_limit_bytes, warm.growth) == (
        CONTEXT, WARM_MODULES, WARM_RESERVATION, WARM_LIMIT, ())
    assert WARM_RESERVATION == stack_reservation_bytes(WARM_LIMIT, H200) and warm.bytes == WARM_NONPYTORCH
    for p in (cold, warm):
        assert {status_words(f.status) for f in (p.context, p.modules, p.stack)} == {f"measured (on this machine, {TODAY})"}
        assert assumptions_words(p) == [] and p.triton == "3.6.0"
    assert "4,413,259,776 B alone after the first call" in cold.modules.source


def test_a_reading_at_exactly_the_context_and_reservation_is_no_modules():
    """4,308,402,176 B = 552,402,944 + 3,755,999,232: sound, 0 B of modules; one byte less is refused below."""
    measured(FakeProbe(BASELINE, *(row(s, nonpytorch_bytes=CONTEXT + COLD_RESERVATION,
                                       in_process_alone={"nonpytorch_bytes": CONTEXT + COLD_RESERVATION,
                                                         "reserved_bytes": 0}, stack_limit_bytes=COLD_LIMIT)
                                   for s in ("cold", "warm"))))
    assert process_memory(H200, kda(), "cold", SHAPE).modules.bytes == 0


# ------------------------------------------------------------------------------------- per GPU, never the checks

def test_a_record_is_its_gpus_and_the_record_checks_never_read_it():
    """An H200's process answers for the H200 only: the H100 (which takes the H200's committed data, unbounded) keeps
    its own words; ``derived_frames=False`` (``validate --from-records``: the committed model) reads no record."""
    measured(FakeProbe(BASELINE, row("cold"), row("warm")))
    h100 = process_memory(H100, kda("H100"), "cold", SHAPE)
    assert status_words(h100.modules.status).startswith("estimated: off the H200: the H200's figure, its error on this GPU not measured")
    assert status_words(h100.modules.status).endswith(COMMAND)
    committed = process_memory(H200, kda(), "cold", SHAPE, derived_frames=False)
    assert status_words(committed.modules.status).startswith("estimated: not measured for fla-kda")
    assert status_words(committed.context.status) == "measured" and status_words(committed.stack.status).startswith("derived")


def test_a_process_measured_on_an_h100_answers_for_the_h100_only():
    """Measured on "NVIDIA H100 80GB HBM3", the H100 preset (132 SMs x 2,048 threads, as the H200: the same
    3,755,999,232-B reservation) takes its figures, measured; the H200 keeps its unbounded modules."""
    gpu = {"gpu": "NVIDIA H100 80GB HBM3"}
    got = measured(FakeProbe(BASELINE, row("cold", **gpu), row("warm", **gpu)))
    assert [r["device"] for r in got] == ["H100", "H100"]
    h100 = process_memory(H100, kda("H100"), "cold", SHAPE)
    assert (h100.context.bytes, h100.modules.bytes, h100.stack.bytes) == (CONTEXT, COLD_MODULES, COLD_RESERVATION)
    assert assumptions_words(h100) == []
    assert status_words(process_memory(H200, kda(), "cold", SHAPE).modules.status).startswith("estimated: ")


# ------------------------------------------------------------------------------------- refusals

ALONE_PLUS_1_GIB = {"nonpytorch_bytes": COLD_NONPYTORCH + 1_073_741_824, "reserved_bytes": 1_447_034_880}


@pytest.mark.parametrize("lines,message", [
    # the library refused the call: no first call's modules
    ([row("cold", error="RuntimeError: no"), row("warm")], r"fla-kda@0.6.0:report D256 H16 HV16 \(cold\): RuntimeError: no: "
                                                           "nothing measured"),
    # the cold call did not finish by the deadline (the probe then runs no warm case over its partial cache)
    ([{"case": row("cold")["case"], "status": "did not finish its first call by the deadline"}],
     r"\(cold\): did not finish its first call by the deadline: nothing measured"),
    # the warm process failed: refused in one line naming the cold reading, which is kept on its own merits
    ([row("cold"), row("warm", error="RuntimeError: no")], r"\(warm\): RuntimeError: no: nothing measured \(kept: cold\)$"),
    ([row("cold", triton="3.7.1"), row("warm", triton="3.7.1")], "the installed Triton is 3.7.1, not 3.6.0"),
    ([row("cold", fla="0.5.0"), row("warm", fla="0.5.0")], "the installed fla-core is 0.5.0; these data are fla-core "
                                                           "0.6.0's"),
    ([row("cold", gpu="NVIDIA Foo"), row("warm", gpu="NVIDIA Foo")], r"no preset describes this GPU \('NVIDIA Foo'\)"),
    # another process on the GPU: the in-process reading holds its memory too, the NVML drop at exit does not
    # 4,413,259,776 + 1,073,741,824 = 5,487,001,600 B in process
    ([row("cold", in_process_alone=ALONE_PLUS_1_GIB), row("warm")],
     r"\(cold\): the process read 5,487,001,600 B in itself and 4,413,259,776 B by NVML at its exit: another process "
     r"used the GPU; measure on an idle GPU \(kept: warm\)$"),
    ([{k: v for k, v in row("cold").items() if k != "in_process_alone"}, row("warm")],
     r"\(cold\): no reading of the process alone on the GPU .*: nothing measured \(kept: warm\)$"),
    ([row("cold", stack_limit_bytes=None), row("warm")], r"\(cold\): no stack_limit_bytes read"),
    ([row("cold", context_nonpytorch_bytes=None), row("warm")], r"\(cold\): no context_nonpytorch_bytes read"),
    # 4,308,402,175 B: one byte below the context (552,402,944) and the 14,912-B limit's 3,755,999,232 B
    ([row("cold", nonpytorch_bytes=4_308_402_175,
          in_process_alone={"nonpytorch_bytes": 4_308_402_175, "reserved_bytes": 0}), row("warm")],
     "4,308,402,175 B after the call leave less than the context and the 14,912-B limit's reservation on the H200"),
])
def test_measure_refuses_an_unsound_reading_in_one_line(lines, message):
    """One line for the first refused reading; each sound one is kept and named ``(kept: ...)``; the cold answer stays
    unbounded unless the cold reading was kept."""
    import re
    probe = FakeProbe(BASELINE, *lines)
    with pytest.raises(LivebytesError, match=message) as err:
        measured(probe)
    assert "\n" not in str(err.value) and len(probe.commands) == 1
    kept = re.search(r"\(kept: ([a-z, ]+)\)$", str(err.value))
    states = kept.group(1).split(", ") if kept else []
    assert [r["state"] for r in measured_store.measured_cases()] == states
    assert status_words(process_memory(H200, kda(), "cold", SHAPE).modules.status).startswith(
        "measured (on this machine" if "cold" in states else "estimated: ")


@pytest.mark.parametrize("probe,message", [
    (FakeProbe(BASELINE, returncode=1), r"the process-memory probe measured nothing \(torch.OutOfMemoryError: the last "
                                        r"line\)"),
    (FakeProbe(None, returncode=1), r"measured nothing \(torch.OutOfMemoryError: the last line\)"),
    (FakeProbe(None, returncode=1, stderr=""), r"measured nothing \(no output\)")])
def test_a_probe_that_measured_nothing_says_its_last_line(probe, message):
    with pytest.raises(LivebytesError, match=message) as err:
        measured(probe)
    assert str(err.value).startswith(f"{CASE}: ") and "\n" not in str(err.value)


@pytest.mark.parametrize("key,options,shape,triton,message", [
    # no probe runs these: a whole model, a context-parallel wrapper, the plain contract with grouped value heads
    ("fla-kda-model@0.6.0", {}, Shape(1, 4096, 8, 256), "3.6.0", r"fla-kda-model@0.6.0 \(-\): the process-memory "
                                                                 "probe runs no such case"),
    ("fla-kda-cp@0.6.0", {}, SHAPE, "3.6.0", "no such case"),
    ("fla-kda@0.6.0", {"contract": "plain", "gva": True}, Shape(1, 4096, 16, 128, 32), "3.6.0",
     r"fla-kda@0.6.0 \(plain\): the process-memory probe runs no such case"),
    # no Triton frames in its library; a Triton the data lack
    ("cudnn-kda-hopper-cuda@1.32.0", {}, Shape(1, 4096, 8, 128), None,
     "its library holds no Triton kernels' data on the H200: no process to measure"),
    ("fla-kda@0.6.0", {"contract": "report"}, SHAPE, "3.7.1", "no process-memory data for Triton '3.7.1'")])
def test_a_case_the_probe_cannot_run_is_refused_before_any_process(key, options, shape, triton, message):
    probe = FakeProbe(BASELINE, row("cold"), row("warm"))
    with pytest.raises(LivebytesError, match=message) as err:
        measure_process.measure(key, shape, triton, options, run=probe)
    assert "\n" not in str(err.value) and probe.commands == []


def test_a_probe_past_its_time_is_refused_in_one_line():
    def slow(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])
    with pytest.raises(LivebytesError, match=f"^{CASE}: the probe did not finish within 60 s$"):
        measured(slow, timeout=60)


def test_a_row_of_another_case_is_refused():
    """The probe's rows of H32 (not the asked H16) are no figures of D256 H16: refused, nothing kept."""
    other = {**row("cold")["case"], "heads": 32, "v_heads": 32}
    with pytest.raises(LivebytesError, match=f"^{CASE}: the probe wrote a row of another case"):
        measured(FakeProbe(BASELINE, row("cold", case=other), row("warm", case={**other, "state": "warm"})))


# ------------------------------------------------------------------------------------- --keep

@pytest.mark.parametrize("lines,refused", [((row("cold"), row("warm")), False),
                                           ((row("cold", error="RuntimeError: no"), row("warm")), True)])
def test_keep_copies_the_probes_files_whatever_the_outcome(tmp_path, lines, refused):
    kept = tmp_path / "kept"
    probe = FakeProbe(BASELINE, *lines)
    if refused:
        with pytest.raises(LivebytesError, match="nothing measured"):
            measured(probe, keep=kept)
    else:
        measured(probe, keep=kept)
    summary = (kept / "process_memory.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in summary] == [BASELINE, *lines]
    assert (kept / "fla-report_D256_H16_HV16_T4096_cold.stderr").read_text() == "autotuning 96 configs\n"
    assert [r["state"] for r in measured_store.measured_cases()] == (["warm"] if refused else ["cold", "warm"])


def test_keep_copies_the_probes_files_of_a_probe_past_its_time(tmp_path):
    def slow(command, **kwargs):
        FakeProbe(BASELINE, row("cold"))(command)           # the cold group finished, the warm one ran out of time
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])
    with pytest.raises(LivebytesError, match=r"did not finish within 60 s \(kept: cold\)$"):
        measured(slow, timeout=60, keep=tmp_path / "kept")
    assert (tmp_path / "kept" / "process_memory.jsonl").exists()
    assert [r["state"] for r in measured_store.measured_cases()] == ["cold"]        # its reading kept too


@pytest.mark.parametrize("found,message", [
    ({**INSTALLED, "gpu": None}, "no CUDA GPU visible"),
    ({**INSTALLED, "triton": "3.9.0"}, "the installed Triton is 3.9.0, not 3.6.0: measure with --triton 3.9.0"),
    ({**INSTALLED, "fla": "0.5.0"}, "the installed fla-core is 0.5.0"),
    ({**INSTALLED, "gpu": "NVIDIA Foo"}, "no preset describes this GPU")])
def test_the_installed_versions_and_gpu_are_asked_before_the_probe(found, message, tmp_path):
    """A mismatch costs seconds, not the minutes of a cold probe: the probe never starts, and --keep's folder is not
    made (it was, before the refusal)."""
    probe = FakeProbe(BASELINE, row("cold"), row("warm"))
    with pytest.raises(LivebytesError, match=message):
        measured(probe, ask=lambda python: found, keep=tmp_path / "kept")
    assert probe.commands == [] and measured_store.measured_cases() == []
    assert not (tmp_path / "kept").exists()


def test_a_python_that_is_not_there_is_one_line(monkeypatch):
    """The interpreter asked for does not exist: one line naming it (a FileNotFoundError before)."""
    from livebytes.validate.gpu.derive_frames import inspect as asks_that_python
    monkeypatch.setattr(measure_process, "inspect", asks_that_python)      # the real inspection, not the fixture's
    with pytest.raises(LivebytesError, match="^cannot run the Python '/nonexistent/python': No such file"):
        measure_process.measure("fla-kda@0.6.0", SHAPE, "3.6.0", {"contract": "report"}, python="/nonexistent/python")


@pytest.mark.parametrize("keep_is", ["a file", "below a file", "below a missing folder"])
def test_a_keep_that_cannot_be_a_folder_is_refused_before_the_probe(tmp_path, keep_is):
    """Only --keep's own folder is ever made: a missing parent is refused, not made (issue 50)."""
    (tmp_path / "f").write_text("")
    keep = {"a file": tmp_path / "f", "below a file": tmp_path / "f" / "sub",
            "below a missing folder": tmp_path / "new" / "kept"}[keep_is]
    probe = FakeProbe(BASELINE, row("cold"), row("warm"))
    with pytest.raises(LivebytesError, match=f"^--keep {keep}: not a folder we can write"):
        measured(probe, keep=keep)
    assert probe.commands == [] and not (tmp_path / "new").exists()


def test_a_snapshot_modelled_on_the_datas_fla_core_is_not_measured_as_itself():
    """fla-kda@07b80f27's process would run the installed fla-core 0.6.0's kernels: refused, and its label names no
    command (a 0.6.0 record is never read for it: the store's key is the model's full key)."""
    with pytest.raises(LivebytesError, match=r"^fla-kda@07b80f27: the probe runs the installed fla-core 0\.6\.0's "
                                             r"kernels, not 07b80f27's: measure fla-kda@0\.6\.0$"):
        measured(FakeProbe(BASELINE, row("cold"), row("warm")), key="fla-kda@07b80f27")
    measured(FakeProbe(BASELINE, row("cold"), row("warm")))
    snapshot = process_memory(H200, get_model("fla-kda@07b80f27", "H200", contract="report"), "cold", SHAPE)
    assert status_words(snapshot.modules.status).startswith("estimated: ") and "process measure" not in status_words(snapshot.modules.status)


def test_a_reading_at_another_length_keeps_the_case_figure_unbounded():
    """Measured at 4,096 tokens, asked at 8,192: the context (read before any kernel) is measured, the modules are the
    case's own 104,857,600 B but unbounded (lazily loaded kernels and Triton's specialisations can follow the length),
    the stack the frames' derived one; the label's command measures at 8,192."""
    measured(FakeProbe(BASELINE, row("cold"), row("warm")))
    p = process_memory(H200, kda(), "cold", Shape(1, 8192, 16, 256))
    assert status_words(p.context.status).startswith("measured (on this machine") and status_words(p.stack.status).startswith("derived")
    assert p.modules.bytes == COLD_MODULES
    assert status_words(p.modules.status).startswith("unbounded: measured on this machine (") and "at 4,096 tokens, not at 8,192" in \
        status_words(p.modules.status)


# ------------------------------------------------------------------------------------- the API

def test_the_api_call_measures_with_the_models_default_contract_and_triton():
    """fla-kda@0.6.0's default contract is report and its default Triton 3.6.0: neither is needed. The modules are the
    estimator's: 4,413,259,776 - 552,402,944 - 3,755,999,232 = 104,857,600 cold; 760,020,992 - 552,402,944 -
    113,246,208 = 94,371,840 warm."""
    from livebytes.process import MeasuredProcess, measure_process_at, measured_processes
    probe = FakeProbe(BASELINE, row("cold"), row("warm"))
    got = measure_process_at("fla-kda@0.6.0", SHAPE, run=probe)
    assert probe.commands[0][probe.commands[0].index("--cases") + 1] == "fla-report:256:16:16:4096:cold"
    assert got == [MeasuredProcess(CASE, "cold", "H200", "3.6.0", TODAY, CONTEXT, COLD_NONPYTORCH, COLD_LIMIT,
                                   COLD_MODULES, True),
                   MeasuredProcess(CASE, "warm", "H200", "3.6.0", TODAY, CONTEXT, WARM_NONPYTORCH, WARM_LIMIT,
                                   WARM_MODULES, True)]
    assert measured_processes() == got
    assert got[0].to_dict()["modules_bytes"] == COLD_MODULES


def test_measure_process_by_keywords_runs_the_grouped_value_heads_case(monkeypatch):
    """num_v_heads 32 over 16 heads: the gva case, HV32 in the probe's case and in the record's key."""
    from livebytes.process import measure_process as measure_by_keywords
    hv32 = {state: {**row(state)["case"], "v_heads": 32} for state in ("cold", "warm")}
    probe = FakeProbe(BASELINE, row("cold", case=hv32["cold"]), row("warm", case=hv32["warm"]))
    monkeypatch.setitem(measure_process.measure.__kwdefaults__, "run", probe)
    got = measure_by_keywords("fla-kda@0.6.0", num_heads=16, head_dim=256, num_v_heads=32, contract="report",
                              triton="3.6.0")
    assert probe.commands[0][probe.commands[0].index("--cases") + 1] == "fla-report:256:16:32:4096:cold"
    assert [(m.case, m.state, m.modules_bytes) for m in got] == [("fla-kda@0.6.0:report D256 H16 HV32", "cold", COLD_MODULES),
                                                                 ("fla-kda@0.6.0:report D256 H16 HV32", "warm", WARM_MODULES)]


# ------------------------------------------------------------------------------------- the command (cli/commands/process.py)

def _cli(*args: str):
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    return CliRunner().invoke(app, list(args))


def test_process_list_shows_what_was_measured():
    from livebytes.process import measure_process_at
    result = _cli("process", "list", "--json")
    assert result.exit_code == 0 and json.loads(result.output)["results"] == []
    measure_process_at("fla-kda@0.6.0", SHAPE, run=FakeProbe(BASELINE, row("cold"), row("warm")))
    data = json.loads(_cli("process", "list", "--json").output)
    assert data["action"] == "list"
    assert [(r["case"], r["state"], r["device"], r["modules_bytes"]) for r in data["results"]] == [
        (CASE, "cold", "H200", COLD_MODULES), (CASE, "warm", "H200", WARM_MODULES)]
    table = _cli("process", "list")
    assert table.exit_code == 0 and CASE in table.output and "104,857,600" in table.output


@pytest.mark.parametrize("width", [80, 200])                   # 80: stacked (the 9 columns do not fit), 200: drawn
@pytest.mark.parametrize("command, filler", [("process", "livebytes process measure"),
                                             ("frames", "livebytes frames derive")])
def test_an_empty_list_says_none_yet_and_what_fills_it(command, filler, width):
    """Nothing kept yet: the list says so and names the command that keeps one, at any width (stacked, an empty table
    was its title alone)."""
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    result = CliRunner().invoke(app, [command, "list"], terminal_width=width)
    assert result.exit_code == 0 and f"none yet: {filler}" in " ".join(result.output.split())


LIST_WORDS = {"process": "processes measured on this machine case state GPU Triton measured context B modules B stack "
                         "limit B non-PyTorch B none yet: livebytes process measure",
              "frames": "stack frames derived on this machine case data Triton largest frame B none yet: livebytes "
                        "frames derive"}


@pytest.mark.parametrize("width", [30, 40, 50, 60, 100, 200])
@pytest.mark.parametrize("command", ["process", "frames"])
def test_an_empty_list_never_breaks_a_word(command, width, monkeypatch, tmp_path):
    """At 40 columns the empty frames table wrapped its header 'data' into 'da' / 'ta': a header that would break
    mid-word stacks the table instead; every word printed is a whole word of the title, headers or caption."""
    from tests.test_golden import rendered
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path))
    out = rendered(monkeypatch, [command, "list"], width)
    printed = set(out.translate({ord(c): " " for c in "┏┓┗┛┃━┳┻╇┡┩│└┘┴─"}).split())
    assert printed <= set(LIST_WORDS[command].split()), (width, printed - set(LIST_WORDS[command].split()))


def test_the_labels_command_measures_through_the_cli_and_the_answer_then_says_measured(monkeypatch, tmp_path):
    """The unbounded modules' words end with ``livebytes process measure ...``; that line, run as it stands (the probe
    faked), keeps both processes (and, with --keep, the probe's files), and the next answer at the case takes them."""
    probe = FakeProbe(BASELINE, row("cold"), row("warm"))
    monkeypatch.setitem(measure_process.measure.__kwdefaults__, "run", probe)
    line = status_words(process_memory(H200, kda(), "cold", SHAPE).modules.status).rsplit(": ", 1)[1]
    assert line == COMMAND
    result = _cli(*line.split()[1:], "--keep", str(tmp_path / "kept"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["action"] == "measure" and data["warnings"] == []
    assert [(r["state"], r["modules_bytes"]) for r in data["results"]] == [("cold", COLD_MODULES), ("warm", WARM_MODULES)]
    assert (tmp_path / "kept" / "process_memory.jsonl").exists()
    after = process_memory(H200, kda(), "cold", SHAPE)
    assert status_words(after.modules.status) == f"measured (on this machine, {TODAY})" and after.modules.bytes == COLD_MODULES
    # the answer says so in words too, not only in --json's figures: no committed record holds these
    answer = " ".join(_cli("predict", "--impl", "fla-kda@0.6.0", "--contract", "report", "--head-dim", "256",
                           "--num-heads", "16", "--seq-len", "4096").output.split())
    assert f"kernel modules: measured (on this machine, {TODAY})" in answer
    assert f"stack reservation: measured (on this machine, {TODAY})" in answer


@pytest.mark.parametrize("args,code,message", [
    (("process", "frob"), 2, "process: the action is measure or list, not 'frob'"),
    (("process", "list", "--impl", "fla-kda@0.6.0"), 2, "--impl has no effect with process list"),
    (("process", "list", "--keep", "kept"), 2, "--keep has no effect with process list"),
    (("process", "measure", "--num-heads", "8"), 2, "process measure: --impl and --num-heads are required"),
    (("process", "measure", "--impl", "fla-kda@0.6.0"), 2, "process measure: --impl and --num-heads are required"),
    (("process", "measure", "--impl", "fla-kda@0.6.0", "--num-heads", "8", "--keep", ""), 2,
     "process measure: --keep needs a folder"),
    (("process", "measure", "--impl", "fla-kda@0.6.0", "--num-heads", "8", "--keep", " "), 2, "--keep needs a folder"),
    (("process", "measure", "--impl", "fla-kda@0.6.0", "--num-heads", "0"), 1, "--num-heads: must be positive, got '0'"),
    # a file, or below a path that cannot be made: the same line and code (a file was a usage error, /proc/nope/x not)
    (("process", "measure", "--impl", "fla-kda@0.6.0", "--num-heads", "8", "--keep", __file__), 1,
     f"--keep {__file__}: not a folder we can write ({__file__} is not a folder)"),
    (("process", "measure", "--impl", "fla-kda@0.6.0", "--num-heads", "8", "--keep", f"{__file__}/x"), 1,
     f"--keep {__file__}/x: not a folder we can write ({__file__} is not a folder)"),
    (("process", "measure", "--impl", "fla-kda-model@0.6.0", "--num-heads", "8"), 1,
     "fla-kda-model@0.6.0 (-): the process-memory probe runs no such case"),
    (("process", "measure", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--num-heads", "8"), 1,
     "cudnn-kda-hopper-cuda@1.32.0 (-): the process-memory probe runs no such case"),
    (("process", "measure", "--impl", "fla-kda@0.6.0", "--num-heads", "8", "--triton", "9.9.9"), 1, "9.9.9"),
    (("process", "measure", "--impl", "fla-kda@0.6.0", "--contract", "plain", "--num-heads", "16", "--num-v-heads",
      "32"), 1, "fla-kda@0.6.0 (plain): the process-memory probe runs no such case"),
])
def test_the_command_refuses_in_one_line(args, code, message):
    result = _cli(*args)
    assert result.exit_code == code
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output


# ------------------------------------------------------------------------------------- run 38: the command on the H200

RUN38 = Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "runs" / "run38"


class RecordedProbe:
    """subprocess.run for the probe that writes the lines the H200's probe wrote in run 38 (its --keep folder)."""
    def __init__(self, folder: str):
        self.lines = (RUN38 / folder / "probe" / "process_memory.jsonl").read_text()

    def __call__(self, command, **kwargs):
        out = Path(command[command.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "process_memory.jsonl").write_text(self.lines)
        return subprocess.CompletedProcess(command, 0, "", "")


@pytest.mark.parametrize("folder,key,options,shape,cold,warm", [
    # chunk_kda report D256 H8 (issue 33's reading): cold limit 14,912 -> 3,755,999,232 B reserved, 4,413,259,776 -
    # 552,402,944 - 3,755,999,232 = 104,857,600 B of modules; warm 1,040 -> 1,040 x 270,336 = 281,149,440 B = 134.06
    # pages -> 135 - 132 = 3 pages = 6,291,456 B, 655,163,392 - 552,402,944 - 6,291,456 = 96,468,992 B
    ("kda_d256_h8", "fla-kda@0.6.0", {"contract": "report"}, Shape(1, 8192, 8, 256),
     (4_413_259_776, 14_912, 104_857_600), (655_163_392, 1_040, 96_468_992)),
    # D128 H40 (frames compiled on the CPU by run 36, limit 14,464 there and here): 14,464 x 270,336 = 3,910,139,904 B
    # -> 1,865 - 132 = 1,733 pages = 3,634,364,416 B, 4,291,624,960 - 552,402,944 - 3,634,364,416 = 104,857,600 B;
    # warm 1,440 -> 54 pages = 113,246,208 B, 764,215,296 - 552,402,944 - 113,246,208 = 98,566,144 B
    ("kda_report_d128_h40", "fla-kda@0.6.0", {"contract": "report"}, Shape(1, 8192, 40, 128),
     (4_291_624_960, 14_464, 104_857_600), (764_215_296, 1_440, 98_566_144)),
    # the KDA layer H16/HV32 at hidden 2048: 11,808 -> 1,391 pages = 2,917,138,432 B, 3,710,713,856 - 552,402,944 -
    # 2,917,138,432 = 241,172,480 B; warm 1,952 x 270,336 = 527,695,872 B -> 252 - 132 = 120 pages = 251,658,240 B,
    # 1,038,942,208 - 552,402,944 - 251,658,240 = 234,881,024 B
    ("kda_layer_h16_hv32_h2048", "fla-kda-layer@0.6.0", {"gva": True, "hidden": 2048}, Shape(1, 8192, 16, 128, 32),
     (3_710_713_856, 11_808, 241_172_480), (1_038_942_208, 1_952, 234_881_024))])
def test_run_38s_readings_pass_the_checks_and_the_committed_model_predicts_them(folder, key, options, shape, cold, warm):
    """Run 38 ran `livebytes process measure` on the H200 (fresh processes, empty Triton caches, each alone). Its probe
    lines, replayed through ``measure``, pass every check and give the figures the command printed there
    (measure.json); the committed model (run 38 folded into the data: ``validate/check/frames.py`` RUN38) predicts each
    process to the byte, cold and warm, without reading this machine's store."""
    from livebytes.process import measure_process_at
    printed = json.loads((RUN38 / folder / "measure.json").read_text())["results"]
    got = measure_process_at(key, Shape(1, 4096, shape.heads, shape.dim, shape.v_heads, **(
        {"hidden": options["hidden"]} if "hidden" in options else {})), {"contract": options["contract"]} if "contract" in
        options else {}, "3.6.0", run=RecordedProbe(folder))
    # the command on the H200 keyed cases by family (``fla-kda:report ...``); the store now keys them by the model's
    # full key (``fla-kda@0.6.0:report ...``): every figure the same
    assert [{k: v for k, v in m.to_dict().items() if k not in ("stored", "measured_on")} for m in got] == \
        [{**{k: v for k, v in r.items() if k != "measured_on"}, "case": r["case"].replace(":", "@0.6.0:", 1)}
         for r in printed]
    for state, (nonpytorch, limit, modules) in (("cold", cold), ("warm", warm)):
        m = next(m for m in got if m.state == state)
        assert (m.nonpytorch_bytes, m.stack_limit_bytes, m.modules_bytes) == (nonpytorch, limit, modules)
        committed = process_memory(H200, get_model(key, "H200", **options), state, shape, derived_frames=False)
        assert (committed.bytes, committed.stack_limit_bytes, committed.modules.bytes) == (nonpytorch, limit, modules)
        assert status_words(committed.modules.status) == "measured" and not assumptions_words(committed)


@pytest.mark.parametrize("given", ["report", "REPORT", "Report"])
def test_the_contract_reads_in_any_case_as_predict_reads_it(given):
    """README: a word flag reads in any case; ``process measure`` and ``frames derive`` refused --contract REPORT
    ("option contract='REPORT' not supported") while predict took it."""
    from livebytes.cli import options as o
    key, shape, options = o.case_from("fla-kda@0.6.0", "16", "256", None, given, "process measure", "process")
    assert (key, options, (shape.heads, shape.dim)) == ("fla-kda@0.6.0", {"contract": "report"}, (16, 256))


LAYER_CASE = "fla-kda-layer@0.6.0:- D128 H16 HV16 [hidden=2048 layers=2 checkpoint=1 conv_size=4]"


@pytest.mark.parametrize("width", [60, 100, 120, 136, 140, 160, 200, 250])
def test_the_list_never_cuts_a_key_or_a_figure(width, monkeypatch):
    """At 120 columns the drawn table cut '104,857,6…' and squeezed the date column to nothing; at 140-160 a layer's
    key lost its tail. A key or a figure is now whole at every width: drawn where the table holds them, else stacked."""
    from tests.test_golden import rendered
    assert measured_store.save(DATA_36, record("cold"))
    assert measured_store.save(DATA_36, record("warm", key=LAYER_CASE))
    out = rendered(monkeypatch, ["process", "list"], width)
    assert "…" not in out
    for figure in ("104,857,600", "94,371,840", "4,413,259,776", "760,020,992", "14,912", "1,440", TODAY):
        assert figure in out, (width, figure)
    joined = " ".join(out.split())
    assert CASE in joined and LAYER_CASE in joined


@pytest.mark.parametrize("command", ["process", "frames"])
def test_a_list_that_cannot_read_the_cache_says_why(command, tmp_path, monkeypatch):
    """A folder where the signing key belongs: the list is empty, and a warning says why (it said "none yet" alone, or
    failed with 'cannot use 3: Is a directory')."""
    from typer.testing import CliRunner

    from livebytes.cli.app import app
    monkeypatch.setenv("LIVEBYTES_CACHE_DIR", str(tmp_path / "c"))
    assert measured_store.save(DATA_36, record("cold"))
    (tmp_path / "c" / "hmac.key").unlink()
    (tmp_path / "c" / "hmac.key").mkdir()
    (tmp_path / "c" / "hmac.key" / "x").write_text("")
    (tmp_path / "c" / "derived_frames").mkdir(mode=0o700)
    result = CliRunner().invoke(app, [command, "list"])
    assert result.exit_code == 0
    assert f"warning: {command} list: {tmp_path / 'c' / 'hmac.key'} is no file this user owns" in result.output


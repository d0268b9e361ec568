"""Issue 33, point 4: the bad and odd inputs a newcomer fed the command line, each kept here. Every one answers with
one line on stderr naming the problem and exit 1 (2 for a usage error): never a traceback, a hang, or a silent answer.

Snapshots are built here as Python values and pickled into the test's folder (a self-referencing block, a list
referenced a thousand times and a pickle that would run code are easier to read as code than as bytes); records and
traces are files in tests/bad_inputs/.
"""
import json
import os
import pickle
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.validate.check import explain

BAD = Path(__file__).parent / "bad_inputs"
CONFIG = Path(__file__).parents[1] / "validate" / "data" / "model_configs" / "kda-h1024-l2-v32k.json"
KDA = ("--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "4")


def block(**fields) -> dict:
    return {"address": 0x1000, "size": 512, "state": "active_allocated", **fields}


def segments(*blocks) -> dict:
    return {"segments": [{"address": 0x1000, "blocks": list(blocks)}]}


def self_sized_block() -> dict:
    b = block()
    b["size"] = b               # the block is its own size: a circular value the error must still quote in one line
    return segments(b)


def traced(*events) -> dict:
    return {**segments(block()), "device_traces": [list(events)]}


def shared_blocks(blocks_per_segment: int, segment_count: int) -> dict:
    """One block list referenced by every segment: a ~4 KB pickle that walks as segment_count x blocks_per_segment."""
    blocks = [block()] * blocks_per_segment
    return {"segments": [{"address": 0, "blocks": blocks}] * segment_count}


def shared_frames(frames_per_block: int, block_count: int) -> dict:
    frames = [{"filename": "x.py", "line": 1, "name": "f"}] * frames_per_block
    return segments(*[block(frames=frames)] * block_count)


BOTH, PEAK = ("peak", "snapshot"), ("peak",)      # --at snapshot reads the segments alone, not the trace
SNAPSHOTS = [
    # (name, the unpickled snapshot, the phrase its one line holds, the --at values that read what is wrong)
    ("frames are ints", segments(block(frames=[1, 2])), "segments[0].blocks[0].frames[0]: expected an object, got 1", BOTH),
    ("frames is a string", segments(block(frames="abc")), "segments[0].blocks[0].frames: expected a list, got 'abc'", BOTH),
    ("frames are strings", segments(block(frames=["a.py:1:f"])), "frames[0]: expected an object, got 'a.py:1:f'", BOTH),
    ("a frame's line is text", segments(block(frames=[{"filename": "a.py", "line": "1", "name": "f"}])),
     "frames[0].line: expected an integer, got '1'", BOTH),
    ("trace frames are ints", traced({"action": "alloc", "addr": 1, "size": 512, "frames": [7]}),
     "device_traces[0][0].frames[0]: expected an object, got 7", BOTH),
    ("a self-referencing block", self_sized_block(), "size: expected a non-negative integer, got a dict that holds itself",
     BOTH),
    ("an alloc without addr", traced({"action": "alloc", "size": 512}), "device_traces[0][0].addr: missing", PEAK),
    ("a free without addr", traced({"action": "free_requested", "size": 512}), "device_traces[0][0].addr: missing", PEAK),
    ("an alloc without size", traced({"action": "alloc", "addr": 1}), "device_traces[0][0].size: missing", PEAK),
    ("a traced block without address", {"segments": [{"blocks": [{"size": 512, "state": "active_allocated"}]}],
                                         "device_traces": [[{"action": "alloc", "addr": 1, "size": 512}]]},
     "segments[0].blocks[0].address: missing", PEAK),
    # 1,000 segments x 1,000 blocks + the 1,000 segments = 1,001,000 entries > MAX_SNAPSHOT_ENTRIES (1,000,000)
    ("1000 x 1000 shared blocks", shared_blocks(1000, 1000), "more than 1,000,000 segments, blocks and trace events", BOTH),
    # 20,001 blocks x 1,000 frames = 20,001,000 frames > MAX_SNAPSHOT_FRAMES (20,000,000); 20,002 entries are few
    ("20,001 x 1,000 shared frames", shared_frames(1000, 20_001), "or 20,000,000 frames", BOTH),
]
CASES = [(name, snapshot, phrase, at) for name, snapshot, phrase, ats in SNAPSHOTS for at in ats]
TRACE_ONLY = [(name, snapshot) for name, snapshot, _, ats in SNAPSHOTS if ats == PEAK]


def one_line(result, code: int, phrase: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == code, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and phrase in lines[0], result.stderr
    assert "Traceback" not in result.output and result.stdout == ""


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def explain_file(tmp_path, snapshot, *more: str):
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    return run("explain", str(path), *KDA, *more)


@pytest.mark.parametrize("name,snapshot,phrase,at", CASES, ids=[f"{c[0]}, --at {c[3]}" for c in CASES])
def test_a_bad_snapshot_is_one_line(tmp_path, name, snapshot, phrase, at):
    one_line(explain_file(tmp_path, snapshot, "--at", at), 1, phrase)


@pytest.mark.parametrize("name,snapshot", TRACE_ONLY, ids=[c[0] for c in TRACE_ONLY])
def test_a_trace_lacking_addresses_is_no_matter_when_the_trace_is_not_read(tmp_path, name, snapshot):
    """--at snapshot explains the segments' one 512-B block; the trace's missing fields are not read."""
    r = explain_file(tmp_path, snapshot, "--at", "snapshot", "--json")
    assert r.exit_code == 0, r.output
    assert [b["bytes"] for b in json.loads(r.stdout)["results"][0]["blocks"]] == [512]


def test_the_limits_are_beyond_a_shared_snapshot_just_below_them(tmp_path):
    """The refusals above are the limits', not any shared list's: 999 x 1,000 blocks + 999 segments = 999,999 entries
    pass the count (and the layout check), exactly as many as the readers then walk."""
    snapshot = shared_blocks(1000, 999)
    explain.refuse_absurd(snapshot, "here")
    assert sum(1 for _ in explain._entries(snapshot)) == 999 * 1000 + 999


def test_a_snapshot_file_larger_than_the_limit_is_refused_unread(tmp_path):
    path = tmp_path / "huge.pickle"
    with open(path, "wb") as f:             # sparse: its size says one byte past the limit, no byte is written
        f.truncate(explain.MAX_SNAPSHOT_BYTES + 1)
    one_line(run("explain", str(path), *KDA), 1, "more than 1,073,741,824 bytes")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_dev_zero_is_read_no_further_than_the_limit(monkeypatch):
    """/dev/zero's size says 0: only reading one byte past the limit finds it endless (the limit lowered to 1 KiB
    so the test reads 1,025 bytes, not 1 GiB)."""
    monkeypatch.setattr(explain, "MAX_SNAPSHOT_BYTES", 1024)
    one_line(run("explain", "/dev/zero", *KDA), 1, "/dev/zero: more than 1,024 bytes")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("args,phrase", [
    (("explain", "{fifo}", *KDA), "{fifo}: not a memory snapshot pickle"),
    (("predict", "--model", "{fifo}", "--seq", "8K"), "{fifo}: the file is empty"),
    (("validate", "--from-records", "{fifo}"), "not a record file (a device, pipe or socket); not read")])
def test_a_named_pipe_no_one_writes_to_is_one_line_not_a_hang(tmp_path, args, phrase):
    """open(2) of a FIFO waits for a writer for ever; the readers open it non-blocking: empty, one line."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    one_line(run(*(a.format(fifo=fifo) for a in args)), 1, phrase.format(fifo=fifo))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_dev_zero_as_records_is_not_a_record_file():
    one_line(run("validate", "--from-records", "/dev/zero"), 1,
             "--from-records '/dev/zero': not a record file (a device, pipe or socket); not read")


class RunsCode:
    """Unpickled by a plain pickle.load, this would run ``os.system(command)``."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "hostile.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "x": RunsCode(f"touch {shlex.quote(str(marker))}")}))
    one_line(run("explain", str(path), *KDA), 1, "a memory snapshot holds only plain data")
    assert not marker.exists()


BAD_COMMANDS = [
    # (arguments, exit code, the phrase of the one line)
    (("validate", "--from-records", str(BAD / "record_peak_bytes_0.json")), 1, "peak_bytes: 0 B measured"),
    (("validate", "--from-records", str(BAD / "record_seq_1e30.json")), 1,
     "shape: seq: 1000000000000000000000000000000 is beyond any size"),
    # 999,999,999,999,999,999 x 2^30: 18 digits pass the digit limit, the suffix takes it past 2^50
    (("predict", "--impl", "fla-kda@0.6.0", "--seq", "999999999999999999G", "--heads", "4"), 1, "--seq-len: 1,073,741,"),
    (("predict", "--impl", "fla-kda-layer@0.6.0", "--seq", "8K", "--heads", "4", "--hidden", str(2**50 + 1)), 1,
     "--hidden-size: 1,125,899,906,842,625 is beyond any size (at most 2^50"),
    (("learn", "--traces", str(BAD / "mixed_traces")), 1,
     "traces of 2 kernels: fla-gdn-fwd@0.6.0 (2 files: fla-gdn-fwd_0.6.0_T2060_N2_H1_HV2_K64_V64.json, ...), "
     "fla-kda@0.6.0 contract=report (2 files: fla-kda_0.6.0_T2060_N2_H2_HV2_K64_V64.json, ...)"),
    (("drift", "--impl", "fla-kda@0.6.0", "--traces", str(BAD / "mixed_traces")), 1, "traces of 2 kernels"),
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", "80GiB", "--triton", "3.9.0"), 2,
     "--triton has no effect with --budget: the budget bounds the allocated peak"),
    (("plan", "--impl", "fla-kda@0.6.0", "--budget", ""), 1, "memory size '' needs a unit"),
    (("predict", *KDA, "--gpu", ""), 1, "unknown GPU ''"),
    (("diff", "--impl", "fla-kda@0.6.0", "--impl", "fla-kda@07b80f27", "--gpu", ""), 1, "unknown GPU ''"),
    (("timeline", *KDA, "--out", ""), 1, "--out: an empty name; name a file, e.g. out.png"),
    (("sweep", "--impl", "fla-kda@0.6.0", "--out", ""), 1, "--out: an empty name; name a file, e.g. out.csv"),
    # an empty text was taken as the option left out (the default dim, the current folder)
    (("predict", *KDA, "--dim", ""), 1, "--head-dim: '' is not a positive integer"),
    (("diff", "--impl", "fla-kda@0.6.0", "--impl", "fla-kda@07b80f27", "--seq", "8K", "--heads", "4", "--mbs", ""), 1,
     "--batch-size: '' is not a positive integer"),
    (("predict", "--model", "", "--seq", "8K"), 1, "--model: an empty name"),
    (("explain", "", *KDA), 1, "SNAPSHOT.pickle: an empty name"),
    (("validate", "--from-records", ""), 1, "--from-records: an empty name"),
    # issue 34, point 3: each gap a flag closes still refuses what it cannot do, in one line with the reason
    (("sweep", "--impl", "fla-gdn@0.6.0", "--seq", "8K", "--heads", "16,64", "--v-heads", "32"), 1,
     "--num-v-heads 32 at --num-heads 64: value heads must be a multiple of heads"),
    (("sweep", "--impl", "cudnn-kda-frost@1.32.0", "--seq", "8K", "--heads", "16", "--v-heads", "32"), 1,
     "value heads != heads (GVA) is not covered by this model"),
    (("sweep", "--model", str(CONFIG), "--v-heads", "32"), 2,
     "--num-v-heads has no effect with --model"),
    # sweep --expand-v: a model whose kernels take no other value head dim refuses it (predict and plan alike)
    (("sweep", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--seq", "8K", "--heads", "16", "--expand-v", "1,2"), 1,
     "kda_hopper engines take value head dim 128 only (hopper/cuda_engine.py and hopper/kda_engine.py check_support"),
    (("predict", "--impl", "cudnn-kda-frost@1.32.0", "--seq", "8K", "--heads", "16", "--expand-v", "0.5"), 1,
     "FROST KDA kernels take value head dim 128 only (frost/kda_engine.py _check_common: 'head dims must be 128 (the "
     "recurrent state is 128x128)'), got head_v_dim 64"),
    (("plan", "--impl", "cudnn-kda-hopper@1.32.0", "--expand-v", "2"), 1, "got head_v_dim 256"),
    (("sweep", *KDA, "--expand-v", "0.5,,2"), 1, "--expand-v: an empty item in '0.5,,2'"),
    # a ratio's text and size are bounded (1e20000 formatted a 20,000-digit number, 1..1e1000000 doubled for ever)
    (("sweep", *KDA, "--expand-v", "1..1e20000"), 1, "--expand-v: '1e20000' is outside 2^-20 to 2^20"),
    (("sweep", *KDA, "--expand-v", "1e-300..1"), 1, "--expand-v: '1e-300' is outside 2^-20 to 2^20"),
    (("predict", *KDA, "--expand-v", "1" * 40), 1, "is longer than any ratio (24 characters)"),
    (("sweep", *KDA, "--expand-v", "0.5..3"), 1, "--expand-v: range '0.5..3' doubles from its start and would stop at 2"),
    (("sweep", *KDA, "--head-dim", "64,100", "--expand-v", "0.125"), 1,
     "--expand-v at --head-dim 100: head_dim 100 x '0.125' = 12.5 is not a whole value head dimension"),
    (("sweep", "--model", str(CONFIG), "--expand-v", "2"), 2, "--expand-v has no effect with --model"),
    (("formula", "--impl", "fla-kda@0.6.0", "--layers", "2"), 1, "--num-hidden-layers describes a layer; this model is a kernel"),
    (("diff", "--impl", "fla-kda@0.6.0", "--impl", "fla-kda@07b80f27", "--hidden", "1024"), 1,
     "--hidden-size describes a layer; this model is a kernel"),
    (("predict", *KDA, "--cp-rank", "last"), 1, "fla-kda@0.6.0 does not take --cp-rank"),
    (("predict", "--impl", "fla-kda-cp@0.6.0", "--seq", "8K", "--heads", "4", "--cp-rank", "middle"), 1,
     "cp_rank middle needs a world size of 3 or more (got 2)"),
    (("predict", "--impl", "fla-kda-cp@0.6.0", "--seq", "8K", "--heads", "4", "--cp-rank", "centre"), 1,
     "option cp_rank='centre' not supported (choose from first, middle, last)"),
    (("predict", *KDA, "--triton-cache", "hot"), 1, "--triton-cache must be one of cold, warm, got 'hot'"),
    (("predict", *KDA, "--triton-cache", "auto"), 1, "got 'auto'; auto is validate's (a GPU run's cache: warm when a "
                                                      "committed autotune file matches it), a prediction states which"),
    (("validate", "--impl", "fla-kda@0.6.0", "--shapes", "1,8K,4", "--triton-cache", "hot"), 1,
     "--triton-cache must be one of cold, warm, auto, got 'hot'"),
    (("validate", "--plan", str(BAD / "record_peak_bytes_0.json"), "--triton-cache", "warm"), 2,
     "--triton-cache has no effect with --plan (each of the plan file's groups sets its own)"),
    # issue 36 point 3: a preset's name is a name or a file; --routing is a model with experts' (all before tracing)
    (("predict", "--model", "qwen3-next-81b", "--seq", "8K"), 1,
     "--model 'qwen3-next-81b': no such preset and no such file; presets: kimi-linear-48b-a3b, kimi-linear-small, "
     "qwen3-next-80b-a3b, qwen3-next-small (or give a config.json)"),
    (("plan", "--model", "no-such.json"), 1, "no-such.json"),
    # the checkpoint's linear_attn_config places 27 layers (1-indexed), as transformers 5.17 reads it
    (("predict", "--model", "kimi-linear-48b-a3b", "--seq", "8K", "--layers", "8"), 1,
     "config: linear_attn_config places layers 1 .. 27 (27 of them), not each of 1 .. 8 once: give layer_types"),
    (("predict", "--model", "qwen3-next-small", "--seq", "8K", "--routing", "sideways"), 1,
     "--routing must be one of balanced, worst, got 'sideways'"),
    (("plan", "--model", "kimi-linear-small", "--routing", ""), 1, "--routing must be one of balanced, worst, got ''"),
    (("predict", *KDA, "--routing", "worst"), 2, "--routing has no effect without --model; leave it out"),
    (("plan", "--model", str(CONFIG), "--routing", "worst"), 1,
     "--routing: fla-kda-model@0.6.0 has no experts to route to (routing applies to qwen3-next-model@5.17.0, "
     "kimi-linear-model@5.17.0)"),
]


@pytest.mark.parametrize("args,code,phrase", BAD_COMMANDS, ids=[" ".join(a[0])[:60] for a in BAD_COMMANDS])
def test_a_bad_command_is_one_line(args, code, phrase):
    one_line(run(*args), code, phrase)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_a_plan_file_is_read_no_further_than_its_limit():
    one_line(run("validate", "--plan", "/dev/zero"), 1, "/dev/zero: more than 1,048,576 bytes")


LIVEBYTES = [sys.executable, "-m", "livebytes.cli.app"]


def test_closed_standard_output_is_an_error():
    """``livebytes predict ... >&-`` printed its answer nowhere and exited 0."""
    command = shlex.join([*LIVEBYTES, "predict", *KDA]) + " >&-"
    done = subprocess.run(["bash", "-c", command], stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["error: standard output is closed: the answer has nowhere to go; redirect it "
                                        "to a file or /dev/null"]


def test_a_reader_that_stops_early_gets_no_traceback():
    """``livebytes models | head -1``: the pipe closes before the answer is written (closed here before the process
    starts writing): exit 1, nothing on stderr."""
    proc = subprocess.Popen([*LIVEBYTES, "models"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 1 and stderr == ""

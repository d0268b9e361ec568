"""Issue 34, point 4: feedback. A long step shows a progress bar on a terminal's stderr (never elsewhere, never with
--json); explain warns when the snapshot does not fit the asked model or shape and names the shape that does; a
snapshot of a shape that runs out of memory ends with PyTorch's ``oom`` trace event at the failing request."""
import io
import json
import pickle

import pytest
from typer.testing import CliRunner

from livebytes import calls
from livebytes.cli.app import app
from livebytes.estimator.shapes import Shape


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def document(*args: str) -> dict:
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ------------------------------------------------------------------------------ progress

def test_plan_tells_its_progress_of_each_value_it_tries():
    told = []
    plan = calls.plan_at(["fla-kda@0.6.0"], Shape(1, 8192, 96), "seq", progress=lambda *step: told.append(step))
    (answer,) = plan.results
    assert [done for done, _, _ in told] == list(range(1, len(told) + 1))       # one step per value tried, counted
    assert {total for _, total, _ in told} == {None}                            # a search: no total
    notes = {note for _, _, note in told}
    # named as the bar and the flags name it (seq_len), not by the library's field (seq)
    assert {f"fla-kda@0.6.0: seq_len {answer.value:,}", f"fla-kda@0.6.0: seq_len {answer.next_value:,}"} <= notes


def test_sweep_tells_its_progress_of_each_point():
    told = []
    grid = calls.Grid([1], [8192, 16384], [16, 32], [128])
    calls.sweep_at(["fla-kda@0.6.0", "fla-gdn@0.6.0"], grid, progress=lambda *step: told.append(step))
    # 2 models x 2 sequences x 2 head counts = 8 points, each told once with the total
    assert [(done, total) for done, total, _ in told] == [(n, 8) for n in range(1, 9)]
    assert told[0][2] == "fla-kda@0.6.0 at batch_size=1, seq_len=8K, num_heads=16, head_dim=128"


@pytest.fixture
def terminal(monkeypatch):
    """Every rich console reports a terminal (as a user's shell would give stderr)."""
    from rich.console import Console
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))


PLAN = ("plan", "--impl", "fla-kda@0.6.0", "--heads", "8")


def test_a_terminal_sees_the_bar_on_stderr(terminal):
    r = run(*PLAN)
    assert r.exit_code == 0, r.output
    assert "plan: the largest seq" in r.stderr and "plan: the largest seq" not in r.stdout


def test_json_never_shows_the_bar_even_on_a_terminal(terminal):
    r = run(*PLAN, "--json")
    assert r.exit_code == 0 and r.stderr == "" and json.loads(r.stdout)["command"] == "plan"


def test_no_terminal_no_bar():
    r = run(*PLAN)
    assert r.exit_code == 0 and r.stderr == ""


# ------------------------------------------------------------------------------ explain: does the snapshot fit?

KDA_8K = ("--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "8")


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """The predicted process of fla-kda@0.6.0 at 8K tokens, 8 heads, at its peak (timeline --out)."""
    target = tmp_path_factory.mktemp("explain") / "kda_8k_h8.pickle"
    r = run("timeline", *KDA_8K, "--out", str(target))
    assert r.exit_code == 0, r.output
    return str(target)


def explained(snapshot: str, *flags: str) -> tuple[dict, list[str]]:
    """(the --json result, the warnings it carries), the warnings those stderr printed."""
    r = run("explain", snapshot, *flags, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert r.stderr.splitlines() == [f"warning: {w}" for w in data["warnings"]]
    return data["results"][0], data["warnings"]


def test_the_right_model_and_shape_warn_of_nothing(snapshot):
    result, warnings = explained(snapshot, *KDA_8K)
    assert result["unexplained_bytes"] == 0 and warnings == []


@pytest.mark.parametrize("flags,fits", [
    (("--seq", "4K", "--heads", "8"), "--seq-len 8K"),          # too short: the search solves the sequence back
    (("--seq", "8K", "--heads", "4"), "--num-heads 8"),          # named by the HF flags, whichever the user typed
    (("--seq", "8K", "--heads", "8", "--dim", "64"), "--head-dim 128"),
    (("--seq", "4K", "--heads", "8", "--mbs", "2"), None),  # two sizes off: no shape one size away explains it all
])
def test_a_wrong_shape_warns_and_names_the_shape_that_fits(snapshot, flags, fits):
    whole, _ = explained(snapshot, *KDA_8K)
    result, warnings = explained(snapshot, "--impl", "fla-kda@0.6.0", *flags)
    assert result["unexplained_bytes"] > 0 and warnings
    if fits:
        assert warnings[-1].startswith(f"fla-kda@0.6.0 at batch_size=1, seq_len=8K, num_heads=8, head_dim=128 explains all "
                                       f"{whole['live_bytes']:,} live B ({result['explained_bytes']:,} B at the shape asked)")
        assert warnings[-1].endswith(f"the snapshot fits {fits}")
    else:
        assert "explains all" not in " ".join(warnings)


def test_a_shape_larger_than_the_snapshot_says_its_peak_is_not_held(snapshot):
    """At 16K every tensor that scales with the tokens doubles: the model's requested peak passes the bytes live at the
    snapshot's peak, which no run of it at 16K can do."""
    result, warnings = explained(snapshot, "--impl", "fla-kda@0.6.0", "--seq", "16K", "--heads", "8")
    from livebytes.estimator.replay import requested_peak
    from livebytes.estimator.registry import get_model
    need = requested_peak(get_model("fla-kda@0.6.0"), Shape(1, 16384, 8))
    assert result["live_bytes"] < need
    assert warnings[0] == (f"the snapshot holds {result['live_bytes']:,} B live at its peak, fewer than fla-kda@0.6.0 at "
                           f"batch_size=1, seq_len=16K, num_heads=8, head_dim=128 requests at its own peak ({need:,} B): it is not this shape's peak")
    assert warnings[-1].endswith("the snapshot fits --seq-len 8K")


def test_a_model_whose_sources_no_frame_names_warns_its_matches_are_by_size_alone(snapshot):
    result, warnings = explained(snapshot, "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--seq", "8K", "--heads", "8")
    assert result["explained_bytes"] > 0 and {b["match"] for b in result["blocks"] if b["buffer"]} == {"size"}
    assert warnings[0] == (f"cudnn-kda-hopper-cuda@1.32.0 at batch_size=1, seq_len=8K, num_heads=8, head_dim=128 explains "
                           f"{result['explained_bytes']:,} B by size alone (no frame of the blocks names a source it cites): "
                           "another implementation or shape with tensors of these sizes would match as well")


# The right model on its real process warns of nothing: tests/test_snapshot.py's explain of the validator's own H200
# dumps (a 2.52 GB workspace block matched by size alone beside blocks their frames name included).


# ------------------------------------------------------------------------------ explain: a sibling model's snapshot

LIVE_KDA = "live_fla-kda_0.6.0_1x8192x96x128.json"      # the validator's H200 dump of fla-kda@0.6.0, 1 x 8K, H96, D128
KDA_LIVE_SHAPE = ("--seq-len", "8K", "--num-heads", "96")


@pytest.fixture(scope="module")
def kda_h200_snapshot(tmp_path_factory):
    """The committed H200 dump of fla-kda@0.6.0 at its peak (validate/data/records/live/), its 44 blocks with their frames
    (innermost first, as the GPU recorded them), as a snapshot's active blocks."""
    from pathlib import Path
    dump = json.loads((Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "live" / LIVE_KDA).read_text())
    blocks = [{"address": 0, "size": b["bytes"], "state": "active_allocated", "frames": [_frame(f) for f in b["frames"]]}
              for b in dump["blocks"]]
    target = tmp_path_factory.mktemp("live") / "kda_h200.pickle"
    target.write_bytes(pickle.dumps({"segments": [{"address": 0, "blocks": blocks}], "device_traces": []}))
    return str(target)


def _frame(text: str) -> dict:
    """"file:line:function" (the dump's) as a snapshot's frame."""
    filename, line, name = text.rsplit(":", 2)
    return {"filename": filename, "line": int(line), "name": name}


def test_a_sibling_models_snapshot_is_flagged_though_shared_frames_match(kda_h200_snapshot):
    """fla-gdn@0.6.0 asked of fla-kda@0.6.0's H200 dump: GDN shares FLA's common code (chunk_delta_h.py's h and v_new,
    l2norm.py's outputs), so blocks match it by source line and no earlier warning fired. The blocks' own allocation
    sites (each one's innermost fla frame) name KDA's files, which GDN cites nowhere; from the dump, by hand:
    chunk_bwd.py 3 x 402,653,184 + 3 x 201,326,592 + 3,145,728 = 1,815,085,056 B; chunk_intra.py 3 x 402,653,184
    + 2 x 100,663,296 + 12,582,912 + 3,145,728 = 1,425,014,784 B; wy_fast.py 4 x 201,326,592 = 805,306,368 B;
    kda/gate.py 402,653,184 B; gla/chunk.py 201,326,592 B; common/gate.py 3,145,728 B: 21 blocks, 4,652,531,712 B."""
    result, warnings = explained(kda_h200_snapshot, "--impl", "fla-gdn@0.6.0", *KDA_LIVE_SHAPE)
    assert any(b["match"] == "source line" for b in result["blocks"])           # the shared code's frames do match
    foreign = [w for w in warnings if "cites nowhere" in w]
    assert foreign == [
        "21 live blocks (4,652,531,712 B) were allocated in fla/ops/kda/chunk_bwd.py, fla/ops/kda/chunk_intra.py, "
        "fla/ops/kda/wy_fast.py and 3 more, which fla-gdn@0.6.0 cites nowhere: the snapshot is another model's (a "
        "sibling shares some of its package's code, so some frames match); fla-kda@0.6.0, fla-kda@07b80f27, "
        "fla-kda-cp@0.6.0, fla-kda-layer@0.6.0 cite all of it"]
    assert 1_815_085_056 + 1_425_014_784 + 805_306_368 + 402_653_184 + 201_326_592 + 3_145_728 == 4_652_531_712


def test_a_forward_only_model_asked_of_a_backward_snapshot_is_flagged(kda_h200_snapshot):
    """fla-kda-fwd@0.6.0 runs chunk_kda's forward only: the backward's 7 blocks from chunk_bwd.py (1,815,085,056 B, as
    above) are code it does not run."""
    _, warnings = explained(kda_h200_snapshot, "--impl", "fla-kda-fwd@0.6.0", *KDA_LIVE_SHAPE)
    assert [w.split(", which")[0] for w in warnings if "cites nowhere" in w] == [
        "7 live blocks (1,815,085,056 B) were allocated in fla/ops/kda/chunk_bwd.py"]


def test_the_asked_model_on_its_own_snapshot_has_no_foreign_site(kda_h200_snapshot):
    result, warnings = explained(kda_h200_snapshot, "--impl", "fla-kda@0.6.0", *KDA_LIVE_SHAPE)
    assert warnings == []


@pytest.mark.parametrize("frame,site", [
    ("/tmp/site/fla/ops/kda/gate.py:502:kda_gate_chunk_cumsum", "fla/ops/kda/gate.py"),
    ("/home/fla/venv/lib/site-packages/fla/modules/norm/l2norm.py:117:l2norm_fwd", "fla/modules/norm/l2norm.py"),
    ("fla/ops/utils/index.py:42:prepare_lens", "fla/ops/utils/index.py"),
    ("/usr/lib/python3/site-packages/torch/nn/functional.py:12:linear", None),      # outside the package
    ("/tmp/fla.py:3:f", None),                                                      # a file named like it is not it
])
def test_a_frames_allocation_site_is_its_path_from_the_package(frame, site):
    from livebytes.validate.check.explain import package_path
    assert package_path(frame, "fla") == site


# ------------------------------------------------------------------------------ the out-of-memory snapshot

OOM = ("--impl", "fla-kda@0.6.0", "--seq", "1M", "--heads", "96")


@pytest.fixture(scope="module")
def oom_snapshot(tmp_path_factory):
    target = tmp_path_factory.mktemp("oom") / "kda_1m_h96.pickle"
    r = run("timeline", *OOM, "--out", str(target))
    assert r.exit_code == 0, r.output
    assert r.stdout == (f"wrote {target} (torch.cuda.memory._snapshot() of the predicted process at the failing request: "
                        "out of memory at fwd.l2norm_q allocating q_normed)\n")
    return target


def test_an_out_of_memory_snapshot_ends_with_pytorchs_oom_event(oom_snapshot):
    """torch/csrc/cuda/memory_snapshot.cpp writes TraceEntry::OOM as {action: oom, device_free, size}, no addr."""
    snap = pickle.loads(oom_snapshot.read_bytes())
    (p,) = document("predict", *OOM)["results"]
    o = p["oom"]
    events = snap["device_traces"][0]
    assert [e["action"] for e in events].count("oom") == 1 and events[-1]["action"] == "oom"
    last = events[-1]
    assert "addr" not in last and last["stream"] == 0
    # q_normed, bf16 [T, H, K]: 2^20 tokens x 96 heads x 128 x 2 B = 25,769,803,776 B (a multiple of 512: not rounded)
    assert last["size"] == o["request_bytes"] == 2**20 * 96 * 128 * 2
    assert last["device_free"] == o["free_bytes"]
    assert last["frames"][-1]["name"] == "fwd.l2norm_q (q_normed, call 1)"
    # the segments are the allocator's at the failure: what PyTorch's message calls reserved, within the device
    reserved = sum(s["total_size"] for s in snap["segments"])
    assert reserved == o["reserved_bytes"] and reserved + last["device_free"] <= p["device_memory"]["total_bytes"]
    assert snap["livebytes"]["oom"] == o


def test_the_h200s_out_of_memory_snapshot_is_the_predicted_one(oom_snapshot):
    """Run 27 (validate/data/plans/h200_run27_oom_snapshot.sh): the same process on the H200, cold, memory history recorded,
    the snapshot dumped in the OutOfMemoryError handler. One ``oom`` event, last, of the predicted request; the segments
    (PyTorch's reserved) the predicted ones to the byte. Its free bytes are 8,388,608 B above the prediction's: the
    prediction charges the call's kernel modules (104,857,600 B, measured after the call) from its start, and the GPU's
    process had loaded 8 MiB of them fewer when it failed, before fla's first launch (CUDA loads a module at a
    kernel's first launch): 150,109,880,320 - 129,052,442,624 - 20,408,565,760 = 648,871,936 B outside PyTorch, the
    context's 552,402,944 and 96,468,992 B of modules."""
    from livebytes.validate.check.explain import _PlainUnpickler
    from livebytes.validate.check.model_records import MODEL_RECORDS_DIR
    path = MODEL_RECORDS_DIR.parent / "runs" / "run27" / "oom_snapshot" / "real.pickle"
    real = _PlainUnpickler(io.BytesIO(path.read_bytes())).load()
    predicted = pickle.loads(oom_snapshot.read_bytes())
    last_real, last_predicted = real["device_traces"][0][-1], predicted["device_traces"][0][-1]
    assert last_real["action"] == last_predicted["action"] == "oom"
    assert last_real["size"] == last_predicted["size"] == 25_769_803_776
    assert [e["action"] for e in real["device_traces"][0]].count("oom") == 1
    reserved = [sum(s["total_size"] for s in snap["segments"]) for snap in (real, predicted)]
    assert reserved == [129_052_442_624, 129_052_442_624]
    assert last_real["device_free"] - last_predicted["device_free"] == 8_388_608
    assert 150_109_880_320 - reserved[0] - last_real["device_free"] == 552_402_944 + 104_857_600 - 8_388_608


def test_pytorchs_reader_shows_the_failure(oom_snapshot):
    memory_viz = pytest.importorskip("torch.cuda._memory_viz")
    text = memory_viz.trace(pickle.loads(oom_snapshot.read_bytes()))
    assert "raise OutOfMemoryError # 24.0GiB requested, " in text


def test_a_snapshot_that_fits_has_no_oom_event(snapshot):
    with open(snapshot, "rb") as f:
        assert all(e["action"] != "oom" for e in pickle.load(f)["device_traces"][0])


def test_explain_of_an_out_of_memory_snapshot_does_not_ask_for_the_peak_it_never_reached(oom_snapshot):
    result, warnings = explained(str(oom_snapshot), *OOM)
    assert result["unexplained_bytes"] == 0 and warnings == []

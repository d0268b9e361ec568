"""PyTorch's own memory-snapshot format, both ways: ``timeline --out FILE.pickle`` writes the predicted process as a
``torch.cuda.memory._snapshot()`` dictionary that ``torch.cuda._memory_viz`` opens, its peak the prediction's;
``explain`` names a snapshot's live blocks by the model's buffers (our own snapshot, and the validator's live
dumps of real runs, validate/data/records/live/)."""
import json
import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator import get_model
from livebytes.estimator.replay import requested_peak
from livebytes.estimator.prediction import allocations
from livebytes.estimator.shapes import Shape
from livebytes.estimator.buffers import Source
from livebytes.estimator.compiled import compiled
from livebytes.estimator.snapshot import process_snapshot, source_frame

memory_viz = pytest.importorskip("torch.cuda._memory_viz")

LIVE = Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "live"
CASES = [("fla-kda@0.6.0", ["--seq", "8K", "--heads", "32"]), ("cudnn-kda-hopper-cuda@1.32.0", ["--seq", "8K", "--heads", "32"]),
         ("fla-gdn@0.6.0", ["--seq", "4K", "--heads", "16", "--v-heads", "32"]), ("cudnn-kda-frost@e0b4ce98", ["--seq", "8K", "--heads", "8"])]


def run(*args):
    return CliRunner().invoke(app, list(args))


def written(tmp_path, key, shape_args) -> dict:
    target = tmp_path / "process.pickle"
    r = run("timeline", "--impl", key, *shape_args, "--out", str(target))
    assert r.exit_code == 0, r.output
    return pickle.loads(target.read_bytes())


def live_requested_peak(snapshot) -> int:
    """What memory_viz's Active Memory Timeline tops at: live bytes of the trace's alloc/free events (requests)."""
    live = top = 0
    for e in snapshot["device_traces"][0]:
        live += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
        top = max(top, live)
    return top


@pytest.mark.parametrize("key,shape_args", CASES)
def test_the_snapshot_opens_in_memory_viz_with_the_predicted_peak(tmp_path, key, shape_args):
    snap = written(tmp_path, key, shape_args)
    (pred,) = json.loads(run("predict", "--impl", key, *shape_args, "--json").stdout)["results"]
    html = memory_viz.trace_plot(snap)              # the Active Memory Timeline page, the snapshot inside
    assert "snapshot.pickle" in html and len(html) > 1000
    summary = memory_viz.segsum(snap)               # memory_viz's own accounting checks pass
    assert "total_reserved" in summary
    active = sum(b["size"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    assert active == pred["replay_peak_bytes"] >= pred["peak_bytes"]     # taken at the steady-state replay's peak
    shape = Shape.from_dict(pred["shape"])
    assert live_requested_peak(snap) == requested_peak(get_model(key, **{k: v for k, v in pred["options"].items()
                                                                         if k in ("contract", "gva")}), shape)
    assert live_requested_peak(snap) <= pred["peak_bytes"]       # requests, before the 512-byte rounding
    reserved = sum(s["total_size"] for s in snap["segments"])
    assert reserved >= active and all(s["allocated_size"] <= s["total_size"] for s in snap["segments"])


def test_every_allocation_points_at_the_models_source(tmp_path):
    snap = written(tmp_path, "fla-kda@0.6.0", ["--seq", "8K", "--heads", "32"])
    sources = {(r[0].source.file, r[0].source.line, r[0].source.function) for r in allocations(get_model("fla-kda@0.6.0")).values()}
    allocs = [e for e in snap["device_traces"][0] if e["action"] == "alloc"]
    assert allocs and all((e["frames"][0]["filename"], e["frames"][0]["line"], e["frames"][0]["name"]) in sources
                          for e in allocs)
    assert all(e["frames"][1]["filename"] == "<livebytes model fla-kda@0.6.0>" for e in allocs)
    frees = {e["addr"] for e in snap["device_traces"][0] if e["action"] == "free_completed"}
    assert frees <= {e["addr"] for e in allocs}                   # every free is of a traced allocation


def test_a_snapshot_holds_one_process():
    r = run("timeline", "--impl", "fla-kda@0.6.0", "--impl", "fla-gdn@0.6.0", "--seq", "8K", "--heads", "4", "--out", "x.pickle")
    assert r.exit_code == 2 and "give one --impl" in r.stderr


@pytest.mark.parametrize("key,shape_args", CASES)
@pytest.mark.parametrize("at", ["peak", "snapshot"])
def test_explain_names_every_block_of_the_predicted_process(tmp_path, key, shape_args, at):
    written(tmp_path, key, shape_args)
    r = run("explain", str(tmp_path / "process.pickle"), "--impl", key, *shape_args, "--at", at, "--json")
    assert r.exit_code == 0, r.output
    (result,) = json.loads(r.stdout)["results"]
    assert result["unexplained_bytes"] == 0 and result["blocks"]
    assert {b["match"] for b in result["blocks"]} == {"source line"}
    assert len({b["buffer"] for b in result["blocks"]}) == len(result["blocks"])        # each buffer explains one block


def _validator_snapshot(path: Path, tmp_path: Path) -> tuple[Path, dict]:
    """A validator live dump (``history.as_rows`` of ``_snapshot()`` at the peak) as a snapshot's active blocks."""
    dump = json.loads(path.read_text())
    blocks = [{"address": 0, "size": b["bytes"], "state": "active_allocated",
               "frames": [{"filename": f.rsplit(":", 2)[0], "line": int(f.rsplit(":", 2)[1]), "name": f.rsplit(":", 2)[2]}
                          for f in b["frames"]]} for b in dump["blocks"]]
    target = tmp_path / "validator.pickle"
    target.write_bytes(pickle.dumps({"segments": [{"address": 0, "blocks": blocks}], "device_traces": []}))
    return target, dump


@pytest.mark.parametrize("path", sorted(LIVE.glob("*.json")), ids=lambda p: p.stem)
def test_explain_on_the_validators_own_snapshots(tmp_path, path):
    target, dump = _validator_snapshot(path, tmp_path)
    s = dump["shape"]
    r = run("explain", str(target), "--impl", dump["impl"], "--mbs", str(s["mbs"]), "--seq", str(s["seq"]),
            "--heads", str(s["heads"]), "--json")
    assert r.exit_code == 0, r.output
    (result,) = json.loads(r.stdout)["results"]
    assert json.loads(r.stdout)["warnings"] == [] == r.stderr.splitlines()     # the right model, its real process: it fits
    assert result["live_bytes"] == sum(b["bytes"] for b in dump["blocks"])
    assert result["explained_bytes"] + result["unexplained_bytes"] == result["live_bytes"]
    named = [b for b in result["blocks"] if b["match"] == "source line"]
    assert named, "some block's frames name a buffer's source"
    for b in named:          # a block named by its source line is the buffer that source allocates
        (regions,) = [r for n, r in allocations(get_model(dump["impl"])).items() if n == b["buffer"]]
        assert any(f.endswith(f"{regions[0].source.file}:{regions[0].source.line}:{regions[0].source.function}")
                   for f in b["frames"])
    text = " ".join(run("explain", str(target), "--impl", dump["impl"], "--mbs", str(s["mbs"]), "--seq", str(s["seq"]),
                        "--heads", str(s["heads"])).stdout.split())
    assert ("unexplained" in text) is (result["unexplained_bytes"] > 0)


class _Hostile:
    def __reduce__(self):
        import os
        return (os.system, ("echo pwned > /dev/null",))


@pytest.mark.parametrize("content,phrase", [
    (pickle.dumps(_Hostile()), "holds a posix.system object"), (b"", "not a memory snapshot"),
    (pickle.dumps({"segments": []})[:10], "not a memory snapshot"), (pickle.dumps([1, 2]), "expected an object"),
    (pickle.dumps({"segments": [{"blocks": [{"size": "big", "state": "active_allocated"}]}]}), "segments[0].blocks[0].size"),
])
def test_a_bad_snapshot_is_one_line(tmp_path, content, phrase):
    target = tmp_path / "bad.pickle"
    target.write_bytes(content)
    r = run("explain", str(target), "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "4")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: ") and phrase in lines[0], r.stderr


@pytest.mark.parametrize("width", [80, 200])
def test_explain_golden_table(monkeypatch, tmp_path, width):
    """Golden output (regenerate with LIVEBYTES_UPDATE_GOLDEN=1 and read the diff); nothing cut at either width."""
    import io
    import os

    from rich.console import Console

    from livebytes.cli import render
    shape = ["--seq", "8K", "--heads", "32"]
    written(tmp_path, "cudnn-kda-hopper-cuda@1.32.0", shape)
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False, legacy_windows=False)
    monkeypatch.setattr(render, "console", console)
    r = run("explain", str(tmp_path / "process.pickle"), "--impl", "cudnn-kda-hopper-cuda@1.32.0", *shape)
    assert r.exit_code == 0, r.output
    text = console.file.getvalue()
    golden = Path(__file__).parent / "golden" / f"explain_{width}.txt"
    if os.environ.get("LIVEBYTES_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= width


def test_live_at_peak_replays_the_trace_up_to_its_peak():
    """history.live_at_peak in two passes (find the peak, then replay to it), by hand: a 1,000-B block from before
    the trace, then alloc 1 (100 B): 1,100; alloc 2 (200 B): 1,300, the peak; free 1: 1,200; alloc 3 (50 B): 1,250;
    free 2: 1,050; alloc 4 (150 B): 1,200. Live at the peak: the 1,000, 200 and 100-B blocks."""
    from livebytes.validate.check.history import live_at_peak

    def alloc(addr, size):
        return {"action": "alloc", "addr": addr, "size": size}

    def free(addr):
        return {"action": "free_requested", "addr": addr}
    snapshot = {"segments": [{"blocks": [{"address": 9, "size": 1000, "state": "active_allocated"}]}],
                "device_traces": [[alloc(1, 100), alloc(2, 200), free(1), alloc(3, 50), free(2), alloc(4, 150)]]}
    peak, blocks = live_at_peak(snapshot, keep=())
    assert peak == 1300 and [(b.addr, b.size) for b in blocks] == [(9, 1000), (2, 200), (1, 100)]


def test_the_explain_table_shows_the_explained_and_the_largest_unexplained_blocks():
    """Four rows at most here: the two explained blocks, then the two largest unexplained (400 and 300 B), in the
    result's order; the 100 and 50-B blocks are left out: 2 blocks, 150 B."""
    from livebytes.report import explain_shown
    sizes_and_buffers = [(500, "a"), (400, None), (300, None), (200, "b"), (100, None), (50, None)]
    result = {"blocks": [{"bytes": n, "buffer": buf} for n, buf in sizes_and_buffers]}
    shown, left_out, left_out_bytes = explain_shown(result, limit=4)
    assert [b["bytes"] for b in shown] == [500, 400, 300, 200] and (left_out, left_out_bytes) == (2, 150)


def test_explain_sums_the_blocks_past_the_tables_rows(tmp_path):
    """250 blocks of k x 1,000,003 B (k = 1..250; a size no allocation of the model requests): the table's 200 rows
    are the largest, the other 50 one row: 1,000,003 x (1 + ... + 50) = 1,000,003 x 1,275 = 1,275,003,825 B."""
    blocks = [{"address": k, "size": k * 1_000_003, "state": "active_allocated"} for k in range(1, 251)]
    (tmp_path / "many.pickle").write_bytes(pickle.dumps({"segments": [{"address": 0, "blocks": blocks}]}))
    r = run("explain", str(tmp_path / "many.pickle"), "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "4")
    text = " ".join(r.stdout.split())
    assert r.exit_code == 0 and "1,275,003,825" in text and "50 smaller unexplained" in text, r.output
    assert f"{51 * 1_000_003:,}" in text and f"{50 * 1_000_003:,}" not in text     # 51,000,153 shown; 50,000,150 not


@pytest.mark.parametrize("source, frame", [
    (Source("fla/ops/kda/chunk.py", "chunk_kda_fwd", 120, "o = torch.empty_like(v)"),
     {"filename": "fla/ops/kda/chunk.py", "line": 120, "name": "chunk_kda_fwd"}),
    (Source("a.py", "f"), {"filename": "a.py", "line": 0, "name": "f"}),
    (Source("a.py", "f", 3), {"filename": "a.py", "line": 3, "name": "f"})])
def test_a_source_and_its_text_give_one_frame(source, frame):
    """A compiled model keeps each buffer's source as ``str(Source)``: its frame is the Source's own."""
    assert source_frame(source) == source_frame(str(source)) == frame


def test_a_compiled_models_snapshot_is_the_models():
    """``process_snapshot`` of a compiled model (text sources) equals that of the model it was compiled from."""
    model, shape = get_model("fla-kda@0.6.0", "H200"), Shape(1, 4096, 16, 128, 16)
    assert process_snapshot(compiled(model), shape) == process_snapshot(model, shape)

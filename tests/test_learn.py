"""learn and drift on the CPU: the exact size solver, the round trip model -> synthetic traces -> learned
buffers, drift findings, the draft model, the tracer's pure parts, the commands, and committed GPU traces."""
import dataclasses
import json
from pathlib import Path

import pytest
from livebytes.cli.app import app
from livebytes.learn.draft import draft_model, draft_source
from livebytes.learn.drift import differences, drift
from livebytes.estimator.replay import requested_peak
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import Shape
from livebytes.learn.learn import (
    device_dependent,
    factor_values,
    learn,
    solve_sizes,
)
from livebytes.estimator.registry import get_model
from livebytes.estimator.symbols import DK, DV, HV
from livebytes.learn.synthetic import (
    buffer_bytes,
    in_window,
    model_shape,
    synthetic_trace,
)
from livebytes.learn.traces import load_traces, trace_from_dict
from livebytes.lifetimes import fla_kda
from typer.testing import CliRunner

# KDA: HV = H and K = V in every shape (tied); S = 1030 is no multiple of 16, 32 or 64, so per-sequence
# chunk counts, packed chunk counts and T are told apart; each symbol varies on its own once.
KDA_SHAPES = [{"T": 2060, "N": 2, "H": 2, "HV": 2, "K": 64, "V": 64}, {"T": 4096, "N": 2, "H": 2, "HV": 2, "K": 64, "V": 64},
              {"T": 3090, "N": 3, "H": 2, "HV": 2, "K": 64, "V": 64}, {"T": 2060, "N": 2, "H": 4, "HV": 4, "K": 64, "V": 64},
              {"T": 2060, "N": 2, "H": 2, "HV": 2, "K": 128, "V": 128}]
# GDN: grouped value heads (HV > H); H, HV, K, V each vary on their own; K = 256 shows the dg tile count.
GDN_SHAPES = [{"T": 2060, "N": 2, "H": 1, "HV": 2, "K": 64, "V": 64}, {"T": 4096, "N": 2, "H": 1, "HV": 2, "K": 64, "V": 64},
              {"T": 3090, "N": 3, "H": 1, "HV": 2, "K": 64, "V": 64}, {"T": 2060, "N": 2, "H": 2, "HV": 4, "K": 64, "V": 64},
              {"T": 2060, "N": 2, "H": 1, "HV": 4, "K": 64, "V": 64}, {"T": 2060, "N": 2, "H": 1, "HV": 2, "K": 256, "V": 64},
              {"T": 2060, "N": 2, "H": 1, "HV": 2, "K": 64, "V": 128}]
OUTSIDE = ("cu_seqlens",)


def traces_of(model, shapes):
    return [trace_from_dict(synthetic_trace(model, s, OUTSIDE), f"synthetic {i}") for i, s in enumerate(shapes)]


@pytest.fixture(scope="module")
def kda():
    model = get_model("fla-kda@0.6.0", contract="report")
    return model, learn(traces_of(model, KDA_SHAPES))


@pytest.fixture(scope="module")
def gdn():
    model = get_model("fla-gdn@0.6.0", gva=True)
    return model, learn(traces_of(model, GDN_SHAPES))


# ---------------------------------------------------------------- the solver

SHAPES3 = [{"T": 2060, "N": 2, "H": 2, "HV": 4, "K": 64, "V": 128}, {"T": 4096, "N": 2, "H": 2, "HV": 4, "K": 64, "V": 128},
           {"T": 3090, "N": 3, "H": 2, "HV": 8, "K": 128, "V": 128}, {"T": 2060, "N": 2, "H": 2, "HV": 8, "K": 64, "V": 64}]


@pytest.mark.parametrize("sizes,text", [
    # [T, HV, K] fp32: 4*2060*4*64 = 2109440, 4*4096*4*64 = 4194304, 4*3090*8*128 = 12656640, 4*2060*8*64 = 4218880
    ([2109440, 4194304, 12656640, 4218880], "4*T*HV*K"),
    # [N + 1] int64: 8*3 = 24, 8*3 = 24, 8*4 = 32, 8*3 = 24
    ([24, 24, 32, 24], "8*N + 8"),
    # [NT, HV, K, V] bf16, NT = N*cdiv(S, 64): 2*17*4*64*128*2 = 2228224; 2*32*4*64*128*2 = 4194304;
    # 3*17*8*128*128*2 = 13369344; 2*17*8*64*64*2 = 2228224
    ([2228224, 4194304, 13369344, 2228224], "2*HV*K*V*NT64"),
])
def test_exact_formulas_by_hand(sizes, text):
    sol = solve_sizes(sizes, SHAPES3)
    assert sol.formula.text() == text and not sol.ambiguous


def test_a_size_off_by_one_byte_is_not_explained():
    assert solve_sizes([2109440, 4194304, 12656641, 4218880], SHAPES3).formula is None


def test_shapes_that_move_two_symbols_together_leave_an_ambiguity():
    # N and HV both change only in the third shape: 8*N + 8 and 2*HV + 16 give 24, 24, 32 alike
    sol = solve_sizes([24, 24, 32], SHAPES3[:3])
    assert sol.ambiguous and {sol.formula.text(), *(a.text() for a in sol.alternatives)} == {"8*N + 8", "2*HV + 16"}


def test_a_tile_count_is_reported_as_device_dependent(gdn):
    _, learned = gdn
    tiles = [b for b in learned.buffers if b.formula and b.formula.tiles]
    # dg = [cdiv(K, 128), T, HV] fp32: at K = 256, 2*2060*2*4 = 32960 bytes against 16480 at K = 64
    assert [b.formula.text() for b in tiles] == ["4*T*HV*cdiv(K,128)"]
    assert "device-dependent" in device_dependent(tiles[0]) and "chunk_bwd_dqkwg" in tiles[0].site


def test_symbols_that_never_vary_are_reported(kda):
    model, _ = kda
    learned = learn(traces_of(model, KDA_SHAPES[:2]))          # only T varies
    assert any("N, H, HV, K, V never vary" in line for line in learned.unexplained)


# ---------------------------------------------------------------- round trip and drift

def _hand_bytes(model, shapes):
    return [buffer_bytes(model, s) for s in shapes]


@pytest.mark.parametrize("which", ["kda", "gdn"])
def test_learn_recovers_every_in_window_buffer_exactly(which, request):
    model, learned = request.getfixturevalue(which)
    shapes = KDA_SHAPES if which == "kda" else GDN_SHAPES
    hand = _hand_bytes(model, shapes)
    seen = [b for b in model.buffers if in_window(b, OUTSIDE) and any(sizes[b.name] for sizes in hand)]   # 0 B: no event
    assert len(learned.buffers) == len(seen)
    for lb, b in zip(learned.buffers, seen):          # synthetic traces allocate in the model's order
        assert [lb.formula.value(factor_values(s)) for s in shapes] == [sizes[b.name] for sizes in hand]


def test_only_the_dq2_tile_is_ambiguous_at_these_kda_shapes(kda):
    _, learned = kda
    ambiguous = [b.function for b in learned.buffers if b.alternatives]
    assert ambiguous == ["chunk_kda_bwd_intra"]                # db2 = [cdiv(K, 32), T, HV] fp32: K = 64, 128 are multiples of 16, 32, 64


@pytest.mark.parametrize("key,expected", [
    ("fla-kda@0.6.0", set()),
    # the report snapshot: bf16 dq2/dk2 and a bf16 sigmoid beta, and nothing else
    ("fla-kda@07b80f27", {("re-typed", "dq2"), ("re-typed", "dk2"), ("re-typed", "beta_sigmoid")}),
])
def test_drift_of_kda_against_0_6_0_traces(kda, key, expected):
    _, learned = kda
    found = {(f.kind, f.buffer) for f in differences(drift(get_model(key, contract="report"), learned))}
    assert found == expected


def test_gdn_hand_model_has_no_drift_against_its_own_traces(gdn):
    model, learned = gdn
    assert differences(drift(model, learned)) == []


def _with(model, name, **changes):
    buffers = tuple(dataclasses.replace(b, **changes) if b.name == name else b for b in model.buffers)
    return dataclasses.replace(model, buffers=buffers)


@pytest.mark.parametrize("name,changes,kind", [
    ("h", {"shape": (fla_kda.NT + 1, HV, DK, DV)}, "resized"),                 # one state more: no constant ratio
    ("dg2", {"dtype": "bf16"}, "re-typed"),
    ("dv_dhu", {"freed_after": "bwd.intra"}, "lifetime"),                       # one step late
])
def test_drift_finds_a_changed_hand_record(kda, name, changes, kind):
    model, learned = kda
    found = differences(drift(_with(model, name, **changes), learned))
    assert [(f.kind, f.buffer) for f in found] == [(kind, name)]


def test_drift_finds_added_and_removed_buffers(kda):
    model, learned = kda
    without = dataclasses.replace(model, buffers=tuple(b for b in model.buffers if b.name != "Akkd"))
    kinds = [f.kind for f in differences(drift(without, learned))]
    assert kinds.count("added") == 1
    learned_less = dataclasses.replace(learned, buffers=tuple(b for b in learned.buffers if "chunk_kda_fwd_intra" not in b.site))
    removed = {f.buffer for f in differences(drift(model, learned_less)) if f.kind == "removed"}
    assert removed == {"Aqk", "Akk", "Akkd"}


def _traced_peak(trace) -> int:
    """Largest sum of live requested bytes, replayed from the trace's own events."""
    events = sorted([(a.position, a.size) for a in trace.allocations]
                    + [(a.freed_at, -a.size) for a in trace.allocations if a.freed_at is not None])
    live = peak = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("which", ["kda", "gdn"])
def test_the_draft_model_predicts_the_traced_peaks(which, request):
    _, learned = request.getfixturevalue(which)
    draft = draft_model(learned)
    for trace in learned.traces:
        assert requested_peak(draft, model_shape(trace.values)) == _traced_peak(trace)


def test_the_draft_module_imports(kda, tmp_path):
    import importlib.util
    _, learned = kda
    path = tmp_path / "draft_kda.py"
    path.write_text(draft_source(learned))
    spec = importlib.util.spec_from_file_location("draft_kda", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert len(module.MODEL.buffers) == len(learned.buffers)


# ---------------------------------------------------------------- the tracer's pure parts

def test_frames_are_library_frames_innermost_first_relative_to_site_packages():
    from livebytes.validate.gpu.trace import frames_of
    roots = {"/repo/validate/": "livebytes/validate/"}
    entry = {"frames": [{"filename": "/repo/validate/gpu/trace.py", "name": "take", "line": 9},
                        {"filename": "/x/site-packages/fla/ops/a.py", "name": "outer", "line": 5},
                        {"filename": "/x/site-packages/fla/ops/b.py", "name": "inner", "line": 7}]}
    assert frames_of(entry, roots) == ["fla/ops/b.py:inner:7", "fla/ops/a.py:outer:5"]   # outermost-first input turned round
    harness = {"frames": [{"filename": "/repo/validate/gdn_harness.py", "name": "to_device", "line": 3},
                          {"filename": "/repo/validate/gpu/trace.py", "name": "take", "line": 9}]}
    assert frames_of(harness, roots) == ["livebytes/validate/gdn_harness.py:to_device:3"]


def test_events_keep_the_window_and_count_outside_frees():
    from livebytes.validate.gpu.trace import events_of
    snap = {"device_traces": [[
        {"action": "alloc", "addr": 1, "size": 1000, "frames": []},
        {"action": "free_requested", "addr": 99, "size": 512, "frames": []},     # allocated before the window
        {"action": "free_requested", "addr": 1, "size": 1000, "frames": []},
        {"action": "free_completed", "addr": 1, "size": 1000, "frames": []},
        {"action": "alloc", "addr": 1, "size": 24, "frames": []},                # the address reused
    ]]}
    events, outside = events_of(snap, {})
    assert events == [["a", 0, 1000, []], ["f", 0], ["a", 1, 24, []]] and outside == 1


@pytest.mark.parametrize("text,needle", [("1,1030,2,2,64", "the old positional N,S,H,HV,K,V"),
                                         ("2,1030,1,2,64,64", "two shapes at least"),
                                         ("seq_len=1030,num_heads=2", "two shapes at least")])
def test_trace_shapes_need_six_fields_and_two_shapes(text, needle):
    from livebytes.validate.gpu.trace import parse_trace_shapes
    with pytest.raises(LivebytesError, match=needle):
        parse_trace_shapes(text)


def test_trace_shapes_read_the_one_syntax_and_the_old_one_alike():
    """N,S,H,HV,K,V = 2,1030,1,2,64,32: 2 sequences of 1030 tokens, 1 head, 2 value heads, K 64, V 32."""
    from livebytes.validate.gpu.trace import parse_trace_shapes, trace_shape
    old = parse_trace_shapes("2,1030,1,2,64,32;3,1030,1,2,64,32")
    new = parse_trace_shapes("batch_size=2,seq_len=1030,num_heads=1,num_v_heads=2,head_dim=64,head_v_dim=32;"
                             "seq_len=1030,num_heads=1,num_v_heads=2,head_dim=64,expand_v=0.5,batch_size=3")
    assert old == new and trace_shape(new[0]) == {"T": 2060, "N": 2, "H": 1, "HV": 2, "K": 64, "V": 32}


# ---------------------------------------------------------------- the commands

@pytest.mark.parametrize("key,code", [("fla-kda@0.6.0", 0), ("fla-kda@07b80f27", 3)])
def test_drift_command_exits_3_on_drift(synthetic_kda_traces, key, code):
    r = CliRunner().invoke(app, ["drift", "--impl", key, "--traces", str(synthetic_kda_traces), "--json"])
    assert r.exit_code == code, r.output
    kinds = [f["kind"] for f in json.loads(r.stdout)["results"][0]["findings"] if f["kind"] not in ("outside-window", "empty")]
    assert kinds == ([] if code == 0 else ["re-typed"] * 3)


def test_learn_command_writes_the_draft(synthetic_kda_traces, tmp_path):
    draft = tmp_path / "draft.py"
    r = CliRunner().invoke(app, ["learn", "--traces", str(synthetic_kda_traces), "--draft", str(draft), "--json"])
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["results"][0]["buffers"]) == 54 and "MODEL = LifetimeModel" in draft.read_text()


def test_learns_table_says_what_its_symbols_stand_for(synthetic_kda_traces):
    """The learned formulas are in T, N, H, HV, K, V: the output names each by the shape keys (one vocabulary)."""
    r = CliRunner().invoke(app, ["learn", "--traces", str(synthetic_kda_traces)], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert ("in T = batch_size * seq_len (the packed tokens), N = batch_size, H = num_heads, HV = num_v_heads, "
            "K = head_dim, V = head_v_dim") in " ".join(r.stdout.split())


def test_learn_on_a_missing_directory_is_one_line_exit_1(tmp_path):
    r = CliRunner().invoke(app, ["learn", "--traces", str(tmp_path / "none")])
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "not a directory" in r.output


# ---------------------------------------------------------------- committed GPU traces (validate/data/traces/)

TRACES = Path(__file__).resolve().parents[1] / "validate" / "data" / "traces"
CHECKS = {  # traced implementation directory -> (hand model, options, expected drift)
    "fla-kda_0.6.0": [("fla-kda@0.6.0", set()),
                      ("fla-kda@07b80f27", {("re-typed", "dq2"), ("re-typed", "dk2"), ("re-typed", "beta_sigmoid")})],
    "fla-gdn-fwd_0.6.0": [("fla-gdn-fwd@0.6.0", set())],
    "fla-gdn_0.6.0": [("fla-gdn@0.6.0", set())],          # run 20f: the backward, Triton 3.9.0
}


@pytest.mark.parametrize("folder", sorted(CHECKS))
def test_committed_gpu_traces(folder):
    """H200 traces (runs 6b, 7a; KDA at K = V = 16 added so that db2's [NK, T, H] fp32 tile count is decided:
    at K 64 and 128 alone 2*T*H*cdiv(K,16), 4*T*H*cdiv(K,32) and 8*T*H*cdiv(K,64) all fit)."""
    if not (TRACES / folder).is_dir():
        pytest.skip(f"no GPU traces committed in validate/data/traces/{folder} yet")
    learned = learn(load_traces(TRACES / folder))
    assert learned.unexplained == ()               # every event solved, none ambiguous
    assert all(not b.alternatives for b in learned.buffers)
    for key, expected in CHECKS[folder]:
        from livebytes.cli.commands.drift import _hand_model
        found = {(f.kind, f.buffer) for f in differences(drift(_hand_model(key, learned), learned))}
        assert found == expected, key


def test_gdn_backward_traces_hold_the_forward_traces_buffers_then_the_backwards():
    """Run 20f (fwd+bwd, Triton 3.9.0) against run 6b (forward, Triton 3.6.0) at the same seven shapes: 66 events a shape
    (39 allocations, 27 frees); 39 buffers = the forward's 16 + dO + the backward's 22 (recompute 4, dv_local, dhu 2, dqkwg 4 + 2 group sums + dg's
    sum, WY 4 + its group sum, the reverse cumsum, l2norm's 2); the first 17 solve to the forward's formulas in order
    (dO among the inputs): a second Triton allocates the forward alike."""
    fwd, both = (learn(load_traces(TRACES / f)) for f in ("fla-gdn-fwd_0.6.0", "fla-gdn_0.6.0"))
    assert len(fwd.buffers) == 16 and len(both.buffers) == 39 == 16 + 1 + 22
    assert all(len(t.allocations) == 39 for t in both.traces)
    tritons = {folder: {json.loads(p.read_text())["env"]["triton"] for p in (TRACES / folder).glob("*.json")}
               for folder in ("fla-gdn-fwd_0.6.0", "fla-gdn_0.6.0")}
    assert tritons == {"fla-gdn-fwd_0.6.0": {"3.6.0"}, "fla-gdn_0.6.0": {"3.9.0"}}
    forward = [b.formula for b in both.buffers[:17]]
    del forward[5]                                           # dO, the sixth input: [T, HV, V] bf16
    assert forward == [b.formula for b in fwd.buffers]


@pytest.mark.skipif(__import__("livebytes.validate.gpu.environment", fromlist=["x"]).cuda_available(), reason="a GPU is present")
def test_tracer_without_a_gpu_is_one_line_exit_1(capsys):
    from livebytes.validate.gpu.trace import main
    assert main(["--impl", "fla-gdn-fwd@0.6.0", "--shapes", "2,1030,1,2,64,64;2,2048,1,2,64,64", "--out", "/tmp/x"]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_a_probe_file_must_define_its_parts(tmp_path):
    from livebytes.validate.gpu.trace import load_probe
    probe = tmp_path / "probe.py"
    probe.write_text("IMPL = 'mine@1'\n")
    with pytest.raises(LivebytesError, match="cpu_inputs, step"):
        load_probe(str(probe))


@pytest.mark.parametrize("impl,contract", [("fla-kda@0.6.0", "report"), ("fla-kda@0.6.0", "plain"), ("fla-gdn-fwd@0.6.0", "plain")])
def test_the_tracer_builds_its_inputs_on_the_cpu(impl, contract):
    """Run 6b lost its KDA traces to a recipe the tracer reached into (runner._to_gpu) after the runner changed:
    the inputs must come from the runner's own recipe, on the CPU, leaves without grad until copied."""
    pytest.importorskip("torch")
    from livebytes.validate.gpu.trace import _Impl
    shape = Shape(2, 1030, 2, 64, 2, 64)
    x = _Impl(impl, contract).cpu_inputs(shape)
    assert all(t.device.type == "cpu" and not t.requires_grad for t in x.values())
    assert x["q"].shape[-3:] == (2 * 1030, 2, 64)        # [1, T, H, K]


def test_a_buffer_of_zero_bytes_at_every_traced_shape_is_listed_not_compared(synthetic_kda_traces):
    """kda_gate_bwd's sums stage through the allocator only from 32K (aten_reduce); at the traced shapes (T <= 4,096)
    their staging is 0 bytes, allocate(0) takes no block, so no event: 'empty', which is no drift."""
    r = CliRunner().invoke(app, ["drift", "--impl", "fla-kda@0.6.0", "--traces", str(synthetic_kda_traces), "--json"])
    assert r.exit_code == 0, r.output
    empty = {f["buffer"] for f in json.loads(r.stdout)["results"][0]["findings"] if f["kind"] == "empty"}
    assert {"ddt_bias.reduce_staging", "ddt_bias.reduce_semaphores", "dA_log.reduce_staging"} <= empty

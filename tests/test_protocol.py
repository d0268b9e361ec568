"""The validator's protocol, derived from the models' cache declarations: integer versions, the warmup's
leftovers, cache keys that the measured shape shares, and `predict` as the steady state."""
import json
from pathlib import Path

import pytest

from livebytes.estimator import Shape, get_model, predict
from livebytes.estimator.allocator import CachingAllocator
from livebytes.estimator.replay import _run_prelude, replay
from livebytes.validate.check import protocol

MIB = 2**20


@pytest.mark.parametrize("name,version", [("kda-report-v1", 1), ("kda-report-v2", 2), ("kda-report-v3", 3)])
def test_protocol_versions_are_integers(name, version):
    assert protocol.version_of(name) == version
    assert protocol.PROTOCOLS[version].name == name


@pytest.mark.parametrize("name", ["kda-report-v10", "kda-report-3", "", "report"])
def test_unknown_protocols_are_refused(name):
    with pytest.raises(ValueError, match="unknown protocol"):
        protocol.version_of(name)


def test_from_v3_on_the_cache_is_emptied_after_the_warmup():
    assert [p.empty_cache_after_warmup for p in protocol.PROTOCOLS.values()] == [False, False, True, True]
    assert [p.one_block_per_input for p in protocol.PROTOCOLS.values()] == [False, True, True, True]


def test_no_model_holds_the_validators_warmup():
    from livebytes.estimator import keyed_specs
    for s in keyed_specs():
        m = get_model(s.key)
        assert all(not st.name.startswith("harness.warmup") for st in m.steps), s.key
        assert all(not b.name.startswith("warmup") for b in m.buffers), s.key


# Measured on the H200 without the warmup (the figures): the steady state, predict() itself.
# kda_hopper_cuda 1 x 8K x H32: the v2 record 1,669,335,040 B minus the warmup plans' five fp32
# [1, 32, 128, 128] state buffers, 5 * 32 * 128 * 128 * 4 = 10,485,760 B, is 1,658,849,280 B.
# kda_hopper forward 1 x 8K x H32: 715,195,392 B (the model without the warmup's _WS and plan scratch).
@pytest.mark.parametrize("key,steady", [("cudnn-kda-hopper-cuda@1.32.0", 1_658_849_280),
                                        ("cudnn-kda-hopper@1.32.0", 715_195_392)])
def test_predict_is_the_steady_state_without_warmup_leftovers(key, steady):
    m, shape = get_model(key), Shape(1, 8192, 32)
    assert predict(m, shape).peak_bytes == steady
    assert replay(m, shape).peak_bytes == steady


def test_the_steady_state_measured_without_warmup_is_predict():
    """Run 6c: kda_hopper_cuda 1 x 8K x H32 in a fresh process with no warmup; its steady calls'
    max_memory_allocated is predict's peak to the byte (the issue quoted 1,658,849,792: 512 B high)."""
    import json
    from pathlib import Path
    path = (Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "boundary"
            / "h200_run6c_cudnn-kda-hopper-cuda_1x8K_H32_steady_nowarmup.jsonl")
    (trial,) = [d for d in map(json.loads, path.read_text().splitlines()) if d["stage"] == "value"]
    assert (trial["seq"], trial["mbs"], trial["heads"], trial["fits"]) == (8192, 1, 32, True)
    steady = predict(get_model("cudnn-kda-hopper-cuda@1.32.0"), Shape(1, 8192, 32)).peak_bytes
    assert trial["steady_1"]["max_allocated"] == trial["steady_2"]["max_allocated"] == steady == 1_658_849_280


def test_hopper_cuda_warmup_leaves_five_state_buffers():
    m, shape = get_model("cudnn-kda-hopper-cuda@1.32.0"), Shape(1, 8192, 32)
    # fwd final-state scratch, fwd zero seed, bwd zero s0, zero dfs, d_initial scratch: [1, 32, 128, 128] fp32
    assert protocol.history(m, shape) == (32 * 128 * 128 * 4,) * 5 == (2 * MIB,) * 5
    replayed, _ = protocol.protocol_replay(m, shape, version=2)
    assert replayed.peak_bytes == 1_658_849_280 + 5 * 2 * MIB == 1_669_335_040   # the committed v2 record


def test_fla_warmup_leaves_its_tensor_cache_and_retained_cu_seqlens():
    m = get_model("fla-kda@0.6.0", contract="plain")
    # cu_seqlens [2] int64 (retained argument), chunk_indices [1024/64, 2], seq_lens [1], chunk_offsets [2] int64
    assert protocol.history(m, Shape(3, 5000, 32)) == (2 * 8, 16 * 2 * 8, 1 * 8, 2 * 8)


def test_a_cache_keyed_like_the_warmup_is_not_counted_twice():
    """The CuTe _WS cache is keyed by (T // 16 + N + 1, H, N, nseg): MBS 1 x 1024 is the warmup's own key,
    so the measured call reuses it; the plan scratch (keyed by total tokens) is reused too."""
    m = get_model("cudnn-kda-hopper@1.32.0")
    assert protocol.history(m, Shape(1, 1024, 32)) == ()
    at_2k = protocol.history(m, Shape(1, 2048, 32))
    assert len(at_2k) == 2 + 9        # plan: final-state scratch and zero seed; _WS: nine tensors
    # nch = 1024 // 16 + 1 + 1 = 66 chunks, c = 66 * 32: buf0 is [c * 16, 128] bf16
    assert 66 * 32 * 16 * 128 * 2 in at_2k


def test_earlier_shapes_leave_their_caches_once():
    m = get_model("cudnn-kda-hopper-cuda@1.32.0")
    earlier = (Shape(2, 16384, 32),)
    alone, after = protocol.history(m, Shape(4, 4096, 32)), protocol.history(m, Shape(4, 4096, 32), earlier)
    # the earlier shape's own plan scratch: 5 x [2, 32, 128, 128] fp32; its warmup is this shape's warmup
    assert sum(after) - sum(alone) == 5 * 2 * 32 * 128 * 128 * 4


# ------------------------------------------------------------------ the warmup replayed whole
PROCESS_TRACES = Path(__file__).resolve().parents[1] / "validate" / "data" / "traces" / "process"


def reserved_before_target_inputs(trace: dict, first_input_bytes: int) -> int:
    """Segments the real process held when the target shape's first input was requested (H200 run 7b trace)."""
    reserved, entries = 0, trace["entries"]
    for i, e in enumerate(entries):
        if e["action"] == "alloc" and e["size"] == first_input_bytes:
            made_for_it = entries[i - 1]["action"] == "segment_alloc" and entries[i - 1]["addr"] == e["addr"]
            return reserved - (entries[i - 1]["size"] if made_for_it else 0)
        reserved += {"segment_alloc": e["size"], "segment_free": -e["size"]}.get(e["action"], 0)
    raise AssertionError("the target's first input is not in the trace")


@pytest.mark.parametrize("shape,pinned_mib", [(Shape(1, 8192, 32), 60), (Shape(2, 16384, 32), 60)])
def test_the_warmups_leftovers_pin_the_segments_the_process_trace_shows(shape, pinned_mib):
    """kda_hopper_cuda's five 2 MiB plan-cache entries are made between the warmup's inputs and workspaces, in three
    20 MiB segments (two, two and one of them): after the warmup and empty_cache the process holds 3 x 20 = 60 MiB,
    not the one segment that allocating the five leftovers into an empty allocator gives (5 x 2 = 10 MiB < 20 MiB)."""
    model = get_model("cudnn-kda-hopper-cuda@1.32.0", "H200")
    name = f"process_trace_cudnn-kda-hopper-cuda_1.32.0_{shape.mbs}x{shape.seq // 1024}Kx{shape.heads}x128.json"
    trace = json.loads((PROCESS_TRACES / name).read_text())
    q_bytes = shape.tokens * shape.heads * 128 * 2          # [T, H, K] bf16
    assert reserved_before_target_inputs(trace, q_bytes) == pinned_mib * MIB
    alloc = CachingAllocator()
    _run_prelude(alloc, protocol.prelude(model, shape))
    assert alloc.reserved == pinned_mib * MIB
    leftovers_only = CachingAllocator()
    for nbytes in protocol.history(model, shape):
        leftovers_only.malloc(nbytes)
    assert leftovers_only.reserved == 20 * MIB


def test_the_prelude_leaves_what_the_history_lists():
    """The two descriptions of the warmup agree on what stays allocated: the requests of ``history``, plus the cache
    entries this shape hits (kda_hopper's _WS at MBS 1 x 1024 is the warmup's own: ``history`` leaves it out)."""
    for key, options, shape in [("cudnn-kda-hopper-cuda@1.32.0", {}, Shape(1, 8192, 32)),
                                ("fla-kda@0.6.0", {"contract": "report"}, Shape(3, 5000, 32, 64)),
                                ("cudnn-kda-hopper@1.32.0", {}, Shape(1, 1024, 96))]:
        model = get_model(key, "H200", **options)
        p = protocol.prelude(model, shape)
        freed = {op[1] for op in p.ops if op[0] == "free"} | {tag for _, tag in p.reused}
        kept = sorted(op[2] for op in p.ops if op[0] == "malloc" and op[1] not in freed)
        assert kept == sorted(protocol.history(model, shape)), key
        assert bool(p.reused) == key.startswith("cudnn-kda-hopper@"), key
        earlier = (Shape(1, 4096, shape.heads, shape.dim), Shape(2, 2048, shape.heads, shape.dim))
        p = protocol.prelude(model, shape, earlier=earlier)                     # a shared process: evictions too
        freed = {op[1] for op in p.ops if op[0] == "free"} | {tag for _, tag in p.reused} | set(p.evicted)
        kept = sorted(op[2] for op in p.ops if op[0] == "malloc" and op[1] not in freed)
        assert kept == sorted(protocol.history(model, shape, earlier)), key   # what this call's first step keeps


# ---------------------------------------------------------------- a process's calls, one walker (replay.Process)

def _toy():
    """Inputs cu (retained by a library: FLA's cu_seqlens) and x; step b caches c (keyed by H) and then allocates w."""
    from livebytes.estimator import Buffer, Group, LifetimeModel, Source, Step
    from livebytes.estimator.symbols import MBS, S, H
    src = Source("toy.py", "f")
    steps = (Step("in", "harness"), Step("a", "forward"), Step("b", "backward"))
    buffers = (Buffer("cu", Group.INPUTS, (MBS + 1,), "int64", src, "in", retained=True),
               Buffer("x", Group.INPUTS, (MBS * S, H), "bf16", src, "in"),
               Buffer("c", Group.FORWARD, (H, 1024), "fp32", src, "b", cached=True, cache_key=(H,)),
               Buffer("w", Group.STAGE, (MBS * S, H, 4), "fp32", src, "b", "b"))
    return LifetimeModel("toy@1", "toy", "1", "", steps, buffers)


TOY = Shape(1, 8192, 512, 16)      # x 8192 x 512 x 2 = 8 MiB; c 512 x 1024 x 4 = 2 MiB; w 8192 x 512 x 4 x 4 = 64 MiB


@pytest.mark.parametrize("capacity,fails_at,kept", [
    (None, None, {("c", (512,)), ("cu", "call", 0, "cu", 0)}),     # it ran: the library keeps c and cu
    (64 * MIB, "w", {("cu", "call", 0, "cu", 0)}),                 # failed at b after caching c there: c goes with it
    (4 * MIB, "x", set()),                                # failed making its inputs: no library saw cu
])
def test_what_a_call_leaves_in_library_caches(capacity, fails_at, kept):
    from livebytes.estimator.replay import Call, Process
    model = _toy()
    process = Process(model)
    run = process.call(Call(TOY, 1, capacity_bytes=capacity, cache_keys=protocol.cache_keys(model, TOY, 0)))
    assert (run.oom.buffer if run.oom else None) == fails_at
    process.end_call(failed=run.oom is not None)
    assert set(process.held) == kept


def test_a_later_call_hits_the_kept_entry():
    """Call 1 at the same H reuses call 0's c (a keyed cache); cu is per call, so it is made again."""
    from livebytes.estimator.replay import Call, Process
    model = _toy()
    process = Process(model)
    for n in range(2):
        process.call(Call(TOY, 1, cache_keys=protocol.cache_keys(model, TOY, n)))
        if n == 0:
            first_c = process.held[("c", (512,))]
        process.end_call()
    assert process.held[("c", (512,))] is first_c and {k for k in process.held if k[0] == "cu"} == {
        ("cu", "call", 0, "cu", 0), ("cu", "call", 1, "cu", 0)}


@pytest.mark.parametrize("per_call,call,kept_calls", [
    (1, 4, {1, 2, 3}),     # one entry a call: the queue of 4 keeps 3 earlier calls beside call 4's own
    (2, 2, {1}),           # two a call (the layer's prepare_chunk_indices): 4 - 2 = 2 earlier entries, call 1's
    (2, 3, {2}),
])
def test_one_bounded_queue_per_memoised_function(per_call, call, kept_calls):
    """fla/utils/decorators.py tensor_cache: deque(maxlen=4) per decorated function; its argument signatures share it."""
    keys = [(f"e{i}", "call", c, "prepare_chunk_indices", i) for c in range(call) for i in range(per_call)]
    gone = set(protocol.evicted(keys, call))
    assert {k[2] for k in keys if k not in gone} == kept_calls
    assert len(keys) - len(gone) == protocol.IDENTITY_CACHE_CALLS - per_call


def test_the_process_refuses_misuse():
    from livebytes.estimator.replay import Call, Process
    model = _toy()
    process = Process(model)
    process.call(Call(TOY, 1))
    with pytest.raises(ValueError, match="end_call"):
        process.call(Call(TOY, 1))
    with pytest.raises(ValueError, match="record=True"):
        process.prelude((), ())
    with pytest.raises(ValueError, match="before"):
        Process(model, record=True).before((), None)


def test_queues_beside_each_other_evict_on_their_own():
    """The layer's call: prepare_chunk_indices takes two entries a call (the convolution's, chunk_kda's), prepare_lens
    one. Before call 3: the shared queue keeps call 2's two (4 - 2), prepare_lens calls 0-2's three (4 - 1)."""
    keys = [k for c in range(3) for k in (("conv.ci", "call", c, "prepare_chunk_indices", 0),
                                          ("kda.ci", "call", c, "prepare_chunk_indices", 1),
                                          ("kda.lens", "call", c, "kda.lens", 2))]
    gone = set(protocol.evicted(keys, 3))
    assert {(k[0], k[2]) for k in keys if k not in gone} == {("conv.ci", 2), ("kda.ci", 2), ("kda.lens", 0),
                                                               ("kda.lens", 1), ("kda.lens", 2)}


# ---------------------------------------------------------------- each call runs the harness's model (model_at)

LAYER = "fla-kda-layer@0.6.0"


def layer_at(shape):
    """The model the layer harness runs at ``shape`` (compare.model_at without a record): its layer fields build it."""
    return get_model(LAYER, "H200", **shape.layer_fields())


@pytest.mark.parametrize("name,library", [
    ("below1.cublas.workspace.forward", "cublas.workspace.forward"),    # layer 1 of a stack made the caller's workspace
    ("below1.ckpt.kda.seq_lens", "kda.seq_lens"),                      # checkpoint's first forward, layer 1
    ("ckpt.kda.chunk_indices", "kda.chunk_indices"),
    ("cublas.workspace.backward", "cublas.workspace.backward"),        # the top layer's: already the library's
    ("kda.xbelow1.y", "kda.xbelow1.y"),                                 # only whole dotted segments are prefixes
])
def test_library_name_drops_the_stacks_prefixes(name, library):
    assert protocol.library_name(name) == library


def test_a_layer_records_warmup_runs_the_harnesss_one_layer_of_hidden_2048():
    """fla_layer.FlaLayer.inputs builds the warmup from warmup_shape (no layer fields): hidden 2048, one layer. Its first
    mallocs are x and dY [1024, 2048] bf16 = 4,194,304 B each around cu_seqlens [2] int64 = 16 B, then q_proj.weight
    [4096, 2048] bf16 = 16,777,216 B; the record's own 4-layer stack of hidden 2304 would give 1024 x 2304 x 2 =
    4,718,592 B and [4096, 2304] bf16 = 18,874,368 B. The measured call hits the warmup's three keyed entries (the
    caller's cuBLAS and cuBLASLt workspaces, the backward thread's cuBLAS workspace) under its own names; the one-model
    warmup makes the caller's cuBLAS workspace 48 mallocs later: its 3 more layers' parameters, 16 each."""
    shape = Shape(1, 8192, 32, hidden=2304, layers=4)
    model = layer_at(shape)
    per_call, one = protocol.prelude(model, shape, model_at=layer_at), protocol.prelude(model, shape)
    mallocs = [op[2] for op in per_call.ops if op[0] == "malloc"]
    assert mallocs[:4] == [4_194_304, 16, 4_194_304, 16_777_216]
    assert [op[2] for op in one.ops if op[0] == "malloc"][:4] == [4_718_592, 16, 4_718_592, 18_874_368]
    hits = dict(per_call.reused)
    assert set(hits) == {"below1.cublas.workspace.forward", "below1.cublaslt.workspace.forward", "cublas.workspace.backward"}
    assert dict(one.reused)["below1.cublas.workspace.forward"] - hits["below1.cublas.workspace.forward"] == 3 * 16
    assert mallocs[hits["below1.cublas.workspace.forward"]] == 32 * MIB       # CublasHandlePool.cpp: 4096 KiB x 8


def test_a_checkpointed_stack_makes_the_backward_lt_workspace_the_warmup_did_not():
    """Checkpointing recomputes g_proj's biased Linear on autograd's thread: its cuBLASLt workspace (1 MiB) is the
    checkpointed call's own, since the warmup's one layer without checkpointing runs no addmm there."""
    shape = Shape(1, 8192, 32, hidden=2304, layers=4, checkpoint=True)
    p = protocol.prelude(layer_at(shape), shape, model_at=layer_at)
    assert "cublaslt.workspace.backward" not in dict(p.reused)
    assert "cublaslt.workspace.backward" in dict(protocol.cache_keys(layer_at(shape), shape, 1))


def test_tuned_keys_accumulate_across_the_calls_models():
    """A cold process: the 1 x 1024 warmup (one layer) benchmarks its 19 distinct (kernel, key) launches; the 4-layer
    call at 8K the 4 whose key is bucketed by T (l2norm_fwd, layer_norm_gated_fwd and _bwd with NB = cdiv(8192 x 32,
    65536) = 4 where the warmup's was 1, l2norm_bwd), at its own steps (layer 1's forward, the top layer's backward).
    The keys name kernels, not steps, so the record's stack in both calls benchmarks the same."""
    shape = Shape(1, 8192, 32, hidden=2304, layers=4)
    warmup = protocol.warmup_shape(shape)
    first, second = protocol.process_benchmarks(layer_at(shape), [warmup, shape], "cold", layer_at)
    assert len(first) == 19 and "fwd.q_conv1d" in first                    # the one-layer model's step names
    assert second == ("below1.kda.fwd.l2norm_q", "below1.fwd.o_norm", "bwd.o_norm", "kda.bwd.l2norm_q")
    assert protocol.process_benchmarks(layer_at(shape), [warmup, shape], "cold")[1] == second


def test_a_kernel_models_calls_all_run_its_one_model():
    """No layer fields: the warmup's model is the record's, so model_at changes nothing (cuDNN's plan-cache case)."""
    model, shape = get_model("cudnn-kda-hopper-cuda@1.32.0", "H200"), Shape(1, 8192, 32)
    at = lambda s: get_model("cudnn-kda-hopper-cuda@1.32.0", "H200")          # noqa: E731
    assert protocol.prelude(model, shape, model_at=at) == protocol.prelude(model, shape)


def test_no_two_kept_buffers_of_a_model_share_a_library_name():
    """library_name is an identity only if a model's kept buffers stay apart under it: every model at its defaults, and
    the layer models at 1, 2 and 4 layers with checkpointing off and on (a stack declares layer 1's caches only)."""
    from livebytes.estimator import keyed_specs
    for s in keyed_specs():
        for options in ([{}] if not s.shape_fields else
                        [dict(layers=n, checkpoint=c) for n in (1, 2, 4) for c in (False, True)]):
            names = [protocol.library_name(b.name) for b in protocol._kept(get_model(s.key, **options))]
            assert len(names) == len(set(names)), (s.key, options)

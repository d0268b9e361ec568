"""Context parallelism (lifetimes/fla_cp.py): the W-sized buffers by hand, one rank against the single-GPU model at
its local tokens, the CLI's --cp refusals and plan's total sequence, and the torchrun harness without a GPU."""
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator import Shape, get_model, predict
from livebytes.estimator.buffers import Group
from livebytes.estimator.engine import evaluate

MiB = 2**20
CP_KEYS = ("fla-kda-cp@0.6.0", "fla-gdn-cp@0.6.0")
SINGLE = {"fla-kda-cp@0.6.0": "fla-kda@0.6.0", "fla-gdn-cp@0.6.0": "fla-gdn@0.6.0"}


def nbytes(model, name: str, shape: Shape) -> int:
    (b,) = [b for b in model.buffers if b.name == name]
    return evaluate(b.nbytes, shape)


def block(n: int) -> int:
    """PyTorch's 512-byte rounding (engine.predict sums blocks)."""
    return -(-n // 512) * 512


@pytest.mark.parametrize("key", CP_KEYS)
@pytest.mark.parametrize("world,expected_mib", [(8, 96), (64, 768)])
def test_the_gathered_summaries_by_hand(key, world, expected_mib):
    """ag_hm [W, HV, K, V+K] fp32 at H96, K = V = 128: 8 x 96 x 128 x 256 x 4 B = 100,663,296 B = 96 MiB at W = 8,
    64 x 96 x 128 x 256 x 4 B = 768 MiB at W = 64; the backward's ag_dhm mirrors it; the summary hm is one rank's."""
    model = get_model(key, cp=world)
    shape = Shape(1, world * 8192, 96)
    assert nbytes(model, "ag_hm", shape) == world * 96 * 128 * 256 * 4 == expected_mib * MiB
    assert nbytes(model, "ag_dhm", shape) == expected_mib * MiB
    assert nbytes(model, "hm", shape) == nbytes(model, "dhm", shape) == 96 * 128 * 256 * 4 == 12 * MiB


@pytest.mark.parametrize("key", CP_KEYS)
def test_zigzag_doubles_the_summaries_and_chains_them(key):
    """Zigzag at W = 8, H96: hm [2, HV, K, V+K] = 24 MiB, ag_hm [W, 2, ...] = 192 MiB, the flipped backs [W, ...]
    = 96 MiB and the chain [2W, ...] = 192 MiB, live together in torch.cat; initial_state [2, HV, K, V] fp32 = 12 MiB."""
    model = get_model(key, cp=8, cp_layout="zigzag")
    shape = Shape(1, 16 * 8192, 96)
    one = 96 * 128 * 256 * 4                                    # 12 MiB: one [HV, K, V+K] fp32 summary
    assert nbytes(model, "hm", shape) == 2 * one == 24 * MiB
    assert nbytes(model, "ag_hm", shape) == 8 * 2 * one == 192 * MiB
    assert nbytes(model, "ag_hm_back_flipped", shape) == 8 * one == 96 * MiB
    assert nbytes(model, "hm_chain", shape) == 16 * one == 192 * MiB
    assert nbytes(model, "initial_state", shape) == nbytes(model, "dht", shape) == 2 * 96 * 128 * 128 * 4 == 12 * MiB
    at = predict(model, shape)
    # in torch.cat the rank holds hm, ag_hm, the flip and the chain: (2 + 16 + 8 + 16) x 12 MiB = 504 MiB
    steps = [s.name for s in model.steps]
    assert at.groups_at(steps.index("fwd.cp_chain"))[Group.COMMUNICATION] == 42 * one == 504 * MiB
    # after the merge, nothing of it: pre_process has returned
    assert Group.COMMUNICATION not in at.groups_at(steps.index("fwd.delta_h")) or \
        at.groups_at(steps.index("fwd.delta_h"))[Group.COMMUNICATION] == 0


@pytest.mark.parametrize("key", CP_KEYS)
@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
@pytest.mark.parametrize("seq,heads", [(65536, 16), (262144, 96)])
def test_one_rank_is_the_single_gpu_model_at_its_local_tokens_plus_the_cp_state(key, layout, seq, heads):
    """W = 2: the rank's peak (bwd, after every collective) is the single-GPU model's at S/2 (zigzag: two sequences of
    S/4, the same chunks when S/4 is a multiple of 64) plus what CP keeps there: initial_state (saved) and dht, each
    [N, HV, K, V] fp32 with N = 1 (2 zigzag), plus the caller's global boundaries (one block), minus the int32 chunk
    indices' saving ([NT, 2] int32 instead of int64). At 64K x H16: 1 MiB + 1 MiB + 512 B - (8,192 - 4,096) B."""
    cp = predict(get_model(key, cp=2, cp_layout=layout), Shape(1, seq, heads))
    local = Shape(2, seq // 4, heads) if layout == "zigzag" else Shape(1, seq // 2, heads)
    single = predict(get_model(SINGLE[key]), local)
    n = 2 if layout == "zigzag" else 1
    state = n * heads * 128 * 128 * 4
    chunks = (seq // 2) // 64
    assert cp.peak_step.name == single.peak_step.name
    assert cp.peak_bytes - single.peak_bytes == 2 * state + 512 - (block(chunks * 2 * 8) - block(chunks * 2 * 4))
    if (seq, heads) == (65536, 16):    # 1 MiB + 1 MiB (zigzag: 2 + 2), one block, 8,192 - 4,096 B of chunk indices
        assert cp.peak_bytes - single.peak_bytes == (4 if layout == "zigzag" else 2) * MiB + 512 - 4096


@pytest.mark.parametrize("key", CP_KEYS)
def test_the_gather_grows_with_the_world_and_nothing_else_does(key):
    """The same local tokens (8K per rank) at W = 1 and W = 8: at the forward's gather the W = 8 rank holds 7 more
    [HV, K, V+K] fp32 summaries (H32: 7 x 32 x 128 x 256 x 4 B = 28 MiB); at the peak, after the collectives, the same."""
    one = predict(get_model(key, cp=1), Shape(1, 8192, 32))
    eight = predict(get_model(key, cp=8), Shape(1, 8 * 8192, 32))
    i = [s.name for s in one.model.steps].index("fwd.cp_all_gather")
    assert eight.step_bytes[i] - one.step_bytes[i] == 7 * 32 * 128 * 256 * 4 == 28 * MiB
    assert eight.peak_bytes == one.peak_bytes


def test_the_cp_kernels_a_rank_launches_depend_on_its_place():
    """Contiguous: the first rank exports a summary (fwd) and merges the following ranks' (bwd); the last rank merges
    (fwd) and exports (bwd); a middle rank does all; W = 1 none. Zigzag ranks launch every CP kernel."""
    def cp_kernels(**options):
        return {(a.kernel, a.step) for a in get_model("fla-kda-cp@0.6.0", **options).autotuned if "_cp_" in a.kernel}
    assert cp_kernels(cp=2, cp_rank="first") == {("chunk_cp_fwd_kernel_h", "fwd.cp_summary"),
                                                  ("chunk_cp_fwd_bwd_kernel_merge", "bwd.cp_merge")}
    assert cp_kernels(cp=2, cp_rank="last") == {("chunk_cp_fwd_bwd_kernel_merge", "fwd.cp_merge"),
                                                 ("chunk_cp_bwd_kernel_dh", "bwd.cp_summary")}
    assert len(cp_kernels(cp=4, cp_rank="middle")) == 4
    assert cp_kernels(cp=1) == set()
    assert cp_kernels(cp=2, cp_layout="zigzag", cp_rank="first") == cp_kernels(cp=2, cp_layout="zigzag", cp_rank="last")
    assert len(cp_kernels(cp=1, cp_layout="zigzag")) == 4


@pytest.mark.parametrize("key", CP_KEYS)
def test_every_token_sized_buffer_is_at_s_over_w(key):
    """No buffer of the rank is sized by the total S: at W = 4 each buffer of the single-GPU model is its own size at
    S/4 (the int32 boundaries and chunk indices aside), q at 4 x 1000 tokens, H8: 1000 x 8 x 128 x 2 B."""
    model, single = get_model(key, cp=4), get_model(SINGLE[key])
    total, local = Shape(1, 4 * 1000, 8), Shape(1, 1000, 8)
    int32 = {"cu_seqlens", "chunk_indices", "seq_lens"}
    for b in single.buffers:
        if b.name not in int32:
            assert nbytes(model, b.name, total) == evaluate(b.nbytes, local), b.name
    assert nbytes(model, "q", total) == 1000 * 8 * 128 * 2


@pytest.mark.parametrize("key", CP_KEYS)
def test_the_model_takes_the_total_sequence_fla_takes(key):
    from livebytes.estimator.errors import RefusedShapeError
    from livebytes.estimator.registry import check_shape, seq_multiple
    assert seq_multiple(key, {"cp": 8})[0] == 8 and seq_multiple(key, {"cp": 8, "cp_layout": "zigzag"})[0] == 16
    check_shape(key, Shape(1, 16 * 1000, 8), None, {"cp": 8, "cp_layout": "zigzag"})
    with pytest.raises(RefusedShapeError, match="multiple of 16"):
        check_shape(key, Shape(1, 8 * 1001, 8), None, {"cp": 8, "cp_layout": "zigzag"})
    with pytest.raises(RefusedShapeError, match="batch_size 1"):
        check_shape(key, Shape(2, 8192, 8), None, {"cp": 2})
    with pytest.raises(RefusedShapeError, match="3 or more"):
        get_model(key, cp=2, cp_rank="middle")


# ---------------------------------------------------------------- the CLI


def run(args):
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize("args,needle", [
    (["predict", "--impl", "fla-kda@0.6.0", "--cp", "2", "--seq", "8K", "--heads", "16"], "does not take --cp"),
    (["predict", "--impl", "cudnn-kda-hopper-cuda@1.32.0", "--cp-layout", "zigzag", "--seq", "8K", "--heads", "16"],
     "does not take --cp-layout"),
    (["plan", "--impl", "fla-gdn@0.6.0", "--cp", "4", "--budget", "80GiB"], "does not take --cp"),
    (["predict", "--impl", "fla-kda-cp@0.6.0", "--cp", "3", "--seq", "8K", "--heads", "16"], "cp=3 not supported"),
    (["predict", "--impl", "fla-kda-cp@0.6.0", "--cp", "4", "--seq", "8194", "--heads", "16"], "multiple of 4"),
    (["predict", "--impl", "fla-kda-cp@0.6.0", "--cp", "2", "--cp-layout", "zigzag", "--seq", "8194", "--heads", "16"],
     "multiple of 4"),
    (["predict", "--impl", "fla-kda-cp@0.6.0", "--cp", "2", "--cp-layout", "ring", "--seq", "8K", "--heads", "16"], "cp_layout"),
    (["predict", "--impl", "fla-gdn-cp@0.6.0", "--cp", "0", "--seq", "8K", "--heads", "16"], "--cp"),
    (["predict", "--impl", "fla-gdn-cp@0.6.0", "--cp", "two", "--seq", "8K", "--heads", "16"], "--cp"),
    (["predict", "--impl", "fla-gdn-cp@0.6.0", "--mbs", "2", "--seq", "8K", "--heads", "16"], "batch_size 1"),
    (["formula", "--impl", "fla-kda@0.6.0", "--cp", "2"], "does not take --cp"),
])
def test_cp_flags_refused_with_one_error_line(args, needle):
    r = run(args)
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], r.output


def test_plan_answers_the_total_sequence_over_the_ranks():
    """A budget of 40 GiB per GPU: the 2-rank answer is a multiple of 2 (its next value 2 more), about twice the
    single GPU's (a rank holds S/2 tokens of the same model plus 2 MiB-scale CP state) and no more than twice."""
    def plan(*extra):
        r = run(["plan", "--impl", extra[0], "--heads", "16", "--budget", "40GiB", "--json", *extra[1:]])
        assert r.exit_code == 0, r.output
        (row,) = json.loads(r.stdout)["results"]
        return row
    single = plan("fla-kda@0.6.0")
    two = plan("fla-kda-cp@0.6.0", "--cp", "2")
    zig = plan("fla-kda-cp@0.6.0", "--cp", "2", "--cp-layout", "zigzag")
    assert two["value"] % 2 == 0 and two["next_value"] == two["value"] + 2
    assert zig["value"] % 4 == 0 and zig["next_value"] == zig["value"] + 4
    assert 2 * single["value"] - 2 * 64 <= two["value"] <= 2 * single["value"]
    assert two["options"]["cp"] == 2 and zig["options"]["cp_layout"] == "zigzag"


def test_the_assumed_line_names_the_ranks():
    r = run(["predict", "--impl", "fla-kda-cp@0.6.0", "--cp", "4", "--seq", "64K", "--heads", "16"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "context parallelism over 4 GPUs (contiguous, first rank; --seq-len is the total)" in text
    assert "NCCL's own memory" in text and "not counted" in text


# ---------------------------------------------------------------- the harness, without a GPU


def test_the_harness_imports_and_declines_without_a_gpu():
    from livebytes.validate.gpu import cp_runner
    from livebytes.validate.gpu.harnesses import decline_reason, harness_for
    from livebytes.validate.gpu.harnesses.fla_cp import CpHarness, FlaGdnCp, FlaKdaCp
    assert harness_for("fla-kda-cp@0.6.0") is FlaKdaCp and harness_for("fla-gdn-cp@0.6.0") is FlaGdnCp
    assert issubclass(FlaKdaCp, CpHarness) and FlaKdaCp.takes_contract and FlaKdaCp.triton
    env = cp_runner.rank_environment(1)
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["LIVEBYTES_GPU_LOCK"].endswith("gpu1.lock")
    if not os.environ.get("CUDA_VISIBLE_DEVICES") and not _cuda():
        assert "CUDA" in decline_reason("fla-kda-cp@0.6.0")


def _cuda() -> bool:
    from livebytes.validate.gpu.environment import cuda_available
    return cuda_available()


def test_a_rank_record_carries_the_cp_options_the_model_takes():
    from livebytes.estimator.registry import spec
    from livebytes.validate.gpu.cp_runner import cp_fields
    rec = cp_fields({"impl": "fla-kda-cp@0.6.0", "options": {"contract": "report", "recompute": True}}, 2, 1, "zigzag", "last",
                    {"context_only_bytes": 1, "after_nccl_init_bytes": 2})
    assert rec["options"] == {"contract": "report", "recompute": True, "cp": 2, "cp_layout": "zigzag", "cp_rank": "last"}
    assert set(rec["options"]) <= set(spec("fla-kda-cp@0.6.0").options)
    assert rec["cp"]["world_size"] == 2 and rec["cp"]["rank"] == 1 and rec["cp"]["nonpytorch_bytes"]["after_nccl_init_bytes"] == 2
    get_model("fla-kda-cp@0.6.0", **{k: v for k, v in rec["options"].items()})   # the record's options build its model


def test_the_local_shape_and_the_inputs_order_match_the_model():
    """The harness's local shape is S/W tokens (one slice per rank) and it allocates q, k, v, g, beta, (A_log, dt_bias),
    the global boundaries, the context's local ones, then dO: the model's input order."""
    from livebytes.validate.gpu.harnesses.fla_cp import CpGroup
    g = CpGroup.__new__(CpGroup)
    g.layout, g.world, g.rank = "zigzag", 4, 3
    assert g.local_shape(Shape(1, 8 * 1024, 16)) == Shape(1, 2048, 16) and g.position == "last"
    with pytest.raises(ValueError):
        g.local_shape(Shape(1, 8 * 1024 + 4, 16))
    model = get_model("fla-kda-cp@0.6.0", cp=4, cp_layout="zigzag")
    inputs = [b.name for b in model.buffers if b.allocated_at == "harness.inputs"]
    assert inputs == ["q", "k", "v", "g", "beta", "A_log", "dt_bias", "cu_seqlens_global", "cu_seqlens", "dO"]


def test_the_plan_script_runs_torchrun_with_nvls_off():
    plan = Path(__file__).resolve().parents[1] / "validate" / "data" / "plans" / "h200x2_cp.sh"
    text = plan.read_text()
    assert "NCCL_NVLS_ENABLE=0" in text and "torchrun" in text and "--nproc-per-node 2" in text
    for key in CP_KEYS:
        assert key in text


# ---------------------------------------------------------------- every cited fla/ops/cp line, against the wheel

FLA_SOURCES = Path(os.environ.get("LIVEBYTES_FLA_SOURCES", "/tmp/fla23"))    # an unpacked fla_core-0.6.0 wheel (fla/...)


@pytest.mark.parametrize("key", CP_KEYS)
@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
def test_every_cp_source_quotes_its_line_in_the_wheel(key, layout):
    if not (FLA_SOURCES / "fla" / "ops" / "cp").is_dir():
        pytest.skip("set LIVEBYTES_FLA_SOURCES to an unpacked fla_core-0.6.0 wheel")
    model = get_model(key, cp=2, cp_layout=layout)
    from livebytes.lifetimes import fla_cp
    sources = [b.source for b in model.buffers] + [s.source for s in model.steps if s.source] + [a.source for a in model.autotuned]
    cp_sources = {s for s in sources if s.file.startswith("fla/ops/cp/")} | {fla_cp.KDA.fwd_call, fla_cp.KDA.bwd_call,
                                                                           fla_cp.GDN.fwd_call, fla_cp.GDN.bwd_call}
    assert len(cp_sources) > 8
    for s in cp_sources:
        line = (FLA_SOURCES / s.file).read_text().splitlines()[s.line - 1].strip()
        quote = s.quote.split("...")[0].strip()
        n = min(len(quote), len(line))
        assert line[:n] == quote[:n], f"{s.file}:{s.line}: {line!r} vs {s.quote!r}"


def _plan_value(name: str) -> int:
    plan = (Path(__file__).resolve().parents[1] / "validate" / "data" / "plans" / "h200x2_cp.sh").read_text()
    (line,) = [x for x in plan.splitlines() if x.startswith(f"{name}=")]
    return int(line.split("=")[1].split()[0])


@pytest.mark.xfail(strict=True, reason="the bound's looseness (issue 33 point 1): the CP kernels' stack frames were "
                   "never compiled or logged, so the model's stack reservation is CUDA's 512 KiB per-thread local-memory "
                   "limit's, 141,457,096,704 B on the H200, where the plan's S* rested on the single-GPU kernel's borrowed "
                   "frames, and S* (323,242 tokens at H96) no longer fits under it. It passes again once the CP cases' "
                   "frames are measured on a GPU")
@pytest.mark.parametrize("rank", ["first", "last"])
def test_the_plan_scripts_boundary_is_the_models(rank):
    """S* in validate/data/plans/h200x2_cp.sh runs on both ranks (the runner's process: tuned at 1 x 1,024 first), and the
    next multiple of 2 does not; 1.01 S* (rounded up to a multiple of 2) does not either."""
    from livebytes.estimator.capacity import verdict
    from livebytes.estimator.devices import get_device
    s_star, s_over = _plan_value("S_STAR"), _plan_value("S_OVER")
    assert s_over == -(-round(s_star * 1.01 * 100) // 200) * 2 and s_star % 2 == 0
    model, h200 = get_model("fla-kda-cp@0.6.0", cp=2, cp_rank=rank), get_device("H200")
    assert verdict(model, Shape(1, s_star, 96), h200, tuned_at_tokens=1024).fits
    assert not verdict(model, Shape(1, s_star + 2, 96), h200, tuned_at_tokens=1024).fits
    assert not verdict(model, Shape(1, s_over, 96), h200, tuned_at_tokens=1024).fits


@pytest.mark.parametrize("index, name", [(0, "kda"), (1, "gdn")])
def test_a_cp_version_is_its_kernel_models_version_entry(index, name):
    """CP's version is data (lifetimes/fla_cp.py ``VERSIONS``): an entry whose kernel version entry is derived with only
    ``version`` changed is keyed by it and describes the same records as the registered one."""
    from livebytes.estimator.devices import get_device
    from livebytes.lifetimes import fla_cp
    v = fla_cp.VERSIONS[index]
    example = v.derive(kernel_version=v.kernel_version.derive(version="0.6.0+example"))
    assert (v.key, example.key) == (f"fla-{name}-cp@0.6.0", f"fla-{name}-cp@0.6.0+example")
    before, after = (fla_cp._builder(x)(get_device("H200"), cp=4, cp_layout="zigzag", cp_rank="middle") for x in (v, example))
    assert (after.key, after.version) == (example.key, "0.6.0+example")
    assert (after.steps, after.buffers, after.autotuned) == (before.steps, before.buffers, before.autotuned)
    assert example.covers.format(version=example.version).startswith("fla-core 0.6.0+example ")

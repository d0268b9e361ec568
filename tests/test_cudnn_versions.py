"""cuDNN frontend 1.31.0 as one data entry (lifetimes/cudnn_common.py CUDNN_1_31_0): the Hopper models differ from
1.32.0's only where the wheel does (graph_workspace holds each graph's workspace on the cached graph), and every
source they cite reads, in the 1.31.0 wheel, as the line 1.32.0's model cites reads in 1.32.0's. 1.30.0 (CUDNN_1_30_0):
its CuTeDSL forward is 1.31.0's with ops/kda.py renumbered, and it has no CUDA engine model."""
import os
from pathlib import Path

import pytest

from livebytes.estimator import Shape, get_model, predict

PAIRS = [("cudnn-kda-hopper-cuda@1.31.0", "cudnn-kda-hopper-cuda@1.32.0"), ("cudnn-kda-hopper@1.31.0", "cudnn-kda-hopper@1.32.0"),
         ("cudnn-kda-frost@1.31.0", "cudnn-kda-frost@1.32.0")]
DEVICE = {"cudnn-kda-frost@1.31.0": "B300"}
FROST_REGIONS = {"fwd_scheduler", "fwd_work_items", "fwd_work_count", "fwd_tensormaps", "scheduler", "fused_tensormaps",
                 "summary_tensormaps", "work_items", "work_count", "state_series", "recompute_tensormaps", "gate_part_a",
                 "gate_part_dt", "piece_table", "work_items_summary", "chain_state_m", "chain_states_vk", "bwd_tensormaps"}
HELD = {"cudnn-kda-hopper-cuda@1.31.0": {"fwd_workspace", "chunk_tables", "gn2", "amat", "wneg", "uu", "kg", "dvl", "vnew",
                                         "dv2", "hst", "dhst", "pmat"},
        "cudnn-kda-hopper@1.31.0": {"fwd_workspace"},
        "cudnn-kda-frost@1.31.0": FROST_REGIONS}


def models(old, new):
    device = DEVICE.get(old, "H200")
    return get_model(old, device), get_model(new, device)


@pytest.mark.parametrize("old,new", PAIRS)
def test_the_versions_differ_only_in_the_workspace_lifetime(old, new):
    a, b = models(old, new)
    assert [x.name for x in a.buffers] == [x.name for x in b.buffers]
    changed = {x.name for x, y in zip(a.buffers, b.buffers) if (x.cached, x.freed_after) != (y.cached, y.freed_after)}
    assert changed == HELD[old]
    assert all(x.dtype == y.dtype for x, y in zip(a.buffers, b.buffers))
    chain_floor = {x.name for x, y in zip(a.buffers, b.buffers) if x.shape_text() != y.shape_text()}
    assert not chain_floor or (old.startswith("cudnn-kda-frost") and all("Piecewise" in x.shape_text() for x in a.buffers
                                                                          if x.name in chain_floor))
    shape = Shape(2, 8192, 32, 128)     # on the H200 (132 SMs) 1.31.0's fixed 132-SM _pick_nseg is the device's;
    assert predict(a, shape).buffer_bytes == predict(b, shape).buffer_bytes   # FROST: 16K tokens, above 1.32.0's floor
    assert all(x.cached and x.cache_key is not None and not y.cached for x, y in zip(a.buffers, b.buffers) if x.name in changed)


def test_1_31_0_frost_chains_below_192_tokens():
    """B300, 148 SMs, MBS 1 x 128, H32: piece_budget = min(148 // 32, 16, ceil(128 / 16) // 4) = min(4, 16, 2) = 2, the
    reverse minimum: 1.31.0 chains, 1.32.0 keeps the uncut plan below its 192-token floor. The chain adds the fp32
    per-piece states: chain_state_m 2 pieces * 32 * 128 * 128 * 4 = 4,194,304 B."""
    old, new = models("cudnn-kda-frost@1.31.0", "cudnn-kda-frost@1.32.0")
    shape = Shape(1, 128, 32, 128)
    bytes_of = [dict(zip((b.name for b in m.buffers), predict(m, shape).buffer_bytes)) for m in (old, new)]
    assert bytes_of[0]["chain_state_m"] == 2 * 32 * 128 * 128 * 4 == 4_194_304
    assert bytes_of[1]["chain_state_m"] == 0


def test_1_31_0_plans_the_cute_segments_for_132_sms_on_any_device():
    """kda_prefill_sm90.py:1115 in 1.31.0: pmax = min(132 // max(N * H, 1), ...); 1.32.0 reads the device's SM count."""
    from dataclasses import replace

    from livebytes.estimator.devices import get_device
    from livebytes.lifetimes.cudnn_common import CUDNN_1_31_0, CUDNN_1_32_0
    from livebytes.lifetimes.cudnn_hopper import build_cute_forward
    small = replace(get_device("H200"), name="sm90 with 66 SMs", sm_count=66)
    assert dict(build_cute_forward(CUDNN_1_31_0, small).options)["num_sm"] == 132
    assert dict(build_cute_forward(CUDNN_1_32_0, small).options)["num_sm"] == 66


def test_the_held_workspace_is_live_through_the_forward_by_hand_arithmetic():
    """MBS 1 x 247,466, H96: ncs = ceil(247466 / 64) + 1 - 1 = 3867. The backward arena: chunk tables
    2 * 15,616 + 2 * 256 = 31,744; gn2 3867 * 96 * 512 = 190,070,784; amat 3867 * 96 * 8192 = 3,041,132,544;
    six [T, H, 128] bf16 6 * 247466 * 96 * 256 = 36,490,346,496; three states 3 * 3867 * 96 * 32768 =
    36,493,590,528: 76,215,172,096 B (71 GiB), a multiple of 512. 1.31.0 holds it through the forward; the
    one-byte forward workspace's 512-byte block is held too, so the backward peak grows by 512 B only."""
    shape = Shape(1, 247466, 96, 128)
    old, new = (predict(get_model(k, "H200"), shape) for k in PAIRS[0])
    workspace = 31_744 + 190_070_784 + 3_041_132_544 + 36_490_346_496 + 36_493_590_528
    assert workspace == 76_215_172_096
    steps = [s.name for s in old.model.steps]
    grown = dict(zip(steps, (o - n for o, n in zip(old.step_bytes, new.step_bytes))))
    assert grown == {"harness.inputs": workspace + 512, "fwd.kernel": workspace, "bwd.alloc_grads": workspace + 512,
                     "bwd.kernel": 512}
    assert old.peak_bytes - new.peak_bytes == 512


SOURCES = Path(os.environ.get("LIVEBYTES_CUDNN_SOURCES", "/tmp/cudnn_sources"))   # VERSION/ = an unpacked wheel's cudnn/


def _line(version: str, file: str, line: int) -> str:
    root = SOURCES / version
    if not root.is_dir():
        pytest.skip(f"no unpacked nvidia-cudnn-frontend {version} under {SOURCES} (pip download --no-deps; unzip)")
    return (root / file.removeprefix("cudnn/")).read_text().splitlines()[line - 1].strip()


@pytest.mark.parametrize("old,new", PAIRS)
def test_every_cited_line_reads_in_the_1_31_0_wheel_as_in_1_32_0(old, new):
    a, b = models(old, new)
    sites = [(x.source, y.source) for x, y in zip(a.buffers, b.buffers)]
    sites += [(x.source, y.source) for x, y in zip(a.steps, b.steps) if x.source]
    for s_old, s_new in sites:
        if s_old.function == "graph_workspace":     # the difference itself: 1.31.0 keeps it on the graph
            assert _line("1.31.0", s_old.file, s_old.line) == s_old.quote
            assert _line("1.31.0", s_old.file, s_old.line + 1) == "graph.la_ops_workspace = workspace"
            continue
        assert _line("1.31.0", s_old.file, s_old.line) == _line("1.32.0", s_new.file, s_new.line), s_old


def test_a_probe_is_the_model_of_the_library_version_it_ran():
    """A boundary probe of kda_hopper_cuda under the 1.31.0 wheel replays against 1.31.0's model, not 1.32.0's."""
    from livebytes.validate.check.probe_records import load_probe, model_of, probe_files
    assert model_of("kda_hopper_cuda", {"cudnn": "1.31.0"}) == ("cudnn-kda-hopper-cuda@1.31.0", {})
    assert model_of("fla-plain", {"fla": "0.6.0", "cudnn": "1.31.0"}) == ("fla-kda@0.6.0", {"contract": "plain"})
    hopper = [load_probe(p) for p in probe_files() if load_probe(p).impl == "kda_hopper_cuda"]
    ran = {p.path.name: p.trials[0].measured["cudnn"] for p in hopper}
    assert all(p.key == f"cudnn-kda-hopper-cuda@{ran[p.path.name]}" for p in hopper)
    assert sorted(n for n, v in ran.items() if v == "1.31.0") == [       # run 16c: S* and 1.01 S*, both settings
        f"h200_run16c_cudnn-kda-hopper-cuda-1.31.0_H96_{conf}_nowarmup_{role}.jsonl"
        for conf in ("default", "expandable") for role in ("above", "answer")]


def test_run_13_probes_plans_answer_and_one_percent_above():
    """validate/data/plans/h200_run14_cudnn131.sh probes, per allocator setting, plan's S* for 1.31.0 at H96 and ceil(1.01 S*)."""
    import math
    import re

    from livebytes.validate.gpu.boundary import Case, answer
    script = (Path(__file__).resolve().parents[1] / "validate" / "data" / "plans" / "h200_run14_cudnn131.sh").read_text()
    probed = re.search(r"for conf in ([\w: ]+); do", script).group(1).split()
    expected = []
    for conf in ("False", "True"):
        s_star = answer(Case("cudnn-kda-hopper-cuda@1.31.0", None, "seq", Shape(1, 8192, 96, 128),
                             alloc_conf=f"expandable_segments:{conf}"))
        expected += [f"{conf}:{s_star}", f"{conf}:{math.ceil(s_star * 1.01)}"]
    assert probed == expected


def test_the_protocol_replay_holds_the_warmup_graphs_workspace():
    """What run 14's records must show: under protocol v4 the measured steps of 1.31.0 start holding the 1 x 1024 warmup
    graph's backward arena, ncs = 16: tables 2 * 256 + 2 * 256 = 1,024; gn2 16 * 32 * 512 = 262,144; amat 16 * 32 * 8192 =
    4,194,304; six [1024, 32, 128] bf16 6 * 1024 * 32 * 256 = 50,331,648; three states 3 * 16 * 32 * 32768 = 50,331,648
    (105,120,768 B), and both graphs' one-byte forward workspaces (2 x 512 B); the target graph's arena is live at the
    peak in both versions."""
    from livebytes.validate.check.protocol import protocol_replay
    shape = Shape(1, 8192, 32, 128)
    old, new = (protocol_replay(get_model(k, "H200"), shape)[0].peak_bytes for k in PAIRS[0])
    assert old - new == 1_024 + 262_144 + 4_194_304 + 50_331_648 + 50_331_648 + 2 * 512 == 105_121_792


def _sites(a, b):
    """(a's source, b's source) of every buffer and step, in declaration order."""
    return ([(x.source, y.source) for x, y in zip(a.buffers, b.buffers)]
            + [(x.source, y.source) for x, y in zip(a.steps, b.steps) if x.source])


def test_1_30_0_allocates_as_1_31_0_and_only_ops_kda_lines_move():
    """1.30.0's hopper/ files are 1.31.0's (graph_workspace too: held on the graph, ops/common.py:50), so the CuTeDSL
    forward is the same buffers, cached the same way, of the same bytes. Its ops/kda.py lacks the docstrings 1.31.0
    added, 3 above run_kda_fwd and 11 above kimi_delta_attention: run_kda_fwd 321 - 9 = 312 -> 321 - 12 = 309,
    o 491 - 16 = 475 -> 491 - 19 = 472, kimi_delta_attention 1239 - 36 = 1203 -> 1239 - 47 = 1192."""
    a, b = models("cudnn-kda-hopper@1.30.0", "cudnn-kda-hopper@1.31.0")
    facts = [[(x.name, x.shape_text(), x.dtype, x.cached, str(x.cache_key), x.freed_after) for x in m.buffers] for m in (a, b)]
    assert facts[0] == facts[1]
    shape = Shape(2, 8192, 32, 128)
    assert predict(a, shape).buffer_bytes == predict(b, shape).buffer_bytes
    moved = {(y.line, x.line) for x, y in _sites(a, b) if x != y}
    assert moved == {(312, 309), (475, 472), (1203, 1192)}


def test_1_30_0_registers_no_cuda_engine_model():
    """The 1.30.0 wheel ships no hopper/cuda_kernels/*.cu (cuda_host.KERNEL_DIR): kda_hopper_cuda cannot compile."""
    from livebytes.estimator.registry import keyed_specs
    assert {s.key for s in keyed_specs() if s.version == "1.30.0"} == {"cudnn-kda-hopper@1.30.0"}
    with pytest.raises(Exception, match="unknown implementation"):
        get_model("cudnn-kda-hopper-cuda@1.30.0", "H200")


def test_every_cited_line_reads_in_the_1_30_0_wheel_as_in_1_31_0():
    """The CUDA model is built, not registered, so that the entry's kda_bwd shifts are read in the wheel too."""
    from livebytes.estimator.devices import get_device
    from livebytes.lifetimes.cudnn_common import CUDNN_1_30_0, CUDNN_1_31_0
    from livebytes.lifetimes.cudnn_hopper import build_cuda
    h200 = get_device("H200")
    cute = models("cudnn-kda-hopper@1.30.0", "cudnn-kda-hopper@1.31.0")
    for s_old, s_new in _sites(*cute) + _sites(build_cuda(CUDNN_1_30_0, h200), build_cuda(CUDNN_1_31_0, h200)):
        assert _line("1.30.0", s_old.file, s_old.line) == _line("1.31.0", s_new.file, s_new.line), s_old

"""Where a cold answer rests on dhu's failing-config rule unmeasured (``autotune.held_assumptions``): the rule
(a config fails at K >= 128 on Hopper, its dv kept until the next garbage collection) was measured on the H200 in
the cold kernel lists: chunk_kda (state_v_first off) at K = V = 32, 64, 128, 256 (runs 13, 22h), the KDA layer's call at
128 (runs 19-20's cold first-call probes), the Qwen3-Next GDN call at 64 and 128 (runs 20, 22e)."""
import json

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.report import allocator_terms
from livebytes.estimator import get_model
from livebytes.estimator.allocator import DEFAULT_CONF
from livebytes.estimator.autotune import held_assumptions
from livebytes.estimator.compiler import equal_head_dims, measured_text
from livebytes.estimator.capacity import process_memory
from livebytes.estimator.devices import get_device
from livebytes.estimator.compiler import compile_model
from livebytes.estimator.shapes import Shape

KERNEL = "chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64"
GDN_ARGS = ["predict", "--impl", "fla-gdn@0.6.0", "--seq", "8K", "--heads", "16", "--v-heads", "32", "--dim", "32", "--json"]


@pytest.mark.parametrize("key, shape, expected", [
    # K = V = 128 and 64 in the Qwen3-Next call on the H200: measured (one config fails at 128, none at 64)
    ("fla-gdn@0.6.0", Shape(1, 8192, 16, 128, 32), None),
    ("fla-gdn@0.6.0", Shape(1, 8192, 16, 64, 32), None),
    # K = 32 < 128: the rule says every config launches; GDN never measured there
    ("fla-gdn@0.6.0", Shape(1, 8192, 16, 32, 32), "every config assumed to launch"),
    # K = 256 >= 128: the rule says a config fails, keeping dv_local; measured only at 128
    ("fla-gdn@0.6.0", Shape(1, 8192, 16, 256, 32), "keeping dv_local"),
    # K = 128, V = 64: held by the rule (K >= 128), but V != 128 was never measured
    ("fla-gdn@0.6.0", Shape(1, 8192, 16, 128, 32, dim_v=64), "keeping dv_local"),
    # chunk_kda with state_v_first off at K = V = 128 and 32: measured; at 96 assumed to launch
    ("fla-kda@0.6.0", Shape(1, 8192, 16, 128, 32), None),
    ("fla-kda@0.6.0", Shape(1, 8192, 16, 32), None),
    ("fla-kda@0.6.0", Shape(1, 8192, 16, 96), "every config assumed to launch"),
    # the layer's call (layer_call, STATE_V_FIRST 1) never ran cold: held, assumed, at every K >= 128
    ("fla-gdn-layer@0.6.0", Shape(1, 8192, 16, 128, 32), "keeping gdn.dv_local"),
    # no Triton kernel, no rule
    ("cudnn-kda-hopper-cuda@1.32.0", Shape(1, 8192, 16, 128), None),
])
def test_held_assumptions(key, shape, expected):
    model = get_model(key, "H200")
    notes = held_assumptions(model, shape)
    assert notes == held_assumptions(compile_model(model), shape)      # the compiled model knows it too
    if expected is None:
        assert notes == ()
    else:
        assert len(notes) == 1 and notes[0].startswith(KERNEL) and expected in notes[0]


def test_a_stack_says_it_once():
    # three layers launch dhu at one key: the first launch benchmarks, the other two find it tuned; the layer's call
    # was measured cold at K = V = 128 only (runs 19-20), so D256 is assumed
    model = get_model("fla-kda-layer@0.6.0", "H200", layers=3)
    assert sum(a.kernel == KERNEL for a in model.autotuned) == 3
    assert held_assumptions(model, Shape(1, 8192, 16, 128, 32)) == ()
    notes = held_assumptions(model, Shape(1, 8192, 16, 256, 32))
    assert len(notes) == 1 and "(kda.bwd.dhu)" in notes[0] and "measured only at head_dim = head_v_dim = 128" in notes[0]


def test_the_context_parallel_copy_was_never_measured():
    # fla-gdn-cp copies the single-GPU autotunes: at the measured K = V = 128 it is still assumed
    notes = held_assumptions(get_model("fla-gdn-cp@0.6.0", "H200"), Shape(1, 8192, 16, 128, 32))
    assert len(notes) == 1 and "never measured" in notes[0]


@pytest.mark.parametrize("state, expected", [("cold", 1), ("warm", 0)])
def test_only_a_cold_answer_carries_them(state, expected):
    # warm: the tuned configs load from disk, dhu never benchmarks, no config fails
    device, key = get_device("H200"), "fla-gdn@0.6.0"
    terms = allocator_terms(get_model(key, "H200"), device, DEFAULT_CONF, process_memory(device, key, state),
                            Shape(1, 8192, 16, 32, 32))
    assert len(terms["autotune_assumptions"]) == expected


def test_no_shape_no_assumptions():
    device, key = get_device("H200"), "fla-gdn@0.6.0"
    terms = allocator_terms(get_model(key, "H200"), device, DEFAULT_CONF, process_memory(device, key, "cold"))
    assert terms["autotune_assumptions"] == []


def test_measured_text():
    # in the shape keys' words (formula's symbols: DK head_dim, DV head_v_dim)
    assert measured_text("Eq(DK, 128) & Eq(DV, 128)") == "head_dim = head_v_dim = 128"
    assert measured_text("Eq(DK, 128) & Eq(DV, 64)") == "head_dim = 128 and head_v_dim = 64"
    assert measured_text(equal_head_dims(64, 128)) == "head_dim = head_v_dim = 64 or head_dim = head_v_dim = 128"


@pytest.mark.parametrize("extra, expected", [([], 1), (["--triton-cache", "warm"], 0)])
def test_predict_json_says_it(extra, expected):
    r = CliRunner().invoke(app, GDN_ARGS + extra)
    assert r.exit_code == 0, r.output
    notes = json.loads(r.stdout)["results"][0]["autotune_assumptions"]
    assert len(notes) == expected
    assert all(n.startswith(KERNEL) and "every config assumed to launch" in n for n in notes)

"""A traced family is one row (``lifetimes/traced/families.py``): every reader takes it from there, an unknown one is
refused in one line, and the GPU probes build the layer its row names."""
import importlib.util
from pathlib import Path

import pytest

from livebytes.estimator.errors import LivebytesError
from livebytes.lifetimes.traced.families import BY_TYPE, ROWS, family, probe_impls, probed
from livebytes.lifetimes.traced.model import canonical_config, config_sizes, model_key


def test_each_row_is_found_by_its_model_type_and_keyed_by_its_name_and_version():
    assert [f.model_type for f in ROWS] == list(BY_TYPE)
    assert model_key("kda") == "fla-kda-model@0.6.0" and model_key("qwen3_next") == "qwen3-next-model@5.17.0"


@pytest.mark.parametrize("kind", ["gdn", None, ["kda"], "KDA"])
def test_an_unknown_family_is_one_line_naming_the_known(kind):
    with pytest.raises(LivebytesError, match=r"^model_type .* is not traced \(known: kda, gated_deltanet") as err:
        family(kind)
    assert "\n" not in str(err.value)


def test_a_config_of_an_unknown_family_is_refused_naming_its_file():
    with pytest.raises(LivebytesError, match=r"^x.json: model_type 'llama' is not traced \(known: "):
        canonical_config({"model_type": "llama"}, "x.json")


def test_the_heads_and_head_dim_are_where_the_row_says():
    # Kimi-Linear: its MLA heads, qk_nope 128 + qk_rope 64 = 192 (the row's defaults where the config leaves them out)
    assert config_sizes(canonical_config({"model_type": "kimi_linear", "num_attention_heads": 8})) == (8, 192)
    assert config_sizes(canonical_config({"model_type": "kda"})) == (16, 128)


def test_an_unknown_probe_layer_is_one_line_not_gated_deltanet():
    assert probed("fla-gdn-layer").options == {"use_gate": True} and probed("fla-kda-layer").options == {}
    with pytest.raises(LivebytesError, match=r"no family's GPU probe builds the layer 'fla-gla-layer' \(known: "):
        probed("fla-gla-layer")


def _boundary_probe():
    path = Path(__file__).resolve().parents[1] / "validate" / "gpu" / "probes" / "boundary_probe.py"
    spec = importlib.util.spec_from_file_location("boundary_probe_rows", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_standalone_probe_copies_the_rows_probe_layers():
    """boundary_probe.py imports nothing of livebytes: its copy of the rows' probe layers is held equal to them."""
    bp = _boundary_probe()
    rows = {f.probe.impl: (f.probe.module, f.probe.cls, dict(f.probe.options)) for f in ROWS if f.probe is not None}
    assert bp.LAYER_CLASSES == rows and bp.LAYER_IMPLS == probe_impls()
    with pytest.raises(SystemExit, match="no layer probe 'fla-gla-layer'"):
        bp.layer_class("fla-gla-layer")


# ---------------------------------------------------------------------- every other fla causal LM, unvalidated

UNVALIDATED_ROWS = [f for f in ROWS if not f.validated]
# one tracer process for every family: a step of each row's example at one sequence of 64 tokens (the cheap trace)
TRACE_EACH = """
import json, sys, warnings
from livebytes.estimator.devices import get_device
from livebytes.tracer.target import install, meta_index_is_device_0
warnings.filterwarnings("ignore")
install(get_device("H200"))
import fla  # noqa: F401
meta_index_is_device_0()
import torch
from livebytes.tracer.step import build_model, trace_training
out = {}
for config in json.loads(sys.stdin.read()):
    spec = {"device": "H200", "config": config, "precision": "bf16", "optimizer": "adamw", "checkpoint": False,
            "packed": False, "steps": 3, "layers": None}
    events = [e for e in trace_training(spec, 1, 64)["events"] if e["e"] == "alloc"]
    model = build_model(config, None).to(torch.bfloat16)     # as the step places it: float tensors in bf16
    placed = list(model.parameters()) + list(model.buffers())
    out[config["model_type"]] = {
        "parameter_bytes": sum(e["bytes"] for e in events if e.get("param") and e["op"] == "model.to(device)"),
        "placed_bytes": sum(t.numel() * t.element_size() for t in placed),
        "layer_modules": sorted({e["module"] for e in events if not e.get("param")
                                 and ".layers.0." in "." + (e.get("module") or "")})}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def traced_each():
    import json
    import subprocess
    import sys
    configs = [{"model_type": f.model_type, **f.example} for f in UNVALIDATED_ROWS]
    done = subprocess.run([sys.executable, "-c", TRACE_EACH], input=json.dumps(configs), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_at_least_twelve_more_families_are_rows_each_unvalidated_with_a_small_example():
    assert len(UNVALIDATED_ROWS) >= 12
    assert all(f.example and f.dist == "flash-linear-attention" and f.version == "0.6.0" for f in UNVALIDATED_ROWS)
    assert all(f.notes[0].startswith("unvalidated: ") for f in UNVALIDATED_ROWS)


@pytest.mark.parametrize("row", UNVALIDATED_ROWS, ids=lambda f: f.model_type)
def test_each_family_traces_its_own_layers(traced_each, row):
    """The trace places every parameter and buffer once, float ones in bf16 (``model.to(device)``: as torch counts
    them on the same config, 2 bytes an element) and holds buffers of the family's own first layer (its mixer's, not
    only the norms'; fla's Mamba names its stack ``backbone``)."""
    got = traced_each[row.model_type]
    assert got["parameter_bytes"] == got["placed_bytes"]
    assert any(not m.endswith("norm") for m in got["layer_modules"]), got["layer_modules"]


def test_a_family_that_does_not_trace_is_refused_in_one_line_naming_why():
    with pytest.raises(LivebytesError, match=r"^model_type 'mla' is not traced: its attention calls flash-attn's"):
        family("mla")
    with pytest.raises(LivebytesError, match=r"^c.json: model_type 'cat' is not traced: its forward reads a tensor's"):
        canonical_config({"model_type": "cat"}, "c.json")


def test_an_unvalidated_family_answers_predict_from_its_config_and_says_it_is_unvalidated(tmp_path):
    """GLA, hidden 256, one layer, vocab 4096: the embedding and the untied lm_head hold 4096 x 256 bf16 each
    (2 MiB apiece) among its parameters; the answer's warnings say it is unvalidated."""
    import json

    from typer.testing import CliRunner

    from livebytes.cli.app import app
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gla", **BY_TYPE["gla"].example}))
    r = CliRunner().invoke(app, ["predict", "--model", str(path), "--seq", "1K", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (one,) = data["results"]
    assert one["impl"] == "fla-gla-model@0.6.0"
    assert one["group_bytes"]["parameters"] >= 2 * 4096 * 256 * 2
    assert any(w.startswith("fla-gla-model@0.6.0: unvalidated: ") for w in data["warnings"])


def test_livebytes_models_lists_every_row():
    import json

    from typer.testing import CliRunner

    from livebytes.cli.app import app
    r = CliRunner().invoke(app, ["models", "--json"])
    listed = {m["impl"]: m for m in json.loads(r.stdout)["results"]}
    assert {f.key for f in ROWS} <= set(listed)
    assert listed["fla-gla-model@0.6.0"]["implementation"] == "flash-linear-attention 0.6.0 GLAForCausalLM (traced, unvalidated)"


@pytest.mark.parametrize("model_type, says", [
    ("gla", "unvalidated: one GPU run checks this family (three steps at 1 x 8,192 tokens"),        # run 46 a
    ("delta_net", "unvalidated: one GPU run checks this family (three steps at 1 x 8,192 tokens"),  # run 46 c
    ("retnet", "unvalidated: no GPU measurement checks this family"),
])
def test_an_unvalidated_familys_caveat_says_how_far_it_was_measured(model_type, says):
    """Each unvalidated row's caveat (the registry's, every answer's warning) says what measured it, if anything."""
    from livebytes.estimator.registry import spec
    assert spec(BY_TYPE[model_type].key).caveat.startswith(f"{BY_TYPE[model_type].key}: {says}")

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

"""The transformers a user has (issue 48 point 5): Qwen3-Next and Kimi-Linear trace the installed transformers 5.x as it
is, their answers labelled "validated under 5.17.0" (the version the H200 records ran) where it is another, and refused
in one line only where its code does not trace: a release outside 5.x, or a trace that fails (the line says under
which transformers). flash-linear-attention's own models stay pinned to fla 0.6.0."""
import json
import types

import pytest
from typer.testing import CliRunner

from livebytes.notes import assumption_lines, version_lines
from livebytes.cli.app import app
from livebytes.estimator.devices import get_device
from livebytes.estimator.errors import LivebytesError
from livebytes.lifetimes.traced import model as traced
from livebytes.lifetimes.traced.model import Request, canonical_config
from livebytes.tracer import target

REAL = traced.installed_versions()
LABEL = "traced as installed; validated under 5.17.0"


def with_transformers(monkeypatch, version):
    """This environment as if ``version`` of transformers were installed (None: none), the rest as it is."""
    monkeypatch.setattr(traced, "installed_versions", lambda: dict(REAL, transformers=version))


@pytest.mark.parametrize("model_type", ["qwen3_next", "kimi_linear"])
@pytest.mark.parametrize("version", ["5.17.0", "5.18.0", "5.25.0", "5.30.0.dev0"])
def test_any_5x_is_traced_as_installed(monkeypatch, model_type, version):
    with_transformers(monkeypatch, version)
    traced.check_environment(traced.environment(), None, model_type)      # no refusal


@pytest.mark.parametrize("model_type,key", [("qwen3_next", "qwen3-next-model@5.17.0"),
                                            ("kimi_linear", "kimi-linear-model@5.17.0")])
@pytest.mark.parametrize("version,said", [("4.57.1", "4.57.1"), ("6.0.0", "6.0.0"), (None, "none")])
def test_outside_5x_is_refused_in_one_line(monkeypatch, model_type, key, version, said):
    with_transformers(monkeypatch, version)
    with pytest.raises(LivebytesError) as err:
        traced.check_environment(traced.environment(), None, model_type)
    assert str(err.value) == (f"{key} traces transformers 5.x as installed (validated under 5.17.0); this environment "
                              f"has {said} (pip install 'livebytes[model]')")


def test_fla_models_stay_pinned(monkeypatch):
    """fla's KDA model is fla's code: another fla is refused, whatever transformers is installed."""
    monkeypatch.setattr(traced, "installed_versions", lambda: dict(REAL, transformers="5.25.0"))
    traced.check_environment(traced.environment(), None, "kda")           # fla 0.6.0: traced
    monkeypatch.setattr(traced, "installed_versions", lambda: dict(REAL, **{"flash-linear-attention": "0.5.0"}))
    with pytest.raises(LivebytesError, match=r"^the traced models are of flash-linear-attention 0\.6\.0; this "
                                             r"environment has 0\.5\.0"):
        traced.check_environment(traced.environment(), None, "kda")


@pytest.mark.parametrize("model_type,versions,expected", [
    ("qwen3_next", {"transformers": "5.25.0"}, "5.25.0"),
    ("kimi_linear", {"transformers": "5.18.0"}, "5.18.0"),
    ("kimi_linear", {"transformers": "5.17.0"}, None),        # the validated version: nothing to say
    ("kimi_linear", {}, "?"),                                 # traces that name no transformers
    ("kda", {"transformers": "5.25.0"}, None),                # a pinned family: its key's version is what ran
])
def test_unvalidated_is_the_other_version(model_type, versions, expected):
    assert traced.unvalidated(model_type, versions) == expected


KIMI = canonical_config({"model_type": "kimi_linear", "num_hidden_layers": 2, "pad_token_id": None})


@pytest.mark.parametrize("version,implementation", [
    ("5.25.0", "transformers 5.25.0 KimiLinearForCausalLM, traced as installed; validated under 5.17.0"),
    ("5.17.0", "transformers 5.17.0 KimiLinearForCausalLM, traced"),
])
def test_the_model_says_which_transformers_it_traced(version, implementation):
    """The model's implementation names the transformers its traces ran (the traces' versions, not the key's)."""
    versions = dict(REAL, transformers=version)
    fields = traced.fields(Request(KIMI, "H200"), get_device("H200"), versions)
    assert (fields["implementation"], fields["version"], fields["key"]) == (implementation, version,
                                                                          "kimi-linear-model@5.17.0")
    assert f"transformers {version}, triton" in fields["notes"][0]


def built(key, version, implementation, options=()):
    return types.SimpleNamespace(key=key, version=version, implementation=implementation, options=options)


def test_an_answer_under_another_version_carries_the_label_once():
    """The label is a warning line (text: printed before the answer; --json: its warnings): one per model built
    under another version than its key's, none where they agree (fla's models, 5.17.0 itself)."""
    other = built("kimi-linear-model@5.17.0", "5.25.0", f"transformers 5.25.0 KimiLinearForCausalLM, {LABEL}")
    same = built("kimi-linear-model@5.17.0", "5.17.0", "transformers 5.17.0 KimiLinearForCausalLM, traced")
    fla = built("fla-kda-model@0.6.0", "0.6.0", "flash-linear-attention 0.6.0 KDAForCausalLM, traced")
    assert version_lines([other, same, fla, other]) == [f"kimi-linear-model@5.17.0: transformers 5.25.0 "
                                                        f"KimiLinearForCausalLM, {LABEL}"]
    assert version_lines([same, fla]) == []
    worst = built("kimi-linear-model@5.17.0", "5.25.0", other.implementation, (("routing", "worst"),))
    lines = assumption_lines([worst])
    assert len(lines) == 2 and lines[0].endswith(LABEL) and lines[1].startswith("routing: worst")


class FailedTracer:
    """A tracer process that exits 1 with one ``error:`` line."""
    returncode = 1

    def communicate(self, text):
        return "", "Traceback (most recent call last):\nerror: AttributeError: 'Cache' has no attribute 'layers'\n"


@pytest.mark.parametrize("version,said", [
    ("5.25.0", "tracing the model failed under transformers 5.25.0 as installed (validated under 5.17.0): "
               "AttributeError: 'Cache' has no attribute 'layers'"),
    ("5.17.0", "tracing the model failed: AttributeError: 'Cache' has no attribute 'layers'"),
])
def test_a_failed_trace_says_under_which_transformers(monkeypatch, version, said):
    with_transformers(monkeypatch, version)
    monkeypatch.setattr(traced, "_start", lambda spec: FailedTracer())
    spec = traced.trace_spec(Request(KIMI, "H200"), 2)
    with pytest.raises(LivebytesError) as err:
        traced.run_tracers([spec])
    assert str(err.value) == said


def test_meta_inputs_take_the_gpu_packages_path(monkeypatch):
    """transformers after 5.17 runs fla's chunk_kda only for inputs on a device fla supports, else its torch reference
    (integrations/hub_kernels.py): the tracer's meta stands for the GPU, so every package that runs on cuda runs on
    meta; a CPU-only table entry is left as it is."""
    from transformers.integrations import hub_kernels
    table = {"fla": ("cuda", "xpu", "mlu", "npu"), "causal_conv1d": ("cuda",), "cpu_only": ("cpu",)}
    monkeypatch.setattr(hub_kernels, "_PACKAGE_SUPPORTED_DEVICES", table, raising=False)
    target.meta_runs_gpu_packages()
    target.meta_runs_gpu_packages()         # twice: meta once
    assert table == {"fla": ("cuda", "xpu", "mlu", "npu", "meta"), "causal_conv1d": ("cuda", "meta"),
                     "cpu_only": ("cpu",)}


# Kimi-Linear traced live under this environment's transformers (4 layers, about a minute cold)
TINY = {"model_type": "kimi_linear", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": 128, "q_lora_rank": None,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "linear_num_heads": 4,
        "linear_head_dim": 64, "num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
        "n_shared_experts": 1, "vocab_size": 32000, "pad_token_id": None}


def test_the_installed_transformers_answers_labelled_where_not_5_17(tmp_path):
    """Under 5.17.0 the answer has no label; under any other 5.x it is traced as installed and its warnings (--json)
    and its text say so. The GPU's KDA path is traced under either: fla's chunk_kda's own buffers, never transformers'
    torch reference (whose per-chunk loop would differ in structure between shapes and refuse)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    r = CliRunner().invoke(app, ["predict", "--model", str(path), "--seq-len", "4096", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    have = REAL["transformers"]
    label = [w for w in data["warnings"] if w.startswith("kimi-linear-model@5.17.0: transformers")]
    assert label == ([] if have == "5.17.0" else [f"kimi-linear-model@5.17.0: transformers {have} KimiLinearForCausalLM, "
                                                  f"{LABEL}"])
    (d,) = data["results"]
    assert any(b["source"].startswith("fla/ops/kda/") for b in d["buffers_at_peak"])
    text = CliRunner().invoke(app, ["predict", "--model", str(path), "--seq-len", "4096"])
    assert text.exit_code == 0 and (LABEL in text.output) == (have != "5.17.0"), text.output

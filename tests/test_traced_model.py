"""The traced whole-model source (issue 32): the tracer on the real flash-linear-attention 0.6.0 code (CPU, meta
tensors), the model-step records re-checked figure by figure, the two sources of the KDA layer, and the CLI's --model.

These trace live (``pip install '.[test]'`` carries torch, triton, fla and transformers); the traces and the compiled
models land in the private model cache (``LIVEBYTES_CACHE_DIR``), so a second run is fast.
"""
import gzip
import hashlib
import json
import subprocess
import sys
import re
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator.capacity import cold_benchmarks
from livebytes.estimator.devices import get_device
from livebytes.estimator.engine import predict
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.groups import Group
from livebytes.estimator.registry import get_compiled, get_model
from livebytes.estimator.replay import replay
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced.model import canonical_config, options_for, read_config
from livebytes.validate.check import model_records
from livebytes.validate.check.records import load_records
from livebytes.process_words import status_words

TINY = {"model_type": "kda", "hidden_size": 256, "num_hidden_layers": 2, "num_heads": 2, "head_dim": 64,
        "vocab_size": 1000}
H200 = get_device("H200")
runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_text(json.dumps(TINY))
    return path


def tiny_model(precision: str = "bf16", packed: bool = False, **fields):
    key, options = options_for(canonical_config(dict(TINY)), precision=precision, packed=packed)
    return get_model(key, H200, **options, **fields)


def counted_by_transformers(config_path, what: str) -> int:
    """An element count of the config's model as transformers builds it (a second process, on the meta device):
    ``what`` is an expression of the model ``m``."""
    code = ("import json, sys, torch, fla; from transformers import AutoConfig, AutoModelForCausalLM\n"
            "cfg = AutoConfig.for_model(**json.load(open(sys.argv[1])))\n"
            "with torch.device('meta'): m = AutoModelForCausalLM.from_config(cfg)\n"
            f"print({what})")
    return int(subprocess.run([sys.executable, "-c", code, str(config_path)], capture_output=True, text=True,
                              check=True).stdout.split()[-1])


PARAMETERS = "sum(p.numel() for p in m.parameters())"
LINEARS = "sum(p.numel() for x in m.modules() if isinstance(x, torch.nn.Linear) for p in x.parameters())"


def test_parameters_are_the_models_own(tiny_config):
    """The harness's parameter allocations are the bf16 parameters transformers builds for the config: numel x 2 B,
    counted by transformers itself (a second process, the model on the meta device)."""
    numel = counted_by_transformers(tiny_config, PARAMETERS)
    model = tiny_model()
    p = predict(model, Shape(1, 1024, 2, 64))
    params = sum(n for b, n in zip(model.buffers, p.buffer_bytes) if b.group is Group.PARAMETERS)
    blocks = sum(-(-2 * _numel(b) // 512) * 512 for b in model.buffers if b.group is Group.PARAMETERS)
    assert sum(2 * _numel(b) for b in model.buffers if b.group is Group.PARAMETERS) == 2 * numel
    assert params == blocks           # each parameter its own allocation, rounded up to 512-B blocks


def _numel(buffer) -> int:
    """A parameter buffer's element count from its note ('torch.bfloat16 [1000, 256]')."""
    dims = buffer.note.split("[", 1)[1].split("]", 1)[0]
    out = 1
    for d in filter(None, (x.strip() for x in dims.split(","))):
        out *= int(d)
    return out


def test_adamw_keeps_two_states_per_parameter():
    """AdamW (foreach, its CUDA default) makes exp_avg and exp_avg_sq per parameter in the first step and keeps them:
    the optimizer states are twice the parameters, block for block (bf16 parameters, bf16 states)."""
    model = tiny_model()
    p = predict(model, Shape(1, 1024, 2, 64))
    live = {b.name: n for b, n in zip(model.buffers, p.buffer_bytes)}
    params = sum(n for b in model.buffers if b.group is Group.PARAMETERS for n in [live[b.name]])
    states = sum(live[b.name] for b in model.buffers if b.group is Group.OPTIMIZER_STATES)
    assert states == 2 * params


@pytest.mark.parametrize("optimizer", ["sgd", "none"])
def test_optimizers_without_states_keep_none(optimizer):
    key, options = options_for(canonical_config(dict(TINY)), optimizer)
    model = get_model(key, H200, **options)
    assert not [b for b in model.buffers if b.group is Group.OPTIMIZER_STATES]


def test_depth_is_three_layers_expanded():
    """A deep model is the three-layer trace expanded (proved against four traced layers when built): the 6-layer
    model's parameters are the 3-layer's plus three layers' worth."""
    per = {}
    for depth in (3, 4, 6):
        model = tiny_model(layers=depth)
        per[depth] = sum(evaluate_bytes(b) for b in model.buffers if b.group is Group.PARAMETERS)
    layer = per[4] - per[3]
    assert layer > 0 and per[6] == per[3] + 3 * layer


def test_packed_sequences_deep_model_expands():
    """Packed sequences: the first layer's run makes the chunk indices fla's tensor_cache hands the later layers (its
    run has allocations no other run has); the 3-layer trace still expands, proved against four traced layers (building
    the model runs ``layers.check``), and a 6-layer model is the 3-layer one plus three layers' parameters."""
    per = {depth: sum(evaluate_bytes(b) for b in tiny_model(packed=True, layers=depth).buffers
                      if b.group is Group.PARAMETERS) for depth in (3, 4, 6)}
    assert per[4] > per[3] and per[6] == per[3] + 3 * (per[4] - per[3])


def test_runs_of_unequal_length_align_by_operator_and_module():
    """Layer 0's run has two extra allocations between its first and second (the cached chunk indices); layers 1 and
    2 align one to one with each other and the extras get no index."""
    from types import SimpleNamespace as A

    from livebytes.lifetimes.traced.layers import _aligned

    def run(layer, ops):
        return [A(op=op, module=f"model.layers.{layer}.attn") for op in ops]
    runs = {0: run(0, ["mm", "arange", "cumsum", "mm", "empty"]), 1: run(1, ["mm", "mm", "empty"]),
            2: run(2, ["mm", "mm", "empty"])}
    assert _aligned(runs) == {0: [0, None, None, 1, 2], 1: [0, 1, 2], 2: [0, 1, 2]}


def evaluate_bytes(buffer) -> int:
    from livebytes.estimator.engine import evaluate
    return evaluate(buffer.nbytes, Shape(1, 1024, 2, 64))


# ------------------------------------------------------------------------------------------- fp32-amp

def test_fp32_amp_keeps_parameters_gradients_and_states_in_fp32(tiny_config):
    """fp32-amp: the parameters are fp32, 4 B each (TINY: per layer 772,930, plus the embedding and the head 256,000
    each and the final norm 256: 2,058,116 parameters, 8,232,464 B), every gradient the optimizer reads is fp32, and
    AdamW's two states are twice the parameters, block for block."""
    numel = counted_by_transformers(tiny_config, PARAMETERS)
    assert numel == 2 * 772_930 + 2 * 256_000 + 256
    model = tiny_model("fp32-amp")
    live = {b.name: n for b, n in zip(model.buffers, predict(model, Shape(1, 1024, 2, 64)).buffer_bytes)}
    params = [b for b in model.buffers if b.group is Group.PARAMETERS]
    assert {b.note.split()[0] for b in params} == {"float32"}
    assert sum(4 * _numel(b) for b in params) == 4 * numel == 8_232_464
    grads = [b for b in model.buffers if b.group is Group.PARAM_GRADS]
    assert grads and {b.note.split()[0] for b in grads} == {"float32"}
    states = sum(live[b.name] for b in model.buffers if b.group is Group.OPTIMIZER_STATES)
    assert states == 2 * sum(live[b.name] for b in params)


def test_fp32_amp_holds_a_bf16_copy_of_every_linear_weight_through_the_forward(tiny_config):
    """autocast's weight cache: each nn.Linear's fp32 weight (and bias) is cast to bf16 once in the forward and held
    at least to the forward's end (the region's exit drops the cache; a copy the backward needs lives on): 2 B per
    element of every Linear (TINY: per layer q, k, v 3 x 32,768, f_proj and g_proj 16,384 + 8,192 each, g_proj's bias
    128, b_proj 512, o_proj 32,768, gate and up 2 x 196,608, down 196,608 = 770,688; the head 256,000; 1,797,376
    elements, 3,594,752 B)."""
    elements = counted_by_transformers(tiny_config, LINEARS)
    assert elements == 2 * 770_688 + 256_000
    model = tiny_model("fp32-amp")
    copies = [b for b in model.buffers if b.note.endswith("autocast.linear.cached")]
    assert {b.group for b in copies} == {Group.AUTOCAST}
    assert {b.note.split()[0] for b in copies} == {"bfloat16"}
    assert sum(2 * _numel(b) for b in copies) == 2 * elements == 3_594_752
    p = predict(model, Shape(1, 1024, 2, 64))
    end_of_forward = max(i for i, s in enumerate(model.steps) if s.name.startswith("for."))
    live = {b.name for b, _ in p.live_at(end_of_forward)}
    assert all(b.allocated_at.startswith("for.") and b.name in live for b in copies)


@pytest.mark.parametrize("options, variant, readable", [
    ({"precision": "bf16"}, "-", "fla-kda-model"),
    ({"precision": "bf16", "packed": True}, "packed", "fla-kda-model (packed sequences)"),
    ({"precision": "fp32-amp"}, "-+fp32-amp", "fla-kda-model (fp32-amp)"),
    ({"precision": "fp32-amp", "packed": True}, "packed+fp32-amp", "fla-kda-model (packed sequences, fp32-amp)"),
])
def test_fp32_amp_is_a_process_case_of_its_own(options, variant, readable):
    """fp32 tensors reach the kernels: other specialisations, other modules than the bf16 process's records hold."""
    from livebytes.estimator.process.memory import _readable, case_variant
    assert case_variant(options) == variant
    assert _readable(f"fla-kda-model:{variant}") == readable


def test_fp32_amp_process_memory_names_what_it_borrows():
    """fp32-amp processes are measured at two KDA cases (run 28: H8 and H16, head_dim 128): at another case its modules
    are the family's largest figure and its stack limit the family's largest measured at this head dim (no fp32-amp case
    at D64; the bf16 models at D64: H16 19,376 B, H24 18,848), both estimated with their rules' leave-one-out errors (it was
    CUDA's 512 KiB cap, 141,457,096,704 B, before): 19,376 x 270,336 = 5,238,030,336 B -> 2,498 pages - 132 = 2,366
    pages = 4,961,861,632 B, the whole-model rule's high end (281,018,368 B) counted by the verdict."""
    from livebytes.estimator.process.memory import process_memory
    pm = process_memory(H200, tiny_model("fp32-amp"), "cold", Shape(1, 1024, 2, 64))
    assert status_words(pm.modules.status).startswith("estimated: not measured for fla-kda-model (fp32-amp) at head_dim=64 num_heads=2:")
    assert status_words(pm.stack.status).startswith("estimated: stack limit not measured for fla-kda-model (fp32-amp) at head_dim=64 "
                                      "num_heads=2: 19,376 B, the largest measured in the same model family at this head dim")
    assert (pm.stack_limit_bytes, pm.stack.bytes, pm.stack.margin) == (19_376, 4_961_861_632, 281_018_368)


def test_fp32_amp_costs_more_than_bf16(tiny_config):
    """The same step with fp32 parameters, gradients and states and the bf16 copies: a higher peak than bf16."""
    peaks = {}
    for precision in ("bf16", "fp32-amp"):
        r = runner.invoke(app, ["predict", "--model", str(tiny_config), "--seq", "1K", "--precision", precision, "--json"])
        assert r.exit_code == 0, r.output
        peaks[precision] = json.loads(r.stdout)["results"][0]["peak_bytes"]
    assert peaks["fp32-amp"] > peaks["bf16"]


# ------------------------------------------------------------------------------------------- the records

RECORDS = model_records.record_files()


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_model_record_every_figure(path):
    """Each figure of each committed model-step record, to the byte or at exactly its named miss: traced here, or
    through the traces stored for the record's torch and Triton (the GDN records' Triton 3.9.0, which fla-core 0.6.0
    needs for the gated backward on Hopper; run 28's fp32-amp records' torch 2.11)."""
    why = model_records.not_checkable_here(path)
    if why:
        pytest.skip(why)
    checks = model_records.check(path)
    assert checks and all(c.passed for c in checks), [(c.field, c.error, c.expected_error) for c in checks if not c.passed]


@pytest.mark.parametrize("model_type", ["kda", "gated_deltanet"])
def test_records_cover_what_the_issue_asks(model_type):
    """Four configurations of each model: hidden 1024-2048, 2-24 layers (run 39's 7B-class KDA model adds 32), vocab
    32K-152K, checkpointing on and off."""
    configs = [json.loads(p.read_text()) for p in RECORDS]
    ran = [c for c in configs if c["config"]["model_type"] == model_type and not any(s.get("oom") for s in c["steps"])]
    assert len({json.dumps(c["config"], sort_keys=True) for c in ran}) >= 4
    assert {c["options"]["checkpoint"] for c in ran} == {True, False}
    assert min(c["config"]["num_hidden_layers"] for c in ran) == 2 and max(c["config"]["num_hidden_layers"] for c in ran) >= 24
    assert max(c["config"]["vocab_size"] for c in ran) >= 150_000


@pytest.mark.parametrize("model_type,experts", [("qwen3_next", "num_experts"), ("kimi_linear", "num_local_experts")])
def test_hybrid_records_cover_issue_36(model_type, experts):
    """Issue 36 point 4: small configurations of both transformers models on the H200 (run 31), each 2-4 blocks with
    one full-attention layer and a few experts, 4K-32K tokens, AdamW; two configurations each."""
    ran = [json.loads(p.read_text()) for p in RECORDS]
    ran = [r for r in ran if r["config"]["model_type"] == model_type]
    assert len({json.dumps(r["config"], sort_keys=True) for r in ran}) >= 2
    for r in ran:
        c = r["config"]
        assert 2 <= c["num_hidden_layers"] <= 4 and _full_attention_layers(c) == 1
        assert (c.get(experts) or c["num_experts"]) <= 16     # the published Kimi config names them num_experts
        assert 4096 <= r["shape"]["seq"] <= 32768 and r["options"]["optimizer"] == "adamw"


def _full_attention_layers(c: dict) -> int:
    """How many of a hybrid config's layers are full attention: its layer_types, Kimi's published linear_attn_config
    (full_attn_layers, 1-based), or Qwen3-Next's full_attention_interval."""
    if c.get("layer_types"):
        return c["layer_types"].count("full_attention")
    if c.get("linear_attn_config"):
        return len(c["linear_attn_config"]["full_attn_layers"])
    return sum((i + 1) % c["full_attention_interval"] == 0 for i in range(c["num_hidden_layers"]))


@pytest.mark.parametrize("field,delta", [("max_allocated_bytes", 512), ("max_reserved_bytes", 2 << 20),
                                         ("requested_peak_bytes", 8)])
def test_an_edited_record_fails_at_the_field(field, delta, tmp_path):
    """A record edited in one figure fails there, named misses included (they pass only at exactly their size). Run 23's
    k1-packed: its reserved band is one figure wide (a 2 MiB edit leaves it)."""
    source = model_records.MODEL_RECORDS_DIR / "h200_run23_k1-packed.json"
    data = json.loads(source.read_text())
    data["steps"][1][field] += delta
    edited = tmp_path / source.name
    edited.write_text(json.dumps(data))
    failed = [c.field for c in model_records.check(edited) if not c.passed]
    assert failed == [f"steps[1].{field}"]


MODEL_EDITS = {"x2": lambda v: 2 * v, "x3": lambda v: 3 * v, "set to 1": lambda v: 1}
STEP_FIGURES = [("h200_run23_k1-packed.json", step, field) for step, field in [
    (0, "max_allocated_bytes"), (2, "max_allocated_bytes"), (0, "max_reserved_bytes"), (1, "max_reserved_bytes"),
    (1, "requested_peak_bytes"), (0, "stack_limit_bytes"), (2, "stack_limit_bytes"), (0, "allocated_after_bytes"),
    (2, "reserved_after_bytes")]] + [
    ("h200_run24_edge-1.3b-468519.json", 1, field)            # the step that ran out of memory
    for field in ("oom_request_bytes", "max_allocated_bytes", "reserved_bytes", "free_bytes", "total_bytes")]


@pytest.mark.parametrize("name,step,field", STEP_FIGURES + [("h200_run23_k1-packed.json", 1, "nonpytorch.bytes")] + [
    ("h200_run23_k1-packed.json", None, field) for field in ("total_memory", "before.allocated_bytes", "before.reserved_bytes")])
@pytest.mark.parametrize("edit", MODEL_EDITS)
def test_every_checked_model_figure_fails_when_edited(name, step, field, edit, tmp_path):
    """Doubled, tripled or set to 1, any checked figure of a model-step record fails, and only it, named."""
    data = json.loads((model_records.MODEL_RECORDS_DIR / name).read_text())
    holder = data if step is None else data["steps"][step]
    *parents, last = field.split(".")
    for key in parents:
        holder = holder[key]
    holder[last] = MODEL_EDITS[edit](holder[last])
    edited = tmp_path / name
    edited.write_text(json.dumps(data))
    failed = [c.field for c in model_records.check(edited) if not c.passed]
    assert failed == [field if step is None else f"steps[{step}].{field}"]


def test_the_context_reading_before_the_steps_fails_below_the_context_only(tmp_path):
    """before.context_nonpytorch is device-wide (other processes add to it): bounded from below by the CUDA context's
    measured figure (552,402,944 B on the H200), so 1 B fails and three times the reading does not."""
    name = "h200_run23_k1-packed.json"
    data = json.loads((model_records.MODEL_RECORDS_DIR / name).read_text())
    edited, reading = tmp_path / name, data["before"]["context_nonpytorch"]["bytes"]
    for value, failed in ((1, ["before.context_nonpytorch.bytes"]), (3 * reading, [])):
        data["before"]["context_nonpytorch"]["bytes"] = value
        edited.write_text(json.dumps(data))
        assert [c.field for c in model_records.check(edited) if not c.passed] == failed


def test_cli_validates_model_records():
    r = runner.invoke(app, ["validate", "--from-records", str(model_records.MODEL_RECORDS_DIR)])
    assert r.exit_code == 0, r.output
    assert "0 failed" in r.output


# ------------------------------------------------------------------------------------- two sources, one answer

def _triton_runs_gated_backward() -> bool:
    """fla-core 0.6.0 refuses the gated backward (GDN) on Hopper under Triton < 3.7.1; the tracer runs its checks."""
    from livebytes.lifetimes.traced.model import untraceable_here
    return untraceable_here("gated_deltanet") is None


# the GDN layer's traces made under Triton 3.9.0 (fla-core 0.6.0 refuses the gated backward on Hopper under < 3.7.1),
# read where this machine cannot trace it: made by ``python -m livebytes.validate.gpu.traced_harness SPEC`` in a virtual
# environment with triton 3.9.0, gzipped under the digest of SPEC (``_layer_spec``)
LAYER_TRACE_STORE = Path(model_records.MODEL_RECORDS_DIR).parent / "layer_traces" / "triton-3.9.0"
LAYER_RECORDS = [pytest.param(r, id=f"{r.impl} {r.shape.label()}")
                 for r in load_records() if r.impl in ("fla-kda-layer@0.6.0", "fla-gdn-layer@0.6.0")
                 and r.origin == "measured"]


def _layer_spec(record) -> dict:
    sh = record.shape
    fields = "".join(f",{k}={('on' if v else 'off') if isinstance(v, bool) else v}" for k, v in sh.layer_fields().items())
    hv = f",hv={sh.hv}" if sh.hv != sh.heads else ""
    return {"impl": record.impl, "device": "H200", "shapes": [f"{sh.mbs},{sh.seq},{sh.heads},{sh.dim}{hv}{fields}"],
            "steps": 3}


def _layer_trace(spec: dict) -> dict:
    """The harness traced here, or (the GDN layer where this Triton refuses it) read from the store."""
    name = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16] + ".json.gz"
    if "gdn" in spec["impl"] and not _triton_runs_gated_backward():
        path = LAYER_TRACE_STORE / name
        assert path.is_file(), f"no stored GDN layer trace {path}"
        return json.loads(gzip.open(path, "rt").read())
    with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
        json.dump(spec, fh)
        fh.flush()
        out = subprocess.run([sys.executable, "-m", "livebytes.validate.gpu.traced_harness", fh.name], capture_output=True,
                             text=True, check=True).stdout
    return json.loads(out)


def _traced_layer(record):
    """The layer record's harness run through the tracer (the GPU runner's harness, unchanged)."""
    from livebytes.lifetimes.traced.build import traced_model
    from livebytes.lifetimes.traced.calls import unify
    trace = _layer_trace(_layer_spec(record))["traces"][0]
    return traced_model(unify(trace), H200.sm_count, key="traced", implementation="traced", version="0.6.0", summary="")


@pytest.mark.parametrize("record", LAYER_RECORDS)
def test_layer_records_replay_the_same_through_both_sources(record):
    """The hand-declared layer model and the traced layer: the same steady peak, and the same cold first call and
    steady calls, allocated and reserved, as the record's process runs them."""
    sh = record.shape
    hand = get_model(record.impl, **sh.layer_fields(), **({"gva": True} if sh.hv != sh.heads else {}))
    traced = _traced_layer(record)
    assert predict(traced, sh).peak_bytes == predict(hand, sh).peak_bytes

    def runs(m):
        r = replay(m, sh, warm_steps=0, measured_steps=3, empty_cache_after_warmup=False,
                   benchmarks=cold_benchmarks(m, sh, "cold"))
        return r.peaks, r.reserved_peaks
    assert runs(traced) == runs(hand)


# ----------------------------------------------------------------------------------------------- the CLI

def test_predict_model_json(tiny_config):
    r = runner.invoke(app, ["predict", "--model", str(tiny_config), "--seq", "1K", "--json"])
    assert r.exit_code == 0, r.output
    (d,) = json.loads(r.stdout)["results"]
    assert d["impl"] == "fla-kda-model@0.6.0" and d["shape"]["num_heads"] == 2 and d["shape"]["head_dim"] == 64
    assert sum(m["total"] for m in d["module_bytes"].values()) == d["peak_bytes"]
    assert {"model.embeddings", "lm_head", "model.layers.1.attn", "model.layers.1.mlp"} <= set(d["module_bytes"])
    assert d["fits"] is True


@pytest.mark.parametrize("args,line", [
    (["--impl", "fla-kda@0.6.0"], "--impl and --model: give one"),
    (["--heads", "4"], "--num-heads has no effect with --model"),
    (["--precision", "fp16"], "option precision='fp16' not supported (choose from bf16, fp32-amp)"),
    (["--optimizer", "adam"], "option optimizer='adam' not supported"),
    (["--hidden", "512"], "--hidden-size has no effect with --model"),
    (["--v-heads", "4"], "--num-v-heads has no effect with --model"),
    (["--expand-v", "2"], "--expand-v has no effect with --model"),
    (["--cp-layout", "zigzag"], "--cp-layout has no effect with --model"),     # --cp itself: tests/test_cp_ep.py
    (["--ep", "2"], "--ep 2: the model has no routed experts"),
    (["--layers", "5000"], "a traced model expands up to 1,024"),
])
def test_model_flags_refused_in_one_line(tiny_config, args, line):
    r = runner.invoke(app, ["predict", "--model", str(tiny_config), "--seq", "1K", *args])
    assert r.exit_code in (1, 2) and line in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("flag", [["--optimizer", "sgd"], ["--packed"], ["--precision", "bf16"]])
def test_model_flags_need_model(flag):
    r = runner.invoke(app, ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "16", *flag])
    assert r.exit_code == 2 and "without --model" in r.output


@pytest.mark.parametrize("content,line", [
    ("{", "not valid JSON"), ("[]", "a config is a JSON object"), ('{"model_type": "llama"}', "is not traced"),
    ('{"model_type": "kda", "num_hidden_layers": 0}', "num_hidden_layers must be an integer from 1 to 4096"),
    ('{"model_type": "kda", "hidden_size": -1}', "hidden_size must be a positive integer"),
    ('{"model_type": "kda", "head_dim": null}', "head_dim is null: give a positive integer (at most 2^50) or leave it out"),
    ('{"model_type": "kimi_linear", "qk_nope_head_dim": null}', "qk_nope_head_dim is null"),
    ('{"model_type": "qwen3_next", "linear_key_head_dim": 0}', "linear_key_head_dim must be a positive integer"),
])
def test_bad_configs_one_line(tmp_path, content, line):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(LivebytesError, match=re.escape(line)):
        read_config(str(path))
    r = runner.invoke(app, ["predict", "--model", str(path), "--seq", "1K"])
    assert r.exit_code == 1 and "Traceback" not in r.output


def test_no_impl_no_model_is_a_usage_error():
    r = runner.invoke(app, ["predict", "--seq", "1K"])
    assert r.exit_code == 2 and "--model CONFIG.json" in r.output


def test_the_compiled_model_is_cached_per_environment(tiny_config):
    """The registry's compiled model: a second ask is the disk cache's (the options carry the environment)."""
    key, options = options_for(read_config(str(tiny_config)))
    a = get_compiled(key, H200, **options)
    b = get_compiled(key, H200, **options)
    assert a.buffers == b.buffers and "environment" in options


def test_an_unknown_environment_is_refused():
    key, options = options_for(canonical_config(dict(TINY)))
    with pytest.raises(LivebytesError, match="other library versions"):
        get_model(key, H200, **dict(options, environment='["other"]'))




GDN_TINY = {"model_type": "gated_deltanet", "hidden_size": 256, "num_hidden_layers": 1, "num_heads": 2, "head_dim": 64,
            "vocab_size": 1000}


@pytest.mark.parametrize("extra,line", [
    ({}, "FusedCrossEntropyLoss (the config's fuse_cross_entropy, GatedDeltaNet's default) asserts CUDA inputs"),
    ({"fuse_cross_entropy": False, "fuse_linear_cross_entropy": True},
     "refuses the gated backward on Hopper under Triton < 3.7.1"),
])
def test_what_the_library_refuses_is_said_in_one_line(tmp_path, extra, line):
    """The GDN model on this CI's Triton 3.6.0: its default loss asserts CUDA tensors, its backward refuses Hopper below
    Triton 3.7.1 (fla-core 0.6.0's own checks, run by the tracer): one line each, exit 1."""
    if _triton_runs_gated_backward() and extra:
        pytest.skip("this Triton runs the GDN backward")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(GDN_TINY, **extra)))
    r = runner.invoke(app, ["predict", "--model", str(path), "--seq", "1K"])
    assert r.exit_code == 1 and line in r.output and "Traceback" not in r.output, r.output


def test_timeline_of_a_whole_model_is_a_row_per_phase_and_module(tiny_config):
    """A whole model's ~700 steps read as one row per phase and module run; the peak's row is marked, and its bytes
    are the peak's."""
    from livebytes.report import TIMELINE_ROWS, timeline_rows
    model = tiny_model()
    p = predict(model, Shape(1, 1024, 2, 64))
    rows = timeline_rows(p)
    assert len(model.steps) > TIMELINE_ROWS > len(rows)
    assert [i for _, i in rows].count(p.peak_index) == 1
    assert max(p.step_bytes[i] for _, i in rows) == p.peak_bytes
    r = runner.invoke(app, ["timeline", "--model", str(tiny_config), "--seq", "1K"])
    assert r.exit_code == 0 and "bac.model.layers.1.attn (" in r.output, r.output


def test_every_buffer_cites_a_line_of_the_installed_library():
    """Each traced buffer names the library line that makes it: parameters torch's ``Module._apply`` (the ``.to``
    that moves them), the batch the model's ``forward`` (the entry point it is the input of), every other allocation
    its innermost library frame, the GPU's own buffers the rule's cited line."""
    model = tiny_model()
    missing = [b.name for b in model.buffers if not (b.source.line > 0 and b.source.quote)]
    assert not missing, missing[:5]
    params = {b.source.function for b in model.buffers if b.group is Group.PARAMETERS}
    assert params == {"_apply"}
    assert {b.source.file for b in model.buffers if b.group is Group.INPUTS} == {"fla/models/kda/modeling_kda.py"}

"""The by-module table a person reads (issue 50, point 4): repeated blocks one row (``model.layers.0-23 (x24)``), the
tree cut at ``--depth``, modules under 1 MiB folded into their parent (``estimator/module_view.py``); the tensor each
buffer was as the trace saw it (``[MBS, S, vocab] fp32``); a fused loss's weight gradient booked with the parameter
gradients under its module; any terminal width. Expected rows and tables are written out by hand beside their
arithmetic."""
import io
import json
import re
from types import SimpleNamespace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from livebytes.cli import render
from livebytes.cli.app import app
from livebytes.cli.commands import predict as predict_cli
from livebytes.estimator.groups import Group
from livebytes.estimator.module_view import FOLD_BELOW, ModuleRow, index_text, module_view, segments
from livebytes.lifetimes.traced.build import dim_names, gradient_owner, group_of, tensor_of
from livebytes.lifetimes.traced.calls import Alloc

MiB = 1 << 20
P, G, S, W, IN = (Group.PARAMETERS, Group.PARAM_GRADS, Group.OPTIMIZER_STATES, Group.WORKSPACE, Group.INPUTS)

# three layers alike but for a 32 MiB workspace in layer 0's attn and layer 2's mlp; each layer's norm 4 KiB
STACK = {
    "model.embeddings": {P: 10 * MiB, S: 20 * MiB},
    **{k: v for n in range(3) for k, v in {
        f"model.layers.{n}.attn_norm": {P: 4096},
        f"model.layers.{n}.attn": {P: 8 * MiB, **({W: 32 * MiB} if n == 0 else {})},
        f"model.layers.{n}.mlp": {P: 16 * MiB, **({W: 32 * MiB} if n == 2 else {})},
    }.items()},
    "model.norm": {P: 4096},
    "lm_head": {P: 10 * MiB, G: 10 * MiB},
    "(none)": {IN: 1024},
}


def row(label, level, nbytes, members=1, each=None, folded=0):
    return (label, level, nbytes, members, each, folded)


def rows_of(view) -> list[tuple]:
    return [(r.label, r.level, r.bytes, r.members, r.each, r.folded) for r in view.rows]


# a layer: 8 + 16 MiB and 4 KiB of norm, layers 0 and 2 32 MiB more: 24 MiB + 4096 (layer 1) .. 56 MiB + 4096
LAYER_LOW, LAYER_HIGH = 24 * MiB + 4096, 56 * MiB + 4096
LAYERS = 3 * 24 * MiB + 2 * 32 * MiB + 3 * 4096          # 136 MiB + 12,288 B
SMALL = 4096 + 1024                                          # model.norm and the batch (no module)
CASES = {
    "stack, depth 1": (STACK, 1, [
        row("model.embeddings", 0, 30 * MiB),
        row("model.layers.0-2 (x3)", 0, LAYERS, 3, (LAYER_LOW, LAYER_HIGH)),
        row("lm_head", 0, 20 * MiB),
        row("2 smaller modules", 0, SMALL, folded=2),
    ], 2),
    "stack, depth 2: attn and mlp under the layers, the three attn_norms folded": (STACK, 2, [
        row("model.embeddings", 0, 30 * MiB),
        row("model.layers.0-2 (x3)", 0, LAYERS, 3, (LAYER_LOW, LAYER_HIGH)),
        row(".attn", 1, 3 * 8 * MiB + 32 * MiB, 3, (8 * MiB, 40 * MiB)),     # 56 MiB
        row(".mlp", 1, 3 * 16 * MiB + 32 * MiB, 3, (16 * MiB, 48 * MiB)),    # 80 MiB
        row("lm_head", 0, 20 * MiB),
        row("2 smaller modules", 0, SMALL, folded=2),
    ], 3 + 2),
    "hybrid 3:1 at depth 1, grouped by structure, not by place": ({
        f"model.layers.{n}.{'self_attn' if n % 4 == 3 else 'linear_attn'}": {P: 2 * MiB} for n in range(12)}, 1, [
        row("model.layers.0-2,4-6,8-10 (x9)", 0, 9 * 2 * MiB, 9, (2 * MiB, 2 * MiB)),
        row("model.layers.3,7,11 (x3)", 0, 3 * 2 * MiB, 3, (2 * MiB, 2 * MiB)),
    ], 0),
    "hybrid 3:1, four periods: the middle runs elided": ({
        f"model.layers.{n}.{'self_attn' if n % 4 == 3 else 'linear_attn'}": {P: 2 * MiB} for n in range(16)}, 2, [
        row("model.layers.0-2,4-6,..,12-14 (x12)", 0, 12 * 2 * MiB, 12, (2 * MiB, 2 * MiB)),
        row(".linear_attn", 1, 12 * 2 * MiB, 12, (2 * MiB, 2 * MiB)),
        row("model.layers.3,7,..,15 (x4)", 0, 4 * 2 * MiB, 4, (2 * MiB, 2 * MiB)),
        row(".self_attn", 1, 4 * 2 * MiB, 4, (2 * MiB, 2 * MiB)),
    ], 0),
    "experts inside a stack, depth 3": ({
        f"model.layers.{n}.mlp.experts.{e}": {P: (e + 1) * MiB} for n in range(2) for e in range(3)}, 3, [
        row("model.layers.0-1 (x2)", 0, 2 * (1 + 2 + 3) * MiB, 2, (6 * MiB, 6 * MiB)),
        row(".mlp", 1, 12 * MiB, 2, (6 * MiB, 6 * MiB)),
        row(".experts.0-2 (x3)", 2, 12 * MiB, 6, (1 * MiB, 3 * MiB)),
    ], 0),
    "no stack: each module its own row, in the model's order": ({
        "model.embed_tokens": {P: 3 * MiB}, "model.norm": {P: 2 * MiB}, "lm_head": {P: 5 * MiB}}, 2, [
        row("model.embed_tokens", 0, 3 * MiB), row("model.norm", 0, 2 * MiB), row("lm_head", 0, 5 * MiB),
    ], 0),
}


@pytest.mark.parametrize("name", CASES)
def test_module_rows(name):
    by_module, depth, expected, folded = CASES[name]
    view = module_view(by_module, depth)
    assert rows_of(view) == expected
    assert view.folded == folded
    # the top rows hold every byte: folded modules count in their parent's row or the last row
    assert sum(r.bytes for r in view.rows if r.level == 0) == view.total == sum(sum(g.values()) for g in by_module.values())


def test_a_rows_groups_are_its_members_summed_largest_first():
    (_, layers, attn, *_) = module_view(STACK, 2).rows
    assert layers.groups == ((P, 3 * 24 * MiB + 3 * 4096), (W, 64 * MiB))     # 72 MiB + 12,288 B of parameters
    assert attn.groups == ((W, 32 * MiB), (P, 24 * MiB))                        # layer 0's workspace first


def test_depth_below_one_is_refused():
    with pytest.raises(ValueError, match="depth must be 1 or more"):
        module_view(STACK, 0)


@pytest.mark.parametrize("path,expected", [
    ("model.layers.3.attn.q_proj", ("model", "layers.3", "attn", "q_proj")),
    ("model.layers.3.attn.g_proj.1", ("model", "layers.3", "attn", "g_proj.1")),
    ("lm_head", ("lm_head",)),
    ("", ("(none)",)),
])
def test_segments_keep_an_index_on_its_container(path, expected):
    assert segments(path) == expected


@pytest.mark.parametrize("indices,text", [
    (list(range(24)), "0-23"),
    ([5], "5"),
    ([6, 4, 5, 0, 1, 2], "0-2,4-6"),
    ([3, 7, 11], "3,7,11"),                     # three runs: each spelled out
    ([3, 7, 11, 15], "3,7,..,15"),              # four: the first two, '..', the last
])
def test_index_text(indices, text):
    assert index_text(indices) == text


# ------------------------------------------------------------------------------------------ the rendered table

def rendered(table, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False, legacy_windows=False)
    old, render.console = render.console, console
    try:
        render.show(table)
    finally:
        render.console = old
    return console.file.getvalue()


def stack_table(depth: int = 2, forward_gradients=None):
    pred = SimpleNamespace(module_paths=STACK, forward_gradients=forward_gradients or {})
    return predict_cli.module_table(pred, depth)


# 30 MiB = 0.029 GiB; 136 MiB + 12 KiB = 0.133; 56 MiB = 0.055; 80 MiB = 0.078; 20 MiB = 0.020; 5 KiB prints 0.000
STACK_80 = "\n".join(line.ljust(79) for line in """\
at the peak, by module
┏━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ module                ┃   GiB ┃ of which (GiB)                              ┃
┡━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ model.embeddings      │ 0.029 │ optimizer states 0.020, parameters 0.010    │
│ model.layers.0-2 (x3) │ 0.133 │ parameters 0.070, other workspace 0.062     │
│   each 0.023-0.055    │       │                                             │
│   .attn               │ 0.055 │ other workspace 0.031, parameters 0.023     │
│     each 0.008-0.039  │       │                                             │
│   .mlp                │ 0.078 │ parameters 0.047, other workspace 0.031     │
│     each 0.016-0.047  │       │                                             │
│ lm_head               │ 0.020 │ parameters 0.010, parameter gradients 0.010 │
│ 2 smaller modules     │ 0.000 │ -                                           │
└───────────────────────┴───────┴─────────────────────────────────────────────┘
depth 2 (--depth N); 5 modules under 1 MiB folded into their parent
lm_head's gradient (0.010 GiB) is made in the forward: the fused loss computes
it with the loss, chunk by chunk; kept to zero_grad
""".splitlines()) + "\n"   # rich draws it 79 wide


def test_the_stack_table_at_80_columns():
    assert rendered(stack_table(2, {"lm_head": 10 * MiB}), 80) == STACK_80


@pytest.mark.parametrize("width", [1, 8, 20, 40, 60, 80, 120, 200, 1000, 100_000])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_any_width_cuts_nothing(width, depth):
    """Too narrow for its labels, the table stacks (``render.vertical``), and below a label's own length the label
    folds across lines; wider, it is drawn: nothing is cut, no line is wider than the console."""
    text = rendered(stack_table(depth), width)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
    labels = ["model.embeddings", "model.layers.0-2 (x3)", "lm_head", "2 smaller modules", "0.133"]
    labels += [".attn", ".mlp", "each 0.008-0.039"] if depth > 1 else []
    flat = re.sub(r"\s", "", text)
    for label in labels:
        assert (label in text) if width >= 40 else (re.sub(r"\s", "", label) in flat), (label, text)


# ------------------------------------------------------------------------------------------- the traced buffers

def alloc(module: str, phase: str, dtype="bfloat16", shape=(1000, 256), op="aten._to_copy.default", freed=None,
          param=None, kind="steady"):
    return Alloc(1, 2 * 1000 * 256, dtype, shape, op, (), module, phase, "main", kind=kind, param=param, freed_phase=freed)


EMBEDDING = alloc("model.embeddings", "harness", op="model.to(device)", param="model.embeddings.weight", kind="harness")
HEAD = alloc("lm_head", "harness", op="model.to(device)", param="lm_head.weight", kind="harness")
LOSS_GRAD = alloc("KDAForCausalLM.FusedLinearCrossEntropyLoss", "forward", freed="zero_grad")


def test_a_gradient_the_fused_loss_makes_is_a_parameter_gradient_of_the_lm_head():
    assert group_of(LOSS_GRAD, "zero_grad") is Group.PARAM_GRADS
    assert group_of(alloc(LOSS_GRAD.module, "forward", freed="forward"), "forward") is Group.LOSS    # its logits
    assert gradient_owner(LOSS_GRAD, [EMBEDDING, HEAD]) == "lm_head"      # untied: both [1000, 256] bf16
    assert gradient_owner(LOSS_GRAD, [EMBEDDING]) == "model.embeddings"   # tied: the one weight of its shape
    other = alloc(LOSS_GRAD.module, "forward", shape=(7, 7), freed="zero_grad")
    assert gradient_owner(other, [EMBEDDING, HEAD]) == LOSS_GRAD.module  # no weight of its shape: where it was made


@pytest.mark.parametrize("config,names", [
    ({"vocab_size": 32000, "hidden_size": 2048}, {"32000": "vocab"}),
    ({"vocab_size": 2048, "hidden_size": 2048}, {}),         # two fields hold 2048: a number, not a name
    ({"hidden_size": 2048}, {}),
])
def test_dim_names(config, names):
    assert dim_names(config) == names


@pytest.mark.parametrize("dtype,shape,tensor", [
    ("float32", "[MBS, S, 32000]", "[MBS, S, vocab] fp32"),
    ("bfloat16", "[T, 5632]", "[T, 5632] bf16"),
    ("int64", "[]", "[] int64"),
    ("bfloat16", "chunk 0 of fused_linear_cross_entropy_fwd: 64000*C + 0 bytes",
     "bf16, chunk 0 of fused_linear_cross_entropy_fwd: 64000*C + 0 bytes"),
])
def test_tensor_of(dtype, shape, tensor):
    a = SimpleNamespace(dtype=dtype, shape_text=shape)
    assert tensor_of(a, {"32000": "vocab"}) == tensor


# ------------------------------------------------------------------------- a traced model through the CLI (traces)

TINY = {"model_type": "kda", "hidden_size": 256, "num_hidden_layers": 24, "num_heads": 2, "head_dim": 64,
        "vocab_size": 1000}


@pytest.fixture(scope="module")
def tiny_24(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_text(json.dumps(TINY))
    return path


def cli_at(width: int, *args) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False, legacy_windows=False)
    old, render.console = render.console, console
    try:
        r = CliRunner().invoke(app, list(args))
    finally:
        render.console = old
    assert r.exit_code == 0, r.output
    return console.file.getvalue()


def by_module_section(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("at the peak, by module")))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("max_memory_allocated"))
    return lines[start:end]


def test_a_24_layer_model_fits_one_screen(tiny_24):
    text = cli_at(80, "predict", "--model", str(tiny_24), "--seq-len", "1K", "--checkpoint")
    section = by_module_section(text)
    assert len(section) <= 24, "\n".join(section)
    assert any("model.layers.0-23 (x24)" in line for line in section)
    assert not any("_norm" in line for line in section)                 # 4 KiB norms: folded into their layer
    assert "lm_head.weight [vocab,256] bf16" in text                    # was [512000] uint8
    assert "lm_head's gradient" in "\n".join(section)


def test_the_lm_heads_gradient_is_with_the_gradients_in_json(tiny_24):
    r = CliRunner().invoke(app, ["predict", "--model", str(tiny_24), "--seq-len", "1K", "--checkpoint", "--json"])
    (d,) = json.loads(r.stdout)["results"]
    head = d["module_bytes"]["lm_head"]
    # vocab 1000 x hidden 256 x 2 B = 512,000 B, a 512-B multiple: the weight, its gradient, each AdamW state alike
    assert head["parameters"] == head["param_grads"] == 512_000 and "loss" not in d["group_bytes"]
    tensors = {b["name"]: b["tensor"] for b in d["buffers_at_peak"]}
    assert tensors["lm_head.weight"] == "[vocab, 256] bf16" and tensors["batch.to(device)"] == "[MBS, S] int64"


@pytest.mark.parametrize("depth,levels", [(1, {0}), (2, {0, 1}), (3, {0, 1, 2})])
def test_depth_flag(tiny_24, depth, levels):
    section = by_module_section(cli_at(200, "predict", "--model", str(tiny_24), "--seq-len", "1K", "--checkpoint",
                                       "--depth", str(depth)))
    cells = [line.split("│")[1] for line in section if line.startswith("│")]
    shown = {(len(c) - len(c.lstrip()) - 1) // len(predict_cli.INDENT) for c in cells if c.strip()
             and not c.strip().startswith("each ")}
    assert shown == levels


def test_depth_0_is_refused():
    r = CliRunner().invoke(app, ["predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "32", "--depth", "0"])
    assert r.exit_code == 2 and re.search(r"--depth", r.output)


def test_fold_below_is_one_mib():
    assert FOLD_BELOW == MiB and ModuleRow("x", 0, 0, ()).members == 1


@pytest.mark.parametrize("width", [12, 30, 80, 1000])
def test_the_whole_answer_at_any_width(tiny_24, width):
    """predict --model's whole answer, narrow and wide: nothing cut, no line past the console but a suggested command
    (a line of its own after a colon, render.with_commands)."""
    text = cli_at(width, "predict", "--model", str(tiny_24), "--seq-len", "1K", "--checkpoint")
    lines = text.splitlines()
    assert "…" not in text and "runs" in text
    wider = [i for i, line in enumerate(lines) if len(line) > width]
    assert all(lines[i].startswith("livebytes ") and lines[i - 1].rstrip().endswith(":") for i in wider), wider
    assert re.sub(r"\s", "", "model.layers.0-23 (x24)") in re.sub(r"\s", "", text)

"""FSDP2 on the traced step (issue 36 point 2, ``lifetimes/traced/fsdp.py``): the shard rules by hand, world size 1
against the unsharded step (only FSDP2's named buffers differ), --fsdp and plan --solve gpus on the command line, and
every bad world size in one line.

The traced model is ``test_traced_model``'s TINY KDA (2 layers, hidden 256, vocab 1,000): traced once into the model
cache, shared with those tests."""
import json
from pathlib import Path

import jsonschema
import pytest
import torch
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator.buffers import Buffer, Source
from livebytes.estimator.engine import predict
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.groups import Group
from livebytes.estimator.shapes import Shape
from livebytes.lifetimes.traced.fsdp import ROOT, Param, padded_shard_numel, scaled, shard_bytes, shard_rows, unit_of

from .test_bad_inputs import one_line, run
from .test_traced_model import TINY, tiny_model

runner = CliRunner()

# the toy unit: a [10, 4] weight, a [3] bias and a 0-dim scale, all bf16 (2 B an element)
TOY = [Param("w", (10, 4), 2), Param("b", (3,), 2), Param("s", (), 2)]


@pytest.mark.parametrize("world,rows,expected", [
    (1, (10, 3, 1), 88),    # 10*4*2 + 3*2 + 1*2 = 80 + 6 + 2
    (2, (5, 2, 1), 46),     # ceil(10/2)=5 rows: 5*4*2 = 40; ceil(3/2)=2: 4; the scalar is one row: 2
    (3, (4, 1, 1), 36),     # ceil(10/3)=4: 4*4*2 = 32; ceil(3/3)=1: 2; 2
    (8, (2, 1, 1), 20),     # ceil(10/8)=2: 2*4*2 = 16; ceil(3/8)=1: 2; 2
])
def test_a_units_padded_shards_by_hand(world, rows, expected):
    assert tuple(shard_rows(p.shape[0] if p.shape else 1, world) for p in TOY) == rows
    assert shard_bytes(TOY, world) == expected


@pytest.mark.parametrize("world", [1, 2, 3, 7, 8, 16])
@pytest.mark.parametrize("shape", [(10, 4), (3,), (1000, 256), (2816, 1024), (8,)])
def test_rank_0s_padded_shard_is_torch_chunks_first_chunk(world, shape):
    """FSDP2 pads every shard to ``torch.chunk(param, W, dim=0)[0]`` (_fsdp_param.py:387): torch itself says so."""
    assert padded_shard_numel(Param("p", shape, 2), world) == torch.chunk(torch.empty(shape), world, dim=0)[0].numel()


def test_the_all_gather_of_the_toy_is_w_padded_shards():
    # W=3: 3 x 36 = 108 B gathered for 88 B of parameters: 20 B of padding (w: 12 rows for 10, b: 3 for 3, s: 3 for 1)
    assert 3 * shard_bytes(TOY, 3) == 108 == 88 + (12 - 10) * 8 + (3 - 3) * 2 + (3 - 1) * 2


@pytest.mark.parametrize("path,unit", [("model.layers.12.attn.q_proj", "model.layers.12"), ("model.layers.3", "model.layers.3"),
                                       ("model.embeddings", ROOT), ("lm_head", ROOT), ("model.layers_norm", ROOT),
                                       ("", ROOT), ("KDAForCausalLM.FusedLinearCrossEntropyLoss", ROOT)])
def test_a_module_belongs_to_its_decoder_block_or_the_root(path, unit):
    assert unit_of(path) == unit


def _opt_buffer(nbytes: int) -> Buffer:
    return Buffer("opt.w.zeros_like", Group.OPTIMIZER_STATES, (nbytes,), "uint8", Source("x", "f"), "s", cached=True)


@pytest.mark.parametrize("nbytes,world,expected", [
    (80, 3, 32),     # exp_avg of w (40 elements, 2 B): 2 B x rank 0's 4 rows x 4 = 32
    (160, 3, 64),    # an fp32 state of w: 4 B x 16 elements
    (80, 1, 80),     # one rank: the whole parameter
    (4, 3, 4),       # a step counter is no multiple of w's 40 elements: kept
])
def test_an_optimizer_buffer_is_made_on_the_shard(nbytes, world, expected):
    assert int(scaled(_opt_buffer(nbytes), TOY[0], world).nbytes) == expected


# ------------------------------------------------------------------------------------------ on the traced model

SHAPE = Shape(1, 2048, 2, 64)


@pytest.fixture(scope="module")
def unsharded():
    return tiny_model()


@pytest.fixture(scope="module")
def world_1():
    return tiny_model(fsdp=1)


def _live(model, pred) -> dict[str, int]:
    """Step name -> live bytes (block-rounded)."""
    return {s.name: n for s, n in zip(model.steps, pred.step_bytes)}


def test_world_size_1_differs_from_the_unsharded_step_only_by_fsdp2s_named_buffers(unsharded, world_1):
    base = {b.name: b for b in unsharded.buffers}
    mine = {b.name: b for b in world_1.buffers}
    for name, b in base.items():         # W=1: every shard is its parameter, every optimizer buffer its own size
        assert mine[name].nbytes == b.nbytes, name
    moved = {n for n, b in base.items() if mine[n].freed_after != b.freed_after}
    assert moved and all(base[n].group in (Group.PARAM_GRADS, Group.LOSS) for n in moved)
    assert all(mine[n].freed_after.endswith(".reduce_scatter_input") for n in moved)   # freed at the post-backward
    added = [b for n, b in mine.items() if n not in base]
    assert added and all(b.name.startswith("fsdp.") for b in added)
    assert {b.group for b in added} == {Group.FSDP_GATHER, Group.FSDP_REDUCE, Group.PARAM_GRADS}
    # at every traced step: the sharded step's live bytes are the unsharded step's, plus FSDP2's live buffers, less
    # the gradients it frees early
    p0, p1 = predict(unsharded, SHAPE), predict(world_1, SHAPE)
    live0, live1 = _live(unsharded, p0), _live(world_1, p1)
    by_name = dict(zip((b.name for b in world_1.buffers), p1.buffer_bytes))
    index, index0 = world_1.step_positions(), unsharded.step_positions()
    for step in live0:
        i, i0 = index[step], index0[step]
        extra = sum(by_name[b.name] for b in added if i in world_1.live_range(b, index))
        early = sum(by_name[n] for n in moved if i not in world_1.live_range(mine[n], index)
                    and i0 in unsharded.live_range(base[n], index0))
        assert live1[step] - live0[step] == extra - early, step


def test_world_size_1_holds_the_roots_unsharded_parameters_through_the_forward(world_1):
    # the root's parameters: embeddings and lm_head 1,000 x 256 x 2 B = 512,000 B each, the final norm 256 x 2 = 512 B
    pred = predict(world_1, SHAPE)
    first = next(i for i, s in enumerate(world_1.steps) if s.name.startswith("for.model.embeddings"))
    assert pred.groups_at(first)[Group.FSDP_GATHER] == 512_000 + 512_000 + 512


def test_three_ranks_shard_the_embedding_by_hand():
    m = tiny_model(fsdp=3)
    sizes = {b.name: b.nbytes for b in m.buffers}
    assert sizes["model.embeddings.weight"] == 171_008          # ceil(1000/3) = 334 rows x 256 x 2 B
    # the root's flat all-gather output: 3 x (embeddings 171,008 + lm_head 171,008 + the norm's ceil(256/3) = 86 x 2)
    assert sizes["fsdp.root.for.all_gather_output"] == 3 * (171_008 + 171_008 + 172) == 1_026_564
    assert dict(m.options)["fsdp"] == 3


def test_two_ranks_keep_one_all_gather_behind_in_the_forward_and_prefetch_one_ahead_in_the_backward():
    m = tiny_model(fsdp=2)
    L0, L1 = "model.layers.0", "model.layers.1"
    size = {b.name: b.nbytes for b in m.buffers}
    params = [b for b in m.buffers if b.group is Group.PARAMETERS]
    for unit in (ROOT, L0, L1):       # a unit's flat all-gather output is W x its padded shards, as its sharded params
        assert size[f"fsdp.{unit}.for.all_gather_output"] == 2 * sum(size[b.name] for b in params if unit_of(b.name) == unit)
    root = {f"fsdp.for.unsharded.{b.name}" for b in params if unit_of(b.name) == ROOT}
    index = m.step_positions()

    def unsharded(unit: str, pass_: str) -> set:
        return {f"fsdp.{pass_}.unsharded.{b.name}" for b in params if unit_of(b.name) == unit}

    def live(step: str) -> set:
        return {b.name for b in m.buffers if b.name.startswith("fsdp.") and index[step] in m.live_range(b, index)}
    flat = "fsdp.{}.{}.all_gather_output".format
    # forward: block 1's all-gather beside block 0's flat output (freed at block 1's copy-out, _fsdp_param_group.py:363);
    # block 0's unsharded parameters already resharded; the root's held
    assert live("for.fsdp.model.layers.1.all_gather") == root | {flat(L0, "for"), flat(L1, "for")}
    assert live("for.fsdp.model.layers.1.copy_out") == root | {flat(L1, "for")} | unsharded(L1, "for")
    # backward: the root's pre-backward prefetched block 1; its copy-out frees that flat output after it; then block
    # 0's prefetch (one deep, :634-647)
    assert live("bac.fsdp.model.layers.1.copy_out") == root | {flat(L1, "bac")} | unsharded(L1, "bac")
    assert live("bac.fsdp.model.layers.0.all_gather") == root | unsharded(L1, "bac") | {flat(L0, "bac")}
    # block 1's post-backward: resharded, its gradients in the reduce-scatter input and the sharded output
    assert live("bac.fsdp.model.layers.1.reduce_scatter_output") == root | {flat(L0, "bac"), f"fsdp.{L1}.reduce_scatter_input",
                                                                           f"fsdp.{L1}.sharded_grads"}


@pytest.mark.parametrize("value,phrase", [(2.0, "fsdp=2.0 is not a whole number from 1 to 65,536"),
                                          (True, "fsdp=True is not a whole number"), (0, "fsdp=0 is not a whole number"),
                                          (-1, "fsdp=-1 is not a whole number"), (65_537, "fsdp=65537 is not a whole")])
def test_the_library_refuses_a_world_size_that_is_no_whole_number_of_ranks(value, phrase):
    with pytest.raises(LivebytesError, match=phrase):
        tiny_model(fsdp=value)


# ------------------------------------------------------------------------------------------ the command line

@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_text(json.dumps(TINY))
    return str(path)


SCHEMAS = Path(__file__).parents[1] / "docs" / "schema"


def _json(*args) -> dict:
    """The command's --json, checked against its committed schema (docs/schema/<command>.json)."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    jsonschema.validate(data, json.loads((SCHEMAS / f"{args[0]}.json").read_text()))
    return data


def test_predict_fsdp_says_its_world_size_and_that_it_is_unvalidated(tiny_config):
    r = _json("predict", "--model", tiny_config, "--seq-len", "2K", "--fsdp", "2")["results"][0]
    assert r["options"]["fsdp"] == 2
    assert r["fsdp"]["world_size"] == 2 and r["fsdp"]["rank"] == 0 and r["fsdp"]["validated"] is False
    assert "unvalidated" in r["fsdp"]["status"] and r["fsdp"]["not_modelled"]
    plain = _json("predict", "--model", tiny_config, "--seq-len", "2K")["results"][0]
    assert "fsdp" not in plain and "fsdp" not in plain["options"]


def test_plan_solve_gpus_answers_the_first_power_of_two_under_the_budget(tiny_config):
    one = _json("predict", "--model", tiny_config, "--seq-len", "2K", "--fsdp", "1")["results"][0]
    budget = one["allocated_peak_bytes"] - 1          # one byte short of world size 1: two ranks halve the embeddings
    r = _json("plan", "--model", tiny_config, "--seq-len", "2K", "--solve", "gpus", "--budget", f"{budget}B")
    row = r["results"][0]
    assert r["solve"] == "gpus" and row["value"] == 2 and row["fsdp"]["world_size"] == 2
    # at two ranks the most split mesh first (CP 2), then from the least CP up: CP 1 fits too, the answer
    assert [(t["world_size"], t["cp"]) for t in row["tried"]] == [(1, 1), (2, 2), (2, 1)]
    assert [t["fits"] for t in row["tried"]] == [False, True, True] and row["mesh"] == {"cp": 1, "ep": 1}
    assert row["tried"][0]["allocated_peak_bytes"] == one["allocated_peak_bytes"]
    assert row["tried"][2]["allocated_peak_bytes"] <= budget


def test_plan_solve_gpus_says_when_no_count_fits(tiny_config):
    data = _json("plan", "--model", tiny_config, "--seq-len", "2K", "--solve", "gpus", "--budget", "1MiB")
    row = data["results"][0]
    assert row["value"] is None and [t["world_size"] for t in row["tried"]] == [2 ** k for k in range(11)]
    assert "no FSDP2 x CP x EP mesh up to 1,024 ranks fits the budget" in data["warnings"][0]


def test_plan_solve_gpus_on_the_device(tiny_config):
    row = _json("plan", "--model", tiny_config, "--seq-len", "2K", "--solve", "gpus")["results"][0]
    assert row["value"] == 1 and row["tried"][0]["fits"] is True       # a 2-layer toy fits one H200


BAD_FSDP = [
    # (arguments after the command, exit code, the phrase of the one line)
    (("predict", "--fsdp", "0"), 1, "--fsdp: must be positive, got '0'"),
    (("predict", "--fsdp", "-2"), 1, "--fsdp: '-2' is not a positive integer"),
    (("predict", "--fsdp", "1.5"), 1, "--fsdp: '1.5' is not a positive integer"),
    (("predict", "--fsdp", "two"), 1, "--fsdp: 'two' is not a positive integer"),
    (("predict", "--fsdp", "99999999"), 1, "--fsdp: 99,999,999 ranks is beyond any machine (at most 65,536)"),
    (("plan", "--solve", "batch_size", "--fsdp", "0"), 1, "--fsdp: must be positive"),
    (("plan", "--solve", "gpus", "--fsdp", "2"), 2, "--fsdp has no effect with --solve gpus"),
]


@pytest.mark.parametrize("args,code,phrase", BAD_FSDP, ids=[" ".join(a[0]) for a in BAD_FSDP])
def test_a_bad_world_size_is_one_line(tiny_config, args, code, phrase):
    command, *rest = args
    one_line(run(command, "--model", tiny_config, "--seq-len", "2K", *rest), code, phrase)


@pytest.mark.parametrize("args,code,phrase", [
    (("predict", "--impl", "fla-kda@0.6.0", "--seq", "8K", "--heads", "4", "--fsdp", "2"), 1,
     "fla-kda@0.6.0 does not take --fsdp"),
    (("plan", "--impl", "fla-kda-layer@0.6.0", "--fsdp", "2"), 1, "fla-kda-layer@0.6.0 does not take --fsdp"),
    (("plan", "--impl", "fla-kda@0.6.0", "--solve", "gpus"), 2, "--solve gpus needs --model CONFIG.json"),
])
def test_a_kernel_or_layer_takes_no_fsdp(args, code, phrase):
    one_line(run(*args), code, phrase)


def _record(fsdp) -> dict:
    """A model-step record as validate/gpu/probes/model_step.py --fsdp writes it (the figures do not matter here)."""
    return {"kind": "model-step", "config": dict(TINY), "shape": {"mbs": 1, "seq": 2048}, "gpu": "NVIDIA H200",
            "options": {"optimizer": "adamw", "precision": "bf16", "checkpoint": False, "packed": False, "fsdp": fsdp},
            "steps": [], "triton_cache": "cold"}


def test_a_record_of_an_fsdp2_run_is_checked_against_the_fsdp_model():
    from livebytes.validate.check import model_records
    model, shape, _ = model_records.model_for(_record(1))
    assert dict(model.options)["fsdp"] == 1 and shape.seq == 2048
    with pytest.raises(LivebytesError, match="fsdp='one' is not a whole number"):
        model_records.model_for(_record("one"))


def test_a_hybrid_moe_model_shards_per_decoder_block():
    """transformers' Kimi-Linear (KDA, MLA and expert blocks; test_traced_kimi_linear's config): every block a unit,
    each unit's all-gathers and reduce-scatters in FSDP2's order, every parameter sharded."""
    from livebytes.estimator.registry import get_model
    from livebytes.lifetimes.traced.model import canonical_config, options_for

    from .test_traced_kimi_linear import H200, TINY as KIMI
    key, options = options_for(canonical_config(dict(KIMI)))
    whole, m = get_model(key, H200, **options), get_model(key, H200, **options, fsdp=4)
    blocks = [f"model.layers.{i}" for i in range(4)]
    fsdp_steps = [s.name.split(".fsdp.")[1] for s in m.steps if ".fsdp." in s.name]
    assert fsdp_steps[:2] == ["root.all_gather", "root.copy_out"] and fsdp_steps[-1] == "root.reduce_scatter_output"
    assert [s.rsplit(".", 1)[0] for s in fsdp_steps if s.endswith("reduce_scatter_input")] == blocks[::-1] + [ROOT]
    shards = {b.name: b.nbytes for b in m.buffers if b.group is Group.PARAMETERS}
    for b in whole.buffers:            # 4 ranks: each parameter's shard a quarter of it, or its padded rows
        if b.group is Group.PARAMETERS:
            assert b.nbytes / 4 <= shards[b.name] < b.nbytes or b.nbytes <= 512, b.name

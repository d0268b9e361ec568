"""Context and expert parallelism on the traced step (issue 51 point 4, ``lifetimes/traced/parallel.py``): the rules by
hand, the expert sharding against torch's own DTensor on a fake process group, Kimi-Linear's tiny config under --ep
and --cp, plan --solve gpus over FSDP2 x CP x EP, and every bad mesh in one line.

The traced model is ``test_traced_kimi_linear``'s TINY (4 layers: 3 KDA, 1 MLA; 8 experts, top 2, hidden 512)."""
import json

import pytest
import sympy as sp
from typer.testing import CliRunner

from livebytes.cli.app import app
from livebytes.estimator.engine import predict
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.groups import Group
from livebytes.estimator.shapes import Shape
from livebytes.estimator.symbols import MBS, S
from livebytes.lifetimes.traced.fsdp import Param, padded_shard_numel
from livebytes.lifetimes.traced.parallel import (Mesh, Plan, check_mesh, check_seq, expert_bytes, expert_runs,
                                                 sequence_formula)

runner = CliRunner()
AT_4K = Shape(1, 4096, 4, 192)


# ------------------------------------------------------------------------------------------------ by hand

@pytest.mark.parametrize("nbytes,experts,ep,expected", [
    (150_994_944, 16, 8, 18_874_368),     # gate_up [16, 2048, 2304] bf16 = 16 x 9,437,184 B: 2 experts a rank
    (75_497_472, 16, 2, 37_748_736),      # down [16, 2304, 1024] bf16: 8 of 16 experts
    (4096, 8, 1, 4096),                   # EP 1: all of them
])
def test_a_rank_holds_e_over_ep_experts_by_hand(nbytes, experts, ep, expected):
    assert int(expert_bytes(nbytes, experts, ep)) == expected == nbytes * (experts // ep) // experts


def test_fsdp2_shards_an_experts_tensor_over_w_over_ep_ranks():
    # [256, 2048, 2304] experts, EP 8 then FSDP2 at W = 16: 32 experts a rank, sharded over 16 / 8 = 2 ranks: 16 rows
    p = Param("model.layers.1.mlp.experts.gate_up_proj", (32, 2048, 2304), 2, world=2)
    assert padded_shard_numel(p, 16) == 16 * 2048 * 2304
    # without EP the same tensor over all 16 ranks: 256 / 16 = 16 rows too: the states are the same, the gather is not
    assert padded_shard_numel(Param("x", (256, 2048, 2304), 2), 16) == 16 * 2048 * 2304


def test_a_buffer_at_s_over_c_by_hand():
    # a [T, 2304] bf16 activation at 4,096 tokens: 18,874,368 B; CP 4: a quarter
    assert sequence_formula(4608 * MBS * S, 4).subs({MBS: 1, S: 4096}) == 4608 * 1024 == 18_874_368 // 4
    # a chunk count ceil(S / 64) at CP 2 and S = 4,160: ceil(2,080 / 64) = 33 chunks (not 65 / 2)
    assert sequence_formula(sp.ceiling(S / 64), 2).subs(S, 4160) == 33
    assert sequence_formula(sp.Integer(4096), 8) == 4096      # a parameter does not depend on S


def test_the_experts_passes_are_runs_of_their_steps():
    steps = ["for.model.layers.1.mlp.gate.mm", "for.model.layers.1.mlp.experts._grouped_mm",
             "for.model.layers.1.mlp.experts.act_fn.silu", "for.model.layers.1.mlp.shared_experts.mm",
             "bac.model.layers.1.mlp.experts.mul", "for.model.layers.2.mlp.experts.mm"]
    assert expert_runs(steps) == [("1", 1, 2), ("1", 4, 4), ("2", 5, 5)]


def test_the_expert_sharding_is_torchs_shard0_on_a_fake_process_group():
    """What EP's arithmetic says a rank holds is DTensor's local shard (``distribute_tensor(..., [Shard(0)])``) at
    world size 2 on torch's fake process group, traced here: rank 0 holds E / 2 experts' rows."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    full = torch.empty(8, 64, 32, dtype=torch.bfloat16)         # 8 experts, gate_up [64, 32]
    local = distribute_tensor(full, mesh, [Shard(0)]).to_local()
    assert local.shape[0] == 4 and local.nbytes == int(expert_bytes(full.nbytes, 8, 2)) == 4 * 64 * 32 * 2
    state = torch.zeros_like(local)                             # AdamW's exp_avg of the local tensor
    assert state.nbytes == local.nbytes


@pytest.mark.parametrize("mesh,experts,routing,phrase", [
    (Mesh(0, 3, 1), 8, "balanced", "--cp 3: a degree is a power of two"),
    (Mesh(0, 1, 6), 8, "balanced", "--ep 6: a degree is a power of two"),
    (Mesh(0, 1, 16), 8, "balanced", "--ep 16 does not divide the 8 experts"),
    (Mesh(0, 1, 2), 0, "balanced", "--ep 2: the model has no routed experts"),
    (Mesh(4, 8, 1), 8, "balanced", "--cp 8 does not divide --fsdp 4"),
    (Mesh(0, 1, 2), 8, "worst", "--ep 2 with --routing worst"),
])
def test_a_bad_mesh_is_one_line(mesh, experts, routing, phrase):
    with pytest.raises(LivebytesError, match=phrase.replace("(", r"\(")) as err:
        check_mesh(mesh, experts, routing)
    assert "\n" not in str(err.value)


def test_a_sequence_cp_cannot_split_is_said():
    assert check_seq(4097, 2) == "--cp 2: the sequence of 4,097 tokens does not split into 2 equal parts"
    assert check_seq(4096, 2) is None


# ------------------------------------------------------------------------------------------ on Kimi-Linear's tiny config

@pytest.fixture(scope="module")
def kimi():
    from livebytes.estimator.registry import get_model
    from livebytes.lifetimes.traced.model import canonical_config, options_for

    from .test_traced_kimi_linear import H200, TINY

    key, options = options_for(canonical_config(dict(TINY)))
    return lambda **kw: get_model(key, H200, **options, **kw)


def _expert_states(model) -> int:
    return sum(int(b.nbytes) for b in model.buffers if b.group is Group.OPTIMIZER_STATES
               and ".experts." in b.name and "shared_experts" not in b.name)


def test_ep_8_holds_an_eighth_of_the_expert_states_of_ep_1(kimi):
    one, eight = _expert_states(kimi()), _expert_states(kimi(ep=8))
    assert 0 < eight < one and eight * 8 == one          # 1 of 8 experts a rank: AdamW's two states of each


def test_under_fsdp2_ep_gathers_w_over_ep_ranks_of_the_experts_and_keeps_their_states(kimi):
    """torchtitan's mesh: at --fsdp 4 the experts' states are a quarter with or without EP 2 (E / 2 experts over 4 / 2
    ranks = E / 4), but the unsharded experts FSDP2 gathers per block are E / 2 of them: half of --fsdp 4 alone's."""
    alone, both = kimi(fsdp=4), kimi(fsdp=4, ep=2)
    assert _expert_states(both) == _expert_states(alone) > 0

    def gathered(m):
        return sum(int(b.nbytes) for b in m.buffers if b.group is Group.FSDP_GATHER and ".unsharded." in b.name
                   and ".experts." in b.name and "shared_experts" not in b.name)
    assert 0 < gathered(both) * 2 == gathered(alone)


def test_ep_adds_two_all_to_all_outputs_per_experts_pass(kimi):
    """TINY: hidden 512, top 2; each pass through a layer's experts: dispatch and combine, [2 x T, 512] bf16 each =
    2 x 4,096 x 512 x 2 B = 8 MiB at 4K tokens."""
    m = kimi(ep=2)
    a2a = [b for b in m.buffers if b.group is Group.EP_ALL_TO_ALL]
    assert a2a and len(a2a) % 2 == 0
    assert {int(b.shape[0].subs({MBS: 1, S: 4096})) for b in a2a} == {2 * 4096 * 512 * 2}


def test_cp_2_holds_less_than_cp_1_and_names_its_exchanges(kimi):
    one, two = predict(kimi(), AT_4K), predict(kimi(cp=2), AT_4K)
    assert two.peak_bytes < one.peak_bytes
    m = kimi(cp=2)
    exchanged = {b.name.rsplit(".", 1)[1] for b in m.buffers if b.group is Group.COMMUNICATION}
    assert {"hm", "ag_hm", "initial_state", "gathered_kv", "next_kv"} <= exchanged


def test_the_plan_of_the_tiny_config_reads_its_layers(kimi):
    from livebytes.lifetimes.traced.model import canonical_config

    from .test_traced_kimi_linear import TINY
    plan = Plan.of(json.loads(canonical_config(dict(TINY))), Mesh(0, 2, 2))
    assert plan.num_experts == 8 and plan.top_k == 2 and plan.hidden == 512
    assert len(plan.layers.linear) == 3 and plan.layers.attention == ("model.layers.3.self_attn",)
    assert plan.layers.attention_dims == (4, 4, 192, 128)


# ------------------------------------------------------------------------------------------------ the command line

@pytest.fixture(scope="module")
def kimi_config(tmp_path_factory):
    from .test_traced_kimi_linear import TINY
    path = tmp_path_factory.mktemp("kimi") / "config.json"
    path.write_text(json.dumps(TINY))
    return path


def test_predict_says_cp_and_ep_are_unvalidated(kimi_config):
    r = runner.invoke(app, ["predict", "--model", str(kimi_config), "--seq-len", "4096", "--cp", "2", "--ep", "2",
                            "--json"])
    assert r.exit_code == 0, r.output
    split = json.loads(r.output)["results"][0]["fsdp"]
    assert (split["cp"], split["ep"], split["validated"]) == (2, 2, False) and "unvalidated" in split["status"]


@pytest.mark.parametrize("args,phrase", [
    (["--ep", "3"], "--ep 3: a degree is a power of two"),
    (["--ep", "16"], "--ep 16 does not divide the 8 experts"),
    (["--cp", "2", "--seq-len", "4097"], "must be a multiple of 2"),
    (["--fsdp", "2", "--cp", "4"], "--cp 4 does not divide --fsdp 2"),
])
def test_a_bad_mesh_on_the_command_line_is_one_line(kimi_config, args, phrase):
    base = ["predict", "--model", str(kimi_config)] + ([] if "--seq-len" in args else ["--seq-len", "4096"])
    r = runner.invoke(app, base + args)
    assert r.exit_code != 0 and phrase in r.output.replace("\n", " "), r.output


def test_a_kernel_model_takes_no_ep():
    r = runner.invoke(app, ["predict", "--impl", "fla-kda@0.6.0", "--seq-len", "4096", "--num-heads", "16", "--head-dim", "128", "--ep", "2"])
    assert r.exit_code != 0 and "--ep" in r.output


def test_plan_solve_gpus_searches_cp_and_ep(kimi_config):
    """A budget only CP fits: at 16K tokens, the tiny model's rank 0 at CP 1 holds more than at CP 2."""
    r = runner.invoke(app, ["plan", "--model", str(kimi_config), "--seq-len", "16384", "--solve", "gpus", "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)["results"][0]
    assert row["value"] == 1 and row["tried"][0]["cp"] == 1        # one GPU fits it: no split tried beyond

"""Issue 36: a hybrid stack (Qwen3-Next, Kimi-Linear) deeper than ``MAX_HYBRID_LAYERS`` answers from its head, one and
two periods of its layer pattern and its tail (``lifetimes/traced/hybrid.py``), proved by ``layers.check`` and
expanded by ``layers.expand``; here also against the stack traced whole. The pattern arithmetic runs without tracing;
the proofs trace live (small widths: a trace's cost is per operator; cached in ``LIVEBYTES_CACHE_DIR``)."""
import json
from dataclasses import replace

import pytest

from livebytes.lifetimes.traced import model as traced
from livebytes.lifetimes.traced.calls import ALLOC
from livebytes.lifetimes.traced.hybrid import Pattern, _labels, find_pattern, layer_kinds, pattern_of, sub_config
from livebytes.lifetimes.traced.layers import NotRepeating, canonical
from livebytes.lifetimes.traced.model import Request, call_for, canonical_config, symbolic_calls

L, F = "linear_attention", "full_attention"
# Qwen3-Next at 14 layers, interval 4: l l l f l l l f l l l f l l -> head 1, 3 periods (l l f l) from layer 1, tail
# 1 (l): 1 + 12 + 1; traced at 1 + 4 + 1 = 6 and 10 layers, and whole at 14
QWEN = {"model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 14, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 64, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 64, "linear_value_head_dim": 64, "num_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128, "vocab_size": 1024,
        "full_attention_interval": 4}
# Kimi-Linear at 15 layers, its checkpoint's placement (MLA at 4, 8, 12, 15 from 1), block 0 dense: head 1 (l, dense),
# 3 periods (l l f l), tail 2 (l f): 1 + 12 + 2; traced at 7 and 11 layers, and whole at 15
KIMI = {"model_type": "kimi_linear", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 15,
        "linear_attn_config": {"full_attn_layers": [4, 8, 12, 15], "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14],
                               "head_dim": 64, "num_heads": 2, "short_conv_kernel_size": 4},
        "num_attention_heads": 2, "num_key_value_heads": 2, "kv_lora_rank": 64, "q_lora_rank": None,
        "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64, "num_experts": 4,
        "num_experts_per_token": 2, "moe_intermediate_size": 128, "num_shared_experts": 1, "vocab_size": 1024,
        "pad_token_id": None}


def short(kinds) -> str:
    return " ".join(a[0] + m[0] for a, m in kinds)


@pytest.mark.parametrize("kinds,head,period,tail,repeats", [
    # uniform: one layer repeated, the first and last apart (the uniform stacks' 3 and 4 layers)
    ([(L, "s")] * 6, "ls", "ls", "ls", 4),
    # Qwen3-Next's interval 4 at 14 layers (the docstring above)
    ([(F if (i + 1) % 4 == 0 else L, "s") for i in range(14)], "ls", "ls ls fs ls", "ls", 3),
    # a period that repeats only once between a head and a tail: none
    ([(L, "s"), (L, "s"), (F, "s"), (L, "d")], None, None, None, None),
])
def test_the_pattern_is_the_shortest_split(kinds, head, period, tail, repeats):
    pattern = find_pattern(kinds)
    if head is None:
        assert pattern is None
        return
    assert (short(pattern.head), short(pattern.period), short(pattern.tail), pattern.repeats) == (head, period, tail,
                                                                                                     repeats)
    assert pattern.kinds(repeats) == kinds


def test_labels_line_the_head_and_tail_up_with_the_period():
    """Head (l, dense) before a period (l l f l): its layer takes the period's last place (3), whose residual it hands
    on as the period's last layer does; a tail (l f) after it: the period's first two places (0, 1). Head and tail
    layers more than a period from it keep their own labels."""
    pattern = Pattern(((L, "d"),), ((L, "s"), (L, "s"), (F, "s"), (L, "s")), ((L, "s"), (F, "s")), 2)
    assert _labels(pattern, 1) == [(0, "3"), (1, "0"), (1, "1"), (1, "2"), (1, "3"), (2, "0"), (2, "1")]
    pattern = Pattern(((L, "s"),) * 5, pattern.period, ((L, "s"),) * 5, 2)
    assert [label for _, label in _labels(pattern, 1)] == ["h0", "0", "1", "2", "3"] + ["0", "1", "2", "3"] * 2 + ["t4"]


@pytest.mark.parametrize("config,depth,line", [
    (KIMI, 16, "linear_attn_config places layers 1 .. 15 (15 of them), not each of 1 .. 16 once"),
    (dict(QWEN, layer_types=[L] * 3), 14, "layer_types must list one entry per layer (14), got 3"),
])
def test_kinds_a_config_cannot_build_are_one_line(config, depth, line):
    with pytest.raises(traced.LivebytesError, match=line.replace("(", r"\(").replace(")", r"\)")):
        layer_kinds(config, depth)


def test_a_deep_stack_without_a_period_is_one_line():
    """12 layers over three kinds, abcacbabcbac: no block of layers is followed by its own copy (square-free), so no
    period repeats between a head and a tail."""
    kinds = {"a": L, "b": F, "c": L}
    word = "abcacbabcbac"
    config = dict(QWEN, num_hidden_layers=12, layer_types=[kinds[x] for x in word],
                  mlp_only_layers=[i for i, x in enumerate(word) if x == "c"])
    assert find_pattern(layer_kinds(config, 12)) is None
    with pytest.raises(NotRepeating, match="12 layers whose kinds .attention, MLP. repeat no period of up to 16 layers "
                                           "between a head and a tail: a hybrid stack is traced whole up to 8 layers"):
        pattern_of(Request(canonical_config(config), "H200"))


def test_the_sub_config_writes_the_kinds_out():
    kinds = layer_kinds(KIMI, 15)
    sub = sub_config(KIMI, kinds[:1] + kinds[1:5] + kinds[13:])      # head + one period + tail: 7 layers
    assert sub["layer_types"] == [L, L, L, F, L, L, F] and sub["mlp_layer_types"] == ["dense"] + ["sparse"] * 6
    assert "full_attn_layers" not in sub["linear_attn_config"] and layer_kinds(sub, 7) == kinds[:5] + kinds[13:]


needs_gdn = pytest.mark.skipif(traced.untraceable_here("qwen3_next") is not None,
                               reason="this Triton refuses the Gated DeltaNet backward on Hopper")


@pytest.mark.parametrize("config,depth,traced_at", [pytest.param(QWEN, 14, 6, marks=needs_gdn), (KIMI, 15, 7)])
def test_a_deep_stack_is_its_periods_expanded(config, depth, traced_at, monkeypatch):
    """The expanded call is the call traced whole, event by event (operators, frames, modules, byte formulas, what
    each free frees)."""
    monkeypatch.setattr(traced, "MAX_HYBRID_LAYERS", 4)         # expand from 6 (7) layers up
    req = Request(canonical_config(dict(config)), "H200")
    assert traced.by_period(req)
    assert json.loads(traced.traced_request(req).config)["num_hidden_layers"] == traced_at
    expanded, whole = call_for(req), symbolic_calls(req)[depth]
    assert canonical(expanded) == canonical(whole)
    assert sum(k == ALLOC for k, _ in expanded.events) == sum(k == ALLOC for k, _ in whole.events)
    # every world size shares the unsharded call, expanded once per process (``plan --solve gpus`` tries several)
    assert call_for(replace(req, fsdp=8)) is expanded


def test_the_answer_says_how_it_was_traced(monkeypatch):
    """Qwen3-Next at 14 layers: head 1 + 3 periods of 4 + tail 1, traced at 6 and 10 layers."""
    monkeypatch.setattr(traced, "MAX_HYBRID_LAYERS", 4)
    note = traced.period_note(Request(canonical_config(dict(QWEN)), "H200"))
    assert note.startswith("depth by period: 14 layers = head 1 + 3 x a period of 4 + tail 1; traced at 6 and 10 layers")

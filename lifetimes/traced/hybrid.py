"""A hybrid stack at any depth from two short traces: its layer pattern's head, one or two periods, and its tail.

Qwen3-Next and Kimi-Linear mix layer kinds along the stack (an attention kind and an MLP kind per layer: transformers
5.17's ``config.layer_types``, Qwen3-Next's ``full_attention_interval``, ``mlp_only_layers`` and
``decoder_sparse_step``, Kimi-Linear's ``linear_attn_config`` and ``first_k_dense_replace``). ``layer_kinds`` lists
them for a depth as the config class builds them; ``find_pattern`` splits the list into a head of ``h`` layers, ``N``
repeats of a period of ``P`` layers and a tail of ``t`` layers (the split with the shortest traces). The stack is
traced twice, as ordinary hybrid requests at their own depth: head + one period + tail and head + two periods + tail
(configs with the kinds written out, ``sub_config``), and the uniform stacks' proof and expansion (``layers.check``,
``layers.expand``) run on the two calls with each period as one "layer": ``regroup`` renames ``layers.{i}`` to
``layers.{group}.{label}`` (group 0 the head, 1 .. k the periods, k + 1 the tail; the label a layer's place in the
period, so that a head or tail layer of the period's kind lines up with its twin). ``check`` proves the two-period
call is the one-period call with one more period; ``expand`` makes N periods; ``ungroup`` puts the layer numbers back.

Not modelled: a stack with no repeating period (every depth up to ``MAX_HYBRID_LAYERS`` is traced whole; deeper
ones without a period are refused in one line).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from livebytes.estimator.errors import LivebytesError

from .layers import NotRepeating, check, expand, relabel
from .calls import ALLOC, FREE
from .symbolic import SymCall

FULL, LINEAR = "full_attention", "linear_attention"
MAX_HYBRID_LAYERS = 8       # deeper hybrid stacks: from their head, one and two periods and tail


# ------------------------------------------------------------------------------------------ the kinds

def layer_kinds(config: dict, depth: int) -> list[tuple[str, str]]:
    """(attention kind, MLP kind) of each of ``depth`` layers, as transformers 5.17's config class builds them."""
    kind = config["model_type"]
    if kind == "qwen3_next":
        return list(zip(_qwen3_next_attention(config, depth), _qwen3_next_mlp(config, depth)))
    if kind == "kimi_linear":
        return list(zip(_kimi_attention(config, depth), _kimi_mlp(config, depth)))
    raise LivebytesError(f"model_type {kind!r} is not a hybrid stack")


def _listed(config: dict, field: str, depth: int) -> list | None:
    values = config.get(field)
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != depth:
        raise LivebytesError(f"config: {field} must list one entry per layer ({depth:,}), got "
                             f"{len(values) if isinstance(values, list) else type(values).__name__}")
    return values


def _qwen3_next_attention(config: dict, depth: int) -> list[str]:
    """configuration_qwen3_next.py:131-138: layer_types, else full attention every ``full_attention_interval``."""
    listed = _listed(config, "layer_types", depth)
    if listed is not None:
        return listed
    interval = config.get("full_attention_interval", 4)
    return [LINEAR if (i + 1) % interval else FULL for i in range(depth)]


def _qwen3_next_mlp(config: dict, depth: int) -> list[str]:
    """modeling_qwen3_next.py:881-882: experts unless the layer is in mlp_only_layers or off decoder_sparse_step."""
    dense = set(config.get("mlp_only_layers") or ())
    step, experts = config.get("decoder_sparse_step", 1), config.get("num_experts", 512)
    return ["sparse" if i not in dense and experts > 0 and (i + 1) % step == 0 else "dense" for i in range(depth)]


def _kimi_attention(config: dict, depth: int) -> list[str]:
    """configuration_kimi_linear.py:131-141: layer_types, else the checkpoint's linear_attn_config lists (1-indexed),
    else full attention at every fourth layer from the fourth (``i and i % 4 == 0``)."""
    listed = _listed(config, "layer_types", depth)
    if listed is not None:
        return listed
    linear = config.get("linear_attn_config") or {}
    if "full_attn_layers" in linear and "kda_layers" in linear:
        placed = {n: FULL for n in linear["full_attn_layers"]} | {n: LINEAR for n in linear["kda_layers"]}
        if sorted(placed) != list(range(1, depth + 1)):
            raise LivebytesError(f"config: linear_attn_config places layers {_span(placed)}, not each of 1 .. {depth:,} "
                                 "once: give layer_types (one entry per layer) for another depth")
        return [placed[n + 1] for n in range(depth)]
    return [FULL if i and i % 4 == 0 else LINEAR for i in range(depth)]


def _span(placed: dict) -> str:
    return f"{min(placed)} .. {max(placed)} ({len(placed)} of them)" if placed else "none"


def _kimi_mlp(config: dict, depth: int) -> list[str]:
    """configuration_kimi_linear.py:143-148: mlp_layer_types, else dense below first_k_dense_replace (default 1)."""
    listed = _listed(config, "mlp_layer_types", depth)
    if listed is not None:
        return listed
    first = config.get("first_k_dense_replace", 1)
    return ["dense" if i < first else "sparse" for i in range(depth)]


def sub_config(config: dict, kinds: list) -> dict:
    """The config of a stack of ``kinds``, each layer's kinds written out (so any depth builds exactly them)."""
    attention, mlp = [a for a, _ in kinds], [m for _, m in kinds]
    out = dict(config, num_hidden_layers=len(kinds), layer_types=attention)
    if config["model_type"] == "qwen3_next":
        return out | {"mlp_only_layers": [i for i, m in enumerate(mlp) if m == "dense"], "decoder_sparse_step": 1}
    linear = {k: v for k, v in (config.get("linear_attn_config") or {}).items()
              if k not in ("full_attn_layers", "kda_layers")}
    return out | {"mlp_layer_types": mlp} | ({"linear_attn_config": linear} if "linear_attn_config" in config else {})


# ------------------------------------------------------------------------------------------ the pattern

@dataclass(frozen=True)
class Pattern:
    """kinds = head + period x repeats + tail (head and tail at least one layer each: the stack's first and last)."""
    head: tuple
    period: tuple
    tail: tuple
    repeats: int

    def kinds(self, repeats: int) -> list:
        return list(self.head) + list(self.period) * repeats + list(self.tail)


MAX_PERIOD = 16         # the longest period looked for (the published stacks repeat every 4 layers)


def find_pattern(kinds: list) -> Pattern | None:
    """The split whose longer trace (head + two periods + tail) is shortest, a period repeated at least twice between
    a head and a tail of at least one layer each; then the shorter period, then the shorter head. None when no period
    of up to ``MAX_PERIOD`` layers repeats."""
    depth, best = len(kinds), None
    for period in range(1, min(MAX_PERIOD, (depth - 2) // 2) + 1):
        head = 1
        while head + 2 * period < depth and (best is None or head < best[0]):
            repeats = _periodic_run(kinds, head, period, depth - 1) // period
            cost = depth - (repeats - 2) * period          # head + 2 periods + tail
            if repeats >= 2 and (best is None or cost < best[0]):
                best = (cost, head, period, repeats)
            head += 1
    if best is None:
        return None
    _, head, period, repeats = best
    body = head + repeats * period
    return Pattern(tuple(kinds[:head]), tuple(kinds[head:head + period]), tuple(kinds[body:]), repeats)


def _periodic_run(kinds: list, start: int, period: int, end: int) -> int:
    """How many layers from ``start`` (before ``end``) repeat the ``period`` layers at ``start``."""
    n = period
    while start + n < end and kinds[start + n] == kinds[start + n - period]:
        n += 1
    return min(n, end - start)


# ------------------------------------------------------------------------------------------ grouping

LAYERS_AT = re.compile(r"(^|\.)layers\.(\d+)(\.|$)")
GROUPED_AT = re.compile(r"(^|\.)layers\.(\d+)\.([a-z]?\d+)(\.|$)")


def _labels(pattern: Pattern, repeats: int) -> list[tuple[int, str]]:
    """(group, label) of each layer of a stack of ``repeats`` periods. A period's layers are labelled by their place in
    it (``j``); so are the head's last ``P`` layers and the tail's first ``P``, whatever their kinds, so that what a
    group hands the next (the residual, made at the end of the decoder layer before it) lines up with its twin in the
    period (``layers._aligned``); other head and tail layers their own (``h{i}``, ``t{r}``)."""
    h, p = len(pattern.head), len(pattern.period)
    out = [(0, str((i - h) % p) if i >= h - p else f"h{i}") for i in range(h)]
    out += [(1 + n // p, str(n % p)) for n in range(repeats * p)]
    return out + [(repeats + 1, str(r) if r < p else f"t{r}") for r in range(len(pattern.tail))]


def _rename(call, rename):
    """The call with every module and parameter name passed through ``rename`` (the same events otherwise)."""
    new = {}

    def renamed(a):
        if a.uid not in new:
            new[a.uid] = replace(a, module=rename(a.module), param=rename(a.param) if a.param else a.param)
        return new[a.uid]
    out = SymCall(harness=[renamed(a) for a in call.harness], first_call=set(call.first_call), notes=list(call.notes))
    for kind, ev in call.events:
        if kind in (ALLOC, FREE):
            out.events.append((kind, renamed(ev)))
        else:
            out.events.append((kind, dict(ev, module=rename(ev.get("module")))))
    return out


def regroup(call, pattern: Pattern, repeats: int):
    """``layers.{i}`` -> ``layers.{group}.{label}`` (``_labels``)."""
    labels = _labels(pattern, repeats)

    def rename(text):
        m = LAYERS_AT.search(text or "")
        if m is None:
            return text
        group, label = labels[int(m.group(2))]
        return relabel(text, f"{group}.{label}")
    return _rename(call, rename)


def ungroup(call, pattern: Pattern, repeats: int):
    """``layers.{group}.{label}`` -> ``layers.{i}`` of a stack of ``repeats`` periods."""
    index = {label: i for i, label in enumerate(_labels(pattern, repeats))}

    def rename(text):
        m = GROUPED_AT.search(text or "")
        if m is None:
            return text
        i = index[(int(m.group(2)), m.group(3))]
        return GROUPED_AT.sub(lambda g: f"{g.group(1)}layers.{i}{g.group(4)}", text, count=1)
    return _rename(call, rename)


def expand_pattern(one, two, pattern: Pattern):
    """The call of ``pattern.repeats`` periods from the calls traced with one and two: proved (``check``), expanded."""
    grouped_one, grouped_two = regroup(one, pattern, 1), regroup(two, pattern, 2)
    try:
        check(grouped_one, grouped_two)
    except NotRepeating as err:
        raise NotRepeating(f"head + two periods + tail is not head + one period + tail with one more period "
                           f"({str(err).split(': ', 1)[-1]})") from None
    return ungroup(expand(grouped_one, pattern.repeats + 2), pattern, pattern.repeats)


# ------------------------------------------------------------------------------------------ requests

def pattern_of(req) -> Pattern:
    """The request's stack as head, period and tail; one line when no period repeats."""
    kinds = layer_kinds(req.config_dict, req.depth)
    pattern = find_pattern(kinds)
    if pattern is None:
        raise NotRepeating(f"{req.depth:,} layers whose kinds (attention, MLP) repeat no period of up to "
                           f"{MAX_PERIOD} layers between a head and a tail: a hybrid stack is traced whole up to "
                           f"{MAX_HYBRID_LAYERS} layers only")
    return pattern


def period_request(req, pattern: Pattern, repeats: int):
    """The request of head + ``repeats`` periods + tail, its kinds written into its config, traced at its own depth."""
    config = sub_config(req.config_dict, pattern.kinds(repeats))
    return replace(req, config=json.dumps(config, sort_keys=True), layers=None, routing="balanced")   # no trace depends on it

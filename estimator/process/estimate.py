"""Estimates of a process's stack limit and kernel modules at a case no process measured and no compile derived, each
with its error measured by leaving one committed case out (``leave_one_out``).

CUDA's 512 KiB per-thread local-memory limit bounds any stack limit, but at 270,336 resident threads it is 132 GiB: a
bound no GPU holds, so it never decides a verdict. What does instead is the figure the committed data give through the
nearest cases that share the most with the asked one, and the error that very rule makes on every committed case when
that case is withheld. Frames and limits move with the compile-time constants of the kernels (head dim, head counts,
block sizes chosen from the hidden size), not monotonically, so no neighbour bounds a case; the leave-one-out error says
how far a neighbour has been from the truth, measured.

The rules (each takes the largest figure of the first tier that has one, so ties between neighbours err high). Every
tier of a kernel's frame is tried first over the cases whose head counts compile to the same arithmetic
(``head_arithmetic``), then over all of them; a whole model's tiers are not (its limit is often its MLP's or loss's
kernel, whose constexprs are not the heads):

- **a kernel's frame** (``kernel_frame``): the same family and contract at the same head dim; the same family in
  another contract at the same head dim; the same kernel at the same head dim in any family of these data (a
  forward-only case's kernels are the full case's); the same kernel at the same head dim under the library's other
  Triton version; the same family and contract at any head dim; the same kernel at any head dim; these data's largest
  frame.
- **a whole model's limit** (``model_limit``), read from its processes (its kernels are not logged one by one): the
  same family and sizes in another variant (packed, fp32-amp); the same family at the same head dim; the same family
  (each of these three first over the cases packed as this one is);
  every whole model of these data. Each case at the asked length by the rule the measured figures take (the next
  longer length measured, else the case's longest). Raised to the model's own fla layer's frames at its sizes where
  larger: that layer case, else the layer's cases at this head dim (``LAYER_OF``, ``layer_frame``).

Why the head counts: FLA declares ``H`` a ``tl.constexpr`` in its chunk kernels (``fla/ops/kda/wy_fast.py``,
``chunk_bwd.py``, ...), so every head count compiles its own kernel, and ``i_bh // H``, ``i_bh % H`` and the grouped
values' ``i_h // (HV // H)`` are divisions by a constant: a shift for a power of two, a multiply-high by a magic number
for any other factor, nothing at all for 1. The registers those take decide what spills, so H 12, 24, 48 and 96 (odd
factor 3) compile alike and unlike H 8, 16 or 32 (odd factor 1); the committed frames show it (the KDA layer at D128:
11,712 B at every power of two, 12,408 at every multiple of 3).

Modules keep ``memory._modules``' rule (a case's own figure, else the family's largest measured); its error is
measured here as well.

Not modelled by these rules: a 64-bit specialisation (an integer argument past 2**31 at long sequences), the MLP's
intermediate size (a kernel's constexpr like the head counts), and whether two odd factors (3 and 5) compile alike. The
whole models' steps derived on the CPU (``process.model_frames``) show the first two: fla's ``swiglu_fwdbwd_kernel``
takes ``T = x.numel()`` (tokens x intermediate size) as a plain integer and ``D``, the intermediate size, as a constexpr
it divides by; the 1.3B model (intermediate 5,632) holds 15,272 B there at 32,768 tokens and 16,312 B at 467,490, where
``T`` passes 2**31 and compiles as int64, and that kernel sets the step's limit. That is what a compile (``livebytes
frames derive``, the committed derived steps) or a process measured (``livebytes process measure``) replaces the
estimate by.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .driver import driver_stack_limit

CASE = re.compile(r"(?P<prefix>\S+) D(?P<dim>\d+) H(?P<heads>\d+) HV(?P<v_heads>\d+)")


@dataclass(frozen=True)
class Case:
    """A data file's case key, ``FAMILY:VARIANT D.. H.. HV..``, in its parts."""
    prefix: str
    dim: int
    heads: int
    v_heads: int

    @property
    def family(self) -> str:
        return self.prefix.split(":")[0]

    @property
    def key(self) -> str:
        return f"{self.prefix} D{self.dim} H{self.heads} HV{self.v_heads}"


def parse_case(key: str) -> Case:
    m = CASE.fullmatch(key)
    if m is None:
        raise ValueError(f"not a case key: {key!r}")
    return Case(m["prefix"], int(m["dim"]), int(m["heads"]), int(m["v_heads"]))


@dataclass(frozen=True)
class Estimate:
    """A figure (bytes per thread, or bytes) and the committed cases it was taken from, in the tier's words."""
    value: int
    tier: str
    basis: tuple[str, ...]
    layer: Estimate | None = None   # the model's own layer's largest frame at its sizes that raised the tier's figure
    tier_value: int | None = None   # ... and that figure before it was raised (None: no tier had a case)

    @property
    def words(self) -> str:
        """The tier's words, and the raise by the model's own layer where there was one."""
        if self.layer is None or self.tier_value is None:
            return self.tier
        return f"{self.tier}, raised to its own layer's frames {self.layer.tier}"


def partial_cases(data: dict) -> frozenset[str]:
    """Cases whose frames stop where the call raised (``derived_on_cpu``'s ``partial``): no basis for another case."""
    return frozenset(k for k, v in data.get("derived_on_cpu", {}).items() if v.get("partial"))


def frame_cases(data: dict, withheld: frozenset[str] = frozenset()) -> dict[Case, dict]:
    """Every complete cold case's frames (kernel -> largest frame, bytes), less ``withheld``."""
    skip = partial_cases(data) | withheld
    return {parse_case(k): v for k, v in data["frames"]["cold"].items() if k not in skip}


def _largest(cases: dict[Case, dict], kernel: str | None, keep) -> tuple[int, tuple[str, ...]] | None:
    """The largest frame of ``kernel`` (None: of any kernel) over the cases ``keep`` selects, and those cases."""
    found = [(frames[kernel] if kernel else max(frames.values()), case.key) for case, frames in cases.items()
             if keep(case) and (kernel is None or kernel in frames) and frames]
    return (max(v for v, _ in found), tuple(sorted(k for _, k in found))) if found else None


def division_class(n: int) -> int:
    """What a division by the constant ``n`` compiles to, as a class: 0 for 1 (no instruction), else ``n``'s odd factor
    (a power of two is a shift, 1; any other odd factor a multiply-high by its own magic number)."""
    return 0 if n == 1 else n // (n & -n)


def head_arithmetic(case: Case) -> tuple[int, int, int]:
    """The classes of the divisions a case's kernels compile by its head counts: by H, by HV and by the group HV // H
    (-1 where HV is no multiple of H)."""
    group = division_class(case.v_heads // case.heads) if case.v_heads % case.heads == 0 else -1
    return division_class(case.heads), division_class(case.v_heads), group


def _tiers_alike_first(case: Case, tiers):
    """Each ``(words, keep, *rest)`` tier twice: over the cases whose head counts compile like ``case``'s, then over
    all the tier keeps."""
    alike = head_arithmetic(case)
    for words, keep, *rest in tiers:
        yield (f"{words}, head counts compiling alike", lambda c, keep=keep: keep(c) and head_arithmetic(c) == alike, *rest)
        yield (words, keep, *rest)


def kernel_frame(kernel: str, case: Case, cases: dict[Case, dict], siblings: tuple[dict[Case, dict], ...] = ()) -> Estimate:
    """The frame of ``kernel`` at ``case`` by the first tier that has one (the module's rules)."""
    tiers = (("the same family and contract at this head dim", lambda c: c.prefix == case.prefix and c.dim == case.dim,
              cases, kernel),
             ("the same family in another contract at this head dim",
              lambda c: c.family == case.family and c.dim == case.dim, cases, kernel),
             ("this kernel at this head dim in another family", lambda c: c.dim == case.dim, cases, kernel),
             *(("this kernel at this head dim under the library's other Triton", lambda c: c.dim == case.dim, other, kernel)
               for other in siblings),
             ("the same family and contract at another head dim", lambda c: c.prefix == case.prefix, cases, kernel),
             ("this kernel at another head dim", lambda c: True, cases, kernel),
             ("the largest frame of these data (the kernel never compiled in them)", lambda c: True, cases, None))
    for words, keep, table, name in _tiers_alike_first(case, tiers):
        got = _largest(table, name, keep)
        if got is not None:
            return Estimate(got[0], words, got[1])
    raise ValueError("no frames in these data to estimate from")


def estimate_frames(kernels: tuple[str, ...], case: Case, cases: dict[Case, dict],
                    siblings: tuple[dict[Case, dict], ...] = ()) -> dict[str, Estimate]:
    """Each of ``kernels``' frames at ``case`` (``kernel_frame``)."""
    return {k: kernel_frame(k, case, cases, siblings) for k in dict.fromkeys(kernels)}


def limit_at(points: list[dict], tokens: int) -> int:
    """A whole model's case's limit at ``tokens`` by the measured figures' rule: the next longer length measured, else
    its longest (``memory._model_limit``)."""
    above = [p for p in points if p["tokens"] >= tokens]
    return (above[0] if above else points[-1])["limit_bytes"]


def model_cases(data: dict, state: str = "cold", withheld: frozenset[str] = frozenset()) -> dict[Case, list[dict]]:
    """Every whole-model case's measured limits (points by length) in ``state``, less ``withheld``."""
    table = data.get("model_limits", {}).get(state, {})
    return {parse_case(k): v["points"] for k, v in table.items() if k not in withheld and v.get("points")}


def packed(case: Case) -> bool:
    """Whether a whole-model case's sequences are packed (its variant, ``FAMILY:packed`` or ``FAMILY:packed+...``)."""
    return case.prefix.partition(":")[2].split("+")[0] == "packed"


# A whole model's family -> the fla layer its blocks stack, where that layer's GPU probe compiles the model's attention
# kernels as the model does (lifetimes/traced/families.py: each row's ``probe``; a test keeps these among them and
# checks the agreement on the committed steps). The probe (validate/gpu/harnesses/fla_layer.py) runs one layer at
# expand_v 1 through ``cu_seqlens`` (the varlen kernels): the KDA layer's largest frames are its model steps' within
# 272 B (D128 11,712 against 11,584, D64 19,104 against 19,376, D256 13,000 equal); the GDN layer's are not its models'
# (D256 H8 HV16: the varlen chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64 22,000 B, the model's 4,392; at D128 its
# chunk_bwd_kernel_dqkwg 22,120 at V 128, the models' 17,416 at expand_v 2), so GDN models take the measured tiers.
LAYER_OF = {"fla-kda-model": "fla-kda-layer"}


def cold_frames(data: dict) -> dict[Case, dict]:
    """A process-memory data file's complete cold frames by case (what ``model_limit`` reads a model's layer from)."""
    return frame_cases(data) if data.get("frames") else {}


OWN_LAYER_CASE = "at these sizes"        # the tier of a model's own layer case (``layer_frame``)


def layer_frame(case: Case, frames: dict[Case, dict]) -> Estimate | None:
    """A whole model's own layer's largest frame at its sizes in ``frames`` (the data's cold frames: the layer probe's
    kernels compiled alone): its own case (tier ``OWN_LAYER_CASE``), else the largest of the layer's cases at this
    head dim, those whose head counts compile alike first (the head dim decides the kernels' tiles: the KDA layer at
    D64 holds 19,104 B at H8, H16 and H32, at D128 11,712-12,408). None: another family, an fp32-amp step (other
    input dtypes), or no layer case at this head dim. A packed step's kernels are the layer probe's own (varlen)."""
    layer = LAYER_OF.get(case.family)
    if layer is None or case.prefix.partition(":")[2] not in ("-", "packed"):
        return None
    own = Case(f"{layer}:-", case.dim, case.heads, case.v_heads)
    if frames.get(own):
        return Estimate(max(frames[own].values()), OWN_LAYER_CASE, (own.key,))
    at_this_dim = ("at this head dim", lambda c: c.prefix == own.prefix and c.dim == case.dim)
    for words, keep in _tiers_alike_first(case, (at_this_dim,)):
        got = _largest(frames, None, keep)
        if got is not None:
            return Estimate(got[0], words, got[1])
    return None


def _raised_by_layer(guess: Estimate | None, case: Case, frames: dict[Case, dict]) -> Estimate | None:
    """``guess`` raised to the model's own layer's frames at its sizes where those are larger (rounded as the driver
    rounds a limit, 16 B): the layer is not a bound (the layer probe's hidden size and flags are not the model's: the
    KDA layer at D128 H12 holds 12,416 B where its model measured 12,368), but at a head dim no model process ran it
    is the only figure of the model's attention kernels (the KDA model at D64 H16 with its own case withheld: 19,104 B
    from its layer where its step holds 19,376 and the D128 models 15,280; docs/validation.md lists the records)."""
    layer = layer_frame(case, frames)
    if layer is None:
        return guess
    limit = driver_stack_limit(layer.value)
    if guess is not None and guess.value >= limit:
        return guess
    if guess is None:
        return Estimate(limit, f"its own layer's frames {layer.tier}", (), layer)
    return Estimate(limit, guess.tier, guess.basis, layer, guess.value)


def model_limit(case: Case, tokens: int, cases: dict[Case, list[dict]],
                frames: dict[Case, dict] | None = None) -> Estimate | None:
    """A whole model's stack limit at ``case`` and ``tokens`` by the first tier that has one (the module's rules), raised
    to its own layer's frames at its sizes where ``frames`` (the data's cold frames) hold them, or its layer's cases at
    its head dim, and they are larger (``_raised_by_layer``); None where these data hold neither."""
    return _raised_by_layer(_model_tiers(case, tokens, cases), case, frames or {})


def _model_tiers(case: Case, tokens: int, cases: dict[Case, list[dict]]) -> Estimate | None:
    """The whole-model rule's tiers: the largest limit of the first tier that has a case."""
    def same_sizes(c: Case) -> bool:
        return c.family == case.family and (c.dim, c.heads, c.v_heads) == (case.dim, case.heads, case.v_heads)
    family = (("the same model family and sizes in another variant", same_sizes),
              ("the same model family at this head dim", lambda c: c.family == case.family and c.dim == case.dim),
              ("the same model family at another head dim", lambda c: c.family == case.family))
    # packing decides which kernels launch (the varlen ones take cu_seqlens): within the family, cases packed as this
    # one is come first (Qwen3-Next packed holds 21,456 B where every unpacked step of it holds 21,072)
    tiers = (*((words, lambda c, keep=keep: keep(c) and packed(c) == packed(case)) for words, keep in family),
             *family,
             ("another model family of these data", lambda c: True))
    # no head counts compiling alike first, as the kernels' rule takes them: a whole model's limit is often its MLP's
    # or loss's kernel (fla's swiglu_fwdbwd_kernel: 15,272 B at intermediate 5,632, the hidden-2,048 KDA model at H24,
    # where the H12 model, hidden 1,536, holds 12,368), whose constexprs are the intermediate size, not the heads
    for words, keep in tiers:
        found = [(limit_at(points, tokens), c.key) for c, points in cases.items() if keep(c) and c != case]
        if found:
            return Estimate(max(v for v, _ in found), words, tuple(sorted(k for _, k in found)))
    return None

"""Saved-payload models of the three attention functions of the saved-payload document (seed 004),
as implemented in livebytes/validate/gpu/payload.py, read against torch 2.13's autograd formulas
(tools/autograd/derivatives.yaml; a multiplication saves the operand the *other* input's gradient
needs, only when that input requires grad).

Tiled attention, per query block i (r_i rows) and key block j (c_j columns), in op order:
  s = (q_i @ k_j.T) * scale      mm saves mat2 k_j.T [d, c_j] and self q_i [r_i, d]; the scalar multiply saves nothing
  s.max(-1)                      saves the int64 indices [r_i]
  torch.maximum(m, s_max)        saves self and other, fp32 [r_i] each
  torch.exp(m - m_new)           saves its result [r_i]
  torch.where(neginf(m), 0, .)   saves the bool condition [r_i]
  p = torch.exp(s - m_new)       saves its result p [r_i, c_j]
  l * alpha                      saves l [r_i] (for alpha's gradient) and, from the second key block on, alpha [r_i]
  acc * alpha[:, None]           saves acc [r_i, dv] and, from the second key block on, the view alpha[:, None] [r_i, 1]
  p @ v_j                        saves mat2 v_j [c_j, dv] and self p (already counted)
and per query block: acc / l[:, None] saves l[:, None] [r_i, 1] and acc [r_i, dv]; torch.log(l) saves l [r_i].
Views of q, k and v with the same offset, shape and stride are the same key, so each block of q,
of k.T and of v counts once however many tiles save it. Summed over blocks: sum r_i = sum c_j = T,
sum r_i c_j = T^2, for any T, including a T the block sizes do not divide.
"""
from __future__ import annotations

import sympy as sp

from livebytes.estimator.payload import COLS, NC, NR, ROWS, D, DV, PayloadModel, SavedRecord, T

# Save events: a query block's first tile saves 12 tensors (l and acc are constants there, so alpha is not
# saved), every later tile 14, and each query block ends with 3 (the division's two and the log's one).

TORCH = "2.13.0"


def _r(name, op, formula, dtype, shape, elements, events, largest):
    return SavedRecord(name, op, formula, dtype, shape, sp.sympify(elements), sp.sympify(events), sp.sympify(largest))


DENSE = PayloadModel("dense", "softmax(q @ k.T / sqrt(d)) @ v, materialising the [T, T] scores", (
    _r("q", "mm(q, k.T)", "grad of mat2: self.t() @ grad", "fp32", "[T, d]", T * D, 1, T * D),
    _r("k.T", "mm(q, k.T)", "grad of self: grad @ mat2.t()", "fp32", "[d, T]", T * D, 1, T * D),
    _r("probs", "softmax", "_softmax_backward_data(grad, result)", "fp32", "[T, T]", T * T, 2, T * T),
    _r("v", "mm(probs, v)", "grad of self: grad @ mat2.t()", "fp32", "[T, dv]", T * DV, 1, T * DV),
), TORCH)

TILED = PayloadModel("tiled", "online-softmax attention over bq x bk tiles (never builds [T, T])", (
    _r("k_j.T", "mm(q_i, k_j.T)", "grad of self", "fp32", "[d, c_j], one per key block", T * D, NR * NC, D * COLS),
    _r("q_i", "mm(q_i, k_j.T)", "grad of mat2", "fp32", "[r_i, d], one per query block", T * D, NR * NC, ROWS * D),
    _r("max indices", "max(dim=-1)", "value_selecting_reduction_backward(indices)", "int64", "[r_i] per tile",
       NC * T, NR * NC, ROWS),
    _r("running max", "maximum(m, s_max)", "self and other", "fp32", "[r_i] per tile", NC * T, NR * NC, ROWS),
    _r("tile max", "maximum(m, s_max)", "self and other", "fp32", "[r_i] per tile", NC * T, NR * NC, ROWS),
    _r("exp(m - m_new)", "exp", "grad * result", "fp32", "[r_i] per tile", NC * T, NR * NC, ROWS),
    _r("neginf mask", "where(cond, 0, alpha)", "where(condition, grad, 0)", "bool", "[r_i] per tile", NC * T, NR * NC, ROWS),
    _r("p", "exp(s - m_new)", "grad * result (mm(p, v_j) saves the same tensor again)", "fp32", "[r_i, c_j] per tile",
       T * T, 2 * NR * NC, ROWS * COLS),
    _r("running sum", "mul(l, alpha)", "grad of alpha: grad * self", "fp32", "[r_i] per tile", NC * T, NR * NC, ROWS),
    _r("alpha", "mul(l, alpha)", "grad of l: grad * other (only once l requires grad)", "fp32", "[r_i], tiles j >= 1",
       (NC - 1) * T, NR * (NC - 1), ROWS),
    _r("accumulator", "mul(acc, alpha[:, None])", "grad of alpha: grad * self", "fp32", "[r_i, dv] per tile",
       NC * T * DV, NR * NC, ROWS * DV),
    _r("alpha[:, None]", "mul(acc, alpha[:, None])", "grad of acc (only once acc requires grad)", "fp32", "[r_i, 1], tiles j >= 1",
       (NC - 1) * T, NR * (NC - 1), ROWS),
    _r("v_j", "mm(p, v_j)", "grad of self", "fp32", "[c_j, dv], one per key block", T * DV, NR * NC, COLS * DV),
    _r("final sum view", "div(acc, l[:, None])", "self and other", "fp32", "[r_i, 1] per query block", T, NR, ROWS),
    _r("final accumulator", "div(acc, l[:, None])", "self and other", "fp32", "[r_i, dv] per query block", T * DV, NR, ROWS * DV),
    _r("final sum", "log(l)", "grad / self", "fp32", "[r_i] per query block", T, NR, ROWS),
), TORCH)

CHECKPOINTED = PayloadModel("checkpointed", "the tiled function under torch.utils.checkpoint(use_reentrant=False)", (
    _r("q", "checkpoint", "the inputs, recomputed from in backward", "fp32", "[T, d]", T * D, 1, T * D),
    _r("k", "checkpoint", "the inputs", "fp32", "[T, d]", T * D, 1, T * D),
    _r("v", "checkpoint", "the inputs", "fp32", "[T, dv]", T * DV, 1, T * DV),
), TORCH)

PAYLOAD_MODELS = {m.key: m for m in (DENSE, TILED, CHECKPOINTED)}

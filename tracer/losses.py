"""The loss a traced step computes, applied to the built model as a user applies it.

- ``default``: the model's own forward and loss (transformers' ``ForCausalLMLoss`` over the fp32-upcast logits; an fla
  model's loss as its config picks it, fla/models/modeling_utils.py:92-150).
- ``liger``: Liger-Kernel's fused linear cross-entropy (liger-kernel 0.8.5), the loss alone: Liger's other kernels
  (RMSNorm, SwiGLU, RoPE) are left as the model has them. Qwen3-Next through Liger's own patch,
  ``apply_liger_kernel_to_qwen3_next(fused_linear_cross_entropy=True, model=model)`` with the rest off
  (liger_kernel/transformers/monkey_patch.py:3117-3171: the instance's forward becomes
  ``transformers/model/qwen3_next.py lce_forward``). Liger has no patch for Kimi-Linear: its forward is bound to
  ``liger_forward`` below, Kimi-Linear's own forward (modeling_kimi_linear.py:968-1022) with the logits and
  ``loss_function`` replaced by ``LigerForCausalLMLoss`` on the last hidden states and ``lm_head.weight``, as Liger's
  generic causal-LM forward does in training (transformers/model/llama.py:113-127, ``skip_logits``).

Liger's chunked forward computes the gradients in the forward (ops/fused_linear_cross_entropy.py:51-415) and picks its
buffers by the device: ``_can_use_mm_out`` (:32-48: ``_input.device.type != "cuda"`` -> no ``logits_storage``, a new
chunk of logits per ``@``) and the weight gradient's ``addmm(out=grad_weight)`` (:349-370, ``grad_weight.device.type
== "cuda"``; else :375 a [V, H] fp32 temporary per chunk). The tracer's meta tensors stand for CUDA ones, so
``fused_linear_cross_entropy_forward`` is recompiled from Liger's own source, at its own file and lines, with those
device tests reading a meta tensor as CUDA (``meta_is_cuda``); nothing else in it changes. Its Triton kernel
(``liger_cross_entropy_kernel``, :219-249) writes in place into the chunk of logits and the loss slice: a launch
recorded by ``tracer.launches``, no allocation.

Liger reads the count of labels not ignored (``target_mask.sum().item()``, :131-132): the batch's labels carry values
(``values``: every one a token, none ignored; the count changes no buffer). Its backward skips the rescaling kernel when
the loss's gradient is 1.0 (:420, ``torch.equal``), as ``loss.backward()``'s seed is: the seed (``ones_like``) carries its
value, and the literal it is compared with is made by ``ones_like`` too (``_ONE``: the same 4 bytes, a value known).
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from types import MethodType

from transformers.modeling_outputs import CausalLMOutputWithPast

LOSSES = ("default", "liger")        # what the tracer applies (fla's loss is an fla model's default: its config's)

# the device tests of liger-kernel 0.8.5's fused_linear_cross_entropy_forward, and what they read on the tracer's meta
_CUDA_TESTS = (('_input.device.type != "cuda"', '_input.device.type not in ("cuda", "meta")'),
               ('grad_weight.device.type == "cuda"', 'grad_weight.device.type in ("cuda", "meta")'))
_CUDA_TEST_COUNTS = (1, 2)          # :36 in _can_use_mm_out; :328 and :350 in the forward
# :420 compares the loss's gradient with a literal 1.0 made on its device: ``torch.tensor`` makes it with no operator
# dispatched, so the trace would not know its value; the same 0-dim fp32 made by a factory whose value it knows
_ONE = ("torch.tensor(1.0, device=grad_output.device)",
        "torch.ones_like(grad_output, dtype=torch.float32, memory_format=torch.contiguous_format)")


class LossRefused(Exception):
    pass


def _recompiled(fn, module, replacements):
    """``fn`` compiled again from its own source with ``replacements`` (each must occur as counted), at its own file
    and first line, in its module's globals."""
    source = textwrap.dedent(inspect.getsource(fn))
    for (old, new), count in replacements:
        if source.count(old) != count:
            raise LossRefused(f"liger-kernel's {fn.__name__} is not the 0.8.5 code the tracer reads as CUDA "
                              f"({old!r} found {source.count(old)} times, expected {count})")
        source = source.replace(old, new)
    tree = ast.parse(source)
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    namespace: dict = {}
    exec(compile(tree, inspect.getsourcefile(fn), "exec"), module.__dict__, namespace)
    return namespace[fn.__name__]


def meta_is_cuda() -> None:
    """Liger's fused linear cross-entropy takes the CUDA path for the tracer's meta tensors (module doc)."""
    from liger_kernel.ops import fused_linear_cross_entropy as ops  # deferred: Liger-Kernel is optional (--loss liger)
    if getattr(ops.fused_linear_cross_entropy_forward, "_livebytes", False):
        return
    mm_out = _recompiled(ops._can_use_mm_out, ops, [(_CUDA_TESTS[0], _CUDA_TEST_COUNTS[0])])
    forward = _recompiled(ops.fused_linear_cross_entropy_forward, ops, [(_CUDA_TESTS[1], _CUDA_TEST_COUNTS[1])])
    backward = _recompiled(ops.fused_linear_cross_entropy_backward, ops, [(_ONE, 1)])
    forward._livebytes = True
    ops._can_use_mm_out = mm_out
    ops.fused_linear_cross_entropy_forward = forward
    ops.fused_linear_cross_entropy_backward = backward


def liger_forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                  inputs_embeds=None, labels=None, use_cache=None, logits_to_keep=0, **kwargs):
    """A transformers causal LM's forward (Kimi-Linear's, modeling_kimi_linear.py:968-1022) with Liger's loss in
    training, as Liger's generic ``lce_forward`` computes it (transformers/model/llama.py:113-127)."""
    # deferred: Liger-Kernel is optional (--loss liger)
    from liger_kernel.transformers.model.loss_utils import LigerForCausalLMLoss, unpack_cross_entropy_result
    outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=past_key_values, inputs_embeds=inputs_embeds, use_cache=use_cache, **kwargs)
    hidden_states = outputs.last_hidden_state
    slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
    kept = hidden_states[:, slice_indices, :]
    shift_labels = kwargs.pop("shift_labels", None)
    logits, loss = None, None
    if self.training and (labels is not None or shift_labels is not None):
        result = LigerForCausalLMLoss(hidden_states=kept, lm_head_weight=self.lm_head.weight, labels=labels,
                                      shift_labels=shift_labels, hidden_size=self.config.hidden_size, **kwargs)
        loss = unpack_cross_entropy_result(result)[0]
    else:
        logits = self.lm_head(kept)
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
    return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=outputs.past_key_values,
                                  hidden_states=outputs.hidden_states, attentions=outputs.attentions)


def apply_liger(model) -> None:
    """Liger's fused linear cross-entropy on ``model`` (module doc); any other model refused in one line."""
    meta_is_cuda()
    model_type = model.config.model_type
    if model_type == "qwen3_next":
        from liger_kernel.transformers import apply_liger_kernel_to_qwen3_next  # deferred: Liger-Kernel is optional (--loss liger)
        apply_liger_kernel_to_qwen3_next(rope=False, cross_entropy=False, fused_linear_cross_entropy=True,
                                         rms_norm=False, swiglu=False, model=model)
    elif model_type == "kimi_linear":
        model.forward = MethodType(liger_forward, model)
    else:
        raise LossRefused(f"--loss liger applies to transformers' Qwen3-Next and Kimi-Linear, not {model_type}")


def apply_loss(model, loss: str) -> None:
    if loss == "liger":
        apply_liger(model)
    elif loss != "default":
        raise LossRefused(f"loss {loss!r} is not traced (known: {', '.join(LOSSES)})")

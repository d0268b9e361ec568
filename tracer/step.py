"""A training step as a script runs it, traced: the model built from its HF config, its parameters moved to the GPU,
the batch, then ``steps`` iterations of forward (``loss = model(**batch).loss``: the output's other fields die at
once, as in HF's Trainer), ``loss.backward()``, ``optimizer.step()`` and ``optimizer.zero_grad(set_to_none=True)``.

The process's first iteration allocates what it keeps (AdamW's states, library caches); later ones are the steady
state. Each traced shape starts a fresh model and optimizer, and the library's identity caches (fla's
``tensor_cache`` queues) are emptied first, as in a new process.

- Parameters: built on meta in fp32 (nothing recorded), cast to the precision's dtype, then adopted as the harness's
  allocations in the order ``model.to("cuda")`` makes them (``Module._apply``: a module's children first, then its own
  parameters and buffers).
- ``bf16``: every parameter and buffer cast with ``.to(torch.bfloat16)``, no autocast.
- ``fp32-amp``: parameters and buffers stay fp32 (``model.to("cuda")``, no dtype); the forward, loss included, runs
  under ``torch.autocast("cuda", dtype=torch.bfloat16)`` (accelerate's autocast, HF Trainer's ``bf16=True``), whose
  exit drops autocast's weight cache; backward, ``optimizer.step()`` and ``zero_grad`` run outside it. torch's autocast
  does not act on meta tensors: ``autocast`` emulates its CUDA kernels at their dispatch key (casts recorded by
  autograd, the weight cache as torch keeps it). After the region, accelerate's ``convert_to_fp32`` of the outputs
  (``fp32_outputs``: the fp16/bf16 tensors, e.g. an unfused loss's logits, copied to fp32; the outputs die with it).
- Optimizers with their CUDA defaults: AdamW(lr 1e-3, weight_decay 0.01, foreach: what ``_default_to_fused_or_foreach``
  picks for CUDA tensors; on meta tensors it would pick the per-tensor loop, so foreach is passed), SGD (no momentum:
  no state), or none.
- Checkpointing: ``model.gradient_checkpointing_enable()`` (transformers' default: non-reentrant), whose recompute
  runs under the function modes its forward ran under (``recompute_under_forward_modes``).
- LoRA (``"lora": {"r": R, "alpha": A, "targets": "all-linear" | [names]}``): after the cast and checkpointing,
  ``peft.get_peft_model(model, LoraConfig(r=R, lora_alpha=A, target_modules=targets))`` with peft's defaults otherwise
  (no dropout; ``autocast_adapter_dtype=True``: the adapters of a bf16 base are fp32), as a fine-tuning script calls it:
  the base weights frozen (``requires_grad=False``: no gradients, no optimizer states), each targeted Linear's
  ``lora_A`` [R, in] and ``lora_B`` [out, R] trained (a transformers-5 MoE's fused experts: the parameters peft maps
  the expert names onto, ``ParamWrapper``); under checkpointing peft calls ``enable_input_require_grads``.
  The optimizer takes the parameters that require grad (HF Trainer's); the forward runs through the ``PeftModel``,
  whose two wrappers take the root's module path, so every path is the model's own (``base_layer`` and
  ``lora_A.default`` below each targeted Linear).
- Loss (``spec["loss"]``, ``tracer.losses``): the model's own, or Liger-Kernel's fused linear cross-entropy applied
  to the built model as Liger's patch applies it.
- Batch: ``input_ids`` and ``labels`` [B, S] int64, or packed: [1, B*S] with ``cu_seqlens`` [B + 1] int64 passed to the
  model (fla's layers read it from the keyword arguments), whose values the trace knows (``values``).
"""
from __future__ import annotations

import contextlib
import gc
import sys
from collections import deque
from collections.abc import Mapping

import torch
from torch.overrides import _get_current_function_mode_stack
from transformers import AutoConfig, AutoModelForCausalLM

from livebytes.estimator.devices import get_device

from .autocast import emulated
from .launches import install as install_launches
from .losses import apply_loss
from .modules import module_paths
from .recorder import Recorder, code_line
from .sdpa import Target, cuda_sdpa_mode

PRECISIONS = ("bf16", "fp32-amp")
OPTIMIZERS = ("adamw", "sgd", "none")


def build_model(config: dict, layers: int | None):
    """The causal LM of ``config`` (an HF config dict, ``model_type`` registered by fla's import), on meta, fp32."""
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    if layers is not None:
        kwargs["num_hidden_layers"] = layers
    cfg = AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    experts = getattr(model.config, "_experts_implementation", None)
    # an experts module of transformers' ``use_experts_implementation`` (integrations/moe.py) carries ``has_gate``
    moe = any(hasattr(m, "has_gate") and hasattr(m, "is_transposed") for m in model.modules())
    if moe and experts != "grouped_mm":      # transformers' default from sm80 (modeling_utils get_correct_experts_...)
        raise SystemExit(f"error: the experts run as {experts!r}, not grouped_mm: not traced (their buffers would be "
                         "sized by the routing)")
    return model


def with_lora(model, lora: dict | None):
    """(the module the step calls, the modules around ``model``): ``model`` itself, or peft's ``PeftModel`` of it with
    the spec's LoRA (module doc); a target name no module's path ends in, or one peft refuses: one ``error:`` line."""
    if not lora:
        return model, ()
    from peft import LoraConfig, get_peft_model  # deferred: peft is optional (a LoRA request only)
    targets = lora["targets"]
    if not isinstance(targets, str):        # peft refuses only a list none of whose names match; each must here
        paths = [name for name, _ in model.named_modules()]
        unknown = [t for t in targets if not any(p == t or p.endswith("." + t) for p in paths)]
        if unknown:
            raise SystemExit(f"error: --lora-targets {', '.join(unknown)}: no module of {type(model).__name__} ends "
                             "in that name (peft matches the end of a module's path, e.g. in_proj_qkvz, self_attn.q_proj)")
    config = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], target_modules=targets)
    try:
        peft_model = get_peft_model(model, config)
    except ValueError as err:
        shown = targets if isinstance(targets, str) else ", ".join(targets)
        raise SystemExit(f"error: --lora-targets {shown}: peft {str(err).splitlines()[0]}") from None
    return peft_model, (peft_model, peft_model.base_model)


def apply_order(model) -> list:
    """Parameters and buffers in the order ``Module._apply`` moves them (children first, then the module's own),
    each storage once (tied weights)."""
    out, seen = [], set()

    def visit(m):
        for child in m.children():
            visit(child)
        for t in list(m._parameters.values()) + list(m._buffers.values()):
            if t is not None and id(t.untyped_storage()) not in seen:
                seen.add(id(t.untyped_storage()))
                out.append(t)
    visit(model)
    return out


def make_optimizer(name: str, params):
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, foreach=True)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, foreach=True)
    return None


def batch(mbs: int, seq: int, packed: bool, mirrors, style: str = "cu_seqlens", labels_known: bool = False) -> dict:
    """The step's inputs on meta (``cu_seqlens`` with its real values); ``style`` "flattening": transformers'
    ``DataCollatorWithFlattening(return_flash_attn_kwargs=True)`` (data/data_collator.py): ``input_ids``, ``labels`` and
    ``position_ids`` [1, B*S] int64 (positions restarting per sequence), ``cu_seq_lens_q`` and ``cu_seq_lens_k`` [B + 1]
    int32 (two tensors: ``torch.tensor`` of each key), ``max_length_q`` and ``max_length_k`` Python ints.
    ``labels_known``: the labels' values too, where the loss reads them (every one token 0, none ignored)."""
    if labels_known:
        out = batch(mbs, seq, packed, mirrors, style)
        mirrors.add(out["labels"], torch.zeros(out["labels"].shape, dtype=torch.int64))
        return out
    if packed and style == "flattening":
        ids = torch.empty(1, mbs * seq, dtype=torch.int64, device="meta")
        out = {"input_ids": ids, "labels": torch.empty_like(ids)}
        positions = torch.arange(seq, dtype=torch.int64).repeat(mbs).unsqueeze(0)
        out["position_ids"] = torch.empty_like(ids)
        mirrors.add(out["position_ids"], positions)
        for key in ("cu_seq_lens_q", "cu_seq_lens_k"):
            out[key] = torch.empty(mbs + 1, dtype=torch.int32, device="meta")
            mirrors.add(out[key], torch.arange(0, mbs + 1, dtype=torch.int32) * seq)
        return out | {"max_length_q": seq, "max_length_k": seq}
    if packed:
        ids = torch.empty(1, mbs * seq, dtype=torch.int64, device="meta")
        cu = torch.arange(0, mbs + 1, dtype=torch.int64) * seq
        cu_meta = torch.empty(mbs + 1, dtype=torch.int64, device="meta")
        mirrors.add(cu_meta, cu)
        return {"input_ids": ids, "labels": torch.empty_like(ids), "cu_seqlens": cu_meta}
    ids = torch.empty(mbs, seq, dtype=torch.int64, device="meta")
    return {"input_ids": ids, "labels": torch.empty_like(ids)}


def reset_library_caches() -> None:
    """Empty fla's ``tensor_cache`` queues (each decorated function's closure holds one deque), as a new process has."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("fla.") or module is None:
            continue
        for value in vars(module).values():
            for cell in getattr(value, "__closure__", None) or ():
                try:
                    contents = cell.cell_contents
                except ValueError:
                    continue
                if isinstance(contents, deque):
                    contents.clear()


def recompute_under_forward_modes():
    """``torch.utils.checkpoint``'s ``context_fn``: the recompute re-enters the torch function modes active at the
    checkpointed forward (the tracer's CUDA routing, e.g. ``sdpa.cuda_sdpa_mode``). ``loss.backward()`` reaches each
    mode's ``__torch_function__``, which runs with that mode popped, so the recompute inside the backward would run
    without them: SDPA's math path where the forward took cuDNN, a different count of saved tensors, and checkpoint's
    CheckpointError. On the GPU the routing is torch's C++ (``select_sdp_backend``), the same in both passes."""

    forward_modes = _get_current_function_mode_stack()       # bottom first, as pushed

    @contextlib.contextmanager
    def recompute():
        with contextlib.ExitStack() as stack:
            active = _get_current_function_mode_stack()
            for mode in forward_modes:
                if not any(mode is m for m in active):
                    stack.enter_context(mode)
            yield
    return contextlib.nullcontext(), recompute()


def forward_region(precision: str):
    """The forward's autocast region: ``torch.autocast("cuda", dtype=torch.bfloat16)`` for fp32-amp, none for bf16."""

    return torch.autocast("cuda", dtype=torch.bfloat16) if precision == "fp32-amp" else contextlib.nullcontext()


def fp32_outputs(data):
    """accelerate's ``convert_to_fp32`` with its ``recursively_apply`` (accelerate/utils/operations.py), which
    ``ConvertOutputsToFp32`` applies to the autocast forward's outputs under mixed precision: every fp16/bf16 tensor in
    tuples, lists and mappings (a ModelOutput) becomes ``tensor.float()``, anything else is kept."""

    if isinstance(data, (tuple, list)):
        items = [fp32_outputs(o) for o in data]
        return type(data)(*items) if hasattr(data, "_fields") else type(data)(items)     # accelerate's honor_type
    if isinstance(data, Mapping):
        return type(data)({k: fp32_outputs(v) for k, v in data.items()})
    if hasattr(data, "dtype") and data.dtype in (torch.float16, torch.bfloat16):
        return data.float()
    return data


def autocast_forward(model, inputs: dict):
    """accelerate's autocast forward: ``model(**batch)`` in the region (its exit drops autocast's weight cache)."""
    with forward_region("fp32-amp"):
        return model(**inputs)


def step_loss(model, inputs: dict, precision: str):
    """The loss of one forward: ``model(**batch).loss`` (its other outputs die at once, as in HF's Trainer); fp32-amp:
    ``ConvertOutputsToFp32(autocast(forward))`` as accelerate wraps it: the region's outputs die once converted."""
    if precision != "fp32-amp":
        return model(**inputs).loss
    return fp32_outputs(autocast_forward(model, inputs)).loss


def run_steps(model, optimizer, inputs: dict, steps: int, rec, precision: str = "bf16") -> None:
    for step in range(steps):
        rec.mark("forward", step)
        loss = step_loss(model, inputs, precision)
        rec.mark("backward", step)
        loss.backward()
        del loss
        if optimizer is not None:
            rec.mark("optimizer", step)
            optimizer.step()
            rec.mark("zero_grad", step)
            optimizer.zero_grad(set_to_none=True)
        else:
            rec.mark("zero_grad", step)
            model.zero_grad(set_to_none=True)
    rec.mark("end", steps)


def trace_training(spec: dict, mbs: int, seq: int) -> dict:
    """One shape's trace: the events, the frame table and what was run."""



    precision = spec["precision"]
    if precision not in PRECISIONS:
        raise SystemExit(f"error: precision {precision!r} is not traced (known: {', '.join(PRECISIONS)})")
    reset_library_caches()
    rec = Recorder()
    install_launches(rec.launch)
    model = build_model(spec["config"], spec.get("layers"))
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    if spec.get("checkpoint"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={  # transformers' default, plus the modes
            "use_reentrant": False, "context_fn": recompute_under_forward_modes})
    model.train()
    loss = spec.get("loss", "default")
    apply_loss(model, loss)                 # Liger's patch on the model's own forward, before peft wraps it
    stepped, wrappers = with_lora(model, spec.get("lora"))
    inputs = batch(mbs, seq, spec.get("packed", False), rec.mirrors,    # made unrecorded, adopted below in order
                   spec.get("packed_batch", "cu_seqlens"), labels_known=loss == "liger")
    amp = emulated(rec.state) if precision == "fp32-amp" else contextlib.nullcontext()
    with amp as autocast, cuda_sdpa_mode(Target.of(get_device(spec["device"]), torch.__version__), autocast), \
            rec.mode(), module_paths(model, rec.state, wrappers):
        rec.mark("harness", 0)
        names = {id(t): n for n, t in list(model.named_parameters()) + list(model.named_buffers())}
        rec.adopt(apply_order(model), "model.to(device)", code_line(torch.nn.Module._apply, "param_applied = fn(param)"),
                  names)
        rec.adopt([inputs[k] for k in ("input_ids", "labels", "cu_seqlens", "position_ids", "cu_seq_lens_q",
                                       "cu_seq_lens_k") if k in inputs], "batch.to(device)",
                  code_line(type(model).forward))
        optimizer = make_optimizer(spec["optimizer"], [p for p in model.parameters() if p.requires_grad])
        run_steps(stepped, optimizer, inputs, spec.get("steps", 3), rec, precision)
        del optimizer, inputs, model, stepped, wrappers
        gc.collect()
    return {"mbs": mbs, "seq": seq, "events": rec.events, "frames": rec.frame_table()}

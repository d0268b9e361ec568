"""A whole model's training step on the GPU, measured the way ``livebytes.tracer.step`` traces it.

One process per run (a fresh process: its first step is the process's first call; ``TRITON_CACHE_DIR`` says cold or
warm, ``--state`` labels it). The model is built from an HF config on the CPU (fp32, seeded), cast to bf16 there
(``--precision bf16``, the default; ``fp32-amp`` keeps it fp32), and moved to the GPU one tensor at a time
(``Module._apply``'s order); the batch is ``input_ids`` and ``labels`` [B, S] int64 (``--packed``: [1, B*S] and
``cu_seqlens`` [B + 1] int64); the optimizer is AdamW (lr 1e-3, its CUDA defaults: foreach), SGD or none;
``--checkpoint`` calls ``gradient_checkpointing_enable()``; ``--fsdp 1`` (FSDP2 at world size 1) starts
``torch.distributed`` with NCCL as rank 0 of 1 (MASTER_ADDR localhost) after the model is on the GPU and applies
``fully_shard`` to each decoder block (the ``layers`` ModuleList), then to the root, before the optimizer is made on the
sharded parameters. Then ``--steps`` steps, each with the peaks reset before
it: ``loss = model(**batch).loss; loss.backward(); del loss; opt.step(); opt.zero_grad(set_to_none=True)``; for
fp32-amp the forward runs under ``torch.autocast("cuda", dtype=torch.bfloat16)`` and its outputs go through
accelerate's ``convert_to_fp32`` after it (as HF Trainer's ``bf16=True`` runs it through accelerate;
``livebytes.tracer.step`` traces the same).

The setups of issue 51, in the tracer's order (``livebytes.tracer.step.trace_training``): the model built on the CPU and
cast, checkpointing enabled, the loss applied, LoRA applied, and only then the model moved to the GPU, so the
adapters move with the base weights (``Module._apply``'s order over the base model peft changed in place).
``--loss liger``: Liger-Kernel's fused linear cross-entropy, Qwen3-Next through Liger's own patch
(``apply_liger_kernel_to_qwen3_next`` with every other kernel off), Kimi-Linear (no Liger patch) through the forward
livebytes binds (``livebytes.tracer.losses.liger_forward``: the one import of livebytes, the forward under test).
``--lora-rank R`` (``--lora-alpha``, ``--lora-targets``): ``peft.get_peft_model(model, LoraConfig(r=R, lora_alpha=A,
target_modules=T))``, the optimizer over the parameters that require grad (HF Trainer's). ``--packed-batch
flattening``: the packed batch as transformers' ``DataCollatorWithFlattening(return_flash_attn_kwargs=True)`` makes it
(``input_ids``, ``labels`` with -100 at each sequence's first token, ``position_ids`` [1, B*S] int64,
``cu_seq_lens_q``/``_k`` [B + 1] int32, ``max_length_q``/``_k``) instead of fla's ``cu_seqlens``.

Every step is appended to ``OUT/<tag>.jsonl`` as soon as it ends (max_memory_allocated, max_memory_reserved,
requested_bytes peak, what is allocated and reserved after it, the process's own non-PyTorch bytes from NVML by pid
(device-wide when that is unreadable, and said so), the stack limit); an out-of-memory ends the run with PyTorch's
figures (the observer's request to the byte). ``OUT/<tag>.json`` is the record; with ``--sdpa-choice`` it also says
which SDPA kernel torch picks for the config's full attention (``torch._fused_sdp_choice``, asked after the steps).

    python3 validate/gpu/probes/model_step.py --config CONFIG.json --mbs 1 --seq 8192 --checkpoint --state cold \
        --out DIR --tag kda-1.3b-8k

Needs torch, transformers and flash-linear-attention (peft for LoRA, liger-kernel for its loss); imports nothing of
livebytes but Kimi-Linear's Liger forward (above), so it runs wherever the model does.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import json
import os
import platform
import re
import time
from pathlib import Path
import pickle
from importlib.metadata import PackageNotFoundError, version
from types import MethodType

STEPS = 3


# ---- the process's own memory (NVML by pid, no torch) ------------------------------------------------------------

class _ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


def nvml_process_bytes(pid: int) -> int | None:
    """Device memory NVML counts for ``pid`` on device 0 (context, modules, local memory and PyTorch's segments)."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        lib.nvmlInit_v2()
        handle = ctypes.c_void_p()
        lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))
        count = ctypes.c_uint(64)
        infos = (_ProcessInfo * 64)()
        fn = getattr(lib, "nvmlDeviceGetComputeRunningProcesses_v3", None) or lib.nvmlDeviceGetComputeRunningProcesses_v2
        if fn(handle, ctypes.byref(count), infos) != 0:
            return None
        for info in infos[:count.value]:
            if info.pid == pid:
                return int(info.usedGpuMemory)
    except OSError:
        return None
    return None


def nonpytorch(torch) -> dict:
    """This process's bytes outside PyTorch's allocator: NVML's figure for its pid minus memory_reserved (the device's
    used minus reserved when NVML cannot say, labelled)."""
    reserved = torch.cuda.memory_reserved()
    own = nvml_process_bytes(os.getpid())
    if own is not None:
        return {"bytes": own - reserved, "source": "nvml-pid"}
    free, total = torch.cuda.mem_get_info()
    return {"bytes": total - free - reserved, "source": "device-wide"}


def stack_limit() -> int | None:
    try:
        from cuda.bindings import runtime as cudart  # deferred: cuda is not in the core install (model/validate extras)
        err, value = cudart.cudaDeviceGetLimit(cudart.cudaLimit.cudaLimitStackSize)
        return int(value) if int(err) == 0 else None
    except (ImportError, AttributeError, RuntimeError):
        return None


# ---- the step -----------------------------------------------------------------------------------------------------

PRECISIONS = ("bf16", "fp32-amp")


def build(config: dict, seed: int, precision: str = "bf16"):
    import torch  # deferred: torch is not in the core install (model/validate extras)
    from transformers import AutoConfig, AutoModelForCausalLM  # deferred: transformers is not in the core install (model/validate extras)

    # deferred: fla is not in the core install (model/validate extras)
    import fla  # noqa: F401  (registers its model types)
    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items() if k != "model_type"})
    model = AutoModelForCausalLM.from_config(cfg)
    if precision == "bf16":
        model = model.to(torch.bfloat16)                                  # cast on the CPU
    return model                                                          # moved by ``run`` (``to_gpu``)


def to_gpu(model):
    """One copy per tensor, ``Module._apply``'s order (the base model: peft changed it in place)."""
    return model.to("cuda")


def with_loss(model, loss: str) -> None:
    """``--loss liger`` as the tracer applies it (module doc); ``default`` leaves the model's own."""
    if loss == "default":
        return
    kind = model.config.model_type
    if kind == "qwen3_next":
        # deferred: liger_kernel is not in the core install (model/validate extras)
        from liger_kernel.transformers import apply_liger_kernel_to_qwen3_next
        apply_liger_kernel_to_qwen3_next(rope=False, cross_entropy=False, fused_linear_cross_entropy=True,
                                         rms_norm=False, swiglu=False, model=model)
    elif kind == "kimi_linear":
        # deferred: the probe runs as a standalone script, with or without livebytes installed (probes/__init__.py)
        from livebytes.tracer.losses import liger_forward
        model.forward = MethodType(liger_forward, model)
    else:
        raise SystemExit(f"--loss liger: Qwen3-Next and Kimi-Linear only, not {kind}")


def with_lora(model, rank: int, alpha: float, targets: str):
    """peft's ``PeftModel`` of ``model`` (rank 0: the model itself)."""
    if not rank:
        return model
    from peft import LoraConfig, get_peft_model  # deferred: peft is not in the core install (model/validate extras)
    names = targets if targets == "all-linear" else [t for t in targets.split(",") if t]
    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules=names))


def decoder_blocks(model):
    """The decoder blocks FSDP2 wraps one by one: the model's ``layers`` ModuleList (``model.model.layers`` of both
    flash-linear-attention's and transformers' causal LMs)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    return next(m for name, m in model.named_modules() if name.split(".")[-1] == "layers"
                and isinstance(m, torch.nn.ModuleList))


def start_fsdp(world: int) -> None:
    """torch.distributed with NCCL, this process rank 0 of ``world`` (1: the one-GPU check of FSDP2's buffers)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    import torch.distributed as dist  # deferred: torch is not in the core install (model/validate extras)
    if world != 1:
        raise SystemExit("--fsdp: this probe runs world size 1 only (one process, one GPU)")
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "29532")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=world)


def shard(model):
    """FSDP2 as the predictions assume it: ``fully_shard`` on each decoder block, then on the root (defaults:
    reshard_after_forward True for the blocks, no mixed-precision policy, no offload)."""
    from torch.distributed.fsdp import fully_shard  # deferred: torch is not in the core install (model/validate extras)
    for block in decoder_blocks(model):
        fully_shard(block)
    fully_shard(model)
    return model


def batch(config: dict, mbs: int, seq: int, packed: bool, style: str = "cu_seqlens") -> dict:
    import torch  # deferred: torch is not in the core install (model/validate extras)
    shape = (1, mbs * seq) if packed else (mbs, seq)
    ids = torch.randint(0, config["vocab_size"], shape, device="cuda")
    out = {"input_ids": ids, "labels": ids.clone()}
    if packed and style == "flattening":
        return out | flattening(out["labels"], mbs, seq)
    if packed:
        out["cu_seqlens"] = torch.arange(0, mbs + 1, dtype=torch.int64, device="cuda") * seq
    return out


def flattening(labels, mbs: int, seq: int) -> dict:
    """What ``DataCollatorWithFlattening(return_flash_attn_kwargs=True)`` adds (data/data_collator.py): each sequence's
    first label -100 (its separator), positions restarting per sequence, the boundaries as two int32 tensors."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    labels[:, ::seq] = -100
    positions = torch.arange(seq, dtype=torch.int64, device="cuda").repeat(mbs).unsqueeze(0)
    bounds = [torch.arange(0, mbs + 1, dtype=torch.int32, device="cuda") * seq for _ in range(2)]
    return {"position_ids": positions, "cu_seq_lens_q": bounds[0], "cu_seq_lens_k": bounds[1],
            "max_length_q": seq, "max_length_k": seq}


def optimizer(name: str, model):
    """Over the parameters that require grad (all of them but a LoRA's frozen base: HF Trainer's)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    return None


def fp32_outputs(data):
    """accelerate's ``convert_to_fp32`` (accelerate/utils/operations.py): every fp16/bf16 tensor in tuples, lists and
    mappings (a ModelOutput) becomes ``tensor.float()``; ``livebytes.tracer.step.fp32_outputs`` is the same."""
    # deferred: the same code as the tracer's copy, imports included (tests/test_tracer_autocast.py compares the two)
    from collections.abc import Mapping

    import torch  # deferred: torch is not in the core install (model/validate extras)
    if isinstance(data, (tuple, list)):
        items = [fp32_outputs(o) for o in data]
        return type(data)(*items) if hasattr(data, "_fields") else type(data)(items)
    if isinstance(data, Mapping):
        return type(data)({k: fp32_outputs(v) for k, v in data.items()})
    if hasattr(data, "dtype") and data.dtype in (torch.float16, torch.bfloat16):
        return data.float()
    return data


def autocast_forward(model, inputs: dict):
    """The forward and loss under ``torch.autocast("cuda", dtype=torch.bfloat16)`` (its exit drops the weight cache)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(**inputs)


def step_loss(model, inputs: dict, precision: str):
    """bf16: ``model(**batch).loss``. fp32-amp: ``ConvertOutputsToFp32(autocast(forward))`` as accelerate wraps the
    forward for HF Trainer's ``bf16=True``; backward and the optimizer run outside the region."""
    if precision != "fp32-amp":
        return model(**inputs).loss
    return fp32_outputs(autocast_forward(model, inputs)).loss


def step(model, opt, inputs: dict, precision: str = "bf16") -> None:
    loss = step_loss(model, inputs, precision)
    loss.backward()
    del loss
    if opt is not None:
        opt.step()
        opt.zero_grad(set_to_none=True)
    else:
        model.zero_grad(set_to_none=True)


_TRIED = re.compile(r"Tried to allocate ([0-9.]+) (bytes|KiB|MiB|GiB|TiB)")


def oom_fields(torch, err, observed: list) -> dict:
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    message = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return {"oom": True, "oom_message": message, "oom_request_bytes": observed[-1]["alloc_bytes"] if observed else None,
            "allocated_bytes": stats.get("allocated_bytes.all.current", 0),
            "reserved_bytes": stats.get("reserved_bytes.all.current", 0), "free_bytes": free, "total_bytes": total,
            "max_allocated_bytes": torch.cuda.max_memory_allocated(),
            "max_reserved_bytes": torch.cuda.max_memory_reserved()}


def measure(torch, model, opt, inputs: dict, i: int, log, observed: list, precision: str = "bf16") -> dict:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    try:
        step(model, opt, inputs, precision)
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as err:
        row = {"step": i, "seconds": round(time.time() - t0, 2), **oom_fields(torch, err, observed)}
        log(row)
        return row
    stats = torch.cuda.memory_stats()
    row = {"step": i, "seconds": round(time.time() - t0, 2), "oom": False,
           "max_allocated_bytes": torch.cuda.max_memory_allocated(), "max_reserved_bytes": torch.cuda.max_memory_reserved(),
           "requested_peak_bytes": stats.get("requested_bytes.all.peak"),
           "allocated_after_bytes": torch.cuda.memory_allocated(), "reserved_after_bytes": torch.cuda.memory_reserved(),
           "nonpytorch": nonpytorch(torch), "stack_limit_bytes": stack_limit()}
    log(row)
    return row


def run(args) -> int:
    import torch  # deferred: torch is not in the core install (model/validate extras)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / f"{args.tag}.jsonl"

    def log(row):
        with jsonl.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
    t_start = time.time()
    config = json.loads(Path(args.config).read_text())
    torch.cuda.init()
    observed: list = []
    torch._C._cuda_attach_out_of_memory_observer(
        lambda device, alloc, total, free: observed.append({"alloc_bytes": int(alloc), "free_bytes": int(free)}))
    context = nonpytorch(torch)
    if args.history:        # the allocator's own event trace (no stacks: host-side only, the device layout is unchanged)
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2_000_000)
    if args.fsdp:
        start_fsdp(args.fsdp)
    model = build(config, args.seed, args.precision)
    if args.checkpoint:
        model.gradient_checkpointing_enable()
    model.train()
    with_loss(model, args.loss)
    stepped = with_lora(model, args.lora_rank, args.lora_alpha, args.lora_targets)
    to_gpu(model)
    if args.fsdp:
        shard(model)
    inputs = batch(config, args.mbs, args.seq, args.packed, args.packed_batch)
    opt = optimizer(args.optimizer, model)
    before = {"allocated_bytes": torch.cuda.memory_allocated(), "reserved_bytes": torch.cuda.memory_reserved(),
              "nonpytorch": nonpytorch(torch), "context_nonpytorch": context}
    log({"stage": "before", **before})
    rows = []
    for i in range(args.steps):
        rows.append(measure(torch, stepped, opt, inputs, i, log, observed, args.precision))
        if rows[-1]["oom"]:
            break
    sdpa = sdpa_choice(torch, config, args.mbs, args.seq) if args.sdpa_choice else None
    record = {"kind": "model-step", "config": config, "shape": {"mbs": args.mbs, "seq": args.seq},
              "options": {"optimizer": args.optimizer, "precision": args.precision, "checkpoint": args.checkpoint,
                          "packed": args.packed, **({"fsdp": args.fsdp} if args.fsdp else {}), **setups(args)},
              "steps": rows, "before": before, "history": args.history, "triton_cache": args.state, "allocator_conf":
                  os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") or "expandable_segments:False",
              "protocol": "model-step-v1: fresh process, model built on the CPU in bf16 (fp32-amp: fp32) then moved, "
                          "batch, optimizer, then steps with the peaks reset before each (fp32-amp: the forward under "
                          "bf16 autocast)",
              "versions": versions(torch), "gpu": torch.cuda.get_device_name(0),
              "total_memory": torch.cuda.get_device_properties(0).total_memory,
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "seconds": round(time.time() - t_start, 1), "tag": args.tag}
    if sdpa is not None:
        record["sdpa_choice"] = sdpa
    (out / f"{args.tag}.json").write_text(json.dumps(record, indent=1))
    if args.history:
        with (out / f"{args.tag}.snapshot.pickle").open("wb") as fh:
            pickle.dump(torch.cuda.memory._snapshot(), fh)
    if args.fsdp:
        import torch.distributed as dist  # deferred: torch is not in the core install (model/validate extras)
        dist.destroy_process_group()
    return 0


def setups(args) -> dict:
    """The record's options for issue 51's setups, present only when used (earlier records keep their form): ``lora``
    as ``livebytes.lifetimes.traced.lora.lora_option`` writes it, ``loss``, ``packed_batch``."""
    out = {}
    if args.lora_rank:
        targets = args.lora_targets if args.lora_targets == "all-linear" else [t for t in args.lora_targets.split(",") if t]
        alpha = int(args.lora_alpha) if float(args.lora_alpha).is_integer() else args.lora_alpha
        out["lora"] = json.dumps({"r": args.lora_rank, "alpha": alpha, "targets": targets}, sort_keys=True)
    if args.loss != "default":
        out["loss"] = args.loss
    if args.packed and args.packed_batch != "cu_seqlens":
        out["packed_batch"] = args.packed_batch
    return out


SDP_BACKENDS = {-1: "error", 0: "math", 1: "flash_attention", 2: "efficient_attention", 3: "cudnn_attention",
                4: "overrideable"}          # torch.nn.attention.SDPBackend


def sdpa_choice(torch, config: dict, mbs: int, seq: int) -> dict | None:
    """The kernel torch picks here (``torch._fused_sdp_choice``) for a full-attention call as transformers makes it
    (integrations/sdpa_attention.py): bf16 q [mbs, H, S, D] and k, v [mbs, H_kv, S, D] requiring grad, no mask, causal,
    enable_gqa when H_kv < H; and cuDNN's runtime version. Asked after the steps (its tensors come and go then); None
    for a config without full attention (no num_attention_heads and head_dim)."""
    if "num_attention_heads" not in config or "head_dim" not in config:
        return None
    h, d = config["num_attention_heads"], config["head_dim"]
    hkv = config.get("num_key_value_heads", h)
    opts = dict(dtype=torch.bfloat16, device="cuda", requires_grad=True)
    q = torch.empty(mbs, h, seq, d, **opts)
    k, v = (torch.empty(mbs, hkv, seq, d, **opts) for _ in range(2))
    choice = int(torch._fused_sdp_choice(q, k, v, None, 0.0, True, scale=None, enable_gqa=hkv < h))
    return {"choice": choice, "backend": SDP_BACKENDS.get(choice, str(choice)), "cudnn": torch.backends.cudnn.version(),
            "q": [mbs, h, seq, d], "kv": [mbs, hkv, seq, d]}


def versions(torch) -> dict:
    out = {"torch": torch.__version__, "python": platform.python_version()}
    for dist in ("triton", "fla-core", "flash-linear-attention", "transformers"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--mbs", type=int, default=1)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--optimizer", choices=("adamw", "sgd", "none"), default="adamw")
    p.add_argument("--precision", choices=PRECISIONS, default="bf16",
                   help="bf16 parameters, or fp32 ones with the forward under bf16 autocast")
    p.add_argument("--checkpoint", action="store_true")
    p.add_argument("--packed", action="store_true")
    p.add_argument("--packed-batch", choices=("cu_seqlens", "flattening"), default="cu_seqlens",
                   help="--packed: fla's cu_seqlens keyword, or transformers' DataCollatorWithFlattening")
    p.add_argument("--loss", choices=("default", "liger"), default="default")
    p.add_argument("--lora-rank", type=int, default=0)
    p.add_argument("--lora-alpha", type=float, default=8)
    p.add_argument("--lora-targets", default="all-linear")
    p.add_argument("--fsdp", type=int, default=0, metavar="W",
                   help="FSDP2 (fully_shard per decoder block, then the root) at world size W: 1 only (NCCL, one process)")
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--state", choices=("cold", "warm"), required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--history", action="store_true", help="record the allocator's events; <tag>.snapshot.pickle at the end")
    p.add_argument("--sdpa-choice", action="store_true",
                   help="after the steps, record the SDPA kernel torch picks for the config's full attention")
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True)
    return run(p.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())

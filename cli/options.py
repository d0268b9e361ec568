"""Every option the commands share, and the helpers that turn them into library objects.

One vocabulary (``--impl --batch-size --seq-len --num-heads --head-dim --num-v-heads --gpu --json --out``): the shape's
flags are the HF/FLA names (``shapes.HF_NAMES``), each with its old short name (``--seq``) as an alias, which ``--help``
lists beside it (``errors.aliases_in_help``); a command added elsewhere imports these instead of declaring its own.
The library's errors name concepts ("device", "option recompute"); the flags are named here, once. The helpers the
Python API shares (the model, device, alloc conf and verdict a request chooses) live in ``livebytes.choose``; the
commands import them from there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import typer
import functools
import inspect
import typing
from pathlib import Path
from typer._click.core import ParameterSource

from livebytes.estimator.devices import preset_names
from livebytes.estimator.errors import LivebytesError
from livebytes.choose import ep_of, fsdp_of, what_if, word

from .errors import UsageProblem

IMPL_HELP = "model key, implementation@version, e.g. fla-kda@0.6.0 (see: livebytes models); or --model"
Impl = typer.Option(None, "--impl", help=IMPL_HELP, metavar="KEY")
Impls = typer.Option(None, "--impl", help=IMPL_HELP + "; repeat for several", metavar="KEY")
Model = typer.Option(None, "--model", metavar="CONFIG.json",
                     help="a whole model's training step: a preset (qwen3-next-80b-a3b, kimi-linear-48b-a3b and their "
                          "-small configs; see: livebytes models) or an HF config.json of model_type kda or gated_deltanet "
                          "(KDAForCausalLM or GatedDeltaNetForCausalLM of flash-linear-attention), qwen3_next or "
                          "kimi_linear (transformers' Qwen3NextForCausalLM, KimiLinearForCausalLM), or another of "
                          "flash-linear-attention's causal LMs (unvalidated: see livebytes models), traced on this CPU "
                          "(needs the model extra: pip install 'livebytes\\[model]'); instead of --impl")
Optimizer = typer.Option(None, "--optimizer", metavar="adamw|sgd|none",
                         help="--model only: torch.optim.AdamW (default, its CUDA defaults: foreach), SGD or none")
Precision = typer.Option(None, "--precision", metavar="bf16|fp32-amp",
                         help="--model only: bf16 parameters (default); fp32-amp: fp32 parameters, gradients and "
                              "AdamW states, the forward and loss under CUDA bf16 autocast (HF Trainer's bf16=True)")
Loss = typer.Option(None, "--loss", metavar="default|liger|fla",
                    help="--model: the loss the step computes: default (the model's own: transformers' for Qwen3-Next "
                         "and Kimi-Linear), liger (Liger-Kernel's fused linear cross-entropy; those two), fla "
                         "(flash-linear-attention's models: their own, as the config picks it)")
Routing = typer.Option(None, "--routing", metavar="balanced|worst",
                       help="--model with experts (Qwen3-Next, Kimi-Linear): the routing the answer assumes, balanced "
                            "(default) or worst (the busiest experts take every token they can); the answer says which "
                            "buffers depend on it")
LoraRank = typer.Option(None, "--lora-rank", metavar="R",
                        help="--model only: LoRA of rank R through peft's get_peft_model (the base frozen, the adapters "
                             "trained; needs peft: the model extra); 0 or left out: a full fine-tune")
LoraAlpha = typer.Option(None, "--lora-alpha", metavar="A", help="--model with --lora-rank: peft's lora_alpha (default 8, "
                         "peft's; a scale: it changes no buffer's size)")
LoraTargets = typer.Option(None, "--lora-targets", metavar="all-linear|NAMES",
                           help="--model with --lora-rank: peft's target_modules, all-linear (default: every Linear but "
                                "the output layer) or a comma list of module names (in_proj_qkvz,out_proj)")
LoraQuant = typer.Option(None, "--lora-quant", metavar="4bit",
                         help="--model with --lora-rank: QLoRA's 4-bit base (bitsandbytes); refused: not traced")
Packed = typer.Option(False, "--packed", help="--model only: the --batch-size sequences packed into one row with "
                                              "cu_seqlens (FLA's varlen path) instead of a batch of rows")
Mbs = typer.Option("1", "--batch-size", "--mbs", help="sequences per micro-batch (kernels: packed back to back; --model: "
                   "a batch of rows unless --packed)", metavar="SIZE")
Seq = typer.Option(..., "--seq-len", "--seq", help="tokens per sequence: 8192, 8K or 128K", metavar="SIZE")
Heads = typer.Option(None, "--num-heads", "--heads", help="query/key heads (required with --impl; --model: the config's)",
                     metavar="SIZE")
Dim = typer.Option(None, "--head-dim", "--dim", help="query/key head dimension (default 128; --model: the config's)",
                   metavar="SIZE")
VHeads = typer.Option(None, "--num-v-heads", "--v-heads", metavar="SIZE",
                      help="value heads, a multiple of --num-heads (grouped value attention); default: --num-heads")
ExpandV = typer.Option(None, "--expand-v", metavar="RATIO",
                       help="value head dimension over --head-dim, as FLA's expand_v (0.5, 1, 2; the value head "
                            "dimension head_dim * expand_v must be a whole number); default 1")
Hidden = typer.Option(None, "--hidden-size", "--hidden", help="layer models only: the layer's hidden size (default: the "
                      "layer's own, 2048 for fla-kda-layer and fla-gdn-layer; JSON options say which)", metavar="SIZE")
Layers = typer.Option(None, "--num-hidden-layers", "--layers", help="layer models and --model: layers in the stack "
                      "(default 1; --model: the config's num_hidden_layers)", metavar="SIZE")
Checkpoint = typer.Option(False, "--checkpoint", help="layer models and --model: activation checkpointing per layer "
                          "(torch.utils.checkpoint, non-reentrant)")
ConvSize = typer.Option(None, "--conv-size", help="layer models only: the short convolution's width (default 4)", metavar="SIZE")
Gpu = typer.Option(None, "--gpu", help=f"device preset: {preset_names()}; default: each model's own (see: livebytes models)", metavar="GPU")
Contract = typer.Option(None, "--contract", metavar="report|plain",
                        help="FLA only: report (in-kernel transforms) or plain (the cuDNN Hopper contract)")
NoRecompute = typer.Option(False, "--no-recompute", help="FLA only: disable_recompute=True (save every intermediate)")
Cp = typer.Option(None, "--cp", metavar="W", help="context-parallel models (fla-kda-cp, fla-gdn-cp) and --model: the world "
                  "size W; --seq-len is then the total sequence over the W GPUs (kernel models: default 2; --model: rank "
                  "0's memory, arithmetic on the traced step, unvalidated)")
CpLayout = typer.Option(None, "--cp-layout", metavar="LAYOUT",
                        help="context-parallel models only: FLA's build_cp_context layout, contiguous (default) or zigzag")
CpRank = typer.Option(None, "--cp-rank", metavar="RANK",
                      help="context-parallel models only: the rank modelled, rank 0 (first, default), W-1 (last) or one "
                           "between (middle, W >= 3); which CP kernels it launches, so autotunes on a cold first call")
Fsdp = typer.Option(None, "--fsdp", metavar="W",
                    help="--model only: FSDP2 (torch 2.11's fully_shard per decoder block, then the root) at W ranks: "
                         "rank 0's memory; W > 1 is predicted, unvalidated")
Ep = typer.Option(None, "--ep", metavar="E",
                  help="--model with routed experts only: expert parallelism over E ranks (torchtitan's ExpertParallel: "
                       "E divides the experts and --fsdp's W); rank 0's memory, arithmetic on the traced step, unvalidated")
Json = typer.Option(False, "--json", help="print JSON (schema 3, see docs/json.md) instead of a table")

AllocConf = typer.Option(None, "--alloc-conf", metavar="CONF",
                         help="PYTORCH_CUDA_ALLOC_CONF the process runs with, e.g. expandable_segments:True; default: the "
                              "environment's PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF, else PyTorch's")
Triton = typer.Option(None, "--triton", metavar="VERSION",
                      help="Triton models only: the Triton version whose kernels' process memory counts (stack frames, "
                           "modules): 3.6.0 (default) or 3.9.0 for fla-kda; 3.9.0 alone for fla-gdn, whose backward "
                           "fla-core 0.6.0 runs on Hopper only with Triton >= 3.7.1")
TritonCache = typer.Option(None, "--triton-cache", metavar="cold|warm",
                           help="Triton models only: cold (default), the process's first call is at this shape and "
                                "autotunes every kernel there (first run on a machine); warm: tuned configs cached on disk "
                                "(any case: WARM = warm)")
VALIDATE_TRITON_CACHE = ("cold", "warm", "auto")


def validate_triton_cache(text: Optional[str]) -> Optional[str]:
    """validate's --triton-cache (the runner's states, any case), refused here in one line rather than by the runner's
    own argument parser in a child process."""
    state = word(text)
    if state is not None and state not in VALIDATE_TRITON_CACHE:
        raise LivebytesError(f"--triton-cache must be one of {', '.join(VALIDATE_TRITON_CACHE)}, got {text!r}")
    return state


@dataclass(frozen=True)
class Chosen:
    """What --impl or --model chose: the model keys, the options a traced model's request adds (``traced.model``), and
    the config's heads and head dim (text, as the flags; None for --impl)."""
    keys: List[str]
    options: dict
    heads: Optional[str] = None
    dim: Optional[str] = None


def chosen(impls: Optional[List[str]], model: Optional[str], optimizer: Optional[str] = None,
           precision: Optional[str] = None, packed: bool = False, heads: Optional[str] = None,
           dim_given: bool = False, routing: Optional[str] = None, lora: tuple = (None, None, None, None),
           loss: Optional[str] = None,
           **kernel_flags: bool) -> Chosen:
    """--impl KEY (repeatable) or --model CONFIG.json, exactly one; the --model flags refused without it, and beside it
    --num-heads, --head-dim and the flags of kernels and layers (``kernel_flags``: flag name -> given), which the config
    says or the whole model does not take. ``lora``: the LoRA flags' text (rank, alpha, targets, quant)."""
    impls = list(impls or [])
    if model is None:
        refuse_unused("without --model", optimizer=optimizer is not None,
                      precision=precision is not None, packed=packed, routing=routing is not None, loss=loss is not None,
                      **{flag: text is not None for flag, text in zip(LORA_FLAGS, lora)})
        if not impls:
            raise UsageProblem("give --impl KEY (see: livebytes models) or --model CONFIG.json (a whole model)")
        return Chosen(impls, {})
    if impls:
        raise UsageProblem("--impl and --model: give one (--model is the whole model of an HF config)")
    refuse_unused("with --model: the config's num_heads and head_dim count", heads=heads is not None, dim=dim_given)
    refuse_unused("with --model: the config's sizes count (hidden_size, num_v_heads, expand_v, conv_size), and a whole "
                  "model takes no kernel what-if", **kernel_flags)
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import config_sizes, options_for
    from livebytes.lifetimes.traced.presets import config_of  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.lora import lora_option  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    setting = lora_option(*lora)
    config = config_of(named(model, "--model"))
    key, options = options_for(config, optimizer or "adamw", precision or "bf16", packed, routing=routing, lora=setting,
                               loss=loss)
    n_heads, head_dim = config_sizes(config)
    return Chosen([key], options, str(n_heads), str(head_dim))


def single_impl(impls: List[str], command: str) -> str:
    """``predict --impl A --impl B`` would silently use B: refuse it."""
    if len(impls) != 1:
        raise UsageProblem(f"{command} takes one --impl (got {len(impls)}); use livebytes compare for several")
    return impls[0]


def distinct_impls(impls: List[str], command: str) -> List[str]:
    """``compare --impl X --impl X`` would show one model twice as if two: refuse a repeated key."""
    repeated = sorted({k for k in impls if impls.count(k) > 1})
    if repeated:
        raise UsageProblem(f"{command}: --impl {', '.join(repeated)} given more than once")
    return impls


def refuse_unused(reason: str, **given) -> None:
    """Options that change nothing in this mode (``reason``) are refused, not silently ignored: ``given`` maps
    each flag (underscores for dashes; a Shape field for its flag, ``heads`` for --num-heads) to whether the user set
    it."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import flag_of
    unused = [flag_of(name) for name, was_given in given.items() if was_given]
    if unused:
        raise UsageProblem(f"{', '.join(unused)} {'has' if len(unused) == 1 else 'have'} no effect {reason}; leave "
                           f"{'it' if len(unused) == 1 else 'them'} out")


def given(ctx, *names: str) -> dict[str, bool]:
    """Which of the command's options ``names`` (parameter names) the user wrote on the command line, as opposed to
    left at their defaults."""
    return {name: ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE for name in names}


def refuse_solved(solve: str, given_options: dict[str, bool]) -> None:
    """``plan --solve num_heads --num-heads 7``: the solved dimension's value would be replaced by the answer
    unannounced; refused (``given_options``: ``given``'s answer for the solvable dimensions, by Shape field)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import HF_NAMES, flag_of
    if given_options.get(solve):
        raise UsageProblem(f"{flag_of(solve)} has no effect with --solve {HF_NAMES[solve]}: plan solves for it; leave it out")


def shape_from(mbs: str, seq: str, heads: Optional[str], dim: Optional[str] = "128", v_heads: Optional[str] = None, hidden: Optional[str] = None,
               layers: Optional[str] = None, checkpoint: bool = False, conv_size: Optional[str] = None,
               expand_v: Optional[str] = None):
    """The shape the shape options describe (sizes accept 8K = 8192); the layer flags set the layer fields."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import Shape, head_v_dim, parse_size

    if heads is None:
        raise UsageProblem("--num-heads is required with --impl (with --model the config's num_heads counts)")
    v = parse_size(v_heads, "--num-v-heads") if v_heads is not None else None
    head_dim = parse_size("128" if dim is None else dim, "--head-dim")
    dim_v = head_v_dim(head_dim, expand_v, "--expand-v") if expand_v is not None else None
    return Shape(parse_size(mbs, "--batch-size"), parse_size(seq, "--seq-len"), parse_size(heads, "--num-heads"),
                 head_dim, v_heads=v, dim_v=dim_v, **stack_from(hidden, layers, checkpoint, conv_size))


def stack_from(hidden: Optional[str] = None, layers: Optional[str] = None, checkpoint: bool = False,
               conv_size: Optional[str] = None) -> dict:
    """The layer fields the layer flags set (``Shape``'s keyword names), the flags left out absent."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import flag_of, parse_size
    fields = {"hidden": hidden, "layers": layers, "conv_size": conv_size}
    out = {name: parse_size(text, flag_of(name)) for name, text in fields.items() if text is not None}
    return out | ({"checkpoint": True} if checkpoint else {})


def named(path: str, flag: str, wanted: str = "a file") -> str:
    """A file or folder name as given; an empty one is refused (``Path("")`` is the current folder)."""
    if not path.strip():
        raise LivebytesError(f"{flag}: an empty name; name {wanted}")
    return path


def out_file(path: str, suffixes: tuple[str, ...], flag: str = "--out"):
    """A file to write: refused when it names a folder or lacks one of ``suffixes`` (no silent renaming)."""
    p = Path(path)
    if not path.strip():
        raise LivebytesError(f"{flag}: an empty name; name a file, e.g. out{suffixes[0]}")
    if path.endswith(("/", "\\")) or p.is_dir():
        raise LivebytesError(f"{flag} {path}: is a folder; name a file, e.g. {p / ('out' + suffixes[0])}")
    if p.suffix.lower() not in suffixes:
        raise LivebytesError(f"{flag} {path}: name the file with one of {', '.join(suffixes)}")
    return p


# ---------------------------------------------------------------- the query options, declared once

# each query option: (its parameter's type, its typer.Option); a command takes the ones it names (``query_options``)
QUERY_OPTIONS = {
    "impl": (Optional[List[str]], Impls), "model_config": (Optional[str], Model), "optimizer": (Optional[str], Optimizer),
    "precision": (Optional[str], Precision), "packed": (bool, Packed), "routing": (Optional[str], Routing),
    "loss": (Optional[str], Loss),
    "lora_rank": (Optional[str], LoraRank), "lora_alpha": (Optional[str], LoraAlpha),
    "lora_targets": (Optional[str], LoraTargets), "lora_quant": (Optional[str], LoraQuant),
    "mbs": (str, Mbs), "seq": (str, Seq), "heads": (Optional[str], Heads), "dim": (Optional[str], Dim),
    "v_heads": (Optional[str], VHeads), "expand_v": (Optional[str], ExpandV), "hidden": (Optional[str], Hidden),
    "layers": (Optional[str], Layers), "checkpoint": (bool, Checkpoint), "conv_size": (Optional[str], ConvSize),
    "gpu": (Optional[str], Gpu), "contract": (Optional[str], Contract), "no_recompute": (bool, NoRecompute),
    "cp": (Optional[str], Cp), "cp_layout": (Optional[str], CpLayout), "cp_rank": (Optional[str], CpRank),
    "alloc_conf": (Optional[str], AllocConf), "triton_cache": (Optional[str], TritonCache),
    "triton": (Optional[str], Triton), "fsdp": (Optional[str], Fsdp), "ep": (Optional[str], Ep),
}
# the usual groups, in the order --help lists them
MODEL_OPTIONS = ("impl", "model_config", "optimizer", "precision", "packed", "loss")
LORA_OPTIONS = ("lora_rank", "lora_alpha", "lora_targets", "lora_quant")
LORA_FLAGS = LORA_OPTIONS          # refuse_unused's names (``flag_of``: --lora-rank ...)
SHAPE_OPTIONS = ("mbs", "seq", "heads", "dim", "v_heads", "expand_v", "hidden", "layers", "checkpoint", "conv_size")
WHAT_IF_OPTIONS = ("gpu", "contract", "no_recompute", "cp", "cp_layout", "cp_rank")
PROCESS_OPTIONS = ("alloc_conf", "triton_cache", "triton")


@dataclass(frozen=True)
class QueryFlags:
    """What the query options gave, as typed (text; None or False where left out or not taken by the command)."""
    impl: Optional[List[str]] = None
    model_config: Optional[str] = None
    optimizer: Optional[str] = None
    precision: Optional[str] = None
    packed: bool = False
    routing: Optional[str] = None
    lora_rank: Optional[str] = None
    lora_alpha: Optional[str] = None
    lora_targets: Optional[str] = None
    lora_quant: Optional[str] = None
    loss: Optional[str] = None
    mbs: str = "1"
    seq: Optional[str] = None
    heads: Optional[str] = None
    dim: Optional[str] = None
    v_heads: Optional[str] = None
    expand_v: Optional[str] = None
    hidden: Optional[str] = None
    layers: Optional[str] = None
    checkpoint: bool = False
    conv_size: Optional[str] = None
    gpu: Optional[str] = None
    contract: Optional[str] = None
    no_recompute: bool = False
    cp: Optional[str] = None
    cp_layout: Optional[str] = None
    cp_rank: Optional[str] = None
    alloc_conf: Optional[str] = None
    triton_cache: Optional[str] = None
    triton: Optional[str] = None
    fsdp: Optional[str] = None
    ep: Optional[str] = None


def query_options(*order: str, **replaced):
    """The command's parameters: the query options named in ``order`` (``QUERY_OPTIONS``; ``replaced``: an option
    declared otherwise for this command, a ``typer.Option`` or a (type, Option) pair) and the command's own, at their
    place in ``order`` or after. The function receives the query options as one ``QueryFlags``, its first argument."""

    def wrap(fn):
        own = {p.name: p for p in list(inspect.signature(fn).parameters.values())[1:]}
        hints = typing.get_type_hints(fn)
        taken = [name for name in order if name not in own]
        params = [_query_param(name, replaced.get(name)) if name in taken else own.pop(name).replace(annotation=hints[name])
                  for name in order]
        params += [p.replace(annotation=hints[p.name]) for p in own.values()]
        params.sort(key=lambda p: p.default is not inspect.Parameter.empty)     # ``ctx`` (no default) first

        @functools.wraps(fn)
        def command(**given):
            return fn(QueryFlags(**{name: given.pop(name) for name in taken}), **given)
        command.__signature__ = inspect.Signature(params)
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command
    return wrap


def _query_param(name: str, replaced):
    """One query option as a parameter: its declaration in ``QUERY_OPTIONS``, or the command's own (``replaced``)."""
    kind, option = QUERY_OPTIONS[name]
    if isinstance(replaced, tuple):
        kind, option = replaced
    elif replaced is not None:
        option = replaced
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option, annotation=kind)


def given_or(flag: Optional[str], *defaults: Optional[str]) -> Optional[str]:
    """The flag's text as given (an empty string too: its parser says why), else the first default that is set."""
    return flag if flag is not None else next((d for d in defaults if d is not None), None)


def chosen_by(q: QueryFlags) -> Chosen:
    """``chosen`` of the query flags: --impl or --model, the kernel and layer flags refused beside --model."""
    return chosen(q.impl, q.model_config, q.optimizer, q.precision, q.packed, q.heads, q.dim is not None, q.routing,
                  (q.lora_rank, q.lora_alpha, q.lora_targets, q.lora_quant), q.loss,
                  v_heads=q.v_heads is not None,
                  expand_v=q.expand_v is not None, hidden=q.hidden is not None,
                  conv_size=q.conv_size is not None, contract=q.contract is not None, no_recompute=q.no_recompute,
                  cp_layout=q.cp_layout is not None, cp_rank=q.cp_rank is not None)


def shape_by(q: QueryFlags, ch: Chosen, heads: Optional[str] = None):
    """The one shape of the query flags; --model's heads and head dim where the flags leave them out, else ``heads``."""
    return shape_from(q.mbs, q.seq, given_or(q.heads, ch.heads, heads), given_or(q.dim, ch.dim), q.v_heads, q.hidden,
                      q.layers, q.checkpoint, q.conv_size, q.expand_v)


def what_if_by(q: QueryFlags) -> dict:
    """The what-if options the query flags set (library names)."""
    return what_if(q.contract, q.no_recompute, q.cp, q.cp_layout, q.cp_rank)


def setting_by(q: QueryFlags, ch: Chosen):
    """The query's ``Setting``: device, what-if options with --model's and --fsdp's, allocator and Triton state."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.query import Setting
    return Setting(q.gpu, what_if_by(q) | ch.options | fsdp_of(q.fsdp) | ep_of(q.ep), q.alloc_conf, q.triton_cache,
                   q.triton)


def case_flags(verb: str) -> dict:
    """The flags that name one kernel or layer case without a length (``frames derive``, ``process measure``), their
    help prefixed with ``verb``, the action that takes them."""
    return {
        "impl": typer.Option(None, "--impl", metavar="KEY", help=f"{verb}: the kernel or layer model (fla-kda@0.6.0, "
                                                                   "fla-gdn@0.6.0, fla-kda-layer@0.6.0, ...)"),
        "heads": typer.Option(None, "--num-heads", "--heads", help=f"{verb}: query/key heads", metavar="SIZE"),
        "dim": typer.Option(None, "--head-dim", "--dim", help=f"{verb}: query/key head dimension (default 128)",
                            metavar="SIZE"),
        "v_heads": typer.Option(None, "--num-v-heads", "--v-heads", metavar="SIZE",
                                help=f"{verb}: value heads, a multiple of --num-heads (default: --num-heads)"),
        "contract": typer.Option(None, "--contract", metavar="report|plain",
                                 help=f"{verb}, fla-kda only: the call's contract"),
        "triton": typer.Option(None, "--triton", metavar="VERSION",
                               help=f"{verb}: the installed Triton's version, one the data hold (default: the model's "
                                    "in the data)"),
        # a layer's build options (fla-kda-layer, fla-gdn-layer): part of its case, as the probe builds the layer
        "hidden": typer.Option(None, "--hidden-size", "--hidden", metavar="SIZE",
                               help=f"{verb}, layer models: the layer's hidden size (default 2048)"),
        "layers": typer.Option(None, "--num-hidden-layers", "--layers", metavar="SIZE",
                               help=f"{verb}, layer models: layers in the stack (default 1)"),
        "checkpoint": typer.Option(False, "--checkpoint",
                                   help=f"{verb}, layer models: activation checkpointing per layer"),
        "conv_size": typer.Option(None, "--conv-size", metavar="SIZE",
                                  help=f"{verb}, layer models: the short convolution's width (default 4)")}


def case_from(impl: Optional[str], heads: Optional[str], dim: Optional[str], v_heads: Optional[str],
              contract: Optional[str], command: str, name: str, seq: Optional[str] = None, **layer) -> tuple:
    """(model key, shape, options) of ``case_flags``' values as every command parses them: one sequence of ``seq``
    tokens (4,096 where None: the length changes no frame); ``--impl`` and ``--num-heads`` required. ``layer``: the
    layer flags' values (``stack_from``'s), for a command whose case is a layer's build too."""
    if impl is None or heads is None:
        raise UsageProblem(f"{command}: --impl and --num-heads are required")
    shape = shape_from("1", seq or "4096", heads, dim or "128", v_heads, **layer)
    options = what_if(contract, False)          # the contract as predict reads it (a word in any case)
    if shape.hv != shape.heads:
        options["gva"] = True
    return single_impl([impl], name), shape, options

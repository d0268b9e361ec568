"""What a request's options choose: the model (its what-if options checked), the device, the allocator configuration
and the verdict's process. Shared by the Python API (``livebytes.calls``) and the command line (``livebytes.cli``);
the messages name the command line's flags, whose Python keywords are the same names with underscores."""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Optional

from livebytes.estimator.errors import LivebytesError, UsageProblem
from livebytes.estimator.fields import show
from livebytes.estimator.devices import get_device

# The order expandable_segments is read in: CUDAAllocatorConfig::expandable_segments() asks the generic
# AcceleratorAllocatorConfig (c10/cuda/CUDAAllocatorConfig.h), whose primary variable is PYTORCH_ALLOC_CONF,
# PYTORCH_CUDA_ALLOC_CONF "with lower priority" (c10/core/AllocatorConfig.h, torch 2.13)
ALLOC_CONF_VARIABLES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")

# what-if options: library option name -> the flag that sets it
OPTION_FLAGS = {"contract": "--contract", "recompute": "--no-recompute", "cp": "--cp", "cp_layout": "--cp-layout",
                "cp_rank": "--cp-rank", "config": "--model", "optimizer": "--optimizer", "precision": "--precision",
                "packed": "--packed", "routing": "--routing", "environment": "--model", "fsdp": "--fsdp", "ep": "--ep", "loss": "--loss",
                "lora": "--lora-rank",
                "stored": "validate --from-records (a record of another torch: its stored traces)"}
# options no flag names because the shape selects them (``registry.shape_options``): option -> what sets it
SHAPE_SET_OPTIONS = {"gva": "--num-v-heads above --num-heads", "rows": "--batch-size above 1"}


def word(text: Optional[str]) -> Optional[str]:
    """A flag's word as the library spells it (lower case), blanks around it dropped: ``--triton-cache WARM`` reads as
    warm, as ``--gpu h200`` reads as H200 (``devices.get_device``). Every word-valued option's allowed values are lower
    case; a word outside them is still refused by the option's own check, naming them."""
    return text.strip().lower() if isinstance(text, str) else text


def what_if(contract: Optional[str], no_recompute: bool, cp: Optional[str | int] = None, cp_layout: Optional[str] = None,
            cp_rank: Optional[str] = None) -> dict:
    """The what-if options the flags set (library names), nothing for flags left at their defaults."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import parse_size
    options = {}
    if contract is not None:
        options["contract"] = word(contract)
    if no_recompute:
        options["recompute"] = False
    if cp is not None:
        options["cp"] = parse_size(cp, "--cp")
    if cp_layout is not None:
        options["cp_layout"] = word(cp_layout)
    if cp_rank is not None:
        options["cp_rank"] = word(cp_rank)
    return options


def fsdp_of(text: Optional[str | int], name: str = "--fsdp") -> dict:
    """--fsdp W: FSDP2's world size as the option ``fsdp`` (nothing when not given); a whole model's only (a kernel or
    layer model refuses it in ``check_options_taken``, naming the flag); ``name``: the flag or keyword the errors name."""
    if text is None:
        return {}
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import parse_size
    from livebytes.lifetimes.traced.fsdp import MAX_WORLD  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    world = parse_size(text, name)
    if world > MAX_WORLD:
        raise LivebytesError(f"{name}: {world:,} ranks is beyond any machine (at most {MAX_WORLD:,})")
    return {"fsdp": world}


def ep_of(text: Optional[str | int], name: str = "--ep") -> dict:
    """--ep E: the expert-parallel degree as the option ``ep`` (nothing when not given); a whole model's only."""
    if text is None:
        return {}
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import parse_size
    from livebytes.lifetimes.traced.parallel import MAX_EP  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    ep = parse_size(text, name)
    if ep > MAX_EP:
        raise LivebytesError(f"{name}: {ep:,} ranks is beyond any machine (at most {MAX_EP:,})")
    return {"ep": ep}


def check_options_taken(key: str, options: dict) -> None:
    """Every command refuses a flag the model does not take, naming the flag."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.registry import spec
    taken = {**spec(key).options, **spec(key).counts}
    for name in options:
        if name not in taken:
            raise LivebytesError(f"{key} does not take {OPTION_FLAGS.get(name, name)} (it takes: "
                                 f"{', '.join(OPTION_FLAGS.get(n, n) for n in taken if n in OPTION_FLAGS) or 'no what-if flags'})")


def device_of(key: str, gpu: Optional[str]):
    """The device a command uses for ``key``: --gpu, else the model's default; refused when the engine refuses it."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.registry import check_device, spec
    device = get_device(gpu if gpu is not None else spec(key).default_device)      # --gpu '' is refused, not the default
    check_device(key, device)
    return device


def model_for(key: str, gpu: Optional[str], options: dict, shape=None, depth: bool = True, stack: Optional[dict] = None):
    """The model for ``key`` with the what-if options (each checked) and the code path the shape selects; ``depth``:
    ``check_shape``'s (False: plan's layer search, bounded by its own limit). ``stack``: without a shape, the layer
    fields a layer model is built with (``registry.layer_options``; formula and diff take them without a shape)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.registry import check_shape, get_model, layer_options, shape_options
    check_options_taken(key, options)
    device = device_of(key, gpu)
    chosen = dict(options)
    if shape is not None:
        check_shape(key, shape, device, options, depth)
        chosen.update(shape_options(key, shape))
    elif stack:
        chosen.update(layer_options(key, stack))
    return get_model(key, device, **chosen)


def model_on_device(key: str, gpu: Optional[str], options: dict, shape, compiled: bool = True,
                    depth: bool = True) -> tuple:
    """(``model_for``'s model compiled, from the disk cache when it has it: no sympy import; the device it was built
    for): the device chosen once, as a query resolves it (``query.resolve``, the one caller).
    ``compiled`` False: the model as built (``get_model``), its buffers' sources as records (a snapshot's frames).
    ``depth``: ``model_for``'s."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.registry import check_shape, get_compiled, get_model, shape_options
    check_options_taken(key, options)
    device = device_of(key, gpu)
    check_shape(key, shape, device, options, depth)
    build = get_compiled if compiled else get_model
    return build(key, device, **options, **shape_options(key, shape)), device


def triton_settings(model, device, triton_cache: Optional[str], triton: Optional[str], several: bool) -> tuple:
    """(whether ``model`` runs Triton kernels on ``device``, the cache state and the Triton version its verdict
    simulates): ``capacity.triton_cache_matters`` asked once, then ``triton_cache_for`` and ``triton_for``."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.capacity import triton_cache_matters
    matters = triton_cache_matters(model, device)
    return (matters, triton_cache_for(model, device, triton_cache, several, matters=matters),
            triton_for(model.key, device, triton, several))


def triton_cache_for(model, device, triton_cache: Optional[str], several: bool = False,
                     matters: Optional[bool] = None) -> str:
    """--triton-cache, cold when not given; refused when given for a model it changes nothing for (no Triton kernels),
    unless beside other --impl (``several``: it applies to those, ``cache_skipped`` says so). ``matters``: whether the
    model runs Triton kernels on ``device``, where the caller asked already (``capacity.triton_cache_matters``)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.capacity import check_state, triton_cache_matters
    if triton_cache is None:
        return "cold"
    state = check_state(word(triton_cache))
    if not (triton_cache_matters(model, device) if matters is None else matters):
        if several:
            return "cold"       # no Triton kernels: the state changes nothing the simulation counts
        raise LivebytesError(f"{model.key} runs no Triton kernels: --triton-cache changes nothing for it; leave it out")
    return state


def cache_skipped(models_devices: list, triton_cache: Optional[str], triton: Optional[str] = None,
                  matters: Optional[list] = None) -> Optional[str]:
    """The warning when --triton-cache or --triton is given to several --impl of which some run no Triton kernels: they
    apply to the others. ``matters``: each model's ``capacity.triton_cache_matters``, where the caller asked already."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.capacity import triton_cache_matters
    flags = " and ".join(f"{flag} {show(v)}" for flag, v in (("--triton-cache", triton_cache), ("--triton", triton)) if v)
    if not flags or len(models_devices) < 2:
        return None
    runs_triton = matters if matters is not None else [triton_cache_matters(m, d) for m, d in models_devices]
    none = [m.key for (m, _), triton_kernels in zip(models_devices, runs_triton) if not triton_kernels]
    if len(none) == len(models_devices):
        raise LivebytesError(f"{', '.join(none)} run no Triton kernels: {flags} changes nothing for them; leave it out")
    verb = "apply" if " and " in flags else "applies"
    return f"{flags} {verb} to the Triton models only; {', '.join(none)}: no Triton kernels" if none else None


def alloc_conf_of(text: Optional[str], environ=None):
    """--alloc-conf as the library reads it, else the process's environment (``ALLOC_CONF_VARIABLES``, as PyTorch reads
    it), else PyTorch's default; the answer's ``source`` says which. A key given twice
    (``expandable_segments:True,expandable_segments:False``) is a usage error, not the last one silently winning."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.allocator import parse_alloc_conf
    source, where = "--alloc-conf", "--alloc-conf"
    if text is None:
        env = os.environ if environ is None else environ
        source = next((name for name in ALLOC_CONF_VARIABLES if env.get(name)), "default")
        text, where = env.get(source), f"{source} (from the environment; --alloc-conf overrides it)"
    keys = [item.partition(":")[0].strip() for item in (text or "").split(",") if item.strip()]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:        # a usage error of the flag; the environment's is a bad value (exit 1)
        problem = UsageProblem if source == "--alloc-conf" else LivebytesError
        raise problem(f"{where}: {', '.join(repeated)} given more than once (the last would silently win)")
    try:
        conf = parse_alloc_conf(text)
    except LivebytesError as err:
        raise LivebytesError(f"{where}: {err}") from None
    return replace(conf, source=source)


def triton_for(key: str, device, triton: Optional[str], several: bool = False) -> Optional[str]:
    """--triton, None when not given or, beside other --impl (``several``; ``cache_skipped`` warns), for a model without
    Triton kernels; a version the data lack is refused (``memory.check_triton``)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.process.memory import check_triton, triton_versions
    if triton is None or (several and not triton_versions(key, device)):
        return None
    check_triton(key, triton, device)
    return triton

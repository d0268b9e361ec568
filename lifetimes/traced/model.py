"""A whole model's training step from its HF config, traced once per configuration and answered at any shape.

``Request``: the config (``model_type`` kda or gated_deltanet: flash-linear-attention's ``KDAForCausalLM`` and
``GatedDeltaNetForCausalLM``; qwen3_next: transformers' ``Qwen3NextForCausalLM``, whose linear-attention layers call
flash-linear-attention's ``chunk_gated_delta_rule``), the optimizer, precision, checkpointing, batch layout, layers and
the device.

``traces``: one subprocess (``python -m livebytes.tracer``) traces the step at ``LEARN`` shapes for 1, 2, 3 and 4
layers and at ``HELD_OUT`` for three; cached on disk (the private model cache) by the request, the installed library
versions and the tracer's sources. ``symbolic``: each layer count's calls become one call with byte formulas in S and
MBS (``symbolic``), checked exact at the held-out shape; four layers are checked to be three with one more
(``layers.check``), so any depth from three up is the three-layer call expanded (``layers.expand``). A hybrid stack
(``Family.hybrid``: Qwen3-Next's full-attention layer every ``full_attention_interval`` layers) is not three layers repeated:
it is traced at its own depth up to ``MAX_HYBRID_LAYERS``; deeper, as its head, one and two periods of its layer
pattern and its tail, expanded by period (``hybrid``). ``model``: that call as a ``LifetimeModel`` with the GPU's
own buffers (``build``).
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
import gzip
import re
from dataclasses import replace

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import read_json, show

from .families import PINNED, Family, family
from .hybrid import MAX_HYBRID_LAYERS, expand_pattern, pattern_of, period_request
from .config_fields import check_config
from .families import ROWS
from livebytes.tracer import versions as tracer_versions
from livebytes.estimator.cache import package_digest, cached
from .lora import settings, adapter_parameter, words as lora_words
from livebytes.estimator.devices import get_device
from livebytes.tracer.target import trace_facts
from .calls import unify, ALLOC, TraceRefused
from .layers import check, expand, NotRepeating
from .symbolic import symbolic_call, Unexplained
from livebytes.estimator.shapes import Shape
from livebytes.estimator.symbols import SHAPE_SYMBOLS, shared_lambdify
from .build import dim_names, traced_model
from .parallel import Mesh, Plan
LEARN = ((1, 1030), (2, 1030), (1, 1542), (1, 2060))     # S = 1030 is no multiple of 16..128: chunk counts differ from T
HELD_OUT = (3, 777)                                        # never used to solve, checked against the formulas
# transformers' ForCausalLMLoss shifts the labels with ``labels[..., 1:].contiguous()``: a view of a contiguous [1, S]
# at one row, a copy (and an earlier free of the padded labels) at more, so a batch of one row and a batch of several
# are two programs; such a family (``Family.one_row``) is traced as two models (loss_utils.py:64): one row per batch
# (``Request.rows`` "one", solved at one row) and several (``rows`` "many", solved from two and three rows), the shape's
# batch size choosing which (``registry.shape_options``)
LEARN_ONE_ROW = ((1, 1030), (1, 1542), (1, 2060), (1, 2574))
HELD_OUT_ONE_ROW = (1, 777)
LEARN_MANY_ROWS = ((2, 1030), (3, 1030), (2, 1542), (2, 2060))
HELD_OUT_MANY_ROWS = (3, 777)
BATCH_ROWS = ("one", "many")      # ``Request.rows`` of a ``Family.one_row``: one row per batch, or several
TRACED_LAYERS = (1, 2, 3, 4)
OPTIMIZERS = ("adamw", "sgd", "none")
PRECISIONS = ("bf16", "fp32-amp")
ROUTINGS = ("balanced", "worst")          # the routing an answer assumes of a ``Family.moe`` (``routing_note``)
MAX_CONFIG_BYTES = 1 << 20
MAX_LAYERS = 1024           # --num-hidden-layers of a traced model: the expansion is linear in layers, ~1 s per 25 on one core


@dataclass(frozen=True)
class Request:
    config: str                 # canonical JSON of the HF config
    device: str
    optimizer: str = "adamw"
    precision: str = "bf16"
    checkpoint: bool = False
    packed: bool = False
    layers: int | None = None   # None: the config's num_hidden_layers
    stored: str | None = None   # a folder of traces made under other library versions (``stored_traces``); None: here
    fsdp: int = 0               # FSDP2's world size (``traced.fsdp``); 0: not sharded. Not in the traces' spec
    routing: str = "balanced"   # ``ROUTINGS``: what the answer assumes (MoE families; no traced buffer depends on it)
    lora: str | None = None     # LoRA's settings as canonical JSON (``lora.lora_option``); None: a full fine-tune
    cp: int = 1                 # context-parallel degree (``traced.parallel``); not in the traces' spec
    ep: int = 1                 # expert-parallel degree (``traced.parallel``); not in the traces' spec
    rows: str = "one"           # ``BATCH_ROWS``: a ``Family.one_row``'s program, one row per batch or several (the shape's)
    loss: str | None = None     # ``LOSS_SAID``: the loss the step computes (None: the family's own, ``Family.losses``)

    @property
    def loss_word(self) -> str:
        return self.loss or self.row.losses[0]

    @property
    def config_dict(self) -> dict:
        return json.loads(self.config)

    @property
    def depth(self) -> int:
        config = self.config_dict
        return self.layers or int(config.get("num_hidden_layers", self.row.defaults["num_hidden_layers"]))

    @property
    def row(self) -> Family:
        return family(self.config_dict["model_type"])

    @property
    def family(self) -> str:
        return self.row.name

    @property
    def key(self) -> str:
        return self.row.key

    @property
    def expanded(self) -> bool:
        """Answered by expanding three traced layers (``layers.expand``), not traced at its own depth."""
        return len(layer_counts(self.depth, self.config_dict["model_type"])) > 1


def model_key(model_type: str) -> str:
    """The registry key of a family: ``fla-kda-model@0.6.0``, ``qwen3-next-model@5.17.0`` (``Family.key``)."""
    return family(model_type).key


def config_sizes(config: str) -> tuple[int, int]:
    """(query heads, query/key head dim) of a canonical config, its class's defaults where it leaves them out (a family
    without heads: one; without a head dim: its key width, hidden_size x expand_k, over the heads)
    (Qwen3-Next: its full-attention layers' ``num_attention_heads`` and ``head_dim``; Kimi-Linear: its MLA layers'
    heads and ``qk_nope_head_dim + qk_rope_head_dim``, the ``qk_head_dim`` its config derives)."""
    data = json.loads(config)
    row = family(data["model_type"])
    heads = data.get(row.heads_field, row.defaults.get(row.heads_field)) or 1 if row.heads_field else 1
    if row.head_dim_fields:
        return heads, sum(data.get(f, row.defaults[f]) for f in row.head_dim_fields)
    hidden = data.get("hidden_size", row.defaults["hidden_size"])
    return heads, max(1, int(hidden * data.get("expand_k", row.defaults.get("expand_k", 1))) // heads)


def read_config(path: str) -> str:
    """An HF ``config.json`` (as ``save_pretrained`` writes it) of a model this source traces, as canonical JSON; every
    problem one line."""
    data = read_json(Path(path), MAX_CONFIG_BYTES)
    if not isinstance(data, dict):
        raise LivebytesError(f"{path}: a config is a JSON object")
    return canonical_config(data, str(path))


def canonical_config(data: dict, where: str = "config") -> str:
    """A config of a traced family as canonical JSON, every field its class reads checked first for type and domain
    (``config_fields``): a wrong one is one line naming the field and ``where`` (the file), before any trace."""
    try:
        row = family(data.get("model_type"))
    except LivebytesError as err:
        raise LivebytesError(f"{where}: {err}") from None
    layers = data.get("num_hidden_layers", row.defaults["num_hidden_layers"])
    if type(layers) is not int or not 1 <= layers <= 4096:
        raise LivebytesError(f"{where}: num_hidden_layers must be an integer from 1 to 4096, got {show(layers)}")
    check_config(data, row, where)
    drop = ("architectures", "transformers_version", "torch_dtype", "dtype", "_name_or_path", "auto_map")
    try:
        return json.dumps({k: v for k, v in data.items() if k not in drop}, sort_keys=True)
    except (TypeError, ValueError, RecursionError) as err:    # a dict from the API: a set, an object, a key not text
        raise LivebytesError(f"{where}: holds what a config.json cannot ({show(str(err), 80)})") from None


def architecture_digest(config: str) -> str:
    """A canonical config's digest less its depth (the first 12 hex digits of the SHA-256 of its JSON without
    ``num_hidden_layers``): two configs that differ in depth alone share it, so a process measured at one depth speaks
    for fewer layers of the same stack (``estimator.process.memory``'s whole-model modules)."""
    data = {k: v for k, v in json.loads(config).items() if k != "num_hidden_layers"}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------- tracing

def environment(stored: str | None = None) -> str:
    """What a trace depends on beyond the request: the installed torch, triton, fla-core, flash-linear-attention and
    transformers, and the tracer's sources (a model option: the compiled-model cache keys on it); for traces read from
    a ``stored`` folder, that folder's files (their versions are in them)."""
    if stored is not None:
        return json.dumps(["stored", stored_digest(stored)])
    return json.dumps([installed_versions(), tracer_digest()], sort_keys=True)


def check_environment(env: str, stored: str | None = None, model_type: str | None = None) -> None:
    """The model is built here, now: ``env`` must be this environment, with flash-linear-attention ``PINNED`` and the
    family's pinned distribution (``Family.dist``, ``Family.version``; stored traces carry their own versions: ``stored_traces`` checks them)."""
    if stored is not None:
        if env != environment(stored):
            raise LivebytesError(f"the stored traces in {stored} changed since the model was asked for; ask again")
        return
    fla = installed_versions().get("flash-linear-attention")
    if fla != PINNED:
        raise LivebytesError(f"the traced models are of flash-linear-attention {PINNED}; this environment has "
                             f"{fla or 'none'} (pip install 'livebytes[model]')")
    row = family(model_type)
    have = installed_versions().get(row.dist)
    if row.as_installed and not (have or "").startswith(row.as_installed):
        raise LivebytesError(f"{row.key} traces {row.dist} {row.as_installed}x as installed (validated under "
                             f"{row.version}); this environment has {have or 'none'} (pip install 'livebytes[model]')")
    if not row.as_installed and have != row.version:
        raise LivebytesError(f"{row.key} traces {row.dist} {row.version}; this environment has {have or 'none'}")
    if env != environment():
        raise LivebytesError("the model was asked for under other library versions than those installed; ask again")


def unvalidated(model_type: str, versions: dict | None = None) -> str | None:
    """The version of its library a family traced as installed (its row's ``as_installed``) runs under ``versions`` (default:
    this environment's) where that is not the version its key names and its records validated; None where it is, or
    for a pinned family."""
    row = family(model_type)
    if not row.as_installed:
        return None
    have = (installed_versions() if versions is None else versions).get(row.dist)
    return None if have == row.version else (have or "?")


def options_for(config: str, optimizer: str = "adamw", precision: str = "bf16", packed: bool = False,
                stored: str | None = None, routing: str | None = None, lora: str | None = None,
                loss: str | None = None) -> tuple[str, dict]:
    """(model key, registry options) of a traced model: ``config`` is canonical JSON (``read_config``); ``stored``: a
    folder of traces made under other versions (``stored_traces``), None to trace here; ``routing`` (``ROUTINGS``,
    default balanced) for a family with experts (``Family.moe``), refused for one without; ``lora``: LoRA's settings
    (``lora.lora_option``), None for a full fine-tune."""
    row = family(json.loads(config)["model_type"])
    key = row.key
    options = {"config": config, "optimizer": optimizer, "precision": precision, "packed": packed,
               "environment": environment(stored), "stored": stored} | ({"lora": lora} if lora else {})
    word = check_loss(row, loss)
    if word is not None:                       # the family's own loss is no option (its traces and answers as before)
        options["loss"] = word                 # a stored trace's spec digest holds it (``trace_spec``)
        if word == "liger" and stored is None and liger_version() is None:
            raise LivebytesError("--loss liger traces Liger-Kernel's code: pip install liger-kernel (or "
                                 "'livebytes[model]')")
    if not row.moe:
        if routing is not None:
            raise LivebytesError(f"--routing: {key} has no experts to route to (routing applies to "
                                 f"{', '.join(f.key for f in ROWS if f.moe)})")
        return key, options
    return key, options | {"routing": check_routing(routing)}


# what each loss is, said with every answer (``fields``); the tracer applies it (``tracer.losses``)
LOSS_SAID = {
    "default": "transformers' ForCausalLMLoss: the [T, vocab] logits upcast to fp32 (loss_utils.py), then "
               "cross_entropy; the logits and their gradient are whole buffers",
    "liger": "Liger-Kernel's fused linear cross-entropy (liger-kernel {liger}: LigerForCausalLMLoss; Qwen3-Next through "
             "apply_liger_kernel_to_qwen3_next with its other kernels off, Kimi-Linear, which Liger does not patch, with "
             "its forward's logits replaced the way Liger's causal-LM forward does): no logits; one [C, vocab] bf16 chunk "
             "of them, C = min(next_power_of_2(cdiv(T, cdiv(vocab, hidden))), T), and the gradients of the hidden "
             "states and lm_head computed in the forward",
    "fla": "flash-linear-attention's own, as the config picks it (fuse_cross_entropy / fuse_linear_cross_entropy, "
           "fla/models/modeling_utils.py:92-150: FusedLinearCrossEntropyLoss, chunked, or torch's cross_entropy)",
}


def check_loss(row: Family, loss: str | None) -> str | None:
    """``--loss``'s value for ``row`` (any case, blanks around it dropped; None: the family's own), one line where the
    family's code does not offer it (``Family.losses``)."""
    if loss is None:
        return None
    word = str(loss).strip().lower()
    if word not in LOSS_SAID:
        raise LivebytesError(f"--loss must be one of {', '.join(LOSS_SAID)}, got {show(loss)}")
    if word not in row.losses:
        whose = f"{row.dist}'" if row.dist.endswith("s") else f"{row.dist}'s"
        why = {"fla": f"{whose} {row.causal_lm} computes transformers' loss, not flash-linear-attention's",
               "liger": f"{row.causal_lm} computes flash-linear-attention's loss, as its config picks it "
                        "(fuse_linear_cross_entropy); Liger patches transformers' models"}.get(
            word, f"{row.causal_lm}'s loss is flash-linear-attention's, as its config picks it")
        raise LivebytesError(f"--loss {word}: {why} (--loss takes {' or '.join(row.losses)} for {row.key})")
    return None if word == row.losses[0] else word


def check_routing(routing: str | None) -> str:
    """``--routing``'s value (any case, blanks around it dropped), balanced when left out; else one line."""
    word = "balanced" if routing is None else str(routing).strip().lower()
    if word not in ROUTINGS:
        raise LivebytesError(f"--routing must be one of {', '.join(ROUTINGS)}, got {show(routing)}")
    return word


def installed_versions() -> dict:
    return tracer_versions.installed_versions()


def liger_version() -> str | None:
    return tracer_versions.liger_version()


def tracer_digest() -> str:
    return package_digest("livebytes.tracer")


def layer_counts(depth: int, model_type: str | None = None) -> tuple[int, ...]:
    """The depths traced for a model of ``depth`` layers: itself below three or for a hybrid stack
    (``Family.hybrid``), else three and four (``layers``)."""
    return (depth,) if depth < 3 or (model_type is not None and family(model_type).hybrid) else (3, 4)


def depth_search_start(config: str) -> int:
    """Where a search over the depth of ``config``'s stack starts (``plan --solve num_hidden_layers``): three for a
    uniform stack, whose traces at three and four layers serve every depth from three up (``layer_counts``), so that one
    and two layers are traced only when three do not fit; one for a hybrid (traced at its own depth up to
    ``MAX_HYBRID_LAYERS``)."""
    return 1 if family(json.loads(config)["model_type"]).hybrid else 3


def learn_shapes(req: Request) -> tuple:
    """The shapes the formulas are solved from: ``LEARN``, or for a ``Family.one_row`` one row per batch (``rows``
    "one") or two and three rows (``rows`` "many")."""
    if not req.row.one_row:
        return LEARN
    return LEARN_MANY_ROWS if req.rows == "many" else LEARN_ONE_ROW


def held_out_shape(req: Request) -> tuple:
    if not req.row.one_row:
        return HELD_OUT
    return HELD_OUT_MANY_ROWS if req.rows == "many" else HELD_OUT_ONE_ROW


def trace_spec(req: Request, layers: int) -> dict:
    held = [list(held_out_shape(req))] if layers in (1, 2, 3) or req.row.hybrid else []
    shapes = [list(s) for s in learn_shapes(req)] + held
    flattening = {"packed_batch": req.row.packed_batch} if req.packed and req.row.packed_batch != "cu_seqlens" else {}
    spec = {"device": req.device, "config": req.config_dict, "precision": req.precision, "optimizer": req.optimizer,
            "checkpoint": req.checkpoint, "packed": req.packed, "steps": 3, "runs": [{"layers": layers, "shapes": shapes}],
            **flattening} | ({"loss": req.loss} if req.loss else {})
    if req.lora is None:        # a full fine-tune's spec as before LoRA: its stored traces keep their names
        return spec
    return spec | {"lora": settings(req.lora) | {"peft": peft_version()}}


def peft_version() -> str:
    """The installed peft (a LoRA trace runs its code: the trace's spec, and so its cache key, names it); none: one
    line."""
    try:
        return version("peft")
    except PackageNotFoundError:
        raise LivebytesError("LoRA (--lora-rank) is traced through peft's own code: pip install 'livebytes[model]' "
                             "(it needs peft)") from None


def _start(spec: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "livebytes.tracer", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_tracers(specs: list[dict]) -> list[dict]:
    """The traces of each spec, from tracer processes run side by side (torch, triton and the model's library must be
    installed)."""
    missing = [d for d, v in installed_versions().items() if v is None and d != "fla-core"]
    if missing:
        raise LivebytesError(f"tracing a model needs {', '.join(missing)} installed: pip install 'livebytes[model]'")
    procs = [_start(spec) for spec in specs]
    # one thread a tracer: a tracer reads its spec before anything else, so a spec handed over inside the previous
    # tracer's communicate() let it start only when that one ended (the "side by side" tracers ran one after another)
    with ThreadPoolExecutor(len(procs)) as pool:
        results = list(pool.map(lambda p, spec: p.communicate(json.dumps(spec)), procs, specs))
    out = []
    for p, (stdout, stderr), spec in zip(procs, results, specs):
        if p.returncode != 0:
            last = _error_line(stderr) or f"exit code {p.returncode}"
            raise LivebytesError(f"tracing the model failed{_under(spec)}: "
                                 f"{known_refusal(last) or last.removeprefix('error: ')}")
        out.append(json.loads(stdout))
    return out


def _under(spec: dict) -> str:
    """`` under transformers 5.25.0 as installed (validated under 5.17.0)``, where a failed trace ran code its records
    did not validate (``unvalidated``): the line says whose code refused; else nothing."""
    row = family(spec["config"]["model_type"])
    have = unvalidated(row.model_type)
    return f" under {row.dist} {have} as installed (validated under {row.version})" if have else ""


def _error_line(stderr: str) -> str | None:
    """The line of a failed tracer's stderr that says what failed: the last ``...Error: ...`` (or ``error: ...``) line,
    else the last line with a word in it (an exception whose text spans lines ends in a line of its own, such as one
    ``"``: the whole answer once read ``tracing the model failed: "``)."""
    lines = [ln.strip() for ln in stderr.splitlines() if re.search(r"[A-Za-z]", ln)]
    named = [ln for ln in lines if re.match(r"([\w.]*(Error|Exception)|error): ", ln)]
    return (named or lines or [None])[-1]


# what a traced library refuses on meta tensors or this machine's versions, said in the user's terms
KNOWN_REFUSALS = (
    ("Only support CUDA/NPU/XPU tensors",
     "FLA's FusedCrossEntropyLoss (the config's fuse_cross_entropy, GatedDeltaNet's default) asserts CUDA inputs, which "
     "the tracer's meta tensors are not: not traced yet; set fuse_linear_cross_entropy true and fuse_cross_entropy "
     "false in the config to trace the fused linear loss instead"),
    ("Padding_idx must be within num_embeddings",
     "the config's pad_token_id is not a token of its vocab_size (Kimi-Linear's default is 163839): set pad_token_id "
     "to null or to an id below vocab_size"),
    ("enable checkpoint\u2011debug mode globally",
     "--checkpoint is not traced for this model yet: torch.utils.checkpoint found a different number of tensors saved "
     "by the recomputation than by the forward under the tracer (CheckpointError: the recompute ran other code than "
     "the forward, as Qwen3-Next's and Kimi-Linear's SDPA did before the tracer re-entered its modes there)"),
    ("Please upgrade Triton to >= 3.7.1",
     "fla-core 0.6.0 refuses the gated backward on Hopper under Triton < 3.7.1 (its #640): trace with Triton >= 3.7.1 "
     "installed (pip install 'triton>=3.7.1')"),
)


def known_refusal(line: str) -> str | None:
    return next((said for seen, said in KNOWN_REFUSALS if seen in line), None)


# fla-core 0.6.0 ops/common/chunk_o.py (its #640): the gated chunk_bwd_dqkwg refuses Hopper under these Tritons
GATED_BACKWARD_REFUSED = ((3, 4, 0), (3, 7, 1))


def untraceable_here(model_type: str, sm: int = 90) -> str | None:
    """Why this environment cannot trace a model of ``model_type`` for a GPU of compute capability ``sm`` (None: it
    can): the tracer runs the library's own checks, and fla-core 0.6.0 refuses GatedDeltaNet's backward on Hopper
    under Triton >= 3.4.0 and < 3.7.1 (a family that runs it: ``Family.gated_backward``)."""
    triton = installed_versions().get("triton") or "0"
    version = tuple(int(part) for part in triton.split("+")[0].split(".")[:3])
    low, high = GATED_BACKWARD_REFUSED
    name = family(model_type).gated_backward
    if name and sm == 90 and low <= version < high:
        return f"{name} traces for Hopper under Triton >= 3.7.1 only (fla-core 0.6.0's #640); this has {triton}"
    return None


def traces(req: Request) -> dict:
    """The request's traces, layer count -> that run's traces (and the versions): from the request's stored folder,
    else from the disk cache, else traced now (one tracer process per layer count, side by side)."""
    if req.stored is not None:
        return stored_traces(req)
    specs, parts = _trace_key(req)

    def trace_now() -> dict:
        return _joined(run_tracers(specs))
    return cached(parts, trace_now)


@lru_cache(maxsize=16)
def trace_versions(req: Request) -> dict:
    """The library versions the request's traces were made under, read once per process (a depth search builds a
    model at every depth it tries; each reads them)."""
    return traces(req)["versions"]


def _trace_key(req: Request) -> tuple[list, tuple]:
    """(the tracer specs of the request's layer counts, the disk cache's key of their traces). The key names the GPU
    by the facts a trace reads of it (``tracer.target.trace_facts``), not by its name: an H100's step is the H200's
    trace, a B300's the B200's, so another GPU with the same facts answers from the cache."""
    specs = [trace_spec(req, n) for n in layer_counts(req.depth, req.config_dict["model_type"])]
    facts = trace_facts(get_device(req.device))
    keyed = [dict(spec, device=facts) for spec in specs]
    liger = (liger_version(),) if req.loss == "liger" else ()        # its code is traced too
    return specs, ("traces", json.dumps(keyed, sort_keys=True), json.dumps(installed_versions(), sort_keys=True),
                   tracer_digest()) + liger


def _joined(done: list) -> dict:
    return {"versions": done[0]["versions"], "runs": [d["runs"][0] for d in done]}


class _NotCached(Exception):
    pass


def prefetch_traces(reqs: list) -> None:
    """Trace the requests whose traces are not cached yet side by side (a tracer process per spec), into the cache:
    ``traces`` then reads each from there."""

    def missing() -> dict:
        raise _NotCached
    todo = []
    for req in reqs:
        try:
            cached(_trace_key(req)[1], missing)
        except _NotCached:
            todo.append(req)
    keys = [_trace_key(req) for req in todo]
    done = run_tracers([spec for specs, _ in keys for spec in specs]) if todo else []
    for specs, parts in keys:
        mine, done = done[:len(specs)], done[len(specs):]
        cached(parts, lambda mine=mine: _joined(mine))


# ------------------------------------------------------------------------------- traces made elsewhere, stored
# A trace depends on the installed torch (its autograd engine's order of frees, its autocast policy): a record measured
# under another torch is checked against that torch's traces, made by the tracer under it (``python -m
# livebytes.tracer`` with the spec, ``validate.check.store_traces``) and stored as its raw output, one file per spec.
MAX_STORED_TRACE_BYTES = 64 << 20      # one stored trace, decompressed (the largest committed: ~20 MB)


def store_name(versions: dict) -> str:
    """``torch-2.11.0_triton-3.6.0``: the versions a trace depends on beyond the pinned libraries (local builds'
    ``+cu130`` dropped): a store folder's name."""
    return "_".join(f"{lib}-{str(versions.get(lib) or '?').split('+')[0]}" for lib in ("torch", "triton"))


def stored_trace_name(spec: dict) -> str:
    """The file a spec's trace is stored under: the digest of its canonical JSON."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16] + ".json.gz"


def stored_digest(folder: str) -> str:
    """The stored folder's trace files, by name and content (the compiled-model cache keys on it); a file over the
    stored-trace limit is named by its size alone (reading it is refused later, in one line)."""
    h = hashlib.sha256()
    for path in sorted(Path(folder).glob("*.json.gz")):
        size = path.stat().st_size
        body = hashlib.sha256(path.read_bytes()).digest() if size <= MAX_STORED_TRACE_BYTES else str(size).encode()
        h.update(path.name.encode() + body)
    return h.hexdigest()[:16]


def _read_stored(path: Path) -> dict:
    """A stored trace (gzipped JSON, bounded); every problem one line."""
    try:
        with gzip.open(path, "rb") as fh:
            raw = fh.read(MAX_STORED_TRACE_BYTES + 1)
        if len(raw) > MAX_STORED_TRACE_BYTES:
            raise LivebytesError(f"{path}: a stored trace over {MAX_STORED_TRACE_BYTES:,} bytes decompressed")
        data = json.loads(raw)
    except (OSError, EOFError, ValueError, RecursionError):
        raise LivebytesError(f"{path}: not a readable stored trace (gzipped JSON)") from None
    if not (isinstance(data, dict) and isinstance(data.get("runs"), list) and data["runs"]
            and isinstance(data.get("versions"), dict)):
        raise LivebytesError(f"{path}: not a stored trace (no runs or versions)")
    return data


def stored_traces(req: Request) -> dict:
    """``traces`` read from ``req.stored``: each layer count's spec under its name, its spec the request's, made with
    flash-linear-attention ``PINNED``."""
    runs, versions = [], None
    for n in layer_counts(req.depth, req.config_dict["model_type"]):
        spec = trace_spec(req, n)
        path = Path(req.stored) / stored_trace_name(spec)
        if not path.is_file():
            raise LivebytesError(f"{req.stored} holds no stored trace of this request at {n} layers ({path.name})")
        data = _read_stored(path)
        if data.get("spec") != spec or data["versions"].get("flash-linear-attention") != PINNED:
            raise LivebytesError(f"{path}: not a trace of this request under flash-linear-attention {PINNED}")
        made = store_name(data["versions"])
        if made != Path(req.stored).name:
            raise LivebytesError(f"{path}: made under {made}, not the {Path(req.stored).name} its folder names")
        runs.append(data["runs"][0])
        versions = data["versions"]
    return {"versions": versions, "runs": runs}


# ---------------------------------------------------------------------------------------------- the model

@lru_cache(maxsize=8)
def symbolic_calls(req: Request) -> dict:
    """Layer count -> its symbolic call; the held-out shape checked exact, four layers checked to repeat three."""
    data = traces(req)
    config = req.config_dict
    out = {}
    for run in data["runs"]:
        calls = [unify(t) for t in run["traces"]]
        learn = [c for c in calls if (c.mbs, c.seq) in learn_shapes(req)]
        out[run["layers"]] = symbolic_call(learn, config)
        held = [c for c in calls if (c.mbs, c.seq) == held_out_shape(req)]
        if held:
            check_held_out(out[run["layers"]], held[0], config, learn)
    if 3 in out and 4 in out:
        check(out[3], out[4])
    return out


def check_held_out(sym, held, config: dict, learn: list) -> None:
    """Every allocation the formulas give at the held-out shape is the traced one, byte for byte."""

    both = symbolic_call(learn + [held], config)       # the same events, solved with the held-out shape too
    pairs = [(a, b) for (k, a), (_, b) in zip(sym.events, both.events) if k == ALLOC]
    subs = Shape(held.mbs, held.seq, 1).subs()
    # every formula evaluated at once, each distinct one compiled once (``evaluate``'s values, one lambdify)
    values = shared_lambdify([x.bytes for pair in pairs for x in pair])(*(subs[s] for s in SHAPE_SYMBOLS))
    for (a, _), mine, theirs in zip(pairs, values[::2], values[1::2]):
        if int(mine) != int(theirs):
            raise Unexplained(f"{a.op} at {a.module or 'the model'}: the formula {a.bytes} misses the held-out shape "
                              f"{held.mbs} x {held.seq}")


def call_for(req: Request):
    """The symbolic call of the request's depth: traced whole, or expanded from three and four layers, or for a hybrid
    stack deeper than ``MAX_HYBRID_LAYERS``, from its head, one or two periods and its tail (``hybrid``)."""

    req, depth = replace(req, fsdp=0, cp=1, ep=1), req.depth      # FSDP2, CP, EP: placed on the traced step afterwards
    if by_period(req):
        return hybrid_call(req)
    calls = symbolic_calls(traced_request(req))
    return calls[depth] if depth in calls else expand(calls[3], depth)


@lru_cache(maxsize=8)
def hybrid_call(req: Request):
    """The request's call from its pattern's one- and two-period traces (``hybrid``). Kept per process as
    ``symbolic_calls`` is: every world size ``plan --solve gpus`` tries shares the unsharded call (``call_for``), so its
    expansion and period check run once, not once per try."""
    pattern = pattern_of(req)
    one, two = (period_request(req, pattern, k) for k in (1, 2))
    if req.stored is None:
        prefetch_traces([one, two])             # both traced side by side
    return expand_pattern(symbolic_calls(one)[one.depth], symbolic_calls(two)[two.depth], pattern)


def period_note(req: Request) -> str:
    """How a stack answered by period was traced (``hybrid``)."""
    p = pattern_of(req)
    h, n, t = len(p.head), len(p.period), len(p.tail)
    return (f"depth by period: {req.depth} layers = head {h} + {p.repeats} x a period of {n} + tail {t}; traced at "
            f"{h + n + t} and {h + 2 * n + t} layers, the second proved the first with one more period (layers.check), "
            f"expanded to {p.repeats} periods (layers.expand)")


def by_period(req: Request) -> bool:
    """A hybrid stack too deep to trace whole: answered from its pattern's periods (``hybrid``)."""
    return req.row.hybrid and req.depth > MAX_HYBRID_LAYERS


def traced_request(req: Request) -> Request:
    """The request whose traces (and their versions) the answer comes from: FSDP2 is placed on the traced step
    afterwards (``traced.fsdp``), so every world size shares the unsharded one."""
    req = replace(req, fsdp=0, cp=1, ep=1)
    if by_period(req):
        return period_request(req, pattern_of(req), 1)
    return _deep(req) if req.expanded else req


def _deep(req: Request) -> Request:
    """Every depth from three up shares one request (and its traces at three and four)."""
    return replace(req, layers=3)


def build(req: Request, device) -> "LifetimeModel":  # noqa: F821
    try:
        call = call_for(req)
    except (Unexplained, NotRepeating, TraceRefused) as err:     # the traces are no model: said in one line
        raise LivebytesError(f"{req.key}: {err}") from None
    versions = trace_versions(traced_request(req))
    return traced_model(call, device.sm_count, device.arch, req.fsdp, device.max_threads_per_sm,
                        dims=dim_names(req.config_dict), parallel=parallel_plan(req),
                        trainable=adapter_parameter if req.lora else None, **fields(req, device, versions))


def parallel_plan(req: Request):
    """EP and CP of the request (``traced.parallel.Plan``), checked in one line; None where neither is asked."""
    config = dict(req.config_dict, num_hidden_layers=req.depth)
    return Plan.of(config, Mesh(req.fsdp, req.cp, req.ep), req.routing, req.precision)


def fields(req: Request, device, versions: dict) -> dict:
    config = req.config_dict
    fla = versions.get("flash-linear-attention") or "?"
    depth = req.depth
    row = req.row
    version = versions.get(row.dist) or "?"
    as_installed = f" as installed; validated under {row.version}" if unvalidated(row.model_type, versions) else ""
    return dict(
        key=req.key, implementation=f"{row.dist} {version} {row.causal_lm}, traced{as_installed}",
        version=version, device=device.name,
        summary=(f"{depth} layer{'s' if depth != 1 else ''}, hidden {config.get('hidden_size')}, vocab "
                 f"{config.get('vocab_size')}: a training step (forward, backward, {req.optimizer} step, zero_grad) in "
                 f"{req.precision}{', checkpointing per layer' if req.checkpoint else ''}; traced with torch "
                 f"{versions.get('torch')}, transformers {versions.get('transformers')}"
                 + (f"; {lora_words(req.lora)} (peft {peft_version()})" if req.lora else "")),
        options=(("config", hashlib.sha256(req.config.encode()).hexdigest()[:12]),
                 ("architecture", architecture_digest(req.config)), ("optimizer", req.optimizer),
                 ("precision", req.precision), ("checkpoint", req.checkpoint), ("packed", req.packed),
                 ("layers", depth)) + ((("routing", req.routing),) if row.moe else ())
                + ((("lora", req.lora),) if req.lora else ())
                + ((("rows", req.rows),) if req.rows != "one" else ())
                + ((("loss", req.loss_word),) if len(row.losses) > 1 else ()),
        not_modelled=NOT_MODELLED + row.not_modelled,
        notes=(f"traced on meta tensors with torch {versions.get('torch')}, flash-linear-attention {fla}, transformers "
               f"{versions.get('transformers')}, triton {versions.get('triton')}",)
              + ((routing_note(req.routing),) if row.moe else ()) + (loss_note(req, versions),) + row.notes
              + ((FLATTENING_NOTE,) if req.packed and row.packed_batch == "flattening" else ())
              + ((period_note(req),) if by_period(req) else ()),
    )


# transformers 5.17.0: a packed batch as its DataCollatorWithFlattening(return_flash_attn_kwargs=True) makes it
# (data/data_collator.py), and what each layer of the hybrids does with it
FLATTENING_NOTE = (
    "packed: the batch as transformers' DataCollatorWithFlattening(return_flash_attn_kwargs=True) makes it: one row of "
    "the sequences back to back, position_ids restarting per sequence, cu_seq_lens_q/k (int32) and max_length_q/k. "
    "Full attention: with the config's use_cache true (the presets', as published) the model makes a DynamicCache in "
    "training too and masking_utils looks for packed sequences only without one (_preprocess_mask_arguments), so "
    "sdpa runs causal over the whole row, as on the GPU; with use_cache false (or --checkpoint, which turns it off), "
    "the mask from the position_ids (find_packed_sequence_indices): a block-diagonal [1, 1, T, T] bool mask, made "
    "additive in q's dtype before a fused kernel (attention.cpp convert_boolean_attn_mask; the memory-efficient kernel "
    "pads its last dim to a multiple of 8, preprocess_mask; flash takes no mask). "
    "Linear attention: Qwen3-Next's Gated DeltaNet passes cu_seq_lens_q to fla's chunk_gated_delta_rule as cu_seqlens "
    "(the varlen path); Kimi-Linear's KDA passes no boundaries (transformers' hub wrapper keeps only chunk_kda's own "
    "parameters, hub_kernels.py use_kernel_func_from_hub_with_fallback), so it runs the row as one sequence, as on the "
    "GPU; the torch causal_conv1d fallback takes none either")


def loss_note(req: Request, versions: dict) -> str:
    """The loss the step computes, named (``LOSS_SAID``)."""
    return f"loss: {req.loss_word}: " + LOSS_SAID[req.loss_word].format(liger=liger_version() or "?")


NOT_MODELLED = (
    "CUDA-internal scratch of operators other than GEMMs and leading-dim sums (sort, scan and embedding-backward "
    "temporaries: named per model where they run)",
    "what the process does between steps beyond the step itself (data loading, logging, a second batch in flight)",
)

# transformers 5.17.0: the experts implementation a model gets unless it asks for another is grouped_mm
# (modeling_utils.py:1882-1903 get_correct_experts_implementation; ``_grouped_mm_can_dispatch``, 1678-1687, holds for
# every model whose experts use ``use_experts_implementation``, as both families' do); the call itself runs
# torch.nn.functional.grouped_mm or torch._grouped_mm on sm80+ (integrations/moe.py:291-336); the tracer refuses any
# other implementation (tracer/step.py build_model)
ROUTING_SAID = {
    "balanced": "balanced (each of the E experts takes T x top_k / E of the T x top_k token-expert pairs)",
    "worst": "worst (the busiest experts take every token they can: top_k experts take all T tokens each, the rest "
             "none; a token picks an expert at most once)",
}


def routing_note(routing: str) -> str:
    """What the answer assumes of the routing and why the bytes do not depend on it (a ``Family.moe``)."""
    same = " -- the same bytes as balanced" if routing == "worst" else ""
    return (f"routing: {ROUTING_SAID[routing]}{same}: no traced buffer depends on it. The experts run as transformers "
            "5.17's default grouped_mm (integrations/moe.py:377-481 grouped_mm_experts_forward): the T x top_k "
            "token-expert pairs sorted by expert into [T*top_k, hidden] and [T*top_k, 2*moe_intermediate_size] "
            "buffers, one torch._grouped_mm per projection over all experts, the tokens per expert only the offsets' "
            "values. The per-expert transients that would depend on it are the eager loop's "
            "(experts_implementation='eager': modeling_qwen3_next.py:799-823, KimiLinearExperts the same): each hit "
            "expert's gathered tokens [n_e, hidden], its gate_up output [n_e, 2*moe_intermediate_size], act(gate)*up "
            "[n_e, moe_intermediate_size] and its down and weighted outputs [n_e, hidden], n_e = T x top_k / E "
            "balanced, T worst; that path is not traced")


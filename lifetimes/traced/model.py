"""A whole model's training step from its HF config, traced once per configuration and answered at any shape.

``Request``: the config (``model_type`` kda or gated_deltanet: flash-linear-attention's ``KDAForCausalLM`` and
``GatedDeltaNetForCausalLM``), the optimizer, precision, checkpointing, batch layout, layers and the device.

``traces``: one subprocess (``python -m livebytes.tracer``) traces the step at ``LEARN`` shapes for 1, 2, 3 and 4
layers and at ``HELD_OUT`` for three; cached on disk (the private model cache) by the request, the installed library
versions and the tracer's sources. ``symbolic``: each layer count's calls become one call with byte formulas in S and
MBS (``symbolic``), checked exact at the held-out shape; four layers are checked to be three with one more
(``layers.check``), so any depth from three up is the three-layer call expanded (``layers.expand``). ``model``: that
call as a ``LifetimeModel`` with the GPU's own buffers (``build``).
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import read_json, show

FAMILIES = {"kda": "fla-kda-model", "gated_deltanet": "fla-gdn-model"}
PINNED = "0.6.0"            # the flash-linear-attention version the registered models trace (``check_environment``)
LEARN = ((1, 1030), (2, 1030), (1, 1542), (1, 2060))     # S = 1030 is no multiple of 16..128: chunk counts differ from T
HELD_OUT = (3, 777)                                        # never used to solve, checked against the formulas
TRACED_LAYERS = (1, 2, 3, 4)
OPTIMIZERS = ("adamw", "sgd", "none")
PRECISIONS = ("bf16", "fp32-amp")
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

    @property
    def config_dict(self) -> dict:
        return json.loads(self.config)

    @property
    def depth(self) -> int:
        config = self.config_dict
        return self.layers or int(config.get("num_hidden_layers", CONFIG_DEFAULTS[config["model_type"]]["num_hidden_layers"]))

    @property
    def family(self) -> str:
        return FAMILIES[self.config_dict["model_type"]]


# the config classes' defaults for what a config.json may leave out (fla 0.6.0 fla/models/kda/configuration_kda.py:31-38,
# fla/models/gated_deltanet/configuration_gated_deltanet.py:31-38)
CONFIG_DEFAULTS = {"kda": {"num_heads": 16, "head_dim": 128, "num_hidden_layers": 24},
                   "gated_deltanet": {"num_heads": 6, "head_dim": 256, "num_hidden_layers": 21}}


def config_sizes(config: str) -> tuple[int, int]:
    """(num_heads, head_dim) of a canonical config, its class's defaults where it leaves them out."""
    data = json.loads(config)
    defaults = CONFIG_DEFAULTS[data["model_type"]]
    return data.get("num_heads", defaults["num_heads"]), data.get("head_dim", defaults["head_dim"])


def read_config(path: str) -> str:
    """An HF ``config.json`` (as ``save_pretrained`` writes it) of a model this source traces, as canonical JSON; every
    problem one line."""
    data = read_json(Path(path), MAX_CONFIG_BYTES)
    if not isinstance(data, dict):
        raise LivebytesError(f"{show(path)}: a config is a JSON object")
    return canonical_config(data, str(path))


def canonical_config(data: dict, where: str = "config") -> str:
    kind = data.get("model_type")
    if kind not in FAMILIES:
        raise LivebytesError(f"{where}: model_type {show(kind)} is not traced (known: {', '.join(FAMILIES)})")
    layers = data.get("num_hidden_layers", CONFIG_DEFAULTS[kind]["num_hidden_layers"])
    if type(layers) is not int or not 1 <= layers <= 4096:
        raise LivebytesError(f"{where}: num_hidden_layers must be an integer from 1 to 4096, got {show(layers)}")
    for field in ("hidden_size", "vocab_size", "num_heads", "head_dim"):
        value = data.get(field)
        if value is not None and (type(value) is not int or value <= 0):
            raise LivebytesError(f"{where}: {field} must be a positive integer, got {show(value)}")
    drop = ("architectures", "transformers_version", "torch_dtype", "dtype", "_name_or_path", "auto_map")
    return json.dumps({k: v for k, v in data.items() if k not in drop}, sort_keys=True)


# ---------------------------------------------------------------------------------------------- tracing

def environment(stored: str | None = None) -> str:
    """What a trace depends on beyond the request: the installed torch, triton, fla-core, flash-linear-attention and
    transformers, and the tracer's sources (a model option: the compiled-model cache keys on it); for traces read from
    a ``stored`` folder, that folder's files (their versions are in them)."""
    if stored is not None:
        return json.dumps(["stored", stored_digest(stored)])
    return json.dumps([installed_versions(), tracer_digest()], sort_keys=True)


def check_environment(env: str, stored: str | None = None) -> None:
    """The model is built here, now: ``env`` must be this environment, with flash-linear-attention ``PINNED`` (stored
    traces carry their own versions: ``stored_traces`` checks them)."""
    if stored is not None:
        if env != environment(stored):
            raise LivebytesError(f"the stored traces in {stored} changed since the model was asked for; ask again")
        return
    fla = installed_versions().get("flash-linear-attention")
    if fla != PINNED:
        raise LivebytesError(f"the traced models are of flash-linear-attention {PINNED}; this environment has "
                             f"{fla or 'none'} (pip install 'livebytes[model]')")
    if env != environment():
        raise LivebytesError("the model was asked for under other library versions than those installed; ask again")


def options_for(config: str, optimizer: str = "adamw", precision: str = "bf16", packed: bool = False,
                stored: str | None = None) -> tuple[str, dict]:
    """(model key, registry options) of a traced model: ``config`` is canonical JSON (``read_config``); ``stored``: a
    folder of traces made under other versions (``stored_traces``), None to trace here."""
    key = f"{FAMILIES[json.loads(config)['model_type']]}@{PINNED}"
    return key, {"config": config, "optimizer": optimizer, "precision": precision, "packed": packed,
                 "environment": environment(stored), "stored": stored}



def installed_versions() -> dict:
    from livebytes.tracer.versions import installed_versions as versions
    return versions()


def tracer_digest() -> str:
    from livebytes.estimator.cache import package_digest
    return package_digest("livebytes.tracer")


def layer_counts(depth: int) -> tuple[int, ...]:
    """The depths traced for a model of ``depth`` layers: itself below three, else three and four (``layers``)."""
    return (depth,) if depth < 3 else (3, 4)


def trace_spec(req: Request, layers: int) -> dict:
    shapes = [list(s) for s in LEARN] + ([list(HELD_OUT)] if layers in (1, 2, 3) else [])
    return {"device": req.device, "config": req.config_dict, "precision": req.precision, "optimizer": req.optimizer,
            "checkpoint": req.checkpoint, "packed": req.packed, "steps": 3, "runs": [{"layers": layers, "shapes": shapes}]}


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
    results = [p.communicate(json.dumps(spec)) for p, spec in zip(procs, specs)]
    out = []
    for p, (stdout, stderr) in zip(procs, results):
        if p.returncode != 0:
            lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
            last = lines[-1] if lines else f"exit code {p.returncode}"
            raise LivebytesError(f"tracing the model failed: {known_refusal(last) or last.removeprefix('error: ')}")
        out.append(json.loads(stdout))
    return out


# what a traced library refuses on meta tensors or this machine's versions, said in the user's terms
KNOWN_REFUSALS = (
    ("Only support CUDA/NPU/XPU tensors",
     "FLA's FusedCrossEntropyLoss (the config's fuse_cross_entropy, GatedDeltaNet's default) asserts CUDA inputs, which "
     "the tracer's meta tensors are not: not traced yet; set fuse_linear_cross_entropy true and fuse_cross_entropy "
     "false in the config to trace the fused linear loss instead"),
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
    under Triton >= 3.4.0 and < 3.7.1."""
    triton = installed_versions().get("triton") or "0"
    version = tuple(int(part) for part in triton.split("+")[0].split(".")[:3])
    low, high = GATED_BACKWARD_REFUSED
    if model_type == "gated_deltanet" and sm == 90 and low <= version < high:
        return f"GatedDeltaNet traces for Hopper under Triton >= 3.7.1 only (fla-core 0.6.0's #640); this has {triton}"
    return None


def traces(req: Request) -> dict:
    """The request's traces, layer count -> that run's traces (and the versions): from the request's stored folder,
    else from the disk cache, else traced now (one tracer process per layer count, side by side)."""
    from livebytes.estimator.cache import cached
    if req.stored is not None:
        return stored_traces(req)
    counts = layer_counts(req.depth)
    specs = [trace_spec(req, n) for n in counts]
    parts = ("traces", json.dumps(specs, sort_keys=True), json.dumps(installed_versions(), sort_keys=True),
             tracer_digest())

    def trace_now() -> dict:
        done = run_tracers(specs)
        return {"versions": done[0]["versions"], "runs": [d["runs"][0] for d in done]}
    return cached(parts, trace_now)


# ------------------------------------------------------------------------------- traces made elsewhere, stored
# A trace depends on the installed torch (its autograd engine's order of frees, its autocast policy): a record measured
# under another torch is checked against that torch's traces, made by the tracer under it (``python -m
# livebytes.tracer`` with the spec, ``validate.store_traces``) and stored as its raw output, one file per spec.
MAX_STORED_TRACE_BYTES = 64 << 20      # one stored trace, decompressed (the largest committed: ~20 MB)


def stored_trace_name(spec: dict) -> str:
    """The file a spec's trace is stored under: the digest of its canonical JSON."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16] + ".json.gz"


def stored_digest(folder: str) -> str:
    """The stored folder's trace files, by name and content (the compiled-model cache keys on it)."""
    h = hashlib.sha256()
    for path in sorted(Path(folder).glob("*.json.gz")):
        h.update(path.name.encode() + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def _read_stored(path: Path) -> dict:
    import gzip
    with gzip.open(path, "rb") as fh:
        raw = fh.read(MAX_STORED_TRACE_BYTES + 1)
    if len(raw) > MAX_STORED_TRACE_BYTES:
        raise LivebytesError(f"{path}: a stored trace over {MAX_STORED_TRACE_BYTES:,} bytes decompressed")
    return json.loads(raw)


def stored_traces(req: Request) -> dict:
    """``traces`` read from ``req.stored``: each layer count's spec under its name, its spec the request's, made with
    flash-linear-attention ``PINNED``."""
    runs, versions = [], None
    for n in layer_counts(req.depth):
        spec = trace_spec(req, n)
        path = Path(req.stored) / stored_trace_name(spec)
        if not path.is_file():
            raise LivebytesError(f"{req.stored} holds no stored trace of this request at {n} layers ({path.name})")
        data = _read_stored(path)
        if data.get("spec") != spec or data.get("versions", {}).get("flash-linear-attention") != PINNED:
            raise LivebytesError(f"{path}: not a trace of this request under flash-linear-attention {PINNED}")
        runs.append(data["runs"][0])
        versions = data["versions"]
    return {"versions": versions, "runs": runs}


# ---------------------------------------------------------------------------------------------- the model

@lru_cache(maxsize=8)
def symbolic_calls(req: Request) -> dict:
    """Layer count -> its symbolic call; the held-out shape checked exact, four layers checked to repeat three."""
    from .calls import unify
    from .layers import check
    from .symbolic import symbolic_call
    data = traces(req)
    config = req.config_dict
    out = {}
    for run in data["runs"]:
        calls = [unify(t) for t in run["traces"]]
        learn = [c for c in calls if (c.mbs, c.seq) in LEARN]
        out[run["layers"]] = symbolic_call(learn, config)
        held = [c for c in calls if (c.mbs, c.seq) == HELD_OUT]
        if held:
            check_held_out(out[run["layers"]], held[0], config, learn)
    if 3 in out and 4 in out:
        check(out[3], out[4])
    return out


def check_held_out(sym, held, config: dict, learn: list) -> None:
    """Every allocation the formulas give at the held-out shape is the traced one, byte for byte."""
    from livebytes.estimator.engine import evaluate
    from livebytes.estimator.shapes import Shape

    from .calls import ALLOC
    from .symbolic import Unexplained, symbolic_call
    both = symbolic_call(learn + [held], config)       # the same events, solved with the held-out shape too
    shape = Shape(held.mbs, held.seq, 1)
    for (k, a), (_, b) in zip(sym.events, both.events):
        if k == ALLOC and evaluate(a.bytes, shape) != evaluate(b.bytes, shape):
            raise Unexplained(f"{a.op} at {a.module or 'the model'}: the formula {a.bytes} misses the held-out shape "
                              f"{held.mbs} x {held.seq}")


def call_for(req: Request):
    """The symbolic call of the request's depth."""
    from .layers import expand
    depth = req.depth
    calls = symbolic_calls(req if depth < 3 else _deep(req))
    return calls[depth] if depth in calls else expand(calls[3], depth)


def _deep(req: Request) -> Request:
    """Every depth from three up shares one request (and its traces at three and four)."""
    from dataclasses import replace
    return replace(req, layers=3)


def build(req: Request, device) -> "LifetimeModel":  # noqa: F821
    from .build import traced_model
    call = call_for(req)
    versions = traces(_deep(req) if req.depth >= 3 else req)["versions"]
    return traced_model(call, device.sm_count, device.arch, **fields(req, device, versions))


def fields(req: Request, device, versions: dict) -> dict:
    config = req.config_dict
    fla = versions.get("flash-linear-attention") or "?"
    depth = req.depth
    return dict(
        key=f"{req.family}@{PINNED}", implementation=f"flash-linear-attention {fla} {config['model_type']} causal LM, traced",
        version=fla, device=device.name,
        summary=(f"{depth} layer{'s' if depth != 1 else ''}, hidden {config.get('hidden_size')}, vocab "
                 f"{config.get('vocab_size')}: a training step (forward, backward, {req.optimizer} step, zero_grad) in "
                 f"{req.precision}{', checkpointing per layer' if req.checkpoint else ''}; traced with torch "
                 f"{versions.get('torch')}, transformers {versions.get('transformers')}"),
        options=(("config", hashlib.sha256(req.config.encode()).hexdigest()[:12]), ("optimizer", req.optimizer),
                 ("precision", req.precision), ("checkpoint", req.checkpoint), ("packed", req.packed),
                 ("layers", depth)),
        not_modelled=NOT_MODELLED,
        notes=(f"traced on meta tensors with torch {versions.get('torch')}, flash-linear-attention {fla}, transformers "
               f"{versions.get('transformers')}, triton {versions.get('triton')}",),
    )


NOT_MODELLED = (
    "CUDA-internal scratch of operators other than GEMMs and leading-dim sums (sort, scan and embedding-backward "
    "temporaries: named per model where they run)",
    "what the process does between steps beyond the step itself (data loading, logging, a second batch in flight)",
)

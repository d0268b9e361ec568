"""The committed boundary probes (``validate/data/records/boundary/*.jsonl``, written by
``validate/gpu/probes/boundary_probe.py``) as data: one ``Probe`` per file (one process), its ``Trial``s in order, and
``probed_at``, the trials that ran a given case (what ``predict``, ``compare`` and ``plan`` quote). Light on purpose:
reading them imports no model and no sympy; ``probe_replay`` replays them."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from livebytes.estimator.shapes import LAYER_FIELDS, Shape
from livebytes.estimator.registry import get_model

BOUNDARY_DIR = Path(__file__).parents[1] / "data" / "records" / "boundary"
PHASES = ("first_call", "steady_1", "steady_2")
MODELS = {                  # the probe's --impl -> (implementation, the package whose version the probe records, options)
    "fla-plain": ("fla-kda", "fla", {"contract": "plain"}),
    "fla-report": ("fla-kda", "fla", {"contract": "report"}),
    "kda_hopper_cuda": ("cudnn-kda-hopper-cuda", "cudnn", {}),
    "fla-gdn": ("fla-gdn", "fla", {}),
    "fla-kda-layer": ("fla-kda-layer", "fla", {}),
    "fla-gdn-layer": ("fla-gdn-layer", "fla", {}),
}


def model_of(impl: str, head: dict) -> tuple[str, dict]:
    """(model key, options) a probe ran: its implementation (its forward-only model for a ``--forward-only`` probe) at
    the library version the probe's process had, grouped value heads when the probe had them, a layer probe's stack."""
    implementation, package, options = MODELS[impl]
    suffix = "-fwd" if head.get("forward_only") else ""
    gva = {"gva": True} if head.get("v_heads", head.get("heads")) != head.get("heads") else {}
    layer = head.get("layer") or {}          # a layer probe's stack: hidden, layers, checkpoint, conv_size
    return f"{implementation}{suffix}@{head[package]}", {**options, **gva, **layer}


def _shape(d: dict) -> Shape:
    return Shape(d["mbs"], d["seq"], d["heads"], d["dim"], d.get("v_heads"))


@dataclass(frozen=True)
class Trial:
    index: int                 # order in the process (0 = the warmup when there is one)
    stage: str                 # warmup_1x1024 | bisect | value
    shape: Shape
    measured: dict             # the probe's line

    @property
    def label(self) -> str:
        return f"{self.index}:{self.stage}:{self.shape.mbs}x{self.shape.seq}"


@dataclass(frozen=True)
class Probe:
    path: Path
    impl: str
    key: str                   # the model the probe ran: implementation@the installed library's version
    options: dict              # its options (contract, gva)
    allocator_conf: str
    triton_cache: str          # cold | warm | n/a
    total_bytes: int
    trials: tuple[Trial, ...]

    def model(self):
        return get_model(self.key, "H200", **self.options)


@lru_cache(maxsize=None)
def load_probe(path: Path) -> Probe:
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    head = lines[0]
    trials = tuple(Trial(i, d["stage"], _shape(d), d)
                   for i, d in enumerate(x for x in lines if "first_call" in x or "fits" in x))
    first = trials[0].measured if trials else head
    key, options = model_of(head["impl"], {**head, **{k: first[k] for k in ("heads", "v_heads") if k in first}})
    return Probe(Path(path), head["impl"], key, options, head["allocator_conf"], head["state"], head["total_memory"], trials)


def probe_files() -> list[Path]:
    return sorted(BOUNDARY_DIR.glob("*.jsonl"))


def layer_options(options: dict) -> dict:
    """A layer model's stack options (hidden, layers, checkpoint, conv_size), as resolved: empty for a kernel."""
    return {k: options[k] for k in LAYER_FIELDS if options.get(k) is not None}


def probed_at(model_key: str, contract: str | None, shape: Shape, alloc_conf: str, triton_cache: str,
              device: str, layer: dict | None = None) -> list[dict]:
    """The boundary-probe trials that ran this very case on ``device`` (a preset: H200): implementation, contract,
    shape, allocator configuration, and the Triton-cache state (cold: the trial was its process's first call; warm: a
    warm process; cuDNN: no Triton). ``after_warmup``: that process ran its 1 x 1024 warmup first; ``earlier_trials``:
    the trials it ran before this one besides (their leftovers a fresh process would not hold). What ``predict``,
    ``compare`` and ``plan`` quote. ``layer``: a layer model's resolved stack options, matched against the probe's
    (its trials' shapes carry the kernel fields only)."""
    kernel_shape = replace(shape, **dict.fromkeys(LAYER_FIELDS))
    out = []
    for path in probe_files():
        probe = load_probe(path)
        key, options = probe.key, probe.options
        head = probe.trials[0].measured if probe.trials else {}
        if (key, options.get("contract")) != (model_key, contract) or probe.allocator_conf != alloc_conf \
                or device not in str(head.get("device", "")).split() or layer_options(options) != (layer or {}):
            continue
        warmed = int(probe.trials[0].stage == "warmup_1x1024") if probe.trials else 0
        for t in probe.trials:
            # a cold process tunes at its first call's keys: a later trial of a cold process is in another state
            state_ok = probe.triton_cache == "n/a" or (probe.triton_cache == triton_cache
                                                      and not (triton_cache == "cold" and t.index > 0))
            if t.shape == kernel_shape and t.stage != "warmup_1x1024" and state_ok:
                m = t.measured
                out.append({"record": path.name, "fits": m["fits"], "phase": m.get("oom_phase"),
                            "tried_bytes": m["oom_observer"][0]["tried_bytes"] if m.get("oom_observer") else None,
                            "after_warmup": bool(warmed), "earlier_trials": t.index - warmed})
    return out

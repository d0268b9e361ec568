"""The traced whole models in the registry: ``fla-kda-model@0.6.0`` and ``fla-gdn-model@0.6.0``.

Their options are the request (``model.Request``): ``config`` (an HF config as canonical JSON, ``model.read_config``),
``optimizer``, ``precision``, ``packed`` and ``environment`` (the versions the traces come from and the tracer's digest,
``model.environment``: a compiled model cached under one environment is never read under another) and ``stored`` (a
folder of traces made under other versions, ``model.stored_traces``; none: traced here); the layer fields
``layers`` and ``checkpoint`` are the shape's, as for the layer models.
"""
from __future__ import annotations

from livebytes.estimator.registry import ModelSpec, register

from .model import FAMILIES, OPTIMIZERS, PINNED, PRECISIONS, Request, check_environment


def refuse(shape, device) -> str | None:
    """A traced model takes any batch of at least one token (a portable function: the spec index stores it)."""
    if shape.seq < 1 or shape.mbs < 1:
        return "a batch needs at least one sequence of one token"
    return None


def builder(model_type: str):
    def build_traced(device, config: str, optimizer: str, precision: str, packed: bool, environment: str,
                     stored: str | None = None, layers: int | None = None, checkpoint: bool = False):
        from livebytes.estimator.errors import RefusedShapeError

        from .model import MAX_LAYERS, build
        if layers is not None and layers > MAX_LAYERS:
            raise RefusedShapeError(f"{FAMILIES[model_type]}@{PINNED}: {layers:,} layers: a traced model expands up "
                                    f"to {MAX_LAYERS:,} (its cost grows with the depth; a config may say up to 4,096)")
        check_environment(environment, stored)
        req = Request(config, device.name, optimizer, precision, bool(checkpoint), packed, layers, stored)
        if req.config_dict.get("model_type") != model_type:
            raise RefusedShapeError(f"{FAMILIES[model_type]}@{PINNED}: the config's model_type is "
                                    f"{req.config_dict.get('model_type')!r}, not {model_type!r}")
        return build(req, device)
    return build_traced


for _type, _family in FAMILIES.items():
    _cls = {"kda": "KDAForCausalLM", "gated_deltanet": "GatedDeltaNetForCausalLM"}[_type]
    register(ModelSpec(
        key=f"{_family}@{PINNED}", implementation=f"flash-linear-attention {PINNED} {_cls} (traced)", version=PINNED,
        covers=f"a whole training step of flash-linear-attention {PINNED}'s {_cls} from its HF config (--model "
               "CONFIG.json): forward, backward, the optimizer's step and zero_grad, traced on the CPU",
        builder=builder(_type), refuse=refuse,
        options={"config": None, "optimizer": OPTIMIZERS, "precision": PRECISIONS, "packed": (False, True),
                 "environment": None, "stored": ()},
        shape_fields=("layers", "checkpoint"),
    ))

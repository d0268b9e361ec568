"""The traced whole models in the registry: ``fla-kda-model@0.6.0``, ``fla-gdn-model@0.6.0`` (flash-linear-attention's
causal LMs), ``qwen3-next-model@5.17.0`` and ``kimi-linear-model@5.17.0`` (transformers' ``Qwen3NextForCausalLM`` and
``KimiLinearForCausalLM``).

Their options are the request (``model.Request``): ``config`` (an HF config as canonical JSON, ``model.read_config``),
``optimizer``, ``precision``, ``packed``, ``routing`` (Qwen3-Next and Kimi-Linear: balanced or worst, ``model.
routing_note``) and ``environment`` (the versions the traces come from and the tracer's digest,
``model.environment``: a compiled model cached under one environment is never read under another), ``loss`` (Qwen3-Next and Kimi-Linear:
liger, Liger-Kernel's fused linear cross-entropy; left out: the family's own, ``model.LOSS_SAID``), ``lora`` (LoRA's
settings, ``lora.lora_option``; absent: a full fine-tune) and ``stored`` (a
folder of traces made under other versions, ``model.stored_traces``; none: traced here); the layer fields
``layers`` and ``checkpoint`` are the shape's, as for the layer models.
"""
from __future__ import annotations

from livebytes.estimator.registry import ModelSpec, register

from .fsdp import MAX_WORLD
from .parallel import MAX_CP, MAX_EP
from .families import ROWS, Family
from .model import BATCH_ROWS, OPTIMIZERS, PRECISIONS, ROUTINGS, Request, check_environment, check_loss, check_routing
from .presets import presets_line
from livebytes.estimator.errors import RefusedShapeError, LivebytesError
from .model import MAX_LAYERS, build, parallel_plan
from .hybrid import layer_kinds


def refuse(shape, device) -> str | None:
    """A traced model takes any batch of at least one token (a portable function: the spec index stores it)."""
    if shape.seq < 1 or shape.mbs < 1:
        return "a batch needs at least one sequence of one token"
    return None


def seq_multiple(options: dict) -> tuple[int, str]:
    """--cp C: each of the C ranks holds S / C tokens of every sequence, so S is a multiple of C."""
    cp = int(options.get("cp") or 1)
    return (cp, f"--cp {cp} gives each rank S / {cp} tokens") if cp > 1 else (1, "")


def builder(row: Family):
    def build_traced(device, config: str, optimizer: str, precision: str, packed: bool, environment: str,
                     stored: str | None = None, layers: int | None = None, checkpoint: bool = False, fsdp: int = 0,
                     routing: str = "balanced", lora: str | None = None, cp: int = 1, ep: int = 1, rows: str = "one",
                     loss: str | None = None):

        key, model_type = row.key, row.model_type
        if layers is not None and layers > MAX_LAYERS:
            raise RefusedShapeError(f"{key}: {layers:,} layers: a traced model expands up "
                                    f"to {MAX_LAYERS:,} (its cost grows with the depth; a config may say up to 4,096)")
        check_environment(environment, stored, model_type)
        if rows not in BATCH_ROWS or (rows != "one" and not row.one_row):
            raise RefusedShapeError(f"{key}: rows must be one of {', '.join(BATCH_ROWS) if row.one_row else 'one'}, got "
                                    f"{rows!r}")
        req = Request(config, device.name, optimizer, precision, bool(checkpoint), packed, layers, stored, fsdp,
                      check_routing(routing), lora=lora, cp=cp, ep=ep, rows=rows,
                      loss=check_loss(row, loss))
        if cp > 1 or ep > 1:

            try:
                parallel_plan(req)                          # the mesh checked before anything is traced
            except LivebytesError as err:
                raise RefusedShapeError(f"{key}: {err}") from None
        if layers is None and req.depth > MAX_LAYERS:       # the config's own depth: refused before anything is traced
            raise RefusedShapeError(f"{key}: the config's num_hidden_layers {req.depth:,}: a traced model expands up "
                                    f"to {MAX_LAYERS:,} (its cost grows with the depth); give --num-hidden-layers "
                                    f"{MAX_LAYERS:,} or fewer")
        if req.config_dict.get("model_type") != model_type:
            raise RefusedShapeError(f"{key}: the config's model_type is "
                                    f"{req.config_dict.get('model_type')!r}, not {model_type!r}")
        if row.packed_refused and packed:
            raise RefusedShapeError(f"{key}: packed sequences: {row.packed_refused}; not traced")
        if row.hybrid:
            layer_kinds(req.config_dict, req.depth)     # a depth the config class cannot build: one line, untraced
        return build(req, device)
    return build_traced


def register_family(row: Family) -> None:
    """The registry's entry of a family's row (one traced as installed names its series and the validated version)."""
    release = f"{row.as_installed}x" if row.as_installed else row.version
    what = f"{row.dist} {release}'s {row.causal_lm}"
    presets = presets_line(row.model_type)
    traced = "traced" if row.validated else "traced, unvalidated"
    if row.as_installed:
        traced = f"{traced} as installed; validated under {row.version}"
    register(ModelSpec(
        key=row.key, implementation=f"{row.dist} {release} {row.causal_lm} ({traced})", version=row.version,
        covers=("" if row.validated else "unvalidated (no GPU measurement checks it): ")
               + f"a whole training step of {what} from its HF config (--model CONFIG.json): forward, backward, the "
               "optimizer's step and zero_grad, traced on the CPU; --fsdp W: rank 0 of W under FSDP2 (fully_shard per "
               "block, then the root); --cp C, --ep E: rank 0 under context and expert parallelism (arithmetic on the traced "
               "step, unvalidated)" + (f"; {presets}" if presets else ""),
        builder=builder(row), refuse=refuse, seq_multiple=seq_multiple,
        options={"config": None, "optimizer": OPTIMIZERS, "precision": PRECISIONS, "packed": (False, True),
                 "environment": None, "stored": (), "lora": ()} | ({"routing": ROUTINGS} if row.moe else {})
                | ({"rows": BATCH_ROWS} if row.one_row else {})
                | ({"loss": ()} if len(row.losses) > 1 else {}),      # absent: its own; the builder checks it
        counts={"fsdp": (1, MAX_WORLD), "cp": (1, MAX_CP), "ep": (1, MAX_EP)},
        caveat="" if row.validated else f"{row.key}: {row.notes[0]}",    # its status (families.unvalidated)
        shape_fields=("layers", "checkpoint"),
    ))


for _row in ROWS:
    register_family(_row)

"""One registry of lifetime models, keyed ``implementation@version``.

The estimator knows nothing about any implementation and imports no layer above it: model packages
announce themselves under the ``livebytes.models`` entry-point group (``pyproject.toml``), and the
first look-up imports each of them, which registers their models here. A model is built for a device
and a set of options, and cached.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Callable
from importlib.metadata import entry_points

from .devices import DEVICES, Device, GiB, MiB, build_facts, get_device
from .errors import RefusedShapeError, UnknownModelError
from .groups import Group
from .shapes import Shape
from .cache import read_spec_index, write_spec_index, compiled_model

if TYPE_CHECKING:
    from .buffers import LifetimeModel


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: how to build it, what the implementation refuses (``refuse(shape, device)``
    returns its reason or None) and its options. Whether it can be run is the validator's to say (a harness
    registered for its key), not the model's."""

    key: str
    implementation: str
    version: str
    covers: str
    builder: Callable[..., LifetimeModel]
    refuse: Callable[[Shape, Device], str | None]
    options: dict = field(default_factory=dict)   # option name -> allowed values (first is the default); None: any
                                                  # text the builder checks (a traced model's config), required;
                                                  # (): any text, optional (a traced model's stored traces)
    default_device: str = "H200"
    phase: str = "fwd+bwd"
    refusals: dict = field(default_factory=dict)  # (option, value) -> the implementation's own reason
    refuse_device: Callable[[Device], str | None] | None = None   # devices the engine cannot run on at any shape
    # options -> (m, why): the sequence must be a multiple of m at these options (FLA's CP splits it over the ranks)
    seq_multiple: Callable[[dict], tuple[int, str]] | None = None
    shape_fields: tuple[str, ...] = ()   # Shape.LAYER_FIELDS the builder takes (layer models): hidden, layers, ...
    # a stack of --num-hidden-layers copies of its one-layer model, each with its own parameters (lifetimes/layer_stack.py): a
    # depth no GPU preset holds is refused before it is built (check_depth)
    stacked: bool = False
    # whole-number options: name -> (smallest, largest) (a traced model's FSDP2 world size); absent: the builder's default
    counts: dict = field(default_factory=dict)
    caveat: str = ""     # said with every answer of it (a traced family no measurement checks: ``Family.validated``)

    @property
    def required_options(self) -> tuple[str, ...]:
        """Free-text options without a default (a traced model's config): the key alone builds nothing."""
        return tuple(name for name, allowed in self.options.items() if allowed is None)


_REGISTRY: dict[str, ModelSpec] = {}


_FROM_INDEX: set[str] = set()    # keys whose spec came from the disk index (no builder until the packages load)


def register(spec: ModelSpec) -> ModelSpec:
    if spec.key in _REGISTRY and spec.key not in _FROM_INDEX:
        raise ValueError(f"model {spec.key} registered twice")
    _FROM_INDEX.discard(spec.key)
    _REGISTRY[spec.key] = spec
    return spec


_LOADED = False


def _load(full: bool = False) -> None:
    """The specs: from the disk index (``cache.read_spec_index``, no model module imported) unless
    ``full``; else import every package registered under the ``livebytes.models`` entry points (once)."""
    global _LOADED
    if _LOADED or (not full and _REGISTRY):
        return
    if not full:
        for fields in read_spec_index() or ():
            _REGISTRY[fields["key"]] = ModelSpec(builder=None, **fields)
            _FROM_INDEX.add(fields["key"])
        if _REGISTRY:
            return
    _LOADED = True
    for ep in entry_points(group="livebytes.models"):
        ep.load()
    for key in list(_FROM_INDEX):       # a model its package no longer registers
        del _REGISTRY[key]
    _FROM_INDEX.clear()
    write_spec_index(list(_REGISTRY.values()))


def specs() -> list[ModelSpec]:
    _load()
    return list(_REGISTRY.values())


def keyed_specs() -> list[ModelSpec]:
    """The specs a key alone builds (no required free-text option: a traced model needs its config)."""
    return [s for s in specs() if not s.required_options]


def spec(key: str) -> ModelSpec:
    _load()
    if key not in _REGISTRY and not _LOADED:
        _load(full=True)
    try:
        return _REGISTRY[key]
    except KeyError:
        known = ", ".join(_REGISTRY)
        raise UnknownModelError(f"unknown implementation {key!r}; known: {known}") from None


def _builder(key: str):
    if spec(key).builder is None:
        _load(full=True)
    return spec(key).builder


def resolve_options(s: ModelSpec, options: dict) -> tuple[tuple[str, object], ...]:
    resolved = {}
    for name, allowed in s.options.items():
        value = options.get(name)
        if allowed is None:                     # free text the builder checks (a traced model's config)
            if not isinstance(value, str):
                raise RefusedShapeError(f"{s.key}: needs option {name} (e.g. livebytes predict --model CONFIG.json)")
            resolved[name] = value
            continue
        if allowed == ():                       # optional free text (a traced model's stored traces): absent is none
            if value is not None and not isinstance(value, str):
                raise RefusedShapeError(f"{s.key}: option {name} is text")
            if value is not None:
                resolved[name] = value
            continue
        if value is None:
            value = allowed[0]
        if value not in allowed:
            reason = s.refusals.get((name, value))
            if reason:
                raise RefusedShapeError(f"{s.key}: {reason}")
            raise RefusedShapeError(f"{s.key}: option {name}={value!r} not supported (choose from {', '.join(map(str, allowed))})")
        resolved[name] = value
    for name in s.shape_fields:                 # sizes of a layer: any positive integer (checkpoint: a bool)
        value = options.get(name)
        if value is not None:
            ok = isinstance(value, bool) if name == "checkpoint" else type(value) is int and value > 0
            if not ok:
                raise RefusedShapeError(f"{s.key}: {name}={value!r} is not valid")
            resolved[name] = value
    for name, (low, high) in s.counts.items():
        value = options.get(name)
        if value is not None:
            if type(value) is not int or not low <= value <= high:      # 2.0 and True are no count
                raise RefusedShapeError(f"{s.key}: option {name}={value!r} is not a whole number from {low} to {high:,}")
            resolved[name] = value
    unknown = {k for k, v in options.items() if v is not None} - set(s.options) - set(s.shape_fields) - set(s.counts)
    if unknown:
        raise RefusedShapeError(f"{s.key}: does not take option(s) {', '.join(sorted(unknown))}")
    return tuple(sorted(resolved.items()))


@lru_cache(maxsize=128)
def _build(key: str, device_name: str, options: tuple[tuple[str, object], ...]) -> LifetimeModel:
    return _builder(key)(device=get_device(device_name), **dict(options))


def get_model(key: str, device: Device | str | None = None, **options) -> LifetimeModel:
    """The model for ``key`` on ``device`` (its default device when None) with ``options``."""
    s = spec(key)
    name = device.name if isinstance(device, Device) else (device or s.default_device)
    return _build(key, get_device(name).name, resolve_options(s, options))


def get_compiled(key: str, device: Device | str | None = None, **options):
    """``get_model`` compiled (``evaluation.CompiledModel``): from the disk cache when it has it, so that
    predicting needs neither sympy nor the model modules."""
    s = spec(key)
    dev = get_device(device.name if isinstance(device, Device) else (device or s.default_device))
    resolved = resolve_options(s, options)
    return compiled_model(key, build_facts(dev), resolved, lambda: _build(key, dev.name, resolved), dev.name)


LAYER_FLAGS = {"hidden": "--hidden-size", "layers": "--num-hidden-layers", "checkpoint": "--checkpoint",
               "conv_size": "--conv-size"}      # shapes.flag_of: the HF names


def layer_options(key: str, fields: dict) -> dict:
    """The layer fields (hidden size, layers, checkpointing, convolution width; ``Shape.layer_fields``' names) as the
    build options of a layer model; refused by any other model."""
    foreign = sorted(set(fields) - set(spec(key).shape_fields))
    if foreign:
        verb = "describes" if len(foreign) == 1 else "describe"
        raise RefusedShapeError(f"{key}: {', '.join(LAYER_FLAGS[f] for f in foreign)} {verb} a layer; this model is a "
                                "kernel (layer models: livebytes models)")
    return dict(fields)


def shape_options(key: str, shape: Shape) -> dict:
    """Options a shape implies: grouped value heads (HV > H) select a model's GVA code path; a batch of several rows a
    whole model's several-row program (``rows``: transformers' hybrids, ``lifetimes.traced.model.BATCH_ROWS``); the layer
    fields are a layer model's build options (``layer_options``)."""
    out = layer_options(key, shape.layer_fields())
    if "rows" in spec(key).options:       # transformers' loss: one row per batch and several are two programs
        out["rows"] = "many" if shape.mbs > 1 else "one"
    if shape.hv != shape.heads:
        if "gva" not in spec(key).options:
            raise RefusedShapeError(f"{key}: value heads != heads (GVA) is not covered by this model")
        out["gva"] = True
    return out


def check_device(key: str, device: Device | str | None = None) -> None:
    """Raise RefusedShapeError when the implementation cannot run on ``device`` at any shape."""
    s = spec(key)
    dev = device if isinstance(device, Device) else get_device(device or s.default_device)
    reason = s.refuse_device(dev) if s.refuse_device else None
    if reason:
        raise RefusedShapeError(f"{key}: {reason}")


def check_shape(key: str, shape: Shape, device: Device | str | None = None, options: dict | None = None,
                depth: bool = True) -> None:
    """Raise RefusedShapeError with the implementation's own reason when it refuses the shape (at ``options``: the
    sequence multiple some options impose, ``seq_multiple``), and a stack no GPU preset holds (``check_depth``) unless
    ``depth`` is False (a search whose depths are bounded: one too deep simply fails on the device there)."""
    s = spec(key)
    dev = device if isinstance(device, Device) else get_device(device or s.default_device)
    reason = s.refuse(shape, dev)
    if reason:
        raise RefusedShapeError(f"{key}: {reason}")
    multiple, why = seq_multiple(key, options or {})
    if shape.seq % multiple:
        raise RefusedShapeError(f"{key}: the sequence ({shape.seq:,} tokens) must be a multiple of {multiple:,}: {why}")
    if depth:
        check_depth(key, shape, dev, options)


class TooDeepError(RefusedShapeError):
    """A stack deeper than any GPU preset holds (``check_depth``)."""


def kept_weights_bytes(model, shape: Shape) -> int:
    """Bytes ``model`` charges at ``shape`` for its parameters and their gradients (512-byte blocks)."""
    kept = (Group.PARAMETERS, Group.PARAM_GRADS)
    return sum(int(n) for b, n in zip(model.buffers, model.charged_fn(*shape.values())) if b.group in kept)


@lru_cache(maxsize=64)
def _one_layer(key: str, device_name: str, options: tuple):
    """A stacked model's one-layer model, compiled (the disk cache's; once per process: a sweep checks every shape)."""
    return get_compiled(key, device_name, **dict(options))


def check_depth(key: str, shape: Shape, device: Device, options: dict | None = None) -> None:
    """Refuse a stacked model (``ModelSpec.stacked``) deeper than the largest GPU preset holds, before it is built (its
    cost grows with its layers). At its last step every layer still holds its parameters and their gradients (kept
    for the optimizer), each as much as the one-layer model's at this shape: L of them are a lower bound of its peak."""
    if not spec(key).stacked or (shape.layers or 1) == 1:
        return
    one = _one_layer(key, device.name, tuple(sorted(((options or {}) | shape_options(key, replace(shape, layers=1))).items())))
    per_layer = kept_weights_bytes(one, shape)
    largest = max(DEVICES.values(), key=lambda d: d.capacity_bytes)
    if shape.layers * per_layer > largest.capacity_bytes:
        raise TooDeepError(
            f"{key}: {shape.layers:,} layers: their parameters and gradients alone take {shape.layers * per_layer / GiB:,.1f} "
            f"GiB ({per_layer / MiB:,.1f} MiB a layer at this shape), more than the largest GPU preset holds "
            f"({largest.name}, {largest.capacity_bytes / GiB:,.1f} GiB: {largest.capacity_bytes // per_layer:,} such layers at most)")


def seq_multiple(key: str, options: dict) -> tuple[int, str]:
    """(m, why): the sequence lengths ``key`` takes at ``options`` are the multiples of m (1: every length)."""
    s = spec(key)
    if s.seq_multiple is None:
        return 1, ""
    return s.seq_multiple(dict(resolve_options(s, options)))

"""One registry of lifetime models, keyed ``implementation@version``.

The estimator knows nothing about any implementation and imports no layer above it: model packages
announce themselves under the ``livebytes.models`` entry-point group (``pyproject.toml``), and the
first look-up imports each of them, which registers their models here. A model is built for a device
and a set of options, and cached.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from .devices import Device, get_device
from .errors import RefusedShapeError, UnknownModelError
from .shapes import Shape

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
                                                  # text the builder checks (a traced model's config), required
    default_device: str = "H200"
    phase: str = "fwd+bwd"
    refusals: dict = field(default_factory=dict)  # (option, value) -> the implementation's own reason
    refuse_device: Callable[[Device], str | None] | None = None   # devices the engine cannot run on at any shape
    # options -> (m, why): the sequence must be a multiple of m at these options (FLA's CP splits it over the ranks)
    seq_multiple: Callable[[dict], tuple[int, str]] | None = None
    shape_fields: tuple[str, ...] = ()   # Shape.LAYER_FIELDS the builder takes (layer models): hidden, layers, ...

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
        from .cache import read_spec_index
        for fields in read_spec_index() or ():
            _REGISTRY[fields["key"]] = ModelSpec(builder=None, **fields)
            _FROM_INDEX.add(fields["key"])
        if _REGISTRY:
            return
    _LOADED = True
    from importlib.metadata import entry_points
    for ep in entry_points(group="livebytes.models"):
        ep.load()
    for key in list(_FROM_INDEX):       # a model its package no longer registers
        del _REGISTRY[key]
    _FROM_INDEX.clear()
    from .cache import write_spec_index
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
    unknown = {k for k, v in options.items() if v is not None} - set(s.options) - set(s.shape_fields)
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
    from .cache import compiled_model
    s = spec(key)
    name = get_device(device.name if isinstance(device, Device) else (device or s.default_device)).name
    resolved = resolve_options(s, options)
    return compiled_model(key, name, resolved, build=lambda: _build(key, name, resolved))


LAYER_FLAGS = {"hidden": "--hidden", "layers": "--layers", "checkpoint": "--checkpoint", "conv_size": "--conv-size"}


def shape_options(key: str, shape: Shape) -> dict:
    """Options a shape implies: grouped value heads (HV > H) select a model's GVA code path; the layer fields
    (hidden size, layers, checkpointing, convolution width) are the build options of a layer model, refused by
    any other."""
    out = dict(shape.layer_fields())
    foreign = sorted(set(out) - set(spec(key).shape_fields))
    if foreign:
        verb = "describes" if len(foreign) == 1 else "describe"
        raise RefusedShapeError(f"{key}: {', '.join(LAYER_FLAGS[f] for f in foreign)} {verb} a layer; this model is a "
                                "kernel (layer models: livebytes models)")
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


def check_shape(key: str, shape: Shape, device: Device | str | None = None, options: dict | None = None) -> None:
    """Raise RefusedShapeError with the implementation's own reason when it refuses the shape (at ``options``: the
    sequence multiple some options impose, ``seq_multiple``)."""
    s = spec(key)
    dev = device if isinstance(device, Device) else get_device(device or s.default_device)
    reason = s.refuse(shape, dev)
    if reason:
        raise RefusedShapeError(f"{key}: {reason}")
    multiple, why = seq_multiple(key, options or {})
    if shape.seq % multiple:
        raise RefusedShapeError(f"{key}: the sequence ({shape.seq:,} tokens) must be a multiple of {multiple:,}: {why}")


def seq_multiple(key: str, options: dict) -> tuple[int, str]:
    """(m, why): the sequence lengths ``key`` takes at ``options`` are the multiples of m (1: every length)."""
    s = spec(key)
    if s.seq_multiple is None:
        return 1, ""
    return s.seq_multiple(dict(resolve_options(s, options)))

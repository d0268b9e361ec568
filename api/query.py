"""One query, resolved once, and one answer that every prediction command renders.

A ``Query`` is what ``predict``, ``compare`` and ``timeline`` (and the Python API's ``predict`` and ``compare``) ask:
model keys (``--impl``, or the key a ``--model`` config chose), one ``Shape`` and a ``Setting`` (device preset, what-if
options, allocator configuration, Triton cache state and version). ``resolve`` turns it into models once: each model
compiled (``registry.get_compiled``, from the disk cache when it has it; as built where a snapshot needs its sources),
its device, the allocator configuration, the cache state and Triton version its verdict simulates, and the warnings.
``answer`` walks each resolved model once: the peak by storage group, the steady-state replay, the committed records
and the verdict of a fresh process (``capacity.verdict``: one walk of the process). The commands differ only in what
they read of the answer and show.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .notes import assumption_lines, implausible_warnings, measured_case, measured_records
# choose.triton_settings and capacity.verdict are called through their modules: tests count the calls there
from . import choose
from .choose import alloc_conf_of, cache_skipped, model_on_device
from livebytes.estimator import capacity
from livebytes.estimator.replay import replay


@dataclass(frozen=True)
class Setting:
    """What a verdict depends on beyond the model and the shape, as the caller gave it (None: the default): the
    device preset, the what-if options (library names: ``choose.what_if``), the allocator configuration (text; None:
    the environment's, ``choose.alloc_conf_of``), the Triton cache state and version."""
    gpu: Optional[str] = None
    what_if: dict = field(default_factory=dict)
    alloc_conf: Optional[str] = None
    triton_cache: Optional[str] = None
    triton: Optional[str] = None


@dataclass(frozen=True)
class Query:
    """Model keys at one shape with one setting. ``several``: the flags that apply to Triton models only are taken by
    the others without a refusal (``choose.triton_cache_for``); None: when there is more than one key (compare: always).
    ``sources``: the models as built (``registry.get_model``) rather than compiled (``get_compiled``): the same bytes,
    with each buffer's source a record and its formula, which a memory snapshot's frames and a sweep's vectorised
    evaluation need. ``depth``: ``registry.check_shape``'s."""
    keys: tuple
    shape: object                   # estimator.shapes.Shape
    setting: Setting = Setting()
    several: Optional[bool] = None
    sources: bool = False           # the models as built, each buffer's source a record (a snapshot names its frames)
    depth: bool = True              # a stack no GPU preset holds refused (False: a search bounded by its own limit)
    judged: bool = True             # a verdict follows (False: explain): else no allocator configuration is read

    @property
    def beside_others(self) -> bool:
        return len(self.keys) > 1 if self.several is None else self.several


@dataclass(frozen=True)
class Resolved:
    """One model of a query as its verdict simulates it: the compiled model, its device, whether its kernels are
    Triton's (``capacity.triton_cache_matters``, asked once), the cache state and the Triton version counted."""
    model: object
    device: object
    triton_matters: bool
    triton_cache: str
    triton: Optional[str]


@dataclass(frozen=True)
class Resolution:
    """A query resolved: each key's ``Resolved`` in order, the allocator configuration (one for all), and the warnings
    in their kinds: shapes beyond any GPU, what a whole model assumes (``notes.assumption_lines``), and the flags that
    some of several models take nothing from (``choose.cache_skipped``)."""
    query: Query
    models: tuple
    conf: object
    implausible: tuple = ()
    assumed: tuple = ()
    skipped: Optional[str] = None


def resolve(query: Query, announce: Optional[Callable[[str], None]] = None) -> Resolution:
    """Every model of ``query`` built (each refusal in the order the flags' checks run: options, device, shape), then
    ``announce`` told of the warnings (an absurd shape's simulation takes a moment), then the verdict's settings: each
    model's cache state and Triton version (``choose.triton_settings``, Triton's part asked once) and the flags some of
    several models take nothing from (``choose.cache_skipped``)."""
    s = query.setting
    built = [model_on_device(key, s.gpu, s.what_if, query.shape, not query.sources, query.depth) for key in query.keys]
    implausible, assumed = implausible_warnings(query.shape), assumption_lines([m for m, _ in built])
    for line in (implausible + assumed) if announce else ():
        announce(line)
    conf = alloc_conf_of(s.alloc_conf) if query.judged else None      # the environment's, refused only where used
    models = tuple(Resolved(model, device, *choose.triton_settings(model, device, s.triton_cache, s.triton, query.beside_others))
                   for model, device in built)
    skipped = cache_skipped([(r.model, r.device) for r in models], s.triton_cache, s.triton,
                            matters=[r.triton_matters for r in models])
    return Resolution(query, models, conf, tuple(implausible), tuple(assumed), skipped)


@dataclass(frozen=True)
class ModelAnswer:
    """One model's answer: the engine's prediction (peak by storage group, live bytes per step), the steady-state
    replay's allocated peak (a process running this shape repeatedly), the committed records at this shape, and the
    verdict of a fresh process on the device (``capacity.Verdict``)."""
    resolved: Resolved
    prediction: object
    replay_peak_bytes: Optional[int]
    records: list
    verdict: object


@dataclass(frozen=True)
class Answer:
    """What every prediction command renders: the resolution and one ``ModelAnswer`` per key, in order."""
    resolution: Resolution
    models: tuple

    @property
    def predictions(self) -> list:
        return [m.prediction for m in self.models]

    @property
    def verdicts(self) -> list:
        return [m.verdict for m in self.models]


# what a command may leave out of the answer (timeline shows neither): the steady-state replay, the records
REPLAY, RECORDS = "replay", "records"
EVERYTHING = frozenset((REPLAY, RECORDS))


def answer(resolution: Resolution, asks: frozenset = EVERYTHING) -> Answer:
    """Each resolved model walked once: prediction, then (``asks``) the steady-state replay and the records, then the
    verdict of a fresh process."""
    return Answer(resolution, tuple(_answered(r, resolution, asks) for r in resolution.models))


def _answered(r: Resolved, resolution: Resolution, asks: frozenset) -> ModelAnswer:

    shape = resolution.query.shape
    replayed = replay(r.model, shape).peak_bytes if REPLAY in asks else None
    records = measured_records(r.model, shape) if RECORDS in asks else []
    judged = capacity.verdict(r.model, shape, r.device, resolution.conf, r.triton_cache, triton=r.triton,
                     measured=measured_case(r.model, shape, r.device, resolution.conf, r.triton_cache))
    return ModelAnswer(r, _predicted(r.model, shape, resolution.query.sources), replayed, records, judged)


def _predicted(model, shape, built: bool):
    """The engine's prediction: a compiled model evaluates its own functions; a model as built (``Query.sources``),
    the engine's compiled form of it (``engine.predict``)."""
    if built:
        from livebytes.estimator.engine import predict  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        return predict(model, shape)
    return model.predict(shape)

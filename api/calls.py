"""The Python API's calls. Two layers: the public functions (``predict``, ``compare``, ``plan``, ``sweep``,
``explain``, ``models``) take the HF/FLA keyword names (``livebytes.keywords``); each turns them into a model key, a
``Shape`` and a ``Setting`` and runs the matching ``*_at`` function, which the command line calls too with what its
flags parsed to. So the command line computes nothing the API does not: it parses, calls ``*_at``, renders."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from . import report
from .choose import cache_skipped, compiled_for, device_of, model_for, triton_cache_for, triton_for, verdict_for
from .results import (Comparison, Explanation, ModelInfo, Plan, PlanAnswer, Prediction, Sweep, SweepPoint,
                      document_of)


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


def implausible_warnings(*shapes) -> list[str]:
    """The warning lines for shapes beyond anything a GPU holds (each once)."""
    from livebytes.estimator.shapes import implausible
    return list(dict.fromkeys(r for r in map(implausible, shapes) if r))


def measured_records(model, shape):
    """The records of this model at this shape; a layer model's shape with its layer fields left out is the model's
    defaults (hidden, one layer, no checkpointing), as its records state them."""
    from livebytes.validate.records import find
    opts = {k: v for k, v in model.options if k != "forward_only"}
    if "hidden" in opts and "layers" in opts:
        shape = replace(shape, hidden=shape.hidden or opts["hidden"], layers=shape.layers or opts["layers"],
                        checkpoint=shape.checkpoint or (True if opts.get("checkpoint") else None))
    return find(model.key, shape, opts)


def predict_at(key: str, shape, setting: Setting = Setting(), announce: Optional[Callable[[str], None]] = None) -> Prediction:
    """``predict``: the peak by storage group, the protocol replay, the records, and the verdict of a fresh process.
    ``announce`` gets each warning before the simulation (an absurd shape's takes a moment)."""
    from livebytes.estimator.replay import replay
    model = compiled_for(key, setting.gpu, setting.what_if, shape)
    warnings = implausible_warnings(shape)
    for line in warnings if announce else ():
        announce(line)
    pred = model.predict(shape)
    replayed = replay(model, shape).peak_bytes
    measured = measured_records(model, shape)
    verdict = verdict_for(model, shape, device_of(key, setting.gpu), setting.alloc_conf, setting.triton_cache,
                          setting.triton)
    result = report.prediction_data(pred, measured, verdict, replayed)
    return Prediction.of(result, warnings=tuple(warnings), engine=(pred, measured, replayed))


def prediction_document(answer: Prediction) -> dict:
    """``predict --json``: the envelope around the one result."""
    return report.envelope("predict", [answer.to_dict()], list(answer.warnings))


def compare_at(keys: list[str], shape, setting: Setting = Setting()) -> Comparison:
    """``compare``: each model at one shape, its change against the first, and each one's verdict."""
    from livebytes.estimator.engine import predict as run_predict
    from livebytes.estimator.replay import replay
    models = [model_for(key, setting.gpu, setting.what_if, shape) for key in keys]
    preds = [run_predict(m, shape) for m in models]
    replayed = [replay(m, shape).peak_bytes for m in models]
    measured = [measured_records(m, shape) for m in models]
    devices = [device_of(key, setting.gpu) for key in keys]
    verdicts = [verdict_for(m, shape, d, setting.alloc_conf, setting.triton_cache, setting.triton, several=True)
                for m, d in zip(models, devices)]
    skipped = cache_skipped(list(zip(models, devices)), setting.triton_cache, setting.triton)
    data = report.compare_data(preds, measured, replayed, verdicts, implausible_warnings(shape) + ([skipped] if skipped else []))
    return document_of(Comparison, Prediction, data, engine=(preds, measured))


@dataclass(frozen=True)
class Grid:
    """``sweep``'s grid: every combination of these sizes, with one stack (``Shape``'s layer fields) for all."""
    mbs: list
    seqs: list
    heads: list
    dims: list
    stack: dict = field(default_factory=dict)


def sweep_at(keys: list[str], grid: Grid, setting: Setting = Setting()) -> Sweep:
    """``sweep``: each model over the grid from one vectorised evaluation, each point with predict's verdict."""
    rows, pairs = [], []
    for key in keys:
        model, device = _swept_model(key, grid, setting), device_of(key, setting.gpu)
        rows += [(model, shape, peak, verdict_for(model, shape, device, setting.alloc_conf, setting.triton_cache,
                                                  setting.triton, len(keys) > 1))
                 for shape, peak in _grid_peaks(model, grid)]
        pairs.append((model, device))
    skipped = cache_skipped(pairs, setting.triton_cache, setting.triton)
    data = report.sweep_data(rows, implausible_warnings(*(shape for _, shape, _, _ in rows)) + ([skipped] if skipped else []))
    return document_of(Sweep, SweepPoint, data)


def _swept_model(key: str, grid: Grid, setting: Setting):
    """The one model of ``key`` for the whole grid, every grid point checked against it first."""
    from livebytes.estimator.registry import check_shape
    from livebytes.estimator.shapes import Shape
    model = model_for(key, setting.gpu, setting.what_if, Shape(grid.mbs[0], grid.seqs[0], grid.heads[0], grid.dims[0], **grid.stack))
    for m_, s_, h_, d_ in ((m_, s_, h_, d_) for m_ in grid.mbs for s_ in grid.seqs for h_ in grid.heads for d_ in grid.dims):
        check_shape(key, Shape(m_, s_, h_, d_, **grid.stack), model.device, setting.what_if)
    return model


def _grid_peaks(model, grid: Grid):
    from livebytes.estimator.planning import sweep as run_sweep
    return [(replace(shape, **grid.stack), peak) for shape, peak in run_sweep(model, grid.mbs, grid.seqs, grid.heads, grid.dims)]


def plan_at(keys: list[str], base, solve: str, setting: Setting = Setting(), budget_bytes: Optional[int] = None,
            announce: Optional[Callable[[str], None]] = None) -> Plan:
    """``plan``: per model, the largest value of ``solve`` that runs on the device (the allocator simulation of a fresh
    process) or whose allocated peak fits ``budget_bytes``; the other dimensions held at ``base``."""
    from livebytes.choose import alloc_conf_of
    conf = alloc_conf_of(setting.alloc_conf)
    answers = [_plan_one(key, base, solve, setting, budget_bytes, conf, len(keys) > 1) for key in keys]
    skipped = cache_skipped([(model, device) for _, device, _, model in answers], setting.triton_cache, setting.triton)
    if skipped and announce:
        announce(skipped)
    data = report.plan_data([a[0] for a in answers], solve, base, [a[1] for a in answers], budget_bytes, conf,
                            [a[2] for a in answers])
    return document_of(Plan, PlanAnswer, data)


def _plan_one(key, base, solve, setting: Setting, limit, conf, several: bool = False):
    """plan's answer for one model: (result, device, the process memory its verdict counted, the model)."""
    from livebytes.estimator.capacity import allocated_peak, process_memory
    from livebytes.estimator.planning import answer_shape, largest_fitting, largest_running
    from livebytes.estimator.registry import seq_multiple, spec
    gpu, what_if = setting.gpu, setting.what_if
    multiple = seq_multiple(key, what_if)[0] if solve == "seq" else 1   # a CP model's total sequence: W (2W) ranks' parts
    device, s = device_of(key, gpu), spec(key)
    first = replace(base, seq=multiple) if multiple > 1 else base
    # a traced model's compiled form from the cache (its symbolic build is seconds); the others as they were
    model = compiled_for(key, gpu, what_if, first) if s.required_options else model_for(key, gpu, what_if, first)
    cache, version = triton_cache_for(model, device, setting.triton_cache, several), triton_for(key, device, setting.triton, several)

    def refuse(sh):
        return s.refuse(sh, device)

    def replayed(m, sh):
        return allocated_peak(m, sh, conf, cache)

    def model_at(sh):          # the stack's layers are a build option: one model per tried count, up to the search's
        return model_for(key, gpu, what_if, sh, depth=False)      # limit: one no preset holds fails on the device
    at = model_at if solve == "layers" else None
    result = (largest_fitting(model, base, solve, limit, refuse=refuse, peak=replayed, multiple=multiple, model_at=at)
              if limit is not None else
              largest_running(model, base, solve, device, conf, cache, refuse=refuse, multiple=multiple, model_at=at,
                              triton=version))
    judged = getattr(result, "at_value", None) or getattr(result, "at_next", None)   # the verdict's own process
    process = judged.process if judged is not None else process_memory(device, model, cache, answer_shape(base, result),
                                                                         triton=version)
    return result, device, process, model


def explain_at(snapshot, key: str, shape, setting: Setting = Setting(), at: str = "peak") -> Explanation:
    """``explain``: each live block of a ``torch.cuda.memory._dump_snapshot`` file named by the model's buffer."""
    from pathlib import Path

    from livebytes.validate.explain import explain as run_explain, snapshot_blocks
    model = model_for(key, setting.gpu, setting.what_if, shape)
    blocks = snapshot_blocks(Path(snapshot), at)
    data = report.explain_data(model, shape, run_explain(model, shape, blocks), Path(snapshot).name, at)
    return Explanation.of(data["results"][0])


def explain_document(answer: Explanation) -> dict:
    return report.envelope("explain", [answer.to_dict()])


def models_at() -> tuple[ModelInfo, ...]:
    """Every registered model (``livebytes models``)."""
    from livebytes.estimator.registry import specs
    return tuple(ModelInfo.of(r) for r in report.models_data(specs())["results"])


def models_document(infos) -> dict:
    return report.envelope("models", [i.to_dict() for i in infos])

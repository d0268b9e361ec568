"""The Python API's calls. Two layers: the public functions (``predict``, ``compare``, ``plan``, ``sweep``,
``explain``, ``models``) take the HF/FLA keyword names (``livebytes.keywords``); each turns them into a model key, a
``Shape`` and a ``Setting`` and runs the matching ``*_at`` function, which the command line calls too with what its
flags parsed to. So the command line computes nothing the API does not: it parses, calls ``*_at``, renders."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional
import json
from itertools import product
from pathlib import Path

from . import report
from .choose import cache_skipped, device_of, triton_for
from .notes import assumption_lines, implausible_warnings
from .query import Query, Setting, answer, resolve  # noqa: F401 (Setting: the API's callers name it here)
from .results import (Comparison, Explanation, ModelInfo, Plan, PlanAnswer, Prediction, Sweep, SweepPoint,
                      document_of)
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import Shape, head_v_dim, HF_NAMES
# capacity.verdict is called through its module: tests count the calls there
from livebytes.estimator import capacity
from livebytes.estimator.capacity import allocated_peak, process_memory
from livebytes.estimator.registry import check_shape, shape_options, seq_multiple, spec, specs
from livebytes.choose import alloc_conf_of
from livebytes.estimator.cache import cached
from livebytes.estimator.groups import Group
from livebytes.validate.check import explain as ex


# a caller's progress: told after each unit of work (units done, units in all or None for a search, a short note)
Progress = Optional[Callable[[int, Optional[int], str], None]]


def predict_at(key: str, shape, setting: Setting = Setting(), announce: Optional[Callable[[str], None]] = None) -> Prediction:
    """``predict``: the peak by storage group, the protocol replay, the records, and the verdict of a fresh process
    (one ``query.answer``). ``announce`` gets each warning before the simulation (an absurd shape's takes a moment)."""
    resolution = resolve(Query((key,), shape, setting), announce)
    (one,) = answer(resolution).models
    warnings = resolution.implausible + resolution.assumed
    result = report.prediction_data(one.prediction, one.records, one.verdict, one.replay_peak_bytes,
                                    one.resolved.triton_matters)
    return Prediction.of(result, warnings=warnings, engine=(one.prediction, one.records, one.replay_peak_bytes))


def prediction_document(answer: Prediction) -> dict:
    """``predict --json``: the envelope around the one result."""
    return report.envelope("predict", [answer.to_dict()], list(answer.warnings))


def compare_at(keys: list[str], shape, setting: Setting = Setting()) -> Comparison:
    """``compare``: each model at one shape, its change against the first, and each one's verdict (one
    ``query.answer``; the Triton flags apply to the Triton models among them, even alone)."""
    resolution = resolve(Query(tuple(keys), shape, setting, several=True))
    done = answer(resolution).models
    data = report.compare_data([m.prediction for m in done], [m.records for m in done],
                               [m.replay_peak_bytes for m in done], [m.verdict for m in done],
                               list(resolution.implausible) + _listed(resolution.skipped),
                               [m.resolved.triton_matters for m in done])
    return document_of(Comparison, Prediction, data, engine=([m.prediction for m in done], [m.records for m in done]))


def timeline_at(keys: list[str], shape, setting: Setting = Setting(), sources: bool = False):
    """``timeline``: each model's live bytes per step with predict's verdict (one ``query.answer``, without the
    replay and the records it does not show): (the ``--json`` document, the answer its views draw from). ``sources``:
    the models as built (``Query.sources``), for the predicted process's snapshot."""
    resolution = resolve(Query(tuple(keys), shape, setting, sources=sources))
    done = answer(resolution, asks=frozenset())
    data = report.timeline_data(done.predictions, done.verdicts,
                                list(resolution.implausible) + _listed(resolution.skipped),
                                [m.resolved.triton_matters for m in done.models])
    return data, done


def _listed(line: Optional[str]) -> list[str]:
    return [line] if line else []


@dataclass(frozen=True)
class Grid:
    """``sweep``'s grid: every combination of these sizes, with one stack (``Shape``'s layer fields) for all; ``v_heads``
    None: as many value heads as heads at each point; ``expand_v`` (FLA's ratios, as text: ``planning.parse_ratio_range``)
    None: the value head dim is the head dim at each point, else head_dim * expand_v (``shapes.head_v_dim``)."""
    mbs: list
    seqs: list
    heads: list
    dims: list
    stack: dict = field(default_factory=dict)
    v_heads: Optional[list] = None
    expand_v: Optional[list] = None

    def shapes(self) -> list:
        """Every point in order (micro-batch, sequence, heads, head dim, value heads, expand_v; the last varies
        fastest); a point whose value heads are not a multiple of its heads, or whose head_dim * expand_v is not whole,
        is refused, naming its flags."""

        out = []
        for m, s, h, d, hv, ev in product(self.mbs, self.seqs, self.heads, self.dims, self.v_heads or [None],
                                          self.expand_v or [None]):
            if hv is not None and hv % h:
                raise LivebytesError(f"--num-v-heads {hv} at --num-heads {h}: value heads must be a multiple of heads (each "
                                     "combination of the grid is a point)")
            dv = None if ev is None else head_v_dim(d, ev, f"--expand-v at --head-dim {d}")
            out.append(Shape(m, s, h, d, v_heads=hv, dim_v=dv, **self.stack))
        return out


def sweep_at(keys: list[str], grid: Grid, setting: Setting = Setting(), progress: Progress = None) -> Sweep:
    """``sweep``: each model over the grid from one vectorised evaluation per code path (``_grid_peaks``), each point
    with predict's verdict; ``progress`` hears of each point judged."""
    shapes = grid.shapes()
    rows, pairs = [], []
    for key in keys:
        for one, conf, shape, peak in _grid_peaks(key, shapes, setting, len(keys) > 1):
            rows.append((one.model, shape, peak, capacity.verdict(one.model, shape, one.device, conf, one.triton_cache,
                                                         triton=one.triton)))
            if progress:
                progress(len(rows), len(keys) * len(shapes), f"{key} at {shape.label()}")
        pairs.append((rows[-1][0], one.device))
    skipped = cache_skipped(pairs, setting.triton_cache, setting.triton)
    data = report.sweep_data(rows, implausible_warnings(*(shape for _, shape, _, _ in rows)) + ([skipped] if skipped else []))
    return document_of(Sweep, SweepPoint, data)


def _grid_peaks(key: str, shapes: list, setting: Setting, several: bool) -> list:
    """(resolved model, allocator configuration, shape, peak) at each shape in order: one query per code path the
    shapes select (``shape_options``: value heads above heads take the GVA path; its model as built, whose formulas the
    grid evaluates), every point checked against its model first, each path's peaks from one vectorised evaluation
    (``planning.sweep_shapes``)."""
    from livebytes.estimator.planning import sweep_shapes  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    paths: dict[tuple, list[int]] = {}
    for i, shape in enumerate(shapes):
        paths.setdefault(tuple(sorted(shape_options(key, shape).items())), []).append(i)
    out: list = [None] * len(shapes)
    for indices in paths.values():
        resolution = resolve(Query((key,), shapes[indices[0]], setting, several=several, sources=True))
        one = resolution.models[0]
        for i in indices:
            check_shape(key, shapes[i], one.model.device, setting.what_if)
        for i, peak in zip(indices, sweep_shapes(one.model, [shapes[i] for i in indices])):
            out[i] = (one, resolution.conf, shapes[i], peak)
    return out


def plan_at(keys: list[str], base, solve: str, setting: Setting = Setting(), budget_bytes: Optional[int] = None,
            announce: Optional[Callable[[str], None]] = None, progress: Progress = None) -> Plan:
    """``plan``: per model, the largest value of ``solve`` that runs on the device (the allocator simulation of a fresh
    process) or whose allocated peak fits ``budget_bytes``; the other dimensions held at ``base``. ``progress`` hears
    of each value tried (a search: no total)."""
    conf = alloc_conf_of(setting.alloc_conf)
    tried = [0]

    def on_try(key: str):
        def told(value: int) -> None:           # in the bar's and the flags' words: seq_len, not the field seq
            tried[0] += 1
            progress(tried[0], None, f"{key}: {HF_NAMES[solve]} {value:,}")
        return told if progress else None
    answers = [_plan_one(key, base, solve, setting, budget_bytes, conf, len(keys) > 1, on_try(key)) for key in keys]
    skipped = cache_skipped([(model, device) for _, device, _, model in answers], setting.triton_cache, setting.triton)
    if skipped and announce:
        announce(skipped)
    data = report.plan_data([a[0] for a in answers], solve, base, [a[1] for a in answers], budget_bytes, conf,
                            [a[2] for a in answers], assumption_lines([a[3] for a in answers]))
    return document_of(Plan, PlanAnswer, data)


def _plan_one(key, base, solve, setting: Setting, limit, conf, several: bool = False, on_try=None):
    """plan's answer for one model: (result, device, the process memory its verdict counted, the model). Each model it
    tries is a query's (``resolve``): the first at ``base``, a depth search's one per depth."""
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.estimator.planning import answer_shape, largest_fitting, largest_running
    what_if = setting.what_if
    multiple = seq_multiple(key, what_if)[0] if solve == "seq" else 1   # a CP model's total sequence: W (2W) ranks' parts
    device, s = device_of(key, setting.gpu), spec(key)
    start = depth_search_start(what_if) if solve == "layers" else 1
    first = replace(base, seq=multiple) if multiple > 1 else replace(base, layers=start) if start > 1 else base
    one = resolve(Query((key,), first, setting, several=several)).models[0]
    model, cache, version = one.model, one.triton_cache, one.triton

    def refuse(sh):
        return s.refuse(sh, device)

    def replayed(m, sh):
        return allocated_peak(m, sh, conf, cache)

    def model_at(sh):          # the stack's layers are a build option: one model per tried count, up to the search's
        return resolve(Query((key,), sh, setting, several=several, depth=False)).models[0].model   # limit
    # a batch of one row and of several are two programs for transformers' hybrids (``rows``, ``shape_options``)
    at = model_at if solve == "layers" or (solve == "mbs" and "rows" in s.options) else None
    result = (largest_fitting(model, base, solve, limit, refuse=refuse, peak=replayed, multiple=multiple, model_at=at,
                              on_try=on_try, start=start)
              if limit is not None else
              largest_running(model, base, solve, device, conf, cache, refuse=refuse, multiple=multiple, model_at=at,
                              triton=version, on_try=on_try, start=start))
    judged = getattr(result, "at_value", None) or getattr(result, "at_next", None)   # the verdict's own process
    process = judged.process if judged is not None else process_memory(device, model, cache, answer_shape(base, result),
                                                                         triton=version)
    return result, device, process, model


def depth_search_start(what_if: dict) -> int:
    """The depth ``plan --solve num_hidden_layers`` starts from: a traced whole model's (``--model``: its family's,
    ``traced.model.depth_search_start``); 1 for a layer model."""
    config = what_if.get("config")
    if not config:
        return 1
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import depth_search_start as traced_start
    return traced_start(config)


# plan --solve gpus: FSDP2's world sizes tried, in order (powers of two: a mesh of whole nodes of 1, 2, 4 or 8 GPUs)
GPU_COUNTS = tuple(1 << k for k in range(11))       # 1 .. 1,024


def plan_gpus_at(key: str, base, setting: Setting = Setting(), budget_bytes: Optional[int] = None,
                 progress: Progress = None) -> Plan:
    """``plan --solve gpus``: the fewest ranks (``GPU_COUNTS``, tried from the smallest) at which rank 0's step of the
    whole model ``key`` at ``base`` runs on the device (predict's verdict) or whose allocated peak fits
    ``budget_bytes``, over the FSDP2 x CP x EP meshes users run (``gpu_meshes``): at each count the most split mesh
    first; where it fits, the meshes of that count from the least CP up, the first that fits the answer. Every mesh
    tried, with its peaks and rank 0's activations. No count: ``value`` null."""
    device, conf = device_of(key, setting.gpu), alloc_conf_of(setting.alloc_conf)
    tried, answer = [], None
    experts = _experts(setting.what_if)

    def attempt(world: int, cp: int, ep: int):
        what_if = setting.what_if | {"fsdp": world} | ({"cp": cp} if cp > 1 else {}) | ({"ep": ep} if ep > 1 else {})
        one = resolve(Query((key,), base, replace(setting, what_if=what_if))).models[0]
        model, cache = one.model, one.triton_cache
        if budget_bytes is None:
            judged = capacity.verdict(model, base, device, conf, cache, triton=one.triton)
            row, process = report.verdict_data(judged), judged.process
        else:
            peak = allocated_peak(model, base, conf, cache)
            row, process = {"fits": peak <= budget_bytes, "allocated_peak_bytes": peak}, None
        tried.append({"world_size": world, "cp": cp, "ep": ep, **row,
                      "activations_bytes": activations_bytes(model, base)})
        if progress:
            progress(len(tried), None, f"{key}: --fsdp {world} --cp {cp} --ep {ep}")
        return row["fits"], model, cache, process

    for world in GPU_COUNTS:
        meshes = gpu_meshes(world, base.seq, experts)
        fits, model, cache, process = attempt(world, *meshes[-1])
        if not fits:
            continue
        for cp, ep in meshes[:-1]:
            ok, m, c, p = attempt(world, cp, ep)
            if ok:
                fits, model, cache, process = ok, m, c, p
                break
        answer = model
        break
    process = process or process_memory(device, model, cache, base, triton=triton_for(key, device, setting.triton))
    data = report.gpus_plan_data(answer or model, device, base, tried, answer is not None, GPU_COUNTS, budget_bytes,
                                 conf, process)
    return document_of(Plan, PlanAnswer, data)


def gpu_meshes(world: int, seq: int, experts: int) -> list[tuple[int, int]]:
    """(CP, EP) of the meshes ``plan --solve gpus`` tries at ``world`` ranks, the least split first: CP in ``SOLVER_CP``
    (at most the ranks, splitting the sequence evenly), EP 1 or the most ranks that divide the experts."""
    from livebytes.lifetimes.traced.parallel import SOLVER_CP  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    ep = max((e for e in (1 << k for k in range(17)) if e <= world and experts and experts % e == 0), default=1)
    cps = [c for c in SOLVER_CP if c <= world and seq % c == 0]
    return [(c, e) for c in cps for e in sorted({1, ep})]


def _experts(what_if: dict) -> int:
    """The routed experts of the whole model's config (0: none), for EP's degrees; none under worst-case routing."""
    config = what_if.get("config")
    if not config or what_if.get("routing") == "worst":
        return 0

    from livebytes.lifetimes.traced.model import installed_versions  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.parallel import experts_of, resolved_config
    # kept on disk (the config classes' reading imports them: seconds of a warm --solve gpus), keyed on their versions
    versions = json.dumps(installed_versions(), sort_keys=True)
    return cached(("experts", config, versions), lambda: experts_of(resolved_config(json.loads(config)))[0])


def activations_bytes(model, shape) -> int:
    """Rank 0's activations at ``shape``: the layers' saved tensors and the loss's (what CP splits)."""
    keep = (Group.ACTIVATIONS, Group.LOSS)
    values = model.charged_fn(*shape.values())
    return sum(int(n) for b, n in zip(model.buffers, values) if b.group in keep)


def explain_at(snapshot, key: str, shape, setting: Setting = Setting(), at: str = "peak") -> Explanation:
    """``explain``: each live block of a ``torch.cuda.memory._dump_snapshot`` file named by the model's buffer, and
    warnings where the blocks do not fit the model at this shape (``validate.check.explain.fit_warnings``), with the shape one
    size away that explains more, when there is one."""


    def built(s):              # the model as built: its buffers' sources name the snapshot's frames; nothing judged
        return resolve(Query((key,), s, setting, sources=True, judged=False)).models[0].model
    model = built(shape)
    blocks, failed = ex.read_blocks(Path(snapshot), at)
    explained = ex.explain(model, shape, blocks)
    fit = ex.fit_of(model, shape, explained)
    short = ex.short_of_peak(fit, at, failed)
    better = ex.best_shape(built, shape, blocks, explained, fit) if short or fit.explained_bytes < fit.live_bytes else None
    data = report.explain_data(model, shape, explained, Path(snapshot).name, at)
    whole_model = "config" in (setting.what_if or {})      # a config's traced step (--model)
    return Explanation.of(data["results"][0], warnings=tuple(ex.fit_warnings(key, shape, fit, short, better, whole_model)))


def explain_document(answer: Explanation) -> dict:
    return report.envelope("explain", [answer.to_dict()], list(answer.warnings))


def models_at() -> tuple[ModelInfo, ...]:
    """Every registered model (``livebytes models``)."""
    return tuple(ModelInfo.of(r) for r in report.models_data(specs())["results"])


def models_document(infos) -> dict:
    return report.envelope("models", [i.to_dict() for i in infos])

"""Plain data views for --json and for the renderers: every number a table shows is computed here (or in
the library), so rendering only formats. Every command's JSON is ``envelope(command, ...)``: the keys are
documented in docs/json.md (a test holds the two together).

Schema 3 (docs/json.md, docs/schema/): every command's envelope holds ``warnings`` and ``results``, a list; each
result names ``impl`` (model key), ``device`` (preset name; a GPU's product name, where read from a record or trace,
only in ``device_name``), ``shape`` (``Shape.as_dict``: the HF/FLA names, null where none applies) and ``options``;
storage groups are keyed by ``Group.key`` with their prose in ``group_labels``; byte counts end in ``_bytes``,
fractions in ``_fraction``, ratios in ``_ratio``; ``oom`` is an object or null and ``passed`` a bool wherever they
appear.
"""
from __future__ import annotations

import json
from dataclasses import fields

from livebytes.estimator.devices import GiB
from livebytes.estimator.groups import Group
from livebytes.estimator.devices import preset_of
from livebytes.process_words import assumptions_words, kept_here_words, kind_word, status_words

SCHEMA = 3


def gib(nbytes: int | float) -> float:
    return nbytes / GiB


def envelope(command: str, results: list, warnings: list | None = None, **fields) -> dict:
    """The one JSON envelope: schema version and command first, the warning lines printed on stderr, the command's
    own fields, then its results."""
    return {"schema": SCHEMA, "command": command, "warnings": list(warnings or []), **fields, "results": results}


def group_bytes(groups: dict) -> dict:
    """A map of storage groups (``groups.Group``) to bytes or expressions, keyed by the groups' machine names."""
    return {g.key: n for g, n in groups.items()}


def group_labels(*group_maps) -> dict:
    """Every group the maps name, machine name -> its prose label (the tables' row names), in the groups' order."""
    named = {g for m in group_maps for g in m}
    return {g.key: g.label for g in Group if g in named}


def device_terms(preset: str | None, product_name: str | None) -> dict:
    """A record's or trace's GPU: ``device`` the preset name (as everywhere), ``device_name`` the product name as the
    GPU reported it (null where none is recorded)."""
    name = product_name if product_name and product_name != "?" else None
    return {"device": preset or preset_of(name) or name, "device_name": name}


def model_terms(model) -> dict:
    """What every result built from a model names: the model, its device and options (library names, every option
    the model was built with, defaults included) and its phase."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.registry import spec
    s = spec(model.key)
    return {"impl": model.key, "device": model.device if isinstance(model.device, str) else model.device.name,
            "options": {name: allowed[0] if allowed else None for name, allowed in s.options.items()} | dict(model.options), "phase": s.phase,
            **fsdp_terms(model), **lora_terms(model)}


def lora_terms(model) -> dict:
    """A model fine-tuned with LoRA (``--lora-rank R``): its settings as peft took them; nothing for a full fine-tune."""
    setting = dict(model.options).get("lora")
    if not setting:
        return {}
    from livebytes.lifetimes.traced.lora import settings  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    s = settings(setting)
    return {"lora": {"rank": s["r"], "alpha": s["alpha"], "targets": s["targets"]}}


def fsdp_terms(model) -> dict:
    """A model sharded by FSDP2 (``--fsdp W``) or split by CP or EP (``--cp C``, ``--ep E``): its world size, the
    rank answered, the degrees and that no W above 1 has been measured (world size 1 was, with the misses
    ``WORLD_1_MEASURED`` names); nothing for any other model."""
    options = dict(model.options)
    if "config" not in options:             # a kernel model's own --cp (fla-kda-cp) is its world, not a mesh of ranks
        return {}
    fsdp, cp, ep = options.get("fsdp") or 0, options.get("cp") or 1, options.get("ep") or 1
    world = fsdp or (max(cp, ep) if cp > 1 or ep > 1 else 0)
    if not world:
        return {}
    from livebytes.lifetimes.traced.fsdp import NOT_MODELLED  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.parallel import NOT_MODELLED as SPLIT
    split = cp > 1 or ep > 1
    status = (f"predicted, unvalidated at this world size; {WORLD_1_MEASURED}" if world > 1 else WORLD_1_MEASURED)
    if fsdp and options.get("lora"):
        status = f"{status}; {LORA_UNDER_FSDP}"
    if split:
        status = (f"predicted, unvalidated: CP {cp} x EP {ep} is arithmetic on the traced world-size-1 step "
                  f"(lifetimes/traced/parallel.py), no multi-GPU run has measured it"
                  + (f"; FSDP2 {status}" if fsdp else ""))
    return {"fsdp": {"world_size": world, "rank": 0, "validated": False, "status": status,
                     "not_modelled": list(NOT_MODELLED if fsdp else ()) + list(SPLIT if split else ()),
                     **({"cp": cp, "ep": ep} if split else {})}}


# what was measured at world size 1 (validate/data/records/runs/run32/, validate/model_records' named misses): said with
# every --fsdp answer, kept here beside the answer's other words (no model names a validation run)
WORLD_1_MEASURED = ("world size 1 measured on the H200 (run 32): allocated within 1 MiB in every step; reserved 212 MB "
                    "low there, the reduce-scatter stream's own pool (not modelled)")


LORA_UNDER_FSDP = ("LoRA under FSDP2 (the frozen base sharded and gathered like any parameter, only the adapters "
                   "reduce-scattered, lifetimes/traced/fsdp.py) measured at world size 1 on an H100 (run 42): requested "
                   "peak exact, reserved inside its band, allocated within 1 MiB")


# a preset's capacity_kind (estimator/data/devices.json) -> the status its figure reads as: measured on our GPU, a
# public report of what CUDA reports on that card, or assumed (a datasheet estimate); the source says whose figure
CAPACITY_STATUS = {"measured": "measured", "reported": "reported", "datasheet": "assumed"}


def device_memory_data(device) -> dict:
    return {"total_bytes": device.capacity_bytes, "status": CAPACITY_STATUS[device.capacity_kind],
            "source": device.capacity_source}


def process_memory_data(process) -> dict:
    """The process's memory outside PyTorch as ``memory.ProcessMemory`` states it: its kind, its figures' status and
    source, its assumptions and what this machine supplied, in ``process_words``' words."""

    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.process.memory import Figure
    figures = {f.name: {"bytes": figure.bytes, "status": status_words(figure.status), "source": figure.source}
               for f in fields(process) if isinstance(figure := getattr(process, f.name), Figure)}
    return {"bytes": process.bytes, "margin_bytes": process.margin, "high_bytes": process.high_bytes,
            "library": process.library_name, "status": kind_word(process.kind),
            "figures": figures, "stack_limit_bytes": process.stack_limit_bytes,
            "growth": [{"step": step, "bytes": nbytes} for step, nbytes in process.growth],
            "assumptions": assumptions_words(process), "kept_here": kept_here_words(process)}


def allocator_terms(model, device, conf, process, shape=None, matters: bool | None = None) -> dict:
    """The allocator simulation's settings (``allocator.AllocatorConf``, the Triton cache) and what the device and
    process figures (``capacity.ProcessMemory``) rest on; cold, what autotuning at ``shape`` assumes unmeasured
    (``autotune.held_assumptions``). ``matters``: whether the model runs Triton kernels there, where a query resolved
    it (``query.Resolved``); else asked here (``capacity.triton_cache_matters``)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.autotune import held_assumptions
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.capacity import triton_cache_matters
    matters = triton_cache_matters(model, device) if matters is None else matters
    cold = matters and process.triton_cache == "cold" and shape is not None
    return {"alloc_conf": conf.text, "alloc_conf_source": conf.source, "triton_cache": process.triton_cache if matters else "n/a",
            "triton": (process.triton or "n/a") if matters else "n/a",
            "device_memory": device_memory_data(device), "process_memory": process_memory_data(process),
            "autotune_assumptions": list(held_assumptions(model, shape)) if cold else []}


def probed_data(v) -> list[dict]:
    """The H200 boundary-probe trials that ran this verdict's very case (``validate.check.probe_records.probed_at``)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.validate.check.probe_records import layer_options, probed_at
    if v.shape is None:
        return []
    options = dict(v.options)
    return probed_at(v.model_key, options.get("contract"), v.shape, v.conf.text, v.process.triton_cache,
                     v.device.name, layer_options(options))


def verdict_data(v) -> dict:
    """The three levels (allocated, reserved, device need), the verdict (``capacity.Verdict``), and where a boundary
    probe ran the very case. Out of memory: the peaks are those of a device without a limit (``peaks_unbounded``)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.capacity import oom_dict
    return {"fits": v.fits, "oom": oom_dict(v), "probed": probed_data(v),
            "allocated_peak_bytes": v.allocated_peak_bytes, "reserved_peak_bytes": v.reserved_peak_bytes,
            **reserved_band_data(v), "peaks_unbounded": v.oom is not None, "device_need_bytes": v.device_need_bytes,
            "capacity_bytes": v.capacity_bytes, "headroom_bytes": v.headroom_bytes}


def reserved_band_data(v) -> dict:
    """The reserved band (``capacity.ReservedBand``: every placement's reserved peak without a limit) and whose run
    decided the verdict."""
    band = v.band
    low, high = (band.low_bytes, band.high_bytes) if band is not None else (v.reserved_peak_bytes, v.reserved_peak_bytes)
    kind, placement = v.decided_by
    return {"reserved_low_bytes": low, "reserved_high_bytes": high,
            "reserved_decided_by": {"kind": kind, "placement": placement}}


def change_vs_first(values: list[int | None]) -> list[float | None]:
    """value / first - 1 for each value after the first (None where either is missing)."""
    base = values[0] if values else None
    return [None] + [None if (v is None or not base) else v / base - 1 for v in values[1:]]


def _validate_digest() -> str:
    """The comparison policy's own sources (``livebytes.validate``): a judgement cached on disk depends on them."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.cache import package_digest
    return package_digest("livebytes.validate")


def _judged(record) -> tuple[int | None, int | None]:
    """(validator-process replay, error) of ``validate.check.compare.compare``, the one comparison policy. It builds the
    symbolic model (sympy), so the result is cached on disk by the record's data and both packages' sources."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.cache import cached

    def judge():
        from livebytes.validate.check.compare import compare  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        c = compare(record)
        return (c.predicted if (record.origin == "measured" and not record.oom) else None), c.error_bytes
    return cached(("comparison", record.path.name, json.dumps(record.data, sort_keys=True, default=str),
                   _validate_digest()), judge)


def measured_entry(record) -> dict:
    """One record as ``validate`` judges it: the measured bytes, the replay of the validator's process that
    produced them (its warmup and earlier shapes included; null for published figures and out-of-memory
    records, which are compared otherwise) and the error."""
    replayed, error = _judged(record)
    return {"peak_bytes": record.peak_bytes, "oom": record_oom(record), "origin": record.origin,
            **device_terms(record.gpu, record.device), "record": record.path.name, "protocol_replay_bytes": replayed,
            "error_bytes": error}


def record_oom(record) -> dict | None:
    """A record's out-of-memory as an object (null when it ran): the step and PyTorch's request, where recorded."""
    if not record.oom:
        return None
    figures = record.oom_figures
    return {"step": record.oom_step, "tried_bytes": figures.tried_bytes if figures else None}


def measured_data(records) -> list[dict]:
    return [measured_entry(r) for r in (records or [])]


def quoted_record(records):
    """The one record a table quotes for a shape (the validator's choice), or None."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.validate.check.records import best
    return best(list(records or []))


def prediction_data(p, measured: list | None = None, verdict=None, replayed: int | None = None,
                    matters: bool | None = None) -> dict:
    """One model's prediction at one shape (``matters``: ``allocator_terms``'), with its verdict's terms when given."""
    fwd_bytes, _ = p.forward_peak()
    out = {
        **model_terms(p.model),
        "shape": p.shape.as_dict(),
        "peak_bytes": p.peak_bytes,
        "peak_step": p.peak_step.name,
        "replay_peak_bytes": replayed,
        "forward_peak_bytes": fwd_bytes,
        "group_bytes": group_bytes(p.groups),
        "group_labels": group_labels(p.groups, {b.group for b, n in p.at_peak if n}),   # the modules: these groups
        "buffers_at_peak": [
            {"name": b.name, "group": b.group.key, "shape": b.shape_text(), "dtype": b.dtype, "tensor": b.tensor_text(),
             "allocated_bytes": n,
             "source": str(b.source)}
            for b, n in p.at_peak if n
        ],
        "measured": measured_data(measured),
        "status": "measured" if measured else "predicted (never measured)",
    }
    modules = p.modules
    if modules:         # a traced model: what each module holds at the peak
        out["module_bytes"] = {m: {"total": sum(groups.values()), **group_bytes(groups)} for m, groups in modules.items()}
    if verdict is not None:
        out |= allocator_terms(p.model, verdict.device, verdict.conf, verdict.process, p.shape, matters) | verdict_data(verdict)
    return out


def unlike_columns(results: list[dict]) -> str | None:
    """Why ``compare``'s columns are not like for like: they differ in contract (among models that take one),
    device or phase; None when they agree (a Triton version apart: ``unlike_tritons``)."""
    differ = []
    for what, value in (("contract", lambda r: r["options"].get("contract")), ("device", lambda r: r["device"]),
                        ("phase", lambda r: r["phase"])):
        values = [(r["impl"], value(r)) for r in results if value(r) is not None]
        if len({v for _, v in values}) > 1:
            differ.append(f"{what} (" + ", ".join(f"{k} {v}" for k, v in values) + ")")
    return None if not differ else "the columns differ in " + "; ".join(differ) + ": the changes are not like for like"


def unlike_tritons(results: list[dict]) -> str | None:
    """Where ``compare``'s Triton models count different Triton versions' process memory: their verdicts differ by it
    (the peaks do not depend on it)."""
    values = [(r["impl"], r["triton"]) for r in results if r.get("triton", "n/a") != "n/a"]
    if len({v for _, v in values}) < 2:
        return None
    return ("the columns' process memory is of different Triton versions (" + ", ".join(f"{k} {v}" for k, v in values)
            + "): their verdicts are not like for like, their peaks are (--triton sets one where a model has it)")


def compare_data(preds, measured, replayed, verdicts, warnings: list | None = None, matters: list | None = None) -> dict:
    """One shape, several implementations: each prediction and its change against the first (``matters``: each
    model's ``allocator_terms``')."""
    predicted_change = change_vs_first([p.peak_bytes for p in preds])
    quoted = [quoted_record(m) for m in measured]
    measured_peaks = [None if (q is None or q.oom) else q.peak_bytes for q in quoted]
    measured_change = change_vs_first(measured_peaks) if None not in measured_peaks else [None] * len(preds)
    triton = matters if matters is not None else [None] * len(preds)
    results = [prediction_data(p, m, v, r, t) | {"change_vs_first_fraction": c, "measured_change_vs_first_fraction": mc}
               for p, m, r, v, t, c, mc in zip(preds, measured, replayed, verdicts, triton, predicted_change, measured_change)]
    unlike = [w for w in (unlike_columns(results), unlike_tritons(results)) if w]
    return envelope("compare", results, list(warnings or []) + unlike, shape=preds[0].shape.as_dict())


def formula_data(model, expr, steps: list[int], per_group: dict) -> dict:
    """The closed form (``planning.closed_form``) and, per candidate step, each storage group's (``per_group``: step
    -> ``Group`` -> expression), as sympy text; ``symbols`` names what each symbol stands for (``SYMBOL_NAMES``)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import SYMBOL_NAMES
    return envelope("formula", [{
        **model_terms(model), "shape": None, "peak_bytes_expression": str(expr), "symbols": dict(SYMBOL_NAMES),
        "peak_steps": [model.steps[i].name for i in steps],
        "group_bytes_expressions": {st: {g.key: str(e) for g, e in grp.items()} for st, grp in per_group.items()},
        "group_labels": group_labels(*per_group.values())}])


def models_data(specs) -> dict:
    return envelope("models", [
        {"impl": s.key, "device": s.default_device, "shape": None, "options": {k: v[0] if v else None for k, v in s.options.items()},
         "allowed_options": {k: list(v) if v else [] for k, v in s.options.items()},
         "implementation": s.implementation, "version": s.version, "phase": s.phase, "covers": s.covers}
        for s in specs])


def budget_warning(budget_bytes: int, device) -> str | None:
    if budget_bytes <= device.capacity_bytes:
        return None
    return (f"--budget {budget_bytes / GiB:,.3f} GiB is above the {device.name}'s {device.capacity_bytes / GiB:,.3f} GiB "
            "(its whole memory): an answer that fits the budget may not run there")


def plan_data(results, solve: str, shape, devices: list, budget_bytes: int | None, conf, processes: list,
              warnings: list | None = None) -> dict:
    """``results``: planning.PlanResult (with a budget: the allocated peak against it) or planning.CapacityPlan
    (without: the full simulation of a fresh process on the device, out of memory or not); ``conf`` the allocator
    configuration and ``processes`` each result's ``capacity.ProcessMemory``, for what the answer assumed. Each result's
    ``shape`` is the shape at its answer (``planning.answer_shape``: ``shape`` with the solved field set to the value)."""
    from livebytes.estimator.planning import answer_shape  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    rows, notes = [], list(warnings or [])
    for r, d, process in zip(results, devices, processes):
        at = answer_shape(shape, r)
        row = {**model_terms(r.model), "device": d.name, "shape": at.as_dict()}
        if solve == "layers":         # the searched model's own build options hold its first depth: the answer's
            row["options"] = row["options"] | {"layers": at.layers}
        row |= allocator_terms(r.model, d, conf, process, at)
        row |= {"value": r.value, "next_value": r.next_value}
        if budget_bytes is not None:
            above = budget_warning(budget_bytes, d)
            notes += [above] if above and above not in notes else []
            row |= {"budget_above_device": above is not None, "peak_at_value_bytes": r.peak_at_value,
                    "peak_at_next_bytes": r.peak_at_next}
        else:
            row |= {"at_value": None if r.at_value is None else verdict_data(r.at_value), "at_next": verdict_data(r.at_next)}
        rows.append(row)
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import HF_NAMES
    return envelope("plan", rows, notes, solve=HF_NAMES[solve], budget_bytes=budget_bytes)


def gpus_plan_data(model, device, shape, tried: list, found: bool, counts: tuple, budget_bytes: int | None,
                   conf, process) -> dict:
    """``plan --solve gpus``: ``tried`` the rows of each FSDP2 world size in order (``fits`` and its peaks), the last
    one the answer when ``found``; ``model`` the answer's (else the last tried), ``process`` its process memory."""
    row = {**model_terms(model), "device": device.name, "shape": shape.as_dict(),
           **allocator_terms(model, device, conf, process, shape),
           "value": tried[-1]["world_size"] if found else None, "searched": f"powers of two from {counts[0]} to "
           f"{counts[-1]:,} ranks, the smallest first; at each, FSDP2 x CP x EP (CP up to 8, EP dividing the experts), "
           "the most split first, then from the least CP up", "tried": tried,
           "mesh": {"cp": int(dict(model.options).get("cp") or 1), "ep": int(dict(model.options).get("ep") or 1)}
           if found else None}
    notes = [] if found else [f"{model.key}: no FSDP2 x CP x EP mesh up to {counts[-1]:,} ranks fits "
                              f"{'the budget' if budget_bytes is not None else device.name}: what does not shard "
                              "(activations, the loss, the root's unsharded parameters) does not fit alone"]
    return envelope("plan", [row], notes, solve="gpus", budget_bytes=budget_bytes)


def sweep_data(rows, warnings: list | None = None) -> dict:
    """rows: (model, shape, peak bytes, ``capacity.Verdict``): the verdict is predict's and plan's."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.capacity import oom_dict
    return envelope("sweep", [
        {**model_terms(m), "shape": s.as_dict(), "peak_bytes": peak, **allocator_terms(m, v.device, v.conf, v.process, s),
         **verdict_peaks(v), "device_need_bytes": v.device_need_bytes, "fits": v.fits, "oom": oom_dict(v)}
        for m, s, peak, v in rows], warnings)


def verdict_peaks(v) -> dict:
    """predict's two peaks of a fresh process's run (``capacity.Verdict``) and whether they are those of a device without
    a limit (it goes out of memory), as sweep's and timeline's results carry them."""
    return {"allocated_peak_bytes": v.allocated_peak_bytes, "reserved_peak_bytes": v.reserved_peak_bytes,
            "peaks_unbounded": v.oom is not None}


def oom_when(o: dict) -> str:
    """Where in the process an ``oom`` object's failure falls: the inputs, the first call, or a steady step."""
    if o["first_call"]:
        return "the first call"
    n = o["run_step"]            # 0 is the first call: 1 the first steady call (a boundary probe's steady_1)
    return "the inputs" if n < 0 else f"steady call {n} (the process's call {n + 1})"


def out_of_memory_warning(r: dict) -> str | None:
    """The warning for a result whose verdict (``verdict_data``'s ``oom``) says the device runs out of memory: its
    live bytes are those of a device without a memory limit. None when it runs."""
    o = r["oom"]
    if o is None:
        return None
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.shapes import Shape
    return (f"{r['impl']} at {Shape.from_dict(r['shape']).label()} runs out of memory on the {r['device']} (in "
            f"{oom_when(o)}, at {o['step']} allocating {o['buffer']}: tried to allocate {gib(o['tried_bytes']):,.2f} GiB): "
            "these live bytes are those of a device with no memory limit")


def timeline_data(preds, verdicts, warnings: list | None = None, matters: list | None = None) -> dict:
    """Live bytes per step of each prediction, with its verdict (``capacity.Verdict``, predict's: whether a fresh
    process runs it on the device) and what that verdict assumed; a warning for each that runs out of memory
    (``matters``: each model's ``allocator_terms``')."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.capacity import oom_dict
    triton = matters if matters is not None else [None] * len(preds)
    results = [
        {**model_terms(p.model), "shape": p.shape.as_dict(), "peak_bytes": p.peak_bytes,
         "peak_step": p.peak_step.name, **allocator_terms(p.model, v.device, v.conf, v.process, p.shape, t),
         **verdict_peaks(v), "fits": v.fits, "oom": oom_dict(v),
         "group_labels": group_labels(*(p.groups_at(i) for i in range(len(p.model.steps)))),
         "steps": [{"name": st.name, "phase": st.phase, "live_bytes": p.step_bytes[i],
                    "group_bytes": group_bytes(p.groups_at(i))}
                   for i, st in enumerate(p.model.steps)]}
        for p, v, t in zip(preds, verdicts, triton)]
    notes = list(warnings or []) + [w for w in map(out_of_memory_warning, results) if w]
    return envelope("timeline", results, notes, shape=preds[0].shape.as_dict())


def explain_data(model, shape, explained, snapshot: str, at: str) -> dict:
    """``validate.check.explain``'s answer: every live block, the buffer it is (or null) and how it was matched."""
    blocks = [{"address": e.block.address, "bytes": e.block.size, "requested_bytes": e.block.requested,
               "buffer": e.buffer, "match": e.match, "frames": list(e.block.frames)} for e in explained]
    explained_bytes = sum(b["bytes"] for b in blocks if b["buffer"] is not None)
    live = sum(b["bytes"] for b in blocks)
    return envelope("explain", [{**model_terms(model), "shape": shape.as_dict(), "snapshot": snapshot, "at": at,
                                 "live_bytes": live, "explained_bytes": explained_bytes,
                                 "unexplained_bytes": live - explained_bytes, "blocks": blocks}])


EXPLAIN_ROWS = 200        # the terminal's table: every explained block, then the largest unexplained up to this many rows


def explain_shown(result: dict, limit: int = EXPLAIN_ROWS) -> tuple[list[dict], int, int]:
    """(the blocks the terminal table shows, in the result's order: every explained block and the largest unexplained
    up to ``limit`` rows; the count and bytes of the unexplained blocks left out). ``--json`` lists every block."""
    blocks = result["blocks"]
    room = max(0, limit - sum(b["buffer"] is not None for b in blocks))
    unexplained = sorted((i for i, b in enumerate(blocks) if b["buffer"] is None), key=lambda i: -blocks[i]["bytes"])
    left_out = set(unexplained[room:])
    return ([b for i, b in enumerate(blocks) if i not in left_out], len(left_out),
            sum(blocks[i]["bytes"] for i in left_out))


TIMELINE_ROWS = 200      # more steps than this (a whole model's thousands): one terminal row per phase and module


def timeline_rows(p) -> list[tuple[str, int]]:
    """(label, step index) per terminal row: every step, or, for a model of more than ``TIMELINE_ROWS`` steps, one row
    per run of consecutive steps in one phase and module (``prediction.module_key``: a layer's child), at the run's
    largest step (its peak step where the run holds the peak)."""
    # deferred: keeps the CLI's start from loading it (import livebytes.cli.app: 0.10 s, 0.27 s with every import at the top)
    from livebytes.estimator.prediction import module_key
    steps = p.model.steps
    if len(steps) <= TIMELINE_ROWS:
        return [(st.name, i) for i, st in enumerate(steps)]
    runs: list[tuple[str, list[int]]] = []
    for i, st in enumerate(steps):
        phase, _, rest = st.name.partition(".")
        label = f"{phase}.{module_key(rest.rsplit('.', 1)[0])}" if rest else st.name
        if runs and runs[-1][0] == label:
            runs[-1][1].append(i)
        else:
            runs.append((label, [i]))
    return [(f"{label} ({len(idx)} steps)" if len(idx) > 1 else label,
             p.peak_index if p.peak_index in idx else max(idx, key=lambda i: p.step_bytes[i])) for label, idx in runs]


def bar_lengths(preds, width: int = 40) -> list[list[int]]:
    """Terminal timeline bars: live bytes per step scaled to the largest peak of all ``preds``."""
    top = max(p.peak_bytes for p in preds)
    return [[round(width * n / top) if top else 0 for n in p.step_bytes] for p in preds]


def validation_data(comparisons, tolerance: float, summary=None, warnings: list | None = None) -> dict:
    rows = []
    for c in comparisons:
        r = c.record
        rows.append({"impl": r.impl, **device_terms(r.gpu, r.device), "shape": r.shape.as_dict(), "options": r.options,
                     "mode": r.mode or r.origin, "predicted_bytes": c.predicted, "measured_bytes": c.measured,
                     "oom": record_oom(r), "error_bytes": c.error_bytes, "error_fraction": c.error_fraction,
                     "requested_error_bytes": c.requested_error, "seconds": r.seconds_total,
                     "passed": bool(c.passed), "criterion": criterion(c), "note": c.note, "record": r.path.name,
                     "failed_figures": c.failures})
    counts = None if summary is None else {"passed_count": summary.passed, "failed_count": summary.failed,
                                           "out_of_memory_count": summary.out_of_memory,
                                           "device_seconds": summary.device_seconds}
    return envelope("validate", rows, warnings, tolerance_fraction=tolerance, passed=all(r["passed"] for r in rows),
                    summary=counts)


def criterion(c) -> str:
    """How a row was judged, in a few short words (the table's title explains each; ``note`` has the rest):
    the tolerance, the allocator bounds (history-dependent records), or an out-of-memory verdict."""
    if c.measured is None:
        return c.note or "out of memory"
    if c.record.history_dependent:
        return "allocator bounds"
    return "tolerance"


def payload_rows(fn: str, seqs: list[int], dim: int, dim_v: int | None, block_q: int, block_k: int, measure=None) -> list[dict]:
    """The saved-payload model (and, with ``measure``, the real autograd graph) at each token count."""
    from livebytes.estimator.payload import predict_payload  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.attention_payload import PAYLOAD_MODELS
    rows, previous = [], None
    for t in seqs:
        kw = dict(T=t, d=dim, dv=dim_v, bq=block_q, bk=block_k)
        p = predict_payload(PAYLOAD_MODELS[fn], **kw)
        dense = predict_payload(PAYLOAD_MODELS["dense"], **kw).bytes
        tiled = predict_payload(PAYLOAD_MODELS["tiled"], **kw).bytes
        m = measure(fn, t, dim, dim_v, block_q, block_k) if measure else None
        row = {"impl": fn, "device": "cpu", "options": {},
               "shape": {"seq_len": t, "head_dim": dim, "head_v_dim": dim_v or dim, "block_q": block_q, "block_k": block_k},
               "predicted_bytes": p.bytes, "measured_bytes": m.bytes if m else None,
               "save_events": p.events, "measured_save_events": m.save_events if m else None,
               "largest_elements": p.largest, "measured_largest_elements": m.largest if m else None,
               "growth_ratio": None if previous is None else p.bytes / previous, "vs_dense_ratio": p.bytes / dense,
               "vs_tiled_ratio": p.bytes / tiled, "inputs_bytes": t * (2 * dim + (dim_v or dim)) * 4}
        # validate's words: passed (bytes, events and largest all equal), error_bytes = predicted - measured
        row["passed"] = None if m is None else (m.bytes, m.save_events, m.largest) == (p.bytes, p.events, p.largest)
        row["error_bytes"] = None if m is None else p.bytes - m.bytes
        rows.append(row)
        previous = p.bytes
    return rows

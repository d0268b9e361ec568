"""What an answer says beside its figures: shapes beyond any GPU, what a whole model assumes, the library version it was
built from, and the committed measurements of its very case (records, and the placement that replays one)."""
from __future__ import annotations

from dataclasses import replace
from livebytes.estimator.shapes import implausible
from livebytes.estimator.registry import spec
from livebytes.validate.check.records import find
from livebytes.estimator.placement import MODEL_PLACEMENT
from livebytes.validate.check.model_records import measured_placement
from livebytes.validate.check.probe_records import layer_options, probed_at


def implausible_warnings(*shapes) -> list[str]:
    """The warning lines for shapes beyond anything a GPU holds (each once)."""
    return list(dict.fromkeys(r for r in map(implausible, shapes) if r))


def assumption_lines(models) -> list[str]:
    """What a whole model's answer assumes beyond its options' words: the library it was built from where that is not
    the version its key names (``version_lines``), each model's caveat (its spec's: a traced family that no measurement
    checks is unvalidated), LoRA's settings (``lora.assumption``), and ``--routing worst``'s note (the same bytes as
    balanced, why, and which transients would
    depend on it: ``lifetimes.traced.model.routing_note``)."""
    lines = version_lines(models) + list(dict.fromkeys(spec(m.key).caveat for m in models if spec(m.key).caveat))
    lora = list(dict.fromkeys(dict(m.options)["lora"] for m in models if dict(m.options).get("lora")))
    if lora:
        from livebytes.lifetimes.traced.lora import assumption  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        from livebytes.lifetimes.traced.model import peft_version  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        lines += [assumption(setting, peft_version()) for setting in lora]
    if not any(dict(m.options).get("routing") == "worst" for m in models):
        return lines        # imported only then: a warm cache's answer imports no model module (test_compiled)
    from livebytes.lifetimes.traced.model import routing_note  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    return lines + [routing_note("worst")]


def version_lines(models) -> list[str]:
    """``qwen3-next-model@5.17.0: transformers 5.25.0 Qwen3NextForCausalLM, traced as installed; validated under
    5.17.0``: a model built from another version of its library than its key's (the one its records validated), once
    each, in its own words (its implementation)."""
    return list(dict.fromkeys(f"{m.key}: {m.implementation}" for m in models if m.version != m.key.rpartition("@")[2]))


def measured_records(model, shape):
    """The records of this model at this shape; a layer model's shape with its layer fields left out is the model's
    defaults (hidden, one layer, no checkpointing), as its records state them."""
    opts = {k: v for k, v in model.options if k != "forward_only"}
    if "hidden" in opts and "layers" in opts:
        shape = replace(shape, hidden=shape.hidden or opts["hidden"], layers=shape.layers or opts["layers"],
                        checkpoint=shape.checkpoint or (True if opts.get("checkpoint") else None))
    return find(model.key, shape, opts)


def measured_case(model, shape, device, conf, triton_cache: str):
    """The placement whose replay matches a committed measurement of this very case, which then decides its verdict
    (``capacity.verdict``'s ``measured``); None: the reserved band's high end decides. A whole model: the placement that
    replays its model-step record (``model_records.measured_placement``); a kernel or layer a boundary probe ran at this
    case (``probe_records.probed_at``): the model's own, which replays every boundary record."""
    options = dict(getattr(model, "options", ()))
    if options.get("config") is not None:
        return measured_placement(model, shape, device.name, triton_cache)
    probed = probed_at(model.key, options.get("contract"), shape, conf.text, triton_cache, device.name,
                       layer_options(options))
    return MODEL_PLACEMENT if probed else None

"""The JSON vocabulary of schema 3 and the generated documents: one JSON Schema per command (docs/schema/<command>.json,
each command module's ``schema()``, ``cli/commands``) built from the shared parts below, and the key tables of
docs/json.md. ``python -m livebytes.cli.schema [DOCS]`` rewrites them (DOCS: the checkout's docs folder, ``docs`` by
default), and tests/test_json.py checks that the committed files are what this module writes and that every command's
output validates against its schema.

Every object lists all its keys (``additionalProperties: false``); ``required`` holds every key but those a
command writes in one mode only (plan's ``--budget`` keys). ``map`` objects have data as keys.
"""
from __future__ import annotations

import json
from pathlib import Path
import sys
from .commands import modules


SCHEMA_VERSION = 3


def _t(kind: str, description: str, nullable: bool = False, **more) -> dict:
    out = {"type": [kind, "null"] if nullable else kind, "description": description, **more}
    return out


def integer(d: str, nullable: bool = False) -> dict:
    return _t("integer", d, nullable)


def number(d: str, nullable: bool = False) -> dict:
    return _t("number", d, nullable)


def string(d: str, nullable: bool = False, enum: tuple | None = None) -> dict:
    more = {"enum": list(enum) + ([None] if nullable else [])} if enum else {}
    return _t("string", d, nullable, **more)


def boolean(d: str, nullable: bool = False) -> dict:
    return _t("boolean", d, nullable)


def listof(item: dict, d: str) -> dict:
    return {"type": "array", "description": d, "items": item}


def mapof(values: dict, d: str) -> dict:
    return {"type": "object", "description": d, "additionalProperties": values}


def obj(d: str, props: dict, nullable: bool = False, optional: tuple = ()) -> dict:
    return {"type": ["object", "null"] if nullable else "object", "description": d, "properties": props,
            "required": [k for k in props if k not in optional], "additionalProperties": False}


# ---------------------------------------------------------------- shared parts

SHAPE = obj("a kernel shape (a layer model's: with its layer fields), in HF configs' and FLA layers' names", {
    "batch_size": integer("sequences per micro-batch"), "seq_len": integer("tokens per sequence"),
    "num_heads": integer("query/key heads"), "head_dim": integer("query/key head dim"),
    "num_v_heads": integer("value heads (when given)"),
    "head_v_dim": integer("value head dim (when given: head_dim * expand_v)"),
    "hidden_size": integer("a layer's hidden size (layer models, when given)"),
    "num_hidden_layers": integer("layers in the stack (layer models, when given)"),
    "checkpoint": boolean("activation checkpointing per layer (layer models, when given)"),
    "conv_size": integer("the short convolution's width (layer models, when given)")},
    optional=("num_v_heads", "head_v_dim", "hidden_size", "num_hidden_layers", "checkpoint", "conv_size"))
SHAPE_MARK = "num_heads"      # the key that tells a shape object in the generated tables (payload's has none)
NO_SHAPE = {"type": "null", "description": "null: the result holds no one shape"}
OPTIONS = mapof({}, "options the model was built with, library names (contract, recompute, gva, forward_only; "
                    "context-parallel models: cp, cp_layout, cp_rank; whole models: optimizer, precision, packed, "
                    "routing, and loss where it is not the family's own, e.g. liger), defaults included")


GROUP_LABELS = mapof(string("the group's label, as the tables name it"),
                     "storage group key (snake case, the keys of the group maps) -> its label, for every group this "
                     "result names")
DEVICE_NAME = string("the GPU's product name as torch reported it (torch.cuda.get_device_name, e.g. NVIDIA H200), read "
                     "from the record or trace (null where it records none)", nullable=True)


def terms(shape: dict = SHAPE) -> dict:
    """What every result names: the model, its device, the shape and the options it was built with."""
    return {"impl": string("model key, implementation@version"), "device": string("device preset (H200, B300, ...)"),
            "shape": shape, "options": OPTIONS, "phase": string("fwd+bwd or fwd", enum=("fwd+bwd", "fwd"))}


OOM = obj("null when it runs; else where it goes out of memory, with PyTorch's figures", {
    "run_step": integer("-1 the inputs, 0 the first call, then the steady steps"),
    "first_call": boolean("in the first call"), "step": string("model step"),
    "buffer": string("the allocation that fails"), "request_bytes": integer("the request"),
    "tried_bytes": integer("what PyTorch tried to allocate"), "allocated_bytes": integer("allocated then"),
    "reserved_bytes": integer("reserved then"), "reserved_unallocated_bytes": integer("reserved but unallocated"),
    "free_bytes": integer("free on the device"), "total_bytes": integer("device total")}, nullable=True)
RECORD_OOM = obj("null when the record ran; else its out-of-memory", {
    "step": string("where it ran out of memory, as recorded", nullable=True),
    "tried_bytes": integer("PyTorch's \"Tried to allocate\", where recorded", nullable=True)}, nullable=True)
ALLOCATOR = {
    "alloc_conf": string("PYTORCH_CUDA_ALLOC_CONF simulated (expandable_segments:False by default)"),
    "alloc_conf_source": string("where alloc_conf was read: --alloc-conf (alloc_conf= in Python), the environment's "
                                "PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF (the first set, as PyTorch reads them), "
                                "or default", enum=("--alloc-conf", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "default")),
    "triton_cache": string("cold (the first call autotunes every kernel), warm (tuned configs on disk), n/a (no "
                           "Triton kernels)", enum=("cold", "warm", "n/a")),
    "triton": string("the Triton version whose kernels' process memory is counted (--triton; the model's default "
                     "otherwise), n/a (no Triton kernels)"),
    "device_memory": obj("the device's memory and where the figure comes from", {
        "total_bytes": integer("device memory"),
        "status": string("measured on our GPU; reported: a public report of the card's total_memory (the source "
                          "names it); assumed: a datasheet estimate", enum=("measured", "reported", "assumed")),
        "source": string("where the figure comes from")}),
    "process_memory": obj("the process's memory outside PyTorch after the first call (CUDA context, loaded kernel "
                          "modules, the stack reservation of the kernels that launched), as estimator/process/memory.py states it", {
        "bytes": integer("the figure: each part measured, derived, bounded or estimated"),
        "margin_bytes": integer("the estimated parts' high ends above their figures: the largest shortfall each "
                                "estimate's rule made on a withheld committed case (0: nothing estimated)"),
        "high_bytes": integer("bytes + margin_bytes: what the verdict counts"),
        "library": string("whose process memory that is"),
        "status": string("measured; derived where a part is computed from measured data (the stack reservation from the "
                         "kernels' frames); bounded where a part is a proved upper bound (its proof in assumptions); "
                         "estimated where a part is the nearest committed cases' figure with its leave-one-out error "
                         "(its high end counted); unbounded where any part is neither measured, derived, bounded nor "
                         "estimated", enum=("measured", "derived", "bounded", "estimated", "unbounded")),
        "figures": mapof(obj("one figure", {"bytes": integer("bytes"),
                                            "status": string("measured, derived (the stack from frames), 'bounded: ' "
                                                             "and its proof, 'estimated: ' and its basis and error, "
                                                             "or 'unbounded: ' and why"),
                                            "source": string("where it comes from", nullable=True)}),
                         "figure name (context, modules, stack) -> the figure"),
        "stack_limit_bytes": integer("the per-thread stack limit (cudaLimitStackSize) after the first call"),
        "growth": listof(obj("one raise of the stack limit", {"step": string("the model step whose launch raises it"),
                                                               "bytes": integer("the reservation's growth there")}),
                         "where the first call's launches grow the process's memory (empty: raised before the call)"),
        "assumptions": listof(string("one part neither measured nor derived: 'bounded: PART: proof', 'estimated: "
                                     "PART: basis and leave-one-out error' or 'unbounded: PART: what is used and why "
                                     "nothing bounds it'"),
                              "each part of the figure neither measured nor derived, in its own words"),
        "kept_here": listof(string("'PART: status', the status saying '(on this machine, ...)'"),
                            "each part this machine supplied (livebytes frames derive, livebytes process measure), "
                            "which no committed record holds")}),
    "autotune_assumptions": listof(string("one assumption"), "a cold first call's autotuned launches whose failing "
                                   "configs were not measured at this shape, call and GPU: what the answer assumes "
                                   "(estimator/autotune.py held_assumptions); empty when warm or measured"),
}
PROBED = listof(obj("one trial", {
    "record": string("the probe file (validate/data/records/boundary/)"),
    "fits": boolean("the trial ran (first call and two steady calls)"),
    "phase": string("where it ran out of memory: first_call, steady_1, steady_2, inputs (null: it ran)", nullable=True),
    "tried_bytes": integer("PyTorch's \"Tried to allocate\" (the OOM observer's figure)", nullable=True),
    "after_warmup": boolean("that process ran its 1 x 1024 warmup first"),
    "earlier_trials": integer("trials that process ran before this one, besides the warmup")}),
    "H200 boundary-probe trials that ran this very case")
VERDICT_KEYS = {
    "fits": boolean("a fresh process runs it without going out of memory"), "oom": OOM, "probed": PROBED,
    "allocated_peak_bytes": integer("max_memory_allocated over a fresh process's whole run, first call included"),
    "reserved_peak_bytes": integer("max_memory_reserved over that run: the run reserved_decided_by names"),
    "reserved_low_bytes": integer("the least reserved peak over every placement of the run's segments the driver was "
                                  "seen to give (estimator/data/placements.json), without a device limit"),
    "reserved_high_bytes": integer("the greatest such reserved peak: the band's high end, which decides a case no record "
                                   "measured"),
    "reserved_decided_by": obj("whose run the verdict and its peaks are", {
        "kind": string("high end (no record measured the case: it runs under every placement, the figures are the "
                       "highest's or the first to run out of memory's) or measured (the placement that replays its record)"),
        "placement": string("the placement: model (the allocator model's own, each new segment below every earlier "
                            "one) or the committed trace it was read from (run25h_k2-ckpt, ...)")}),
    "peaks_unbounded": boolean("true when it goes out of memory: the two peaks (and device_need_bytes, built on the "
                               "reserved one) are those of a device without a limit; the printed answer labels each"),
    "device_need_bytes": integer("reserved_peak_bytes + process_memory.bytes"),
    "capacity_bytes": integer("what cudaMalloc can hand the allocator (device total - process memory at its high end)"),
    "headroom_bytes": integer("device total - device_need_bytes (negative: short)"),
}
VERDICT = obj("the verdict at this value", VERDICT_KEYS)
VERDICT_PEAKS = {k: VERDICT_KEYS[k] for k in ("allocated_peak_bytes", "reserved_peak_bytes")} | {
    "peaks_unbounded": boolean("true when it goes out of memory: the two peaks are those of a device without a limit")}
MEASURED = listof(obj("one record", {
    "peak_bytes": integer("the record's peak (null for an out-of-memory)", nullable=True), "oom": RECORD_OOM,
    "origin": string("measured (our GPUs) or published (a document's figure)"),
    "device": string("device preset of the GPU the record was taken on (H200, B300, ...)"), "device_name": DEVICE_NAME,
    "record": string("record file name"),
    "protocol_replay_bytes": integer("the replay of the validator's process that took the record: validate's "
                                     "predicted bytes (null for published figures and out-of-memory records)", nullable=True),
    "error_bytes": integer("validate's error for the record: predicted - measured (null for an out-of-memory)",
                           nullable=True)}), "committed records of this implementation at this shape and options")
FSDP = obj("--model --fsdp W, --cp C, --ep E (and plan --solve gpus): rank 0 under FSDP2 sharding "
           "(lifetimes/traced/fsdp.py) and context and expert parallelism (lifetimes/traced/parallel.py)", {
    "world_size": integer("W, the ranks the model is sharded over"),
    "rank": integer("the rank whose memory is answered: 0 (torch.chunk gives it the largest shard)"),
    "validated": boolean("false: no FSDP2 step has been measured yet (world size 1 has a run plan)"),
    "status": string("predicted, unvalidated, and what would validate it"),
    "not_modelled": listof(string("one part of FSDP2 not modelled"), "what the answer leaves out"),
    "cp": integer("--cp: the context-parallel degree (each rank S / C tokens; lifetimes/traced/parallel.py)"),
    "ep": integer("--ep: the expert-parallel degree (each rank E / EP experts; lifetimes/traced/parallel.py)")},
    optional=("cp", "ep"))
LORA = obj("--model --lora-rank R: LoRA through peft's get_peft_model (lifetimes/traced/lora.py); absent: a full "
           "fine-tune", {
               "rank": integer("r, each adapter's rank"),
               "alpha": number("lora_alpha (peft's default 8): a scale, no buffer depends on it"),
               "targets": {"description": "peft's target_modules: all-linear or the module names",
                           "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}})
PREDICTION = {
    **terms(),
    "fsdp": FSDP,
    "lora": LORA,
    "peak_bytes": integer("peak allocated bytes (512-byte blocks), steady state of a process running this shape"),
    "peak_step": string("the step where the peak is first reached"),
    "replay_peak_bytes": integer("steady-state torch.cuda.max_memory_allocated of the allocator replay"),
    "forward_peak_bytes": integer("the largest live set among forward (and harness) steps"),
    "group_bytes": mapof(integer("bytes"), "storage group key -> bytes live at the peak"),
    "group_labels": GROUP_LABELS,
    "buffers_at_peak": listof(obj("one buffer", {
        "name": string("buffer name"), "group": string("storage group key (its label: group_labels)"),
        "shape": string("the buffer's shape as a formula"), "dtype": string("bf16, fp32, int64, ..."),
        "tensor": string("the tensor as a reader names it: its shape, dims named where the trace knows them, and its "
                         "dtype ([T, 5632] bf16, [MBS, S, vocab] fp32; T = MBS x S); a traced model's shape and dtype "
                         "are its bytes ([131072000] uint8), its tensor what was allocated; a declared model's: its "
                         "shape and dtype"),
        "allocated_bytes": integer("bytes charged at this shape"),
        "source": string("file:function (and line) that allocates it in the pinned library")}), "buffers live at the peak"),
    "measured": MEASURED,
    "status": string("measured or predicted (never measured)"),
    "module_bytes": mapof(mapof(integer("bytes"), "total, and storage group key -> bytes"),
                          "traced models (--model) only: module (a layer's child, e.g. model.layers.3.attn) -> what it "
                          "holds at the peak"),
    **ALLOCATOR, **VERDICT_KEYS,
}
PREDICTION_OPTIONAL = ("module_bytes", "fsdp", "lora")


def envelope(command: str, results_item: dict, description: str, **fields) -> dict:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://livebytes.invalid/schema/{SCHEMA_VERSION}/{command}.json",
        "title": f"livebytes {command} --json (schema {SCHEMA_VERSION})",
        **obj(description, {
            "schema": {"const": SCHEMA_VERSION, "description": "the schema version"},
            "command": {"const": command, "description": "the command's name"},
            "warnings": listof(string("one line"), "the warning lines the command printed on stderr"),
            **fields,
            "results": listof(results_item, "the command's answers, one per implementation (or row)")}),
    }


TRACED_DEVICE = {"device": string("device preset of the GPU the traces were taken on (null: none the traces name)",
                                 nullable=True), "device_name": DEVICE_NAME}
TRACED_SHAPES = {
    "traced_shapes": listof(dict(SHAPE, description="one trace's shape (value heads and value head dim always given)"),
                            "every trace's shape"),
    "symbols": mapof(string("what it stands for, in shape keys"), "each symbol of the traces' formulas and ties -> what "
                     "it stands for: T batch_size * seq_len (the packed tokens), N batch_size, H num_heads, HV "
                     "num_v_heads, K head_dim, V head_v_dim")}


DIFF_KINDS = ("added", "removed", "resized", "retyped", "lives longer", "lives shorter")     # estimator/diff.py KINDS
SHAPE_OR_NONE = dict(SHAPE, type=["object", "null"], description="the shape of the peak's change (--seq-len and --num-heads; "
                                                                  "null without them)")


def _diff_side(which: str) -> dict:
    return obj(f"the allocation in {which} (null: absent there)", {
        "shape": string("its shape as a formula (a carved workspace: its regions' total bytes)"),
        "dtype": string("bf16, fp32, int64, uint8, ..."), "lifetime": string("allocated -> freed, or held across calls"),
        "source": string("file:line function of the pinned library that allocates it"),
        "note": string("the buffer records' notes (empty: none)"),
        "allocated_bytes": integer("bytes charged at the shape (null without one)", nullable=True)}, nullable=True)


def schemas() -> dict[str, dict]:
    """Every command's JSON Schema, by command, in the commands' order (``cli/commands``: each module's ``schema``)."""
    return {m.NAME: m.schema() for m in modules()}


# ---------------------------------------------------------------- docs

def _type(s: dict) -> str:
    if "const" in s:
        return json.dumps(s["const"])
    kinds = s.get("type", "any")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    names = {"integer": "int", "number": "number", "string": "string", "boolean": "bool", "array": "list", "null": "null"}
    out = []
    for k in kinds:
        if k == "object":
            out.append("map" if "properties" not in s else ("shape" if SHAPE_MARK in s["properties"] else "object"))
        else:
            out.append(names.get(k, k))
    return "|".join(out)


def rows(s: dict, path: str = "") -> list[tuple[str, str, str]]:
    """(key path, type, meaning) for every key of ``s``, nested objects and list items too."""
    out = []
    for key, sub in s.get("properties", {}).items():
        here = f"{path}.{key}" if path else key
        out.append((here, _type(sub), sub.get("description", "")))
        if SHAPE_MARK in sub.get("properties", {}):
            continue
        out += rows(sub, here)
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            out += rows(sub["items"], here + "[]")
    return out


def key_tables() -> str:
    parts = []
    for command, s in schemas().items():
        lines = [f"## `{command}`", "", f"{s['description']}; schema: [schema/{command}.json](schema/{command}.json).", "",
                 "| key | type | meaning |", "|---|---|---|"]
        lines += [f"| `{k}` | {t} | {m.replace('|', '/')} |" for k, t, m in rows(s)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


TABLES_MARK = "<!-- key tables: generated by python -m livebytes.cli.schema; do not edit below -->\n"


def schema_text(command: str) -> str:
    return json.dumps(schemas()[command], indent=1) + "\n"


def json_doc(current: str) -> str:
    """docs/json.md with its generated tables replaced (the prose above the mark kept)."""
    return current.split(TABLES_MARK, 1)[0] + TABLES_MARK + "\n" + key_tables()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    docs = Path(args[0] if args else "docs")
    (docs / "schema").mkdir(parents=True, exist_ok=True)
    for command in schemas():
        (docs / "schema" / f"{command}.json").write_text(schema_text(command))
    doc = docs / "json.md"
    doc.write_text(json_doc(doc.read_text()))


if __name__ == "__main__":
    main()

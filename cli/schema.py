"""The JSON vocabulary of schema 3, one JSON Schema per command (docs/schema/<command>.json) and the key tables
of docs/json.md, both generated from the definitions below: ``python -m livebytes.cli.schema [DOCS]`` rewrites them
(DOCS: the checkout's docs folder, ``docs`` by default), and
tests/test_json.py checks that the committed files are what this module writes and that every command's output
validates against its schema.

Every object lists all its keys (``additionalProperties: false``); ``required`` holds every key but those a
command writes in one mode only (plan's ``--budget`` keys). ``map`` objects have data as keys.
"""
from __future__ import annotations

import json
from pathlib import Path

from livebytes.estimator.planning import SOLVE_NAMES

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
                    "context-parallel models: cp, cp_layout, cp_rank), defaults included")


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
                          "modules, the stack reservation of the kernels that launched), as estimator/process.py states it", {
        "bytes": integer("the bytes counted"), "library": string("whose process memory that is"),
        "status": string("measured; derived where a part is computed from measured data (the stack reservation from the "
                         "kernels' frames); bounded where a part is a proved upper bound (its proof in assumptions); "
                         "unbounded where any part is neither measured, derived nor bounded",
                         enum=("measured", "derived", "bounded", "unbounded")),
        "figures": mapof(obj("one figure", {"bytes": integer("bytes"),
                                            "status": string("measured, derived (the stack from frames), 'bounded: ' "
                                                             "and its proof, or 'unbounded: ' and why"),
                                            "source": string("where it comes from", nullable=True)}),
                         "figure name (context, modules, stack) -> the figure"),
        "stack_limit_bytes": integer("the per-thread stack limit (cudaLimitStackSize) after the first call"),
        "growth": listof(obj("one raise of the stack limit", {"step": string("the model step whose launch raises it"),
                                                               "bytes": integer("the reservation's growth there")}),
                         "where the first call's launches grow the process's memory (empty: raised before the call)"),
        "assumptions": listof(string("one part neither measured nor derived: 'bounded: PART: proof' or 'unbounded: "
                                     "PART: what is used and why nothing bounds it'"),
                              "each part of the figure neither measured nor derived, in its own words")}),
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
    "reserved_peak_bytes": integer("max_memory_reserved over that run"),
    "peaks_unbounded": boolean("true when it goes out of memory: the two peaks (and device_need_bytes, built on the "
                               "reserved one) are those of a device without a limit; the printed answer labels each"),
    "device_need_bytes": integer("reserved_peak_bytes + process_memory.bytes"),
    "capacity_bytes": integer("what cudaMalloc can hand the allocator (device total - process memory)"),
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
FSDP = obj("--model --fsdp W (and plan --solve gpus): FSDP2 sharding, lifetimes/traced/fsdp.py", {
    "world_size": integer("W, the ranks the model is sharded over"),
    "rank": integer("the rank whose memory is answered: 0 (torch.chunk gives it the largest shard)"),
    "validated": boolean("false: no FSDP2 step has been measured yet (world size 1 has a run plan)"),
    "status": string("predicted, unvalidated, and what would validate it"),
    "not_modelled": listof(string("one part of FSDP2 not modelled"), "what the answer leaves out")})
PREDICTION = {
    **terms(),
    "fsdp": FSDP,
    "peak_bytes": integer("peak allocated bytes (512-byte blocks), steady state of a process running this shape"),
    "peak_step": string("the step where the peak is first reached"),
    "replay_peak_bytes": integer("steady-state torch.cuda.max_memory_allocated of the allocator replay"),
    "forward_peak_bytes": integer("the largest live set among forward (and harness) steps"),
    "group_bytes": mapof(integer("bytes"), "storage group key -> bytes live at the peak"),
    "group_labels": GROUP_LABELS,
    "buffers_at_peak": listof(obj("one buffer", {
        "name": string("buffer name"), "group": string("storage group key (its label: group_labels)"),
        "shape": string("the buffer's shape as a formula"), "dtype": string("bf16, fp32, int64, ..."),
        "allocated_bytes": integer("bytes charged at this shape"),
        "source": string("file:function (and line) that allocates it in the pinned library")}), "buffers live at the peak"),
    "measured": MEASURED,
    "status": string("measured or predicted (never measured)"),
    "module_bytes": mapof(mapof(integer("bytes"), "total, and storage group key -> bytes"),
                          "traced models (--model) only: module (a layer's child, e.g. model.layers.3.attn) -> what it "
                          "holds at the peak"),
    **ALLOCATOR, **VERDICT_KEYS,
}
PREDICTION_OPTIONAL = ("module_bytes", "fsdp")


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


PLAN_ITEM = obj("one --impl", {
    **terms(shape=dict(SHAPE, description="the shape at the answer: the dimensions held, the solved field set to value "
                                          "(when value is null, nothing runs or fits: set to next_value, 1, the shape "
                                          "at_next judges)")),
    **ALLOCATOR,
    "value": integer("largest value that runs / fits (null: not even 1)", nullable=True),
    "next_value": integer("value + 1"),
    "budget_above_device": boolean("with --budget: the budget is above the device's whole memory"),
    "peak_at_value_bytes": integer("with --budget: replayed max_memory_allocated at value", nullable=True),
    "peak_at_next_bytes": integer("with --budget: replayed max_memory_allocated at next_value (over the budget)"),
    "at_value": dict(VERDICT, type=["object", "null"], description="without --budget: the verdict at value (null: none runs)"),
    "at_next": dict(VERDICT, description="without --budget: the verdict at next_value"),
    "fsdp": FSDP,
    "searched": string("--solve gpus: the FSDP2 world sizes tried (powers of two, the smallest first)"),
    "tried": listof(obj("one world size tried", {
        "world_size": integer("W"), "fits": boolean("rank 0's step runs on the device (fits the budget)"),
        **{k: v for k, v in VERDICT_KEYS.items() if k != "fits"}},
        optional=tuple(k for k in VERDICT_KEYS if k not in ("fits", "allocated_peak_bytes"))),
        "--solve gpus: each world size tried, in order, until one fits (with --budget: its allocated peak alone)"),
}, optional=("budget_above_device", "peak_at_value_bytes", "peak_at_next_bytes", "at_value", "at_next", "next_value",
             "fsdp", "searched", "tried"))


def _predict() -> dict:
    return envelope("predict", obj("the prediction", PREDICTION, optional=PREDICTION_OPTIONAL),
                    "one implementation at one shape")


def _compare() -> dict:
    return envelope("compare", obj("one --impl, in order", {
        **PREDICTION,
        "change_vs_first_fraction": number("peak_bytes / first's - 1 (null for the first)", nullable=True),
        "measured_change_vs_first_fraction": number("the same for the quoted measured peaks, when every "
                                                    "implementation has one", nullable=True)}, optional=PREDICTION_OPTIONAL),
        "several implementations at one shape", shape=SHAPE)


def _models() -> dict:
    return envelope("models", obj("one registered model", {
        "impl": string("model key"), "device": string("default device preset"), "shape": NO_SHAPE,
        "options": mapof({}, "option -> its default value"),
        "allowed_options": mapof(listof({}, "allowed values"), "option -> allowed values (first is the default; empty: "
                                                             "free text the model checks, a traced model's config)"),
        "implementation": string("library and kernel"), "version": string("library version or commit"),
        "phase": string("fwd+bwd or fwd", enum=("fwd+bwd", "fwd")), "covers": string("what the model covers")}),
        "the registry")


def _validate() -> dict:
    return envelope("validate", obj("one record (or run)", {
        "impl": string("model key"), "device": string("device preset (H200, B300, ...) of the GPU the record was taken on"),
        "device_name": DEVICE_NAME, "shape": SHAPE,
        "options": mapof({}, "the record's options"), "mode": string("fresh-process, shared-process, or the origin"),
        "predicted_bytes": integer("replay of the protocol plus earlier shapes' caches"),
        "measured_bytes": integer("null for an out-of-memory", nullable=True), "oom": RECORD_OOM,
        "error_bytes": integer("predicted - measured", nullable=True),
        "error_fraction": number("error_bytes / measured_bytes", nullable=True),
        "requested_error_bytes": integer("predicted - measured requested bytes", nullable=True),
        "seconds": number("wall time of the run", nullable=True), "passed": boolean("the row passed"),
        "criterion": string("tolerance, allocator bounds, or the out-of-memory verdict"),
        "note": string("the comparison's note"), "record": string("record file name"),
        "failed_figures": listof(string("one failing figure: the record, its field, measured and predicted"),
                                 "every figure of the record that failed (validate.check.record_figures); empty when all pass")}),
        "records checked against their models",
        tolerance_fraction=number("largest error that passes, a fraction of the measured peak (--tolerance 0.1% = 0.001)"),
        passed=boolean("every row passed (else exit code 3)"),
        summary=obj("the summary line's counts", {
            "passed_count": integer("measured rows that passed (an out-of-memory row counts in out_of_memory_count)"),
            "failed_count": integer("rows that failed, an out-of-memory the model said would fit included"),
            "out_of_memory_count": integer("out-of-memory rows, whether they passed or failed"),
            "device_seconds": number("device time of the runs (null: re-checked records)", nullable=True)},
            nullable=True))


def _plan() -> dict:
    return envelope("plan", PLAN_ITEM, "the largest value that runs (or fits --budget)",
                     solve=string("the dimension solved for, a shape key: seq_len, batch_size, num_heads or "
                                  "num_hidden_layers; gpus: the fewest FSDP2 ranks (--model)",
                                  enum=SOLVE_NAMES + ("gpus",)),
                     budget_bytes=integer("--budget in bytes (null: the device simulation)", nullable=True))


def _formula() -> dict:
    return envelope("formula", obj("the closed form", {
        **terms(shape=NO_SHAPE),
        "peak_bytes_expression": string("the peak in S, MBS, H, HV, DK, DV (sympy syntax; a Max over candidate steps)"),
        "symbols": mapof(string("the shape key it stands for"), "each symbol of the expressions -> the shape key "
                         "it stands for (S seq_len, MBS batch_size, H num_heads, HV num_v_heads, DK head_dim, DV "
                         "head_v_dim; HV is num_heads and DV head_dim where those are not given)"),
        "peak_steps": listof(string("step"), "candidate peak steps"),
        "group_bytes_expressions": mapof(mapof(string("expression"), "storage group key -> expression"),
                                         "step -> storage group key -> expression (empty with --no-groups)"),
        "group_labels": GROUP_LABELS}),
        "the peak as a closed form")


def _sweep() -> dict:
    return envelope("sweep", obj("one implementation at one grid point", {
        **terms(), "peak_bytes": integer("peak allocated bytes (512-byte blocks), as predict's"), **ALLOCATOR,
        **VERDICT_PEAKS, "device_need_bytes": integer("as predict's"), "fits": boolean("predict's verdict"), "oom": OOM}),
        "predictions over a grid")


def _timeline() -> dict:
    return envelope("timeline", obj("one --impl", {
        **terms(), "peak_bytes": integer("peak"), "peak_step": string("peak step"), **ALLOCATOR, **VERDICT_PEAKS,
        "fits": boolean("predict's verdict: a fresh process runs it on the device (false: a warning says so, and the "
                        "live bytes are those of a device with no memory limit)"), "oom": OOM,
        "group_labels": GROUP_LABELS,
        "steps": listof(obj("one step", {
            "name": string("step name"), "phase": string("harness, forward or backward"),
            "live_bytes": integer("bytes live at the step"),
            "group_bytes": mapof(integer("bytes"), "storage group key -> bytes live at the step")}),
            "every step in order")}),
        "live bytes per step", shape=SHAPE)


def _payload() -> dict:
    return envelope("payload", obj("one token count", {
        "impl": string("dense, tiled or checkpointed"), "device": string("cpu", enum=("cpu",)),
        "shape": obj("the attention's dimensions", {
            "seq_len": integer("tokens T"), "head_dim": integer("q/k head dim d"), "head_v_dim": integer("v head dim dv"),
            "block_q": integer("query block"), "block_k": integer("key block")}),
        "options": mapof({}, "none"),
        "predicted_bytes": integer("bytes autograd saves, per the model"),
        "measured_bytes": integer("measured on the CPU (null with --no-measure)", nullable=True),
        "save_events": integer("tensors saved, per the model"),
        "measured_save_events": integer("measured", nullable=True),
        "largest_elements": integer("largest saved tensor, elements"),
        "measured_largest_elements": integer("measured", nullable=True),
        "growth_ratio": number("predicted_bytes / previous row's", nullable=True),
        "vs_dense_ratio": number("predicted_bytes / dense's"), "vs_tiled_ratio": number("predicted_bytes / tiled's"),
        "inputs_bytes": integer("q, k, v themselves"),
        "passed": boolean("bytes, events and largest all equal (null unmeasured)", nullable=True),
        "error_bytes": integer("predicted - measured, as validate's (null unmeasured)", nullable=True)}),
        "what autograd retains for backward", fn=string("dense, tiled or checkpointed"),
        passed=boolean("every measured row matches the model (else exit code 3)"))


def _explain() -> dict:
    return envelope("explain", obj("the snapshot's live blocks against the model", {
        **terms(), "snapshot": string("the snapshot file's name"),
        "at": string("peak: the blocks live at the trace's peak; snapshot: the segments' as dumped", enum=("peak", "snapshot")),
        "live_bytes": integer("bytes of every live block"), "explained_bytes": integer("bytes of the blocks a buffer explains"),
        "unexplained_bytes": integer("live_bytes - explained_bytes"),
        "blocks": listof(obj("one live block", {
            "address": integer("its address (null where the trace gives none)", nullable=True),
            "bytes": integer("its size as the snapshot gives it (a traced block: the request)"),
            "requested_bytes": integer("the request, where the snapshot gives it beside the size", nullable=True),
            "buffer": string("the model's allocation it is (null: unexplained)", nullable=True),
            "match": string("how: its frames name the source line, the function, or by size alone (null: unexplained)",
                            nullable=True, enum=("source line", "function", "size")),
            "frames": listof(string("file:line:function"), "the frames that allocated it, innermost first")}),
            "every live block, largest first")}),
        "a memory snapshot's live blocks named by the model's buffers")


TRACED_DEVICE = {"device": string("device preset of the GPU the traces were taken on (null: none the traces name)",
                                 nullable=True), "device_name": DEVICE_NAME}
TRACED_SHAPES = {
    "traced_shapes": listof(dict(SHAPE, description="one trace's shape (value heads and value head dim always given)"),
                            "every trace's shape"),
    "symbols": mapof(string("what it stands for, in shape keys"), "each symbol of the traces' formulas and ties -> what "
                     "it stands for: T batch_size * seq_len (the packed tokens), N batch_size, H num_heads, HV "
                     "num_v_heads, K head_dim, V head_v_dim")}


def _learn() -> dict:
    return envelope("learn", obj("the learned draft", {
        "impl": string("the traced implementation"), **TRACED_DEVICE,
        "shape": NO_SHAPE, "options": mapof({}, "the traces' options"), **TRACED_SHAPES,
        "ties": listof(listof(string("symbol"), "symbols the traces vary together"), "tied symbol groups"),
        "buffers": listof(obj("one learned buffer", {
            "name": string("learned name"), "site": string("allocating frame"),
            "bytes_formula": string("exact byte formula (null: none found)", nullable=True),
            "alternatives": listof(string("formula"), "other formulas that fit every trace"),
            "allocated": integer("allocation order"),
            "freed_after": integer("freed after that allocation (null: at the end)", nullable=True),
            "device_dependent": string("why its size may depend on the device (null: none)", nullable=True),
            "observed_bytes": listof(integer("bytes"), "the traced sizes")}), "one per learned buffer"),
        "unexplained": listof(string("line"), "what the traces show that no buffer explains")}),
        "a draft model from allocator traces")


def _drift() -> dict:
    return envelope("drift", obj("the hand model against the traces", {
        "impl": string("the hand model checked"), **TRACED_DEVICE,
        "shape": NO_SHAPE, "options": mapof({}, "the hand model's options"), **TRACED_SHAPES,
        "traced_impl": string("the implementation the traces are of"), "passed": boolean("no difference"),
        "findings": listof(obj("one finding", {
            "kind": string("added, removed, resized, re-typed, lifetime, outside-window or empty (0 bytes at every traced "
                           "shape: not compared)"),
            "buffer": string("hand name (learned name for added)"), "detail": string("what differs")}),
            "every finding, outside-window and empty ones included")}),
        "traced buffers vs a hand model", passed=boolean("no difference (else exit code 3)"))


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


def _diff() -> dict:
    return envelope("diff", obj("one --impl, in order: the first is old, the second new", {
        **terms(shape=SHAPE_OR_NONE),
        "peak_bytes": integer("peak allocated bytes at the shape (512-byte blocks), as predict's (null without a shape)",
                              nullable=True),
        "peak_step": string("the step where the peak is first reached (null without a shape)", nullable=True),
        "held_after_call_bytes": integer("bytes the library keeps when the call returns: its cached buffers (null "
                                         "without a shape)", nullable=True),
        "change_vs_first_bytes": integer("peak_bytes - the first's (null for the first, or without a shape)",
                                         nullable=True)}),
        "what the second model of one implementation allocates differently from the first", shape=SHAPE_OR_NONE,
        renumbered_sources=integer("allocations whose only difference is the line their source cites (not listed)"),
        notes=listof(string("one note"), "the second model's notes the first lacks (a version's evidence)"),
        changes=listof(obj("one change of one allocation (an allocation both resized and retyped: one change each)", {
            "kind": string("what changed", enum=DIFF_KINDS),
            "allocation": string("the allocation's name (a carved workspace: the workspace)"),
            "regions": listof(string("region name"), "a carved workspace's regions (empty: a plain buffer)"),
            "old": _diff_side("the first (results[0])"), "new": _diff_side("the second (results[1])")}),
            "every allocation that differs, the first's order, then those only the second has"))


COMMANDS = {
    "predict": _predict,
    "compare": _compare,
    "models": _models,
    "validate": _validate,
    "plan": _plan,
    "formula": _formula,
    "sweep": _sweep,
    "timeline": _timeline,
    "payload": _payload,
    "explain": _explain,
    "learn": _learn,
    "drift": _drift,
    "diff": _diff,
}


def schemas() -> dict[str, dict]:
    """Every command's JSON Schema, by command."""
    return {name: build() for name, build in COMMANDS.items()}


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
    import sys
    args = sys.argv[1:] if argv is None else argv
    docs = Path(args[0] if args else "docs")
    (docs / "schema").mkdir(parents=True, exist_ok=True)
    for command in schemas():
        (docs / "schema" / f"{command}.json").write_text(schema_text(command))
    doc = docs / "json.md"
    doc.write_text(json_doc(doc.read_text()))


if __name__ == "__main__":
    main()

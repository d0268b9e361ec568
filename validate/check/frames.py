"""The stack frames and loaded-module figures of FLA's kernels on the H200, as committed data for the process-memory
model, one file per Triton version the kernels were compiled by (``estimator/data/process/fla-core-0.6.0_triton-
{3.6.0,3.9.0}_H200.json``; ``LIBRARIES``), regenerated from the GPU records. Every matrix row names its Triton; a row
under another Triton than its file's is refused.

Frames: ``cuobjdump -res-usage``'s STACK of every cubin a process loaded (``validate/gpu/probes/process_memory.py``, run 29 too,
runs 13 and 16b; run 12's ``cubin_usage.jsonl`` for H96). Per case (model family and contract, D, H, HV) and Triton-cache
state, the largest frame of each kernel: cold, over every candidate that launched while autotuning; warm, over the
configs the tuned cache chose. A warm case counts only where its cold case filled the cache completely (run 13a's
deadline cut four cold D128/D256 cases: their warm processes autotuned what was missing). Run 17's warm D64 H128 case
ran over a copy of the cache a cold edge probe filled at the same shape (``filled_by``).

Limits: at cases only an edge probe ran (no kernel log), the stack limit that probe read after its first call
(``LIMIT_PROBES``: D64 H128 and D256 H96, report contract, cold): a check of those cases' CPU-derived frames.

Triton 3.9.0 (runs 20 and 22; fla-core 0.6.0's GDN backward, which it refuses on Hopper with Triton 3.4-3.7.0): the
GPU's frames of GDN forward+backward D128 and D64 H16/HV32 and of KDA forward+backward (report contract, H16, D128 and
D64), cold and warm, and their modules, which ``modules_from_rows`` derives from the rows of processes alone on the GPU
(non-PyTorch bytes minus the context and the measured limit's reservation), one per case. Its kernels were compiled by
the legacy ``ptxas`` Triton 3.9.0 bundles, not its ``ptxas-blackwell`` (run 20's README). The GatedDeltaNet layer's
cold frames are compiled for sm90 on the CPU by the same Triton and ptxas (``CPU_SUMMARIES_TRITON_39``: GDN D64 and
D128 there equal run 20/22's GPU frames kernel for kernel), and its modules are run 22f's 4-layer process's non-PyTorch
bytes minus the context and those frames' reservation (``LAYER_PROCESSES``).

    python -m livebytes.validate.check.frames            # rewrite the data files
    python -m livebytes.validate.check.frames --check    # exit 1 when a committed file differs
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from livebytes.lifetimes.traced.families import family as family_of
from livebytes.lifetimes.traced.families import probe_impls
from .probe_records import model_of
from livebytes.lifetimes.traced.model import architecture_digest, canonical_config, config_sizes
from livebytes.estimator.process.memory import case_variant, process_memory
from livebytes.estimator.devices import get_device
from livebytes.estimator.process.driver import stack_reservation_bytes, driver_stack_limit

RECORDS = Path(__file__).parents[1] / "data" / "records" / "runs"
PROCESS_DATA = Path(__file__).resolve().parents[2] / "estimator" / "data" / "process"
DATA = PROCESS_DATA / "fla-core-0.6.0_triton-3.6.0_H200.json"
DATA_TRITON_39 = PROCESS_DATA / "fla-core-0.6.0_triton-3.9.0_H200.json"
BOUNDARY = Path(__file__).parents[1] / "data" / "records" / "boundary"
# Cold edge probes at cases no matrix logged kernels for: the stack limit after the first call at the shape (no
# warmup) is the case's own measurement, though not which kernel set it.
LIMIT_PROBES = ("h200_run13d_fla-kda-report_H128_D64_default_cold_firstcall_240000.jsonl",
                "h200_run17a_fla-kda-report_H128_D64_default_cold_firstcall_answer.jsonl",
                "h200_run17b_fla-kda-report_H128_D64_default_cold_firstcall_above.jsonl",
                "h200_run17c_fla-kda-report_H96_D256_default_cold_firstcall_answer.jsonl",
                "h200_run17d_fla-kda-report_H96_D256_default_cold_firstcall_above.jsonl")
# Frames compiled for sm90 on the CPU (validate/gpu/probes/cpu_frames.py): 166/166 kernels and 3,220/3,220 candidates equal
# the H200's where both exist (runs/cpu_frames/README.md); used for cases no GPU process logged. A case whose call
# raised (GDN's backward: fla-core 0.6.0 refuses Hopper with Triton 3.6.0) holds the kernels before the raise: partial.
CPU_SUMMARIES = ("cpu_frames/summary.jsonl", "cpu_frames/summary_b.jsonl", "cpu_frames/summary_c.jsonl",
                 "cpu_frames/summary_d.jsonl",       # _d: session 15, report contract D256 H8 (issue 33's case)
                 "cpu_frames/summary_e.jsonl",       # _e: the KimiDeltaAttention layer, grouped value heads (issue 33)
                 "cpu_frames/summary_f.jsonl",       # _f: session 17, cases users ask (H8, the plain contract's head dims)
                 "cpu_frames/summary_g.jsonl",       # _g: run 33, the GPU machine's CPUs (report H1-H48, KDA layer H8-H64)
                 "cpu_frames/summary_h.jsonl",       # _h: run 36, the GPU machine's CPUs (KDA layer H4-H128, report H40/H80, plain, fwd)
                 "cpu_frames/summary_i.jsonl")       # _i: session 32, report D256 H24 and H48 (odd factor 3)
# Triton 3.9.0 compiled by its bundled legacy ptxas (TRITON_PTXAS_BLACKWELL_PATH), as on the H200 in runs 20-22
CPU_SUMMARIES_TRITON_39 = ("cpu_frames/summary_t39.jsonl",
                           "cpu_frames/summary_t39b.jsonl",   # _t39b: session 17, GDN and its layer H16/HV16, KDA plain
                           "cpu_frames/summary_t39c.jsonl",   # _t39c: run 33, GDN and its layer H4-H64, KDA report H32
                           "cpu_frames/summary_t39d.jsonl",   # _t39d: session 21, run 33's three unfinished cases
                           "cpu_frames/summary_t39e.jsonl")   # _t39e: session 32, GDN equal heads H12 and H24 (odd factor 3)
LEGACY_PTXAS = "ptxas (Cuda compilation tools, release 12.9, V12.9.86)"
# Layer processes whose non-PyTorch bytes give their family's cold modules (the process alone on the GPU): run 22f's
# 4 GatedDeltaNet layers, fresh and cold; its side-by-side 1-layer process had freed its memory (that reading,
# device-wide with both processes, is 14,978,318,336 B; this one 6,434,979,840 B, less than two processes' contexts
# and reservations)
LAYER_PROCESSES = {"3.9.0": ("run22/fla-gdn-layer_0.6.0_1_8192_16_128_hv=32_hidden=2048_layers=4_checkpoint=on_"
                             "2026-12-01T230038Z_2011.json",)}
# Run 29: the layer cases issue 33 names (the KDA layer H16/HV32 and H8/HV16 under Triton 3.6.0, the GDN layer
# H16/HV32 under 3.9.0), each alone on the GPU with every loaded cubin's frame: their frames replace the CPU-derived
# ones; their modules are not read (MODULE_CHECKS), so those processes stay an independent check of the modules
# figures the data take from other processes (run 16b's KDA layer, run 22f's GDN layer).
RUN29_KDA_LAYER, RUN29_GDN_LAYER = "run29/process_memory_29k_16_32_8_16.jsonl", "run29/process_memory_29g.jsonl"
# Run 38: `livebytes process measure` on the H200 (each case alone, cold then warm over its cache): chunk_kda report D256
# H8 and D128 H40, the KDA layer H16/HV32 at hidden 2304 (the probe's default) and 2048 (the model's), the same figures
RUN38 = tuple(f"run38/{case}/probe/process_memory.jsonl"
              for case in ("kda_d256_h8", "kda_report_d128_h40", "kda_layer_h16_hv32", "kda_layer_h16_hv32_h2048"))
MATRICES = ("run13/process_memory_13a.jsonl", "run13/process_memory_13c.jsonl", "run16/process_memory_16b.jsonl",
            "run17/process_memory_17.jsonl", RUN29_KDA_LAYER, *RUN38)
MATRICES_TRITON_39 = ("run20/process_memory_20.jsonl", "run22/process_memory_22.jsonl", "run22/process_memory_22r.jsonl",
                      RUN29_GDN_LAYER)
MODULE_CHECKS = (RUN29_KDA_LAYER, RUN29_GDN_LAYER)
# The layer the process-memory probe builds where its case names no options (``boundary_probe.LAYER_DEFAULTS``; a test
# holds them equal): a layer's modules are measured at its build options, which pick its GEMMs' shapes and kernels
PROBE_LAYER = {"hidden": 2304, "layers": 1, "checkpoint": False, "conv_size": 4}
LAYER_IMPLS = probe_impls()     # the layers the families' GPU probes build (``families.Probe``)


def case_model(case: dict) -> tuple[str, dict]:
    """(model key, options) a matrix case ran: the probes' own mapping (``probe_records.model_of``), fla-core 0.6.0."""
    return model_of(case["impl"], {"fla": "0.6.0", "forward_only": case["forward_only"], "heads": case["heads"],
                                   "v_heads": case["v_heads"]})


def family(case: dict) -> str:
    """'FAMILY:CONTRACT' of a case (``-``: no contract), the prefix the process-memory model looks frames up by."""
    key, options = case_model(case)
    return f"{key.split('@')[0]}:{options.get('contract') or '-'}"


def case_key(family: str, dim: int, heads: int, v_heads: int) -> str:
    return f"{family} D{dim} H{heads} HV{v_heads}"


def matrix_rows(names: tuple[str, ...] | None = None) -> list[dict]:
    """The case rows of ``names`` (default: every Triton version's matrices, ``LIBRARIES``)."""
    rows = []
    for name in names if names is not None else MATRICES + MATRICES_TRITON_39:
        rows += [json.loads(line) | {"record": f"validate/data/records/runs/{name}"}
                 for line in (RECORDS / name).read_text().splitlines() if '"case"' in line]
    return rows


def rows_of_triton(names: tuple[str, ...], triton: str) -> list[dict]:
    """The complete rows of ``names``, each held to ``triton`` (a row from another Triton's process would mix two
    compilers' frames into one file)."""
    rows = complete(matrix_rows(names))
    wrong = [f"{r['record']} {r['case']['tag']}: triton {r.get('triton')}" for r in rows if r.get("triton") != triton]
    if wrong:
        raise SystemExit(f"rows not of Triton {triton}: {'; '.join(wrong)}")
    return rows


def complete(rows: list[dict]) -> list[dict]:
    """Cases that finished their first call; a warm one only over a cache its cold case filled, or over a copy of one
    that a named process filled at the same shape (``filled_by``: a cold boundary probe, ``--warm-over``)."""
    done = {r["case"]["cache_dir"] for r in rows if r["case"]["state"] == "cold" and "status" not in r}
    return [r for r in rows if "status" not in r and (r["case"]["state"] == "cold" or r["case"]["cache_dir"] in done
                                                       or r["case"].get("filled_by"))]


def matrix_frames(rows: list[dict]) -> dict:
    out: dict = {"cold": defaultdict(dict), "warm": defaultdict(dict)}
    for r in complete(rows):
        c = r["case"]
        entry = out[c["state"]][case_key(family(c), c["dim"], c["heads"], c["v_heads"])]
        for f in r["frames"]:
            entry[f["name"]] = max(entry.get(f["name"], 0), f["STACK"])
    return out


def run12_frames() -> dict:
    """Run 12's cold H96 D128 caches (both contracts), every compiled candidate. Warm: the tuned wy_dqkg config's frame
    (BK 64, BV 64, 4 warps, 3 stages in the committed tuning), the measured warm limit of runs 6a and 12b; every other
    kernel's tuned frame is bounded by its candidates' largest where that is under the default 1,024-B limit (no raise
    either way), and by the measured 1,440-B limit for l2norm_bwd (candidates up to 5,544 B; it launches after wy_dqkg)."""
    cold: dict = defaultdict(dict)
    for line in (RECORDS / "run12" / "cubin_usage.jsonl").read_text().splitlines():
        r = json.loads(line)
        for contract in ("plain", "report"):
            if f"fla-{contract}_seq_False_cold_answer" in r["folder"]:
                entry = cold[case_key(f"fla-kda:{contract}", 128, 96, 96)]
                entry[r["name"]] = max(entry.get(r["name"], 0), r["STACK"])
    warm = {k: {kernel: frame if frame <= 1024 else 1440 for kernel, frame in v.items()} for k, v in cold.items()}
    return {"cold": cold, "warm": warm}


def probe_limits() -> dict:
    """{state: {case: {limit_bytes, records}}} from ``LIMIT_PROBES``: each file's first trial (its process's first call at
    the shape), ``first_call.stack_limit_bytes``; the files of one case must agree."""
    out: dict = {"cold": {}, "warm": {}}
    for name in LIMIT_PROBES:
        lines = [json.loads(line) for line in (BOUNDARY / name).read_text().splitlines()]
        first = next(r for r in lines if r["stage"] == "value")
        if first["state"] != "cold" or any(r["stage"].startswith("warmup") for r in lines):
            raise SystemExit(f"{name}: a limit probe must be cold with no warmup (its first call at the shape)")
        case = {"impl": first["impl"], "forward_only": first["forward_only"], "heads": first["heads"],
                "v_heads": first.get("v_heads") or first["heads"]}
        key = case_key(family(case), first["dim"], case["heads"], case["v_heads"])
        limit = first["first_call"]["stack_limit_bytes"]
        entry = out[first["state"]].setdefault(key, {"limit_bytes": limit, "records": []})
        if entry["limit_bytes"] != limit:
            raise SystemExit(f"{name}: stack limit {limit} differs from {entry['limit_bytes']} of {entry['records']}")
        entry["records"].append(f"validate/data/records/boundary/{name}")
    return out


def modules() -> dict:
    """Loaded modules (non-PyTorch memory minus the context and the stack reservation), measured in processes alone on
    the GPU at the edge (the matrix's side-by-side processes read 3.1-3.3 MiB less). Each figure names the cases
    (``case_key``) its cited processes ran, ``measured_at``: ``memory._modules`` calls it measured there only."""
    def fig(nbytes: int, source: str, *cases: tuple, options: dict | None = None) -> dict:
        return {"bytes": nbytes, "status": "measured", "source": source,
                "measured_at": [case_key(prefix, dim, heads, v_heads) for prefix, dim, heads, v_heads in cases],
                **({"options": options} if options else {})}
    first_shape = {name: [value] for name, value in PROBE_LAYER.items()}    # run 16b's first shape: hidden 2304, 1 layer
    edge_fwd = "run 13b: fla-kda-fwd and fla-gdn-fwd H16/HV32 D128 cold at the edge, 650,969,088 B - context"
    warm_fwd = "run 13a/13c warm forward-only processes side by side (NVML drop at exit)"
    fwd_dims = (32, 64, 128, 256)           # 13a's warm forward-only cases, H16/HV32 (13c repeated D128 and D256)
    h96 = (("fla-kda:plain", 128, 96, 96), ("fla-kda:report", 128, 96, 96))     # run 6a plain, run 12/12b report
    # run 17a's warm D64 H128 process (run17/process_memory_17.jsonl, alone, limit 1,024 B) read 650,969,088 B: the
    # context and this warm figure to the byte
    d64_h128 = ("fla-kda:report", 64, 128, 128)
    # runs 17c/17d's cold edge probes at D256 H96 (LIMIT_PROBES) read 4,486,660,096 B: the context, this cold figure
    # and the 15,184-B limit's reservation (3,829,399,552 B) to the byte
    d256_h96 = ("fla-kda:report", 256, 96, 96)
    return {
        "fla-kda": {
            "cold": fig(104_857_600, "run 12 (D128 H96, both contracts) and run 13d (D64 H128 report): 4,291,624,960 and "
                                     "5,407,309,824 B minus the context and each limit's reservation",
                        *h96, d64_h128, d256_h96),
            "warm": fig(98_566_144, "runs 6a and 12b (D128 H96 warm): 764,215,296 B minus the context and the 1,440-B "
                                    "limit's reservation", *h96, d64_h128)},
        "fla-kda-fwd": {"cold": fig(98_566_144, edge_fwd, ("fla-kda-fwd:report", 128, 16, 32)),
                        "warm": fig(95_158_272, warm_fwd, *(("fla-kda-fwd:report", d, 16, 32) for d in fwd_dims))},
        "fla-gdn-fwd": {"cold": fig(98_566_144, edge_fwd, ("fla-gdn-fwd:-", 128, 16, 32)),
                        "warm": fig(95_158_272, warm_fwd, *(("fla-gdn-fwd:-", d, 16, 32) for d in fwd_dims))},
        # the records process read its own figure alone on the GPU (the probe beside it had exited), at the probe's
        # 11,712-B limit: its autotune keys hold no T, so its 8K first shape launched the probe's candidates
        "fla-kda-layer": {
            "cold": fig(243_335_168, "run 16b: the KimiDeltaAttention records process (H32 D128 hidden 2304, cold, "
                                     "first shape 1 x 8K), 3,685,613,568 B before its measured steps, minus the context "
                                     "and the 11,712-B limit's reservation (the probe beside it read 239,861,760)",
                        ("fla-kda-layer:-", 128, 32, 32), options=first_shape),
            "warm": fig(229_376_000, "run 16b: the layer's warm probe process beside the records process (NVML drop at "
                                     "exit), 874,053,632 B minus the context and the 1,360-B limit's reservation",
                        ("fla-kda-layer:-", 128, 32, 32), options=first_shape)},
    }


def cpu_frames(measured: dict, names: tuple[str, ...] = CPU_SUMMARIES, triton: str = "3.6.0") -> tuple[dict, dict]:
    """({case: frames}, {case: provenance}) of the CPU-derived cold cases the GPU did not log; a partial case's
    provenance says where its call stopped. Every line must be of ``triton`` (and under 3.9.0 of its legacy ptxas,
    the H200's compiler)."""
    frames, source = {}, {}
    for name in names:
        for line in (RECORDS / name).read_text().splitlines():
            r = json.loads(line)
            if r["triton"] != triton or (triton == "3.9.0" and r.get("ptxas") != LEGACY_PTXAS):
                raise SystemExit(f"{name} {r['key']}: Triton {r['triton']}, {r.get('ptxas')}: not this file's compiler")
            if r["key"] in measured:
                continue
            frames[r["key"]] = r["frames"]
            stop = f"; partial: the kernels launched before the call raised ({r['error'][:100]}...)" if "error" in r else ""
            source[r["key"]] = {"record": f"validate/data/records/runs/{name}", "partial": bool(stop),
                                "note": f"compiled for sm90 on the CPU (validate/gpu/probes/cpu_frames.py){stop}"}
    return frames, source


MODEL_RECORDS = Path(__file__).parents[1] / "data" / "records" / "models"


def model_processes(triton: str = "3.6.0") -> list[dict]:
    """The whole-model processes (``validate/data/records/models``, model-step records, cold, of Triton ``triton``): per
    record its case key, its tokens (MBS x S), its limit and non-PyTorch bytes after the first step."""
    out = []
    for path in sorted(MODEL_RECORDS.glob("*.json")):
        r = json.loads(path.read_text())
        first = r["steps"][0] if r.get("kind") == "model-step" and r["steps"] else {}
        if r.get("triton_cache") != "cold" or r["versions"].get("triton") != triton or first.get("oom", True):
            continue
        if r["options"].get("fsdp"):    # NCCL's memory is in its non-PyTorch bytes (model_records.FSDP_NCCL)
            continue
        key = _model_case(r["config"], r["options"])
        out.append({"key": key, "tokens": r["shape"]["mbs"] * r["shape"]["seq"], "record": path.name,
                    "limit": first["stack_limit_bytes"], "nonpytorch": first["nonpytorch"]["bytes"],
                    "build": model_build(r["config"], r["options"])})
    return out


def model_build(config: dict, options: dict) -> dict:
    """What a whole model's process ran beside its case key, as ``memory._model_at_build`` compares it: the config less
    its depth (the built model's ``architecture`` option), its depth and optimizer (which pick its GEMM shapes and
    kernels, each loaded lazily), with the hidden size and vocabulary named for the reader."""
    canonical = canonical_config(config, "record config")
    full = json.loads(canonical)
    return {"architecture": architecture_digest(canonical), "layers": int(full["num_hidden_layers"]),
            "optimizer": options.get("optimizer", "adamw"), "hidden": full.get("hidden_size"),
            "vocab": full.get("vocab_size")}


def _model_case(config: dict, options: dict) -> str:
    """A model record's case key as estimator/process/memory.py looks it up: the traced family's key and the shape its model
    answers at (``config_sizes``: fla's models their heads and head dim, a hybrid model its full-attention layers'),
    value heads those of fla's configs (``num_v_heads``) or the heads."""
    heads, dim = config_sizes(canonical_config(config, "record config"))
    return case_key(f"{family_of(config['model_type']).name}:{case_variant(options)}", dim, heads,
                    config.get("num_v_heads") or heads)


def model_data(triton: str = "3.6.0") -> tuple[dict, dict, dict]:
    """(model_limits, modules_by_case, modules) of the traced models from their own processes under Triton ``triton``
    (3.9.0: the GDN models of run 25): the stack limit read after the first step (by case, at each measured number of
    tokens: ``points``), and the modules, non-PyTorch bytes minus the context and that limit's reservation; the
    family's modules figure is its cases' largest."""
    context = process_memory(get_device("H200"), "no-library@0").context.bytes
    limits: dict = {}
    by_case: dict = {}
    for p in model_processes(triton):
        points = limits.setdefault(p["key"], {"points": []})["points"]
        entry = next((e for e in points if e["tokens"] == p["tokens"]), None)
        if entry is None:
            entry = {"tokens": p["tokens"], "limit_bytes": p["limit"], "records": [], "builds": []}
            points.append(entry)
            points.sort(key=lambda e: e["tokens"])
        if entry["limit_bytes"] != p["limit"]:
            raise SystemExit(f"{p['record']}: stack limit {p['limit']:,} B differs from {entry['records']}")
        entry["records"].append(f"validate/data/records/models/{p['record']}")
        entry["builds"] += [p["build"]] if p["build"] not in entry["builds"] else []
        reservation = stack_reservation_bytes(p["limit"], get_device("H200"))
        figure = {"bytes": p["nonpytorch"] - context - reservation, "status": "measured",
                  "source": f"{p['record']}: the whole-model process's {p['nonpytorch']:,} B after its first step, minus "
                            f"the context and the {p['limit']:,}-B limit's reservation", "builds": [p["build"]]}
        by_case[p["key"]] = _largest_modules(by_case.get(p["key"]), figure, p["record"])
    families: dict = {}
    for key, figure in by_case.items():
        fam = key.split(":")[0]
        if figure["bytes"] > families.get(fam, {}).get("bytes", -1):
            cases = len([k for k in by_case if k.startswith(fam + ":")])
            families[fam] = dict({k: v for k, v in figure.items() if k != "builds"},
                                 source=f"the largest of {fam}'s measured cases ({cases}): "
                                        f"{figure['source']}")
    return ({"cold": dict(sorted(limits.items())), "warm": {}}, {"cold": dict(sorted(by_case.items()))},
            {fam: {"cold": f} for fam, f in sorted(families.items())})


def _largest_modules(held: dict | None, figure: dict, record: str) -> dict:
    """A case's modules over its processes: the largest, each other process's figure named beside it. Processes of one
    case can load different kernels: run 34's k1c (Kimi-Linear with --checkpoint) held 2,097,152 B less than run 31's
    k1 at the same case, stack limit and context (lazily loaded modules: which kernels a step launches depends on the
    options; transformers turns use_cache off under checkpointing, the log says). The largest is measured at the case
    and bounds the processes that loaded less."""
    if held is None:
        return figure
    builds = [*held.get("builds", []), *(b for b in figure.get("builds", []) if b not in held.get("builds", []))]
    small, large = sorted((held, figure), key=lambda f: f["bytes"])
    if small["bytes"] == large["bytes"]:
        return dict(held, builds=builds) if builds else held
    merged = dict(large, source=f"{large['source']}; the largest of the case's processes ({record} among them): "
                                f"{small['bytes']:,} B in {small['source'].split(':')[0]}")
    return dict(merged, builds=builds) if builds else merged


def build() -> dict:
    m, r12 = matrix_frames(rows_of_triton(MATRICES, "3.6.0")), run12_frames()
    model_limits, model_modules, model_families = model_data()
    _, measured_cases = modules_from_rows(rows_of_triton(RUN38, "3.6.0"))     # each alone: its own case's modules
    gpu = {**m["cold"], **r12["cold"]}
    derived, derived_source = cpu_frames(gpu)
    merged = {"cold": {**derived, **gpu}, "warm": {**m["warm"], **r12["warm"]}}
    frames = {state: {k: dict(sorted(v.items())) for k, v in sorted(merged[state].items())} for state in ("cold", "warm")}
    return {
        "about": "fla-core 0.6.0's Triton kernels (triton 3.6.0) on the H200: per case 'FAMILY:CONTRACT D H HV' and "
                 "Triton-cache state, each kernel's largest stack frame in bytes (cold: every candidate that launched; warm: "
                 "the tuned configs; derived_on_cpu: cold cases compiled for sm90 on the CPU, not logged on a GPU), the stack "
                 "limit measured at cases whose kernels were not logged (limits), and the loaded "
                 "modules per model family and state (measured_at: the cases the processes it cites ran); "
                 "model_limits: traced models' stack limits read from their own "
                 "processes after the first step (their kernels' frames are not logged one by one), at each measured "
                 "number of tokens ('points': a kernel whose integer argument reaches 2**31 compiles an int64 "
                 "specialisation with other frames, so the limit steps up with the length), and their modules per case (modules_by_case). Written by "
                 "`python -m livebytes.validate.check.frames` from the records it names; read by estimator/process.py.",
        "records": [f"validate/data/records/runs/{n}" for n in MATRICES] + ["validate/data/records/runs/run12/cubin_usage.jsonl"],
        "library": "fla-core 0.6.0 (Triton 3.6.0 kernels)",
        "modules": {**modules(), **model_families},
        "modules_by_case": {state: dict(sorted({**measured_cases.get(state, {}), **model_modules.get(state, {})}.items()))
                            for state in ("cold", "warm")},
        "frames": frames,
        "derived_on_cpu": dict(sorted(derived_source.items())),
        "limits": probe_limits(),
        "model_limits": model_limits,
    }


def _module_figure(r: dict, context: int) -> dict:
    """One process's loaded modules: its non-PyTorch bytes alone on the GPU minus the context and its measured stack
    limit's reservation (``estimator.process.memory``'s rules)."""
    alone = r["in_process_alone"]["nonpytorch_bytes"]
    reservation = stack_reservation_bytes(r["stack_limit_bytes"], get_device("H200"))
    return {"bytes": alone - context - reservation, "status": "measured",
            "source": f"{r['record'].split('records/runs/', 1)[-1]} {r['case']['tag']} (Triton {r['triton']}), alone on the GPU: "
                      f"{alone:,} B minus the context ({context:,}) and the {r['stack_limit_bytes']:,}-B limit's "
                      f"reservation ({reservation:,})"}


def modules_from_rows(rows: list[dict]) -> tuple[dict, dict]:
    """({family: {state: figure}}, {state: {case: figure}}) of the processes alone on the GPU (a side-by-side process's
    NVML drop reads a few MiB less: not used). The figures differ by head dim (GDN cold under Triton 3.9.0: 100,663,296 B
    at D128, 98,566,144 B at D64), so each measured case keeps its own; the family's figure, for cases not measured,
    is the largest of its cases (``memory._modules`` says it is unbounded there)."""
    context = process_memory(get_device("H200"), "no-library@0").context.bytes
    by_case: dict = {"cold": {}, "warm": {}}
    grouped: dict = defaultdict(list)
    for r in rows:
        if "in_process_alone" not in r:
            continue
        c = r["case"]
        figure, key = _module_figure(r, context), case_key(family(c), c["dim"], c["heads"], c["v_heads"])
        if c["impl"] in LAYER_IMPLS:        # a layer's figure holds at the build options it was measured at
            figure["options"] = {name: [value] for name, value in (c.get("layer") or PROBE_LAYER).items()}
        held = by_case[c["state"]].setdefault(key, figure)
        if held["bytes"] != figure["bytes"]:             # two processes of one case must agree
            raise SystemExit(f"{c['tag']}: modules {figure['bytes']:,} B differ from {held['source']}")
        for name, values in figure.get("options", {}).items():       # the same figure at more options
            held["options"][name] = sorted(set(held["options"][name]) | set(values))
        grouped[(family(c).split(":")[0], c["state"])].append(figure)
    out: dict = {}
    for (fam, state), figures in sorted(grouped.items()):
        out.setdefault(fam, {})[state] = max(figures, key=lambda f: f["bytes"])
    return out, {state: dict(sorted(v.items())) for state, v in by_case.items()}


def layer_modules(names: tuple[str, ...], cold_frames: dict) -> tuple[dict, dict]:
    """({family: {"cold": figure}}, {"cold": {case: figure}}) of cold layer processes alone on the GPU: the record's
    non-PyTorch bytes after its steps minus the context and the reservation of its case's frames (every kernel of a
    cold process launches: the limit is the largest frame rounded to 16 B, ``driver.driver_stack_limit``)."""
    context = process_memory(get_device("H200"), "no-library@0").context.bytes
    families: dict = {}
    by_case: dict = {}
    for name in names:
        r = json.loads((RECORDS / name).read_text())["records"][0]
        s = r["shape"]
        if r["triton_cache"] != "cold" or r["mode"] != "fresh-process":
            raise SystemExit(f"{name}: a layer's modules come from a fresh cold process")
        key = case_key(f"{r['impl'].split('@')[0]}:-", s["dim"], s["heads"], s.get("v_heads") or s["heads"])
        limit = driver_stack_limit(max(cold_frames[key].values()))
        reservation = stack_reservation_bytes(limit, get_device("H200"))
        after = r["device_memory"]["nonpytorch_after_bytes"]
        figure = {"bytes": after - context - reservation, "status": "measured",
                  "source": f"{name.rsplit('/', 1)[-1]} (Triton {r['triton']}, alone on the GPU): {after:,} B after its "
                            f"steps minus the context ({context:,}) and the {limit:,}-B limit's reservation "
                            f"({reservation:,}) of its CPU-derived frames",
                  "options": {option: [s.get(option, default)] for option, default in PROBE_LAYER.items()}}
        by_case[key] = figure
        families[key.split(":")[0]] = {"cold": figure}
    return families, {"cold": by_case}


def build_triton_39() -> dict:
    """The Triton 3.9.0 file: runs 20 and 22's GPU frames and modules, the cases compiled on the CPU by the same
    compiler (the GatedDeltaNet layer), the layer's modules from its own process; no edge-probe limits."""
    rows = rows_of_triton(MATRICES_TRITON_39, "3.9.0")
    m = matrix_frames(rows)
    checks = {f"validate/data/records/runs/{name}" for name in MODULE_CHECKS}
    modules, modules_by_case = modules_from_rows([r for r in rows if r["record"] not in checks])
    derived, derived_source = cpu_frames(m["cold"], CPU_SUMMARIES_TRITON_39, "3.9.0")
    cold = {**derived, **m["cold"]}
    layer_families, layer_cases = layer_modules(LAYER_PROCESSES["3.9.0"], cold)
    model_limits, model_modules, model_families = model_data("3.9.0")
    return {
        "about": "fla-core 0.6.0's Triton kernels (triton 3.9.0, compiled by its bundled legacy ptxas) on the H200: per "
                 "case 'FAMILY:CONTRACT D H HV' and Triton-cache state, each kernel's largest stack frame in bytes (cold: "
                 "every candidate that launched, or, derived_on_cpu, every candidate compiled for sm90 on the CPU by the "
                 "same Triton and ptxas; warm: the tuned configs), and the loaded modules per model family and "
                 "state (a layer's from its own cold process, less its derived frames' reservation); model_limits "
                 "and the models' modules_by_case: the whole GDN models' own processes (run 25), as in the Triton "
                 "3.6.0 file. Written by "
                 "`python -m livebytes.validate.check.frames` from the records it names; read by "
                 "estimator/process.py for the models estimator/data/process_memory.json lists under Triton 3.9.0.",
        "records": [f"validate/data/records/runs/{n}" for n in MATRICES_TRITON_39 + CPU_SUMMARIES_TRITON_39
                    + LAYER_PROCESSES["3.9.0"]] + [f"validate/data/records/models/{p['record']}" for p in model_processes("3.9.0")],
        "library": "fla-core 0.6.0 (Triton 3.9.0 kernels, its bundled legacy ptxas)",
        "modules": {**modules, **layer_families, **model_families},
        "modules_by_case": {state: dict(sorted({**modules_by_case.get(state, {}), **layer_cases.get(state, {}),
                                                **model_modules.get(state, {})}.items()))
                            for state in ("cold", "warm")},
        "frames": {state: {k: dict(sorted(v.items())) for k, v in sorted(({**m[state], **derived} if state == "cold"
                                                                           else m[state]).items())}
                   for state in ("cold", "warm")},
        "derived_on_cpu": dict(sorted(derived_source.items())),
        "limits": {"cold": {}, "warm": {}},
        "model_limits": model_limits,
    }


# Triton version -> (data file, its builder)
LIBRARIES = {"3.6.0": (DATA, build), "3.9.0": (DATA_TRITON_39, build_triton_39)}


def render(data: dict) -> str:
    return json.dumps(data, indent=1) + "\n"


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python -m livebytes.validate.check.frames [--check]  (no argument: write the data files)")
        return 2
    stale = []
    for path, builder in LIBRARIES.values():
        text = render(builder())
        if argv == ["--check"]:
            if not (path.exists() and path.read_text() == text):
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(path)
    if argv == ["--check"]:
        print("up to date" if not stale else
              "\n".join(f"{p} differs from the records: run python -m livebytes.validate.check.frames" for p in stale))
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The out-of-memory boundary plan for the H200 (issue 9): ``plan``'s answer and 1 % above it, per case.

Each case runs in a fresh process (the process's own memory and the allocator start clean): the
answer S* must fit and ceil(S* x 1.01) must go out of memory. ``validate/data/plans/h200_boundary.json``
is this module's output; ``tests/test_boundary.py`` keeps the file equal to what ``plan`` answers today
and re-checks every boundary record against the simulation.

    python -m livebytes.validate.gpu.boundary [PATH]     # rewrite the plan file
    python -m livebytes.validate.gpu.boundary --commands # the probe commands that measure it on a GPU

A boundary is measured by ``validate/gpu/probes/boundary_probe.py``, one process per case and cache state,
never side by side with another process (the capacity it probes is the whole device):
``--commands`` prints them. The batch driver refuses boundary groups for that reason.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from livebytes.estimator.allocator import parse_alloc_conf
from livebytes.estimator.devices import get_device
from livebytes.estimator.planning import largest_running
from livebytes.estimator.registry import get_model, shape_options, spec
from livebytes.estimator.shapes import Shape, positional_spec

from ..check.protocol import WARMUP_TOKENS

PLAN_PATH = Path(__file__).parents[1] / "data" / "plans" / "h200_boundary.json"
COLD_AFTER_WARMUP = "cold-after-warmup"   # the plan file's and the tests' label of a cold case tuned at the warmup first


@dataclass(frozen=True)
class Case:
    impl: str
    contract: str | None
    solve: str
    base: Shape
    alloc_conf: str = "expandable_segments:False"
    triton_cache: str = "cold"
    tuned_at_tokens: int | None = None     # cold, but the process autotuned at the probe's 1 x WARMUP_TOKENS first
    no_warmup: bool = False                # warm, and each value its process's first call (issue 18's protocol)

    @property
    def cache_label(self) -> str:
        return COLD_AFTER_WARMUP if self.tuned_at_tokens is not None else self.triton_cache


CASES = (
    # tuned at the warmup: the probe's process autotuned at MBS 1 x 1024 first; cold: its first call is the answer
    Case("fla-kda@0.6.0", "plain", "seq", Shape(1, 8192, 96, 128), tuned_at_tokens=WARMUP_TOKENS),
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 96, 128), tuned_at_tokens=WARMUP_TOKENS),
    Case("fla-kda@0.6.0", "plain", "seq", Shape(1, 8192, 96, 128)),
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 96, 128)),
    Case("cudnn-kda-hopper-cuda@1.32.0", None, "seq", Shape(1, 8192, 96, 128)),
    Case("fla-kda@0.6.0", "plain", "seq", Shape(1, 8192, 96, 128), alloc_conf="expandable_segments:True", triton_cache="warm"),
    Case("fla-kda@0.6.0", "plain", "seq", Shape(1, 8192, 96, 128), triton_cache="warm"),
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 96, 128), triton_cache="warm"),
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 96, 128), alloc_conf="expandable_segments:True", triton_cache="warm"),
    Case("cudnn-kda-hopper-cuda@1.32.0", None, "mbs", Shape(1, 32768, 96, 128)),
    Case("cudnn-kda-hopper-cuda@1.32.0", None, "seq", Shape(1, 8192, 96, 128), alloc_conf="expandable_segments:True"),
    # issue 18: forward only, grouped value heads, cold (run 13b)
    Case("fla-kda-fwd@0.6.0", "report", "seq", Shape(1, 8192, 16, 128, 32)),
    Case("fla-gdn-fwd@0.6.0", None, "seq", Shape(1, 8192, 16, 128, 32)),
    # issue 20: nvidia-cudnn-frontend 1.31.0, whose graph keeps its backward workspace (run 16c)
    Case("cudnn-kda-hopper-cuda@1.31.0", None, "seq", Shape(1, 8192, 96, 128)),
    Case("cudnn-kda-hopper-cuda@1.31.0", None, "seq", Shape(1, 8192, 96, 128), alloc_conf="expandable_segments:True"),
    # issue 18: other head dims, each value its process's first call (run 17): D64 H128 cold and warm, D256 H96 cold
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 128, 64)),
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 128, 64), triton_cache="warm", no_warmup=True),
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 96, 256)),
    # issue 21: 4 KimiDeltaAttention layers (Kimi-Linear's: hidden 2304, H32 D128, conv 4), no checkpointing (run 20)
    Case("fla-kda-layer@0.6.0", None, "seq", Shape(1, 8192, 32, 128, hidden=2304, layers=4)),
    # issue 22: Gated DeltaNet forward+backward, grouped value heads (Qwen3-Next's H16/HV32), under Triton 3.9.0, whose
    # backward fla-core 0.6.0 runs on Hopper (run 21e/f). Its --commands line needs that Triton first: run them after
    # validate/data/plans/h200_run21.sh install, in its t39 environment (t39_env.sh), as its gdnedge step does
    Case("fla-gdn@0.6.0", None, "seq", Shape(1, 8192, 16, 128, 32)),
)


def model_of(case: Case):
    return get_model(case.impl, "H200", **({"contract": case.contract} if case.contract else {}),
                     **shape_options(case.impl, case.base))


def answer(case: Case) -> int:
    """``plan``'s S* (or MBS*) for this case on the H200."""
    s = spec(case.impl)
    dev = get_device("H200")
    r = largest_running(model_of(case), case.base, case.solve, dev, parse_alloc_conf(case.alloc_conf),
                        case.triton_cache, refuse=lambda sh: s.refuse(sh, dev), tuned_at_tokens=case.tuned_at_tokens)
    return r.value


def groups() -> list[dict]:
    out = []
    for case in CASES:
        value = answer(case)
        for role, v, expect in (("answer", value, "fits"), ("answer x 1.01", math.ceil(value * 1.01), "oom")):
            shape = replace(case.base, **{case.solve: v})
            g = {"impl": case.impl, "shapes": positional_spec(shape),     # the committed plan (run) keeps its form
                 "alloc_conf": case.alloc_conf,
                 "triton_cache": case.cache_label if case.impl.startswith("fla-") else "n/a", "fresh": True,
                 "boundary": {"solve": case.solve, "role": role, "plan_value": value, "expected": expect}}
            if case.contract:
                g["contract"] = case.contract
            out.append(g)
    return out


def render(items: list[dict]) -> str:
    return "[\n" + ",\n".join(" " + json.dumps(g) for g in items) + "\n]\n"


PROBE_IMPL = {("fla-kda", "plain"): "fla-plain", ("fla-kda", "report"): "fla-report",   # implementation -> the probe's
              ("cudnn-kda-hopper-cuda", None): "kda_hopper_cuda",                     # --impl (it runs what is installed)
              ("fla-kda-fwd", "report"): "fla-report", ("fla-gdn-fwd", None): "fla-gdn",
              ("fla-kda-layer", None): "fla-kda-layer", ("fla-gdn", None): "fla-gdn"}
LAYER_FLAGS = {"hidden": "--hidden", "layers": "--layers", "conv_size": "--conv-size"}    # boundary_probe.py's


def probe_flags(case: Case) -> str:
    """The probe's shape flags beyond --heads: value heads, head dim, forward only, a layer stack's fields."""
    base = case.base
    stack = base.layer_fields()
    return ((f" --v-heads {base.v_heads}" if base.v_heads else "") + (f" --dim {base.dim}" if base.dim != 128 else "")
            + (" --forward-only" if case.impl.split("@")[0].endswith("-fwd") else "")
            + "".join(f" {LAYER_FLAGS[k]} {v}" for k, v in stack.items() if k in LAYER_FLAGS)
            + (" --checkpoint" if stack.get("checkpoint") else ""))


def probe_state(case: Case) -> tuple[str, bool]:
    """(the probe's ``--state`` label, whether it runs the 1x1024 warmup) for a case."""
    if not case.impl.startswith("fla-"):
        return "n/a", False
    if case.tuned_at_tokens is not None:
        return "cold", True
    return case.triton_cache, case.triton_cache == "warm" and not case.no_warmup


def probe_commands(case: Case) -> list[str]:
    """The probe runs proving one case: S* and ceil(S* x 1.01), in one fresh process (a warm or cold-after-warmup
    Triton case warms up at 1x1024 first; cuDNN starts at the answer, as plan simulates), or, for a cold case,
    one fresh process per value: each must be that process's first call, with an empty Triton cache (a ``no_warmup``
    warm case: one process per value, each over its own copy of the cold case's cache, l2norm tuned ahead in it)."""
    value = answer(case)
    state, _ = probe_state(case)
    values = f"{value},{math.ceil(value * 1.01)}"
    if (state == "cold" and case.tuned_at_tokens is None) or case.no_warmup:
        return [*_pretune_command(case, values)] + [_probe_command(case, str(v), f"_{role}")
                                                    for v, role in ((value, "answer"), (math.ceil(value * 1.01), "above"))]
    return [*_pretune_command(case, values), _probe_command(case, values, "")]


def _shape_tag(case: Case) -> str:
    """Head count, value heads and head dim in a folder name: cases of one contract differ there."""
    base = case.base
    return (f"H{base.heads}" + (f"_HV{base.v_heads}" if base.v_heads else "") + (f"_D{base.dim}" if base.dim != 128 else "")
            + (f"_L{base.layers}" if base.layers else "") + ("_ckpt" if base.checkpoint else ""))


def _cache_dir(case: Case) -> str:
    """The Triton cache a warm case reuses (its cold case's: the cold processes run first, ``commands``)."""
    if case.no_warmup:     # the cold case's own first-call folder: the cold answer process fills it
        return f"/tmp/tc_{_tag(replace(case, triton_cache='cold', no_warmup=False), 'cold', False)}_answer"
    return "/tmp/tc_" + (case.contract or "")


def _pretune_command(case: Case, values: str) -> list[str]:
    """Warm report contract: l2norm's autotune key is a token bucket (``fla_l2norm.L2NORM_KEY``), so a separate process
    first tunes it at the warmup's 1024 tokens and at both values; the probe's own process then benchmarks nothing."""
    if case.contract != "report" or case.triton_cache != "warm":
        return []
    tag = f"fla-report_pretune_{case.alloc_conf.split(':')[1]}" + ("" if case.base.heads == 96 and case.base.dim == 128
                                                                    else f"_{_shape_tag(case)}")
    return [f"TRITON_CACHE_DIR={_cache_dir(case)} python3 validate/gpu/probes/boundary_probe.py --impl fla-report "
            f"--heads {case.base.heads}{probe_flags(case)} --pretune {WARMUP_TOKENS},{values} --state warm --out \"$OUT/{tag}\""]


def _tag(case: Case, state: str, warmup: bool) -> str:
    probe_impl = PROBE_IMPL[(case.impl.split("@")[0], case.contract)]
    tag = f"{probe_impl}_{case.solve}_{case.alloc_conf.split(':')[1]}_{state}" + ("_warmup" if warmup else "")
    plain = case.base.heads == 96 and case.base.dim == 128 and not case.base.v_heads      # the first cases' names
    fwd = "_fwd" if case.impl.split("@")[0].endswith("-fwd") else ""    # the probe runs both phases under one --impl
    return (tag if plain else f"{tag}_{_shape_tag(case)}{fwd}").replace("/", "")


def _probe_command(case: Case, values: str, suffix: str) -> str:
    triton = case.impl.startswith("fla-")
    state, warmup = probe_state(case)
    tag = _tag(case, state, warmup) + suffix
    env = f"PYTORCH_CUDA_ALLOC_CONF={case.alloc_conf}"
    copy = ""
    if triton and state == "cold" and not warmup:    # a fresh, empty Triton cache for each process
        env += f" TRITON_CACHE_DIR=/tmp/tc_{tag}"
    elif triton and case.no_warmup:                  # a copy of the cold case's cache for each process
        copy = f"d=$(mktemp -d /tmp/tcw.XXXX) && cp -r {_cache_dir(case)}/. \"$d\"/ && "
        env += ' TRITON_CACHE_DIR="$d"'
    elif triton:     # a warm or cold-after-warmup case reuses the cold case's folder
        env += f" TRITON_CACHE_DIR={_cache_dir(case)}"
    fixed = f" --solve mbs --seq {case.base.seq}" if case.solve == "mbs" else ""
    probe_impl = PROBE_IMPL[(case.impl.split("@")[0], case.contract)]
    return (f"{copy}{env} python3 validate/gpu/probes/boundary_probe.py --impl {probe_impl} "
            f"--heads {case.base.heads}{probe_flags(case)} --values {values}{fixed} --state {state}"
            f"{'' if warmup else ' --no-warmup'}{' --reset-stack' if state == 'cold' else ''} --out \"$OUT/{tag}\"")


def commands() -> list[str]:
    """Cold Triton cases first (their processes fill the Triton cache the warm cases then reuse), then cuDNN's, then warm."""
    order = sorted(CASES, key=lambda c: (c.triton_cache == "warm", not c.impl.startswith("fla-")))
    return [cmd for c in order for cmd in probe_commands(c)]


if __name__ == "__main__":
    if sys.argv[1:] == ["--commands"]:
        print("\n".join(commands()))
    else:
        path = Path(sys.argv[1]) if len(sys.argv) > 1 else PLAN_PATH
        path.write_text(render(groups()))
        print(path)

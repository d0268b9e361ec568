"""Issue 9's proof at the edge: for every boundary case, plan's answer S* ran in a fresh H200 process and
fitted, ceil(S* x 1.01) went out of memory, and S* is within 1 % below the smallest size measured to fail.

The measurements are the committed boundary probes (validate/data/records/boundary/*.jsonl); each case is
matched to the probe lines of its implementation, allocator configuration and Triton-cache state."""
import json
import math
from pathlib import Path

import pytest

from livebytes.estimator.shapes import Shape
from livebytes.validate.gpu.boundary import CASES, Case, answer, probe_state
from livebytes.validate.gpu.boundary import model_of as model_of_case
from livebytes.validate.check.probe_records import layer_options, model_of

BOUNDARY = Path(__file__).resolve().parents[1] / "validate" / "data" / "records" / "boundary"


def ran(case: Case, head: dict, line: dict) -> bool:
    """The probe line ran this case's model (implementation, phase and library version: the probes' own mapping)."""
    key, options = model_of(line["impl"], {**head, **line})
    return key == case.impl and options.get("contract") == case.contract


def stack(case: Case, head: dict) -> bool:
    """A layer probe ran this case's stack (its head's ``layer``: hidden, layers, checkpoint, conv size, as the model
    resolves them); a kernel case and a kernel probe have none."""
    resolved = layer_options(dict(model_of_case(case).options))
    return resolved == layer_options(model_of(head["impl"], head)[1]) if resolved or head.get("layer") else True


def trials(case: Case) -> list[dict]:
    """Every measured trial of this case: value -> fits, from bisections and --values runs alike."""
    state, warmup = probe_state(case)
    out = []
    for path in sorted(BOUNDARY.glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        warmed = any(d.get("stage", "").startswith("warmup") for d in lines)
        for d in lines:
            if (d.get("stage") in ("bisect", "value") and ran(case, lines[0], d) and stack(case, lines[0])
                    and d["allocator_conf"] == case.alloc_conf and d["state"] == state and warmed == warmup
                    and d["heads"] == case.base.heads and d.get("v_heads") == case.base.v_heads
                    and d.get("dim", 128) == case.base.dim
                    and (d["mbs"] == case.base.mbs if case.solve == "seq" else d["seq"] == case.base.seq)):
                out.append({"value": d[case.solve], "fits": d["fits"], "file": path.name, "stage": d["stage"]})
    return out


# Near the edge fragmentation makes the verdict non-monotone: there ceil(1.01 S*) can fit, as the replay says it does,
# while a size between S* and it fails. These cases' 1 %-above check is expected to fail (strict: a fix shows); their
# bound is a fresh-process failure measured above S* (the next test). Value: (why, what ceil(1.01 S*) did on the H200:
# True ran, None not run).
NON_MONOTONE: dict[Case, tuple[str, bool | None]] = {
    # run 17a: 242,559 and 244,985 fitted; run 19b: 242,560, 243,500 and 244,500 ran out of memory in the first steady
    # call (dg2), 246,500 fitted, 248,500 did not: every one as replayed. S* is one token below a measured failure.
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 128, 64), triton_cache="warm", no_warmup=True):
        ("ceil(1.01 S*) = 244,985 fits, as replayed; 242,560-244,500 fail (run 19b)", True),
    # runs 17c/17d: 76,672 ran out of memory in its first steady call and 77,439 fitted; run 19b: S* 76,629 fitted
    Case("fla-kda@0.6.0", "report", "seq", Shape(1, 8192, 96, 256)):
        ("ceil(1.01 S*) = 77,396 lies among fits (77,439 fitted; replayed to fit); 76,672 failed", None),
}


def cid(case: Case) -> str:
    b = case.base
    return (f"{case.impl}:{case.contract}:{case.solve}:{case.alloc_conf}:{case.cache_label}:H{b.heads}"
            + (f"/HV{b.v_heads}" if b.v_heads else "") + f":D{b.dim}"
            + "".join(f":{k}={v}" for k, v in b.layer_fields().items()))


def marked(cases):
    return [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=NON_MONOTONE[c][0])) if c in NON_MONOTONE else c
            for c in cases]


@pytest.mark.parametrize("case", marked(CASES), ids=cid)
def test_plans_answer_fits_and_one_percent_more_does_not(case):
    s_star = answer(case)
    measured = trials(case)
    at = [t for t in measured if t["value"] == s_star and t["stage"] == "value"]
    above = [t for t in measured if t["value"] == math.ceil(s_star * 1.01) and t["stage"] == "value"]
    if not at:
        pytest.skip(f"plan's answer {s_star:,} not measured yet ({len(measured)} trials of this case)")
    assert all(t["fits"] for t in at), at
    assert above and not any(t["fits"] for t in above), above


@pytest.mark.parametrize("case", CASES, ids=cid)
def test_plans_answer_is_never_above_a_measured_failure_and_within_one_percent(case):
    """Only fresh-start trials count for 'never above' (a bisection's process holds earlier trials' caches)."""
    s_star = answer(case)
    measured = trials(case)
    if not measured:
        pytest.skip("no trial of this case")
    failures = [t["value"] for t in measured if not t["fits"] and t["stage"] == "value"]
    assert all(s_star < v for v in failures)
    if not any(not t["fits"] for t in measured):
        assert case in NON_MONOTONE, f"no failure measured for {cid(case)}: nothing bounds its answer from above"
        pytest.skip(f"no failure measured above S* yet: {NON_MONOTONE[case][0]}")
    smallest_failure = min(t["value"] for t in measured if not t["fits"])
    if case.solve == "seq":
        assert s_star >= 0.99 * smallest_failure


@pytest.mark.parametrize("case", [c for c in CASES if c.tuned_at_tokens is None], ids=cid)
def test_predict_quotes_the_probes_of_plans_answer_and_one_percent_above(case):
    """What predict/compare/plan quote (``probe_records.probed_at``): every trial of the very case, at S* all ran, at
    ceil(1.01 S*) none did; a cold case only as its process's first call."""
    from dataclasses import replace

    from livebytes.validate.check.probe_records import probed_at
    contract = case.contract
    cache = case.triton_cache if case.impl.startswith("fla-") else "cold"

    def probed(v):
        return probed_at(case.impl, contract, replace(case.base, **{case.solve: v}), case.alloc_conf, cache, "H200")
    at, above = probed(answer(case)), probed(math.ceil(answer(case) * 1.01))
    if not at:
        pytest.skip(f"plan's answer {answer(case):,} not measured yet")
    assert all(p["fits"] for p in at)
    if case in NON_MONOTONE:     # its 1.01x ran (warm D64) or was not run (D256's 77,396, replayed to fit)
        ran = NON_MONOTONE[case][1]
        assert (not above) if ran is None else (above and all(p["fits"] is ran for p in above))
    else:
        assert above and not any(p["fits"] for p in above)
    assert all(p["earlier_trials"] == 0 and not p["after_warmup"] for p in at + above if cache == "cold"
               and case.impl.startswith("fla-"))

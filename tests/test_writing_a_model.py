"""docs/writing-a-model.md walks through adding a version that differs in one dtype as a diff of
lifetimes/fla_kda.py. This test applies that diff from the page and checks the page's numbers."""
import re
import sys
import types
from pathlib import Path

import pytest

from livebytes.estimator import Shape, predict
from livebytes.lifetimes import fla_kda

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "writing-a-model.md"


def the_diff() -> list[str]:
    if not PAGE.exists():
        pytest.skip("docs/ is not shipped with an installed package")
    blocks = re.findall(r"```diff\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) == 1
    return blocks[0].splitlines()


def apply(diff: list[str], source: str) -> str:
    """Apply the single hunk: its context and removed lines must sit in the file as they are."""
    body = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
    old = "\n".join(line[1:] for line in body if line[:1] in (" ", "-"))
    new = "\n".join(line[1:] for line in body if line[:1] in (" ", "+"))
    assert source.count(old) == 1, "the diff's context no longer matches lifetimes/fla_kda.py"
    return source.replace(old, new)


def test_the_diff_touches_one_file_and_adds_one_entry():
    diff = the_diff()
    assert [line for line in diff if line.startswith("+++")] == ["+++ b/lifetimes/fla_kda.py"]
    assert not [line for line in diff if line.startswith("-") and not line.startswith("---")]


def test_applying_the_diff_registers_a_version_whose_peak_moves_by_hand_arithmetic(monkeypatch):
    from livebytes.estimator import registry
    source = (ROOT / "lifetimes" / "fla_kda.py").read_text()
    module = types.ModuleType("fla_kda_with_the_example")
    sys.modules[module.__name__] = module             # dataclasses resolve their module while being built
    monkeypatch.setattr(registry, "_REGISTRY", {})    # the edited file registers its models into a registry of its own
    monkeypatch.setattr(registry, "_FROM_INDEX", set())
    try:
        exec(compile(apply(the_diff(), source), module.__name__, "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    namespace = module.__dict__
    assert {"fla-kda@0.6.0+bf16beta", "fla-kda-fwd@0.6.0+bf16beta"} <= set(registry._REGISTRY)   # the file registers its entry
    versions = {v.version: v for v in namespace["VERSIONS"]}
    assert set(versions) == {v.version for v in fla_kda.VERSIONS} | {"0.6.0+bf16beta"}
    example = versions["0.6.0+bf16beta"]
    assert example.beta_sigmoid_dtype == "bf16" and example.intra_grad_dtype is None   # only that dtype differs

    shape = Shape(1, 8192, 32)
    base = predict(fla_kda.build(fla_kda.FLA_0_6_0, contract="report"), shape)
    new = predict(namespace["build"](example, contract="report"), shape)
    by_name = {b.name: n for b, n in zip(new.model.buffers, new.buffer_bytes)}
    assert by_name["beta_sigmoid"] == 8192 * 32 * 2 == 524_288           # [T, HV] bf16 (fp32: 1,048,576)
    assert new.peak_step.name == base.peak_step.name == "bwd.intra_db_sum"
    assert base.peak_bytes - new.peak_bytes == 8192 * 32 * (4 - 2)
    assert (base.peak_bytes, new.peak_bytes) == (2_358_792_192, 2_358_267_904)   # the page's figures

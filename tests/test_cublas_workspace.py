"""The cuBLAS workspace per compute capability (lifetimes/fla_modules.py ``cublas_workspace_bytes``): torch 2.11.0's
``parseChosenWorkspaceSize`` gives :4096:8 = 32 MiB on 9.0 exactly and :4096:2:16:8 elsewhere; the layer models and
the traced models both take it from the device they describe."""
import pytest

from livebytes.estimator.devices import capability_of, get_device
from livebytes.estimator.registry import get_model
from livebytes.lifetimes.fla_modules import cublas_workspace_bytes
from livebytes.lifetimes.traced.gpu_rules import blas_workspaces

SM90 = 4096 * 8 * 1024                       # 4096 KiB x 8 = 33,554,432 B
OTHER = 4096 * 1024 * 2 + 16 * 1024 * 8      # 4096 KiB x 2 + 16 KiB x 8 = 8,388,608 + 131,072 = 8,519,680 B


@pytest.mark.parametrize("preset, expected", [
    ("H200", 33_554_432),        # sm90: (9, 0)
    ("H100", 33_554_432),        # sm90: (9, 0)
    ("A100-40GB", 8_519_680),    # sm80: (8, 0) is not (9, 0)
    ("B200", 8_519_680),         # sm100: (10, 0): torch 2.11.0 compares major and minor with (9, 0), not major >= 9
    ("B300", 8_519_680),         # sm100 in the table (10.3 on the card): either way not (9, 0)
])
def test_each_preset_gets_its_capabilitys_size(preset, expected):
    assert SM90 == 33_554_432 and OTHER == 8_519_680
    assert cublas_workspace_bytes(get_device(preset).capability) == expected


@pytest.mark.parametrize("capability, expected", [
    ((9, 0), SM90),
    ((9, 1), OTHER),             # a minor other than 0 is not sm90 in the 2.11.0 rule
    ((10, 0), OTHER),
    ((12, 0), OTHER),
    ((8, 6), OTHER),
])
def test_only_nine_zero_gets_32_mib(capability, expected):
    assert cublas_workspace_bytes(capability) == expected


@pytest.mark.parametrize("arch, capability", [("sm90", (9, 0)), ("sm100", (10, 0)), ("sm80", (8, 0)), ("sm120", (12, 0))])
def test_capability_of_an_arch(arch, capability):
    assert capability_of(arch) == capability


@pytest.mark.parametrize("key", ["fla-kda-layer@0.6.0", "fla-gdn-layer@0.6.0"])
@pytest.mark.parametrize("preset, expected", [("H200", SM90), ("A100-40GB", OTHER), ("B200", OTHER)])
def test_a_layer_model_takes_its_devices_workspace(key, preset, expected):
    """Both threads' cuBLAS workspaces (forward: the caller's; backward: autograd's) at the device's size; the
    cuBLASLt workspace stays 1,024 KiB on every card."""
    ws = {b.name: b.nbytes for b in get_model(key, preset).buffers if "workspace" in b.name}
    assert ws["cublas.workspace.forward"] == expected
    assert ws["cublas.workspace.backward"] == expected
    assert ws.get("cublaslt.workspace.forward", 1024 * 1024) == 1024 * 1024


@pytest.mark.parametrize("capability, expected", [((9, 0), SM90), ((10, 0), OTHER), ((8, 0), OTHER)])
def test_a_traced_gemm_takes_its_devices_workspace(capability, expected):
    """The traced models' rule (gpu_rules.blas_workspaces): a thread's first GEMM gives its handle the workspace of
    the device's capability, a biased one adds the 1 MiB Lt workspace; a second GEMM on that thread adds nothing."""
    seen: set = set()
    events = [("gemm", {"thread": "forward", "lt": True, "out": 7}), ("gemm", {"thread": "forward", "lt": False})]
    extras = blas_workspaces(events, seen, capability)
    assert [(x.name, x.nbytes, x.after) for x in extras] == [
        ("cublas.workspace.forward", expected, 7), ("cublaslt.workspace.forward", 1024 * 1024, 7)]

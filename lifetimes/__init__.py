"""Lifetime models, one module per implementation; importing this package registers them.

Every version entry of a model file (``VERSIONS``) becomes a registered model: adding a version is
one entry in that file. ``runner`` names the validator's code path for the implementation.
"""
from __future__ import annotations

from livebytes.estimator.registry import ModelSpec, register

from . import cudnn_frost, cudnn_hopper, fla_gdn, fla_kda

FLA_OPTIONS = {"contract": ("report", "plain"), "recompute": (True, False), "gva": (False, True)}

HOPPER_CUDA_REFUSES_REPORT = {("contract", "report"): (
    "the engine refuses the report contract: 'KdaHopperCudaEngine: the kernel takes log-space g directly; "
    "safe_gate/a_log/dt_bias are unsupported' and 'the backward kernel takes pre-normalized q/k and post-sigmoid beta' "
    "(cudnn/linear_attention/hopper/cuda_engine.py, check_support); the plain contract is supported")}
HOPPER_CUTE_REFUSES_REPORT = {("contract", "report"): (
    "the engine refuses the report contract: 'KdaHopperEngine: the kernel takes log-space g directly; "
    "safe_gate/a_log/dt_bias are unsupported', 'use_beta_sigmoid_in_kernel is unsupported', "
    "'use_qk_l2norm_in_kernel is unsupported' (cudnn/linear_attention/hopper/kda_engine.py, check_support); "
    "the plain contract is supported")}


def _fla_builder(version: fla_kda.FlaVersion, forward_only: bool):
    def build(device, contract="report", recompute=True, gva=False):
        return fla_kda.build(version=version, contract=contract, recompute=recompute,
                             forward_only=forward_only, device=device.name, gva=gva)
    return build


def _register_fla(v: fla_kda.FlaVersion) -> None:
    register(ModelSpec(
        key=f"fla-kda@{v.version}", implementation="FLA chunk_kda (Triton)", version=v.version, covers=v.covers,
        builder=_fla_builder(v, False), refuse=fla_kda.refuse, options=FLA_OPTIONS, default_device=v.default_device,
        runner="fla" if v.released else None,
    ))
    if v.forward_model:
        register(ModelSpec(
            key=f"fla-kda-fwd@{v.version}", implementation="FLA chunk_kda (Triton)", version=v.version,
            covers=f"{v.origin} forward only under torch.no_grad (inference peak)",
            builder=_fla_builder(v, True), refuse=fla_kda.refuse,
            options={"contract": ("report", "plain"), "gva": (False, True)}, default_device=v.default_device,
            phase="fwd", runner="fla" if v.released else None,
        ))


def _register_frost(v) -> None:
    covers = ("nvidia-cudnn-frontend 1.32.0 kda_frost, report configuration, uncut or chain backward plan by SM count"
              if v is cudnn_frost.CUDNN_1_32_0 else f"{v.origin}; modelled from the 1.32.0 sources, checked against the report")
    register(ModelSpec(
        key=f"cudnn-kda-frost@{v.version}", implementation="cuDNN frontend kda_frost (CuTeDSL)", version=v.version,
        covers=covers, builder=lambda device, v=v: cudnn_frost.build(version=v, num_sm=device.sm_count, device=device.name),
        refuse=cudnn_frost.refuse, refuse_device=cudnn_frost.refuse_device, default_device="B300",
        runner="kda_frost" if v.released else None,
    ))


def _register_hopper(v) -> None:
    register(ModelSpec(
        key=f"cudnn-kda-hopper-cuda@{v.version}", implementation="cuDNN frontend kda_hopper_cuda (NVRTC CUDA)",
        version=v.version, covers=f"{v.origin} Hopper CUDA engine, forward + backward, plain contract, D=128",
        builder=lambda device, contract="plain", v=v: cudnn_hopper.build_cuda(v, device), refuse=cudnn_hopper.refuse,
        refuse_device=cudnn_hopper.refuse_device,
        options={"contract": ("plain",)}, refusals=HOPPER_CUDA_REFUSES_REPORT, default_device="H200", runner="kda_hopper_cuda",
    ))
    register(ModelSpec(
        key=f"cudnn-kda-hopper@{v.version}", implementation="cuDNN frontend kda_hopper (CuTeDSL)",
        version=v.version, covers=f"{v.origin} Hopper CuTeDSL engine, forward only (inference), plain contract, D=128",
        builder=lambda device, contract="plain", v=v: cudnn_hopper.build_cute_forward(v, device), refuse=cudnn_hopper.refuse,
        refuse_device=cudnn_hopper.refuse_device,
        options={"contract": ("plain",)}, refusals=HOPPER_CUTE_REFUSES_REPORT, default_device="H200", phase="fwd",
        runner="kda_hopper",
    ))


for _v in fla_kda.VERSIONS:
    _register_fla(_v)
for _v in cudnn_frost.VERSIONS:
    _register_frost(_v)
for _v in cudnn_hopper.VERSIONS:
    _register_hopper(_v)


def _register_gdn() -> None:
    """runner "gdn": validate/gdn_harness.py holds the inputs and the step for the validator's runner."""
    for forward_only in (False, True):
        register(ModelSpec(
            key=f"fla-gdn{'-fwd' if forward_only else ''}@0.6.0", implementation="FLA chunk_gated_delta_rule (Triton)",
            version="0.6.0",
            covers=("fla-core 0.6.0 Gated DeltaNet forward only under torch.no_grad (inference peak)" if forward_only else
                    "fla-core 0.6.0 Gated DeltaNet forward + backward as Qwen3-Next calls it; backward not measured on Hopper"),
            builder=lambda device, gva=False, f=forward_only: fla_gdn.build(forward_only=f, device=device, gva=gva),
            refuse=fla_gdn.refuse, options={"gva": (False, True)}, default_device="H200",
            phase="fwd" if forward_only else "fwd+bwd", runner="gdn",
        ))


_register_gdn()

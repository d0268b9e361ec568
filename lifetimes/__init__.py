"""Lifetime models, one module per implementation; importing this package registers them."""
from __future__ import annotations

from livebytes.estimator.registry import ModelSpec, register

from . import cudnn_frost, cudnn_hopper, fla_kda


def _fla_refuse(shape, device):
    return fla_kda.refuse(shape)


def _frost_refuse(shape, device):
    if not device.blackwell:
        return (f"kda_frost is Blackwell-only (tcgen05/TMEM, sm100-103 and sm107); {device.name} is {device.arch}: "
                "pass --gpu B200 or --gpu B300")
    return cudnn_frost.refuse(shape)


def _fla_builder(version, forward_only=False):
    def build(device, contract="report", recompute=True, gva=False):
        return fla_kda.build(version=version, contract=contract, recompute=recompute,
                             forward_only=forward_only, device=device.name, gva=gva)
    return build


def _frost_builder(version):
    def build(device):
        return cudnn_frost.build(version=version, num_sm=device.sm_count, device=device.name)
    return build


FLA_OPTIONS = {"contract": ("report", "plain"), "recompute": (True, False), "gva": (False, True)}

register(ModelSpec(
    key="fla-kda@07b80f27", implementation="FLA chunk_kda (Triton)", version="07b80f27",
    covers="the KDA memory report's FLA snapshot; fla-core 0.6.0 code path with the report's bf16 dq2/dk2 and bf16 sigmoid beta",
    builder=_fla_builder("07b80f27"), refuse=_fla_refuse, options=FLA_OPTIONS, default_device="B300",
))
register(ModelSpec(
    key="fla-kda@0.6.0", implementation="FLA chunk_kda (Triton)", version="0.6.0",
    covers="fla-core 0.6.0 forward + backward, report or plain contract, recompute on or off",
    builder=_fla_builder("0.6.0"), refuse=_fla_refuse, options=FLA_OPTIONS, default_device="H200",
))
register(ModelSpec(
    key="fla-kda-fwd@0.6.0", implementation="FLA chunk_kda (Triton)", version="0.6.0",
    covers="fla-core 0.6.0 forward only under torch.no_grad (inference peak)",
    builder=_fla_builder("0.6.0", forward_only=True), refuse=_fla_refuse,
    options={"contract": ("report", "plain"), "gva": (False, True)}, default_device="H200", phase="fwd",
))
register(ModelSpec(
    key="cudnn-kda-frost@e0b4ce98", implementation="cuDNN frontend kda_frost (CuTeDSL)", version="e0b4ce98",
    covers="the KDA memory report's FROST revision; modelled from the 1.32.0 sources, checked against the report",
    builder=_frost_builder("e0b4ce98"), refuse=_frost_refuse, default_device="B300",
))
register(ModelSpec(
    key="cudnn-kda-frost@1.32.0", implementation="cuDNN frontend kda_frost (CuTeDSL)", version="1.32.0",
    covers="nvidia-cudnn-frontend 1.32.0 kda_frost, report configuration, uncut or chain backward plan by SM count",
    builder=_frost_builder("1.32.0"), refuse=_frost_refuse, default_device="B300",
))

HOPPER_CUDA_REFUSES_REPORT = {("contract", "report"): (
    "the engine refuses the report contract: 'KdaHopperCudaEngine: the kernel takes log-space g directly; "
    "safe_gate/a_log/dt_bias are unsupported' and 'the backward kernel takes pre-normalized q/k and post-sigmoid beta' "
    "(cudnn/linear_attention/hopper/cuda_engine.py, check_support); use --contract plain")}
HOPPER_CUTE_REFUSES_REPORT = {("contract", "report"): (
    "the engine refuses the report contract: 'KdaHopperEngine: the kernel takes log-space g directly; "
    "safe_gate/a_log/dt_bias are unsupported', 'use_beta_sigmoid_in_kernel is unsupported', "
    "'use_qk_l2norm_in_kernel is unsupported' (cudnn/linear_attention/hopper/kda_engine.py, check_support); "
    "use --contract plain")}

register(ModelSpec(
    key="cudnn-kda-hopper-cuda@1.32.0", implementation="cuDNN frontend kda_hopper_cuda (NVRTC CUDA)", version="1.32.0",
    covers="nvidia-cudnn-frontend 1.32.0 Hopper CUDA engine, forward + backward, plain contract, D=128",
    builder=lambda device, contract="plain": cudnn_hopper.build_cuda("1.32.0", device), refuse=cudnn_hopper.refuse,
    options={"contract": ("plain",)}, refusals=HOPPER_CUDA_REFUSES_REPORT, default_device="H200",
))
register(ModelSpec(
    key="cudnn-kda-hopper@1.32.0", implementation="cuDNN frontend kda_hopper (CuTeDSL)", version="1.32.0",
    covers="nvidia-cudnn-frontend 1.32.0 Hopper CuTeDSL engine, forward only (inference), plain contract, D=128",
    builder=lambda device, contract="plain": cudnn_hopper.build_cute_forward("1.32.0", device), refuse=cudnn_hopper.refuse,
    options={"contract": ("plain",)}, refusals=HOPPER_CUTE_REFUSES_REPORT, default_device="H200", phase="fwd",
))

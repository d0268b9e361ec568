"""cuDNN frontend's Hopper KDA engines: ``kda_hopper_cuda`` (forward + backward) and ``kda_hopper``
(CuTeDSL, forward only, under inference_mode); both run only on sm90."""
from __future__ import annotations

from .base import harness
from .cudnn_common import CudnnKda, keys


def _hopper_only(plan: str, sm: int) -> str | None:
    return None if sm == 90 else f"{plan} runs only on Hopper (sm90); this GPU is sm{sm}"


@harness(*keys("cudnn-kda-hopper-cuda"))
class KdaHopperCuda(CudnnKda):
    plan = "kda_hopper_cuda"

    @classmethod
    def refuse_device(cls, sm: int, device_name: str) -> str | None:
        return _hopper_only(cls.plan, sm)


@harness(*keys("cudnn-kda-hopper"))
class KdaHopper(CudnnKda):
    plan = "kda_hopper"
    forward_context = "inference_mode"

    @classmethod
    def refuse_device(cls, sm: int, device_name: str) -> str | None:
        return _hopper_only(cls.plan, sm)

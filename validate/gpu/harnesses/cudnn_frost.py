"""cuDNN frontend ``kda_frost`` (CuTeDSL, Blackwell only: tcgen05/TMEM)."""
from __future__ import annotations

from .base import harness
from .cudnn_common import CudnnKda, keys


@harness(*keys("cudnn-kda-frost"))
class KdaFrost(CudnnKda):
    plan = "kda_frost"

    @classmethod
    def refuse_device(cls, sm: int, device_name: str) -> str | None:
        if 100 <= sm <= 103 or sm == 107:
            return None
        return (f"kda_frost runs only on Blackwell (sm100-103, sm107: tcgen05/TMEM); this GPU is sm{sm} "
                f"({device_name}); FROST stays checked against the published table")

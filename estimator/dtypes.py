"""Element sizes of the dtypes the models use."""
from __future__ import annotations

ITEMSIZE: dict[str, int] = {
    "bool": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
    "bf16": 2,
    "fp16": 2,
    "fp32": 4,
}


def itemsize(dtype: str) -> int:
    try:
        return ITEMSIZE[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(ITEMSIZE)}") from None

"""Concrete shapes, and parsing of the sizes users type (8K, 128K, 1M, plain integers)."""
from __future__ import annotations

from dataclasses import dataclass
import re

from .errors import LivebytesError
from .symbols import DK, DV, H, HV, MBS, S

_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str | int, what: str = "value") -> int:
    """``8K`` -> 8192, ``128K`` -> 131072, ``5000`` -> 5000. Zero, negatives and junk are errors."""
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+)\s*([KkMmGg]?)\s*", str(text))
        if not match:
            raise LivebytesError(f"{what}: {text!r} is not a positive integer (8192, 8K and 128K are)")
        value = int(match.group(1)) * _SUFFIX[match.group(2).upper()]
    if value <= 0:
        raise LivebytesError(f"{what}: must be positive, got {text!r}")
    return value


def format_tokens(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 and n >= 1024 else str(n)


@dataclass(frozen=True)
class Shape:
    """One micro-batch: ``mbs`` sequences of ``seq`` tokens, ``heads`` query/key heads."""

    mbs: int
    seq: int
    heads: int
    dim: int = 128
    v_heads: int | None = None
    dim_v: int | None = None

    def __post_init__(self) -> None:
        for name in ("mbs", "seq", "heads", "dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise LivebytesError(f"{name} must be a positive integer, got {value!r}")
        if self.v_heads is not None and (self.v_heads <= 0 or self.v_heads % self.heads):
            raise LivebytesError(f"value heads ({self.v_heads}) must be a positive multiple of heads ({self.heads})")
        if self.dim_v is not None and self.dim_v <= 0:
            raise LivebytesError(f"dim_v must be positive, got {self.dim_v}")

    @property
    def hv(self) -> int:
        return self.v_heads or self.heads

    @property
    def dv(self) -> int:
        return self.dim_v or self.dim

    @property
    def tokens(self) -> int:
        return self.mbs * self.seq

    def subs(self) -> dict:
        return {S: self.seq, MBS: self.mbs, H: self.heads, HV: self.hv, DK: self.dim, DV: self.dv}

    def as_dict(self) -> dict:
        d = {"mbs": self.mbs, "seq": self.seq, "heads": self.heads, "dim": self.dim}
        if self.v_heads is not None:
            d["v_heads"] = self.v_heads
        if self.dim_v is not None:
            d["dim_v"] = self.dim_v
        return d

    def label(self) -> str:
        text = f"MBS {self.mbs} x {format_tokens(self.seq)}, H{self.heads}"
        if self.v_heads and self.v_heads != self.heads:
            text += f"/HV{self.v_heads}"
        text += f", D{self.dim}"
        if self.dim_v and self.dim_v != self.dim:
            text += f"/DV{self.dim_v}"
        return text

    @classmethod
    def from_dict(cls, d: dict) -> "Shape":
        return cls(mbs=int(d["mbs"]), seq=int(d["seq"]), heads=int(d["heads"]), dim=int(d.get("dim", 128)),
                   v_heads=d.get("v_heads"), dim_v=d.get("dim_v"))


def parse_shape_list(text: str) -> list[Shape]:
    """``"1,8K,96,128;2,8K,64,128"`` -> shapes (MBS, sequence, heads, dim)."""
    shapes = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        fields = [f.strip() for f in part.split(",")]
        if len(fields) not in (3, 4):
            raise LivebytesError(f"shape {part!r}: expected MBS,SEQ,HEADS[,DIM]")
        mbs = parse_size(fields[0], "MBS")
        seq = parse_size(fields[1], "sequence")
        heads = parse_size(fields[2], "heads")
        dim = parse_size(fields[3], "dim") if len(fields) == 4 else 128
        shapes.append(Shape(mbs, seq, heads, dim))
    if not shapes:
        raise LivebytesError("no shapes given")
    return shapes

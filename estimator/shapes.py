"""Concrete shapes, and parsing of the sizes users type (8K, 128K, 1M, plain integers)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from .errors import LivebytesError
from .fields import show

_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


MAX_DIGITS = 18
# No dimension of a tensor on a GPU comes near this (an element is a byte at least; the largest GPU holds ~2^38 B):
# a size beyond it is refused, not evaluated (planning searches up to 2^40, times a context-parallel model's ranks).
MAX_SIZE = 1 << 50


# A Shape field -> the name users type and read: HF configs' and FLA layers' own names. The JSON keys, the shape strings
# (``parse_shape_list``) and the flags (``--seq-len``) are these; the fields keep their short names inside the library,
# and the measured records on disk keep the short names as keys (``Shape.record_dict``; ``Shape.from_dict`` reads both).
HF_NAMES = {"mbs": "batch_size", "seq": "seq_len", "heads": "num_heads", "dim": "head_dim", "v_heads": "num_v_heads",
            "dim_v": "head_v_dim", "hidden": "hidden_size", "layers": "num_hidden_layers", "checkpoint": "checkpoint",
            "conv_size": "conv_size"}
FIELD_OF = {name: field for field, name in HF_NAMES.items()}
# The symbols of the lifetime models' formulas (estimator/symbols.py, ``Shape.subs``) -> the HF name each stands for (HV
# is num_heads and DV head_dim where those are not given)
SYMBOL_NAMES = {"S": "seq_len", "MBS": "batch_size", "H": "num_heads", "HV": "num_v_heads", "DK": "head_dim",
                "DV": "head_v_dim"}


def flag_of(field: str) -> str:
    """The command line's flag of a Shape field (or of any other option name): ``seq`` -> ``--seq-len``."""
    return "--" + HF_NAMES.get(field, field).replace("_", "-")


TOKEN_FIELDS = ("value", "sequence", "--seq", "--seq-len", "--block-q", "--block-k", "seq", "seq_len")   # in tokens: 8K


def parse_size(text: str | int, what: str = "value") -> int:
    """``8K`` -> 8192, ``128K`` -> 131072, ``5000`` -> 5000. Zero, negatives and junk are errors."""
    if isinstance(text, bool):          # an int to Python, never a size: True read as 1 head
        raise LivebytesError(f"{what}: {text!r} is not a positive integer")
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+)\s*([KkMmGg]?)\s*", str(text))
        if not match:
            examples = "8192, 8K and 128K are" if what in TOKEN_FIELDS else "1, 4 and 32 are"
            raise LivebytesError(f"{what}: {show(text)} is not a positive integer ({examples})")
        if len(match.group(1).lstrip("0")) > MAX_DIGITS:     # int() refuses 4,300+ digits; no size needs 19
            raise LivebytesError(f"{what}: a {len(match.group(1)):,}-digit number is beyond any size (at most {MAX_DIGITS} digits)")
        value = int(match.group(1)) * _SUFFIX[match.group(2).upper()]
    if value <= 0:
        raise LivebytesError(f"{what}: must be positive, got {text!r}")
    if value > MAX_SIZE:
        raise LivebytesError(f"{what}: {value:,} is beyond any size (at most 2^50 = {MAX_SIZE:,})")
    return value


def parse_ratio(text: str | int | float, what: str = "expand_v"):
    """A positive ratio (2, 0.5, "1.5"), read exactly as a ``Fraction`` (0.1 is one tenth, not its float), from 2^-20
    to 2^20 (a value head dim of head_dim x that: beyond it no head fits any GPU) and at most ``MAX_RATIO_CHARS``
    characters of text (so no text makes an arbitrarily large Fraction)."""
    word = str(text).strip()
    if len(word) > MAX_RATIO_CHARS:
        raise LivebytesError(f"{what}: {show(word[:MAX_RATIO_CHARS])}... is longer than any ratio ({MAX_RATIO_CHARS} characters)")
    try:
        ratio = Fraction(word)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise LivebytesError(f"{what}: {show(text)} is not a number (e.g. 0.5, 1 or 2)") from None
    if ratio <= 0:
        raise LivebytesError(f"{what}: must be positive, got {show(text)}")
    if not Fraction(1, 1 << 20) <= ratio <= 1 << 20:
        raise LivebytesError(f"{what}: {show(word)} is outside 2^-20 to 2^20")
    return ratio


MAX_RATIO_CHARS = 24


def head_v_dim(head_dim: int, expand_v: str | int | float, what: str = "expand_v") -> int:
    """The value head dimension of FLA's ``expand_v`` (``int(head_dim * expand_v)`` in its layers): ``expand_v`` a
    positive number (2, 0.5, "1.5"), read exactly; a product that is not a whole number is refused, as FLA refuses a
    value dim it cannot split into heads."""
    value = head_dim * parse_ratio(expand_v, what)
    if value > MAX_SIZE:
        raise LivebytesError(f"{what}: head_dim {head_dim} x {show(expand_v)} is beyond any size (at most 2^50)")
    if value.denominator != 1:
        raise LivebytesError(f"{what}: head_dim {head_dim} x {show(expand_v)} = {float(value):g} is not a whole value "
                             "head dimension")
    return parse_size(int(value), what)


def format_tokens(n: int) -> str:
    """The largest suffix that divides exactly (parse_size reads it back): 16777216 -> 16M, 8192 -> 8K, 5000."""
    for suffix, scale in (("M", 1024**2), ("K", 1024)):
        if n > 0 and n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


@dataclass(frozen=True)
class Shape:
    """One micro-batch: ``mbs`` sequences of ``seq`` tokens, ``heads`` query/key heads. The layer fields
    (``LAYER_FIELDS``: hidden size, layers in the stack, activation checkpointing, short-convolution width) are
    None for a kernel; a layer model takes them as its build options (``registry.shape_options``), so no kernel
    model and no compiled byte function sees them."""

    mbs: int
    seq: int
    heads: int
    dim: int = 128
    v_heads: int | None = None
    dim_v: int | None = None
    hidden: int | None = None
    layers: int | None = None
    checkpoint: bool | None = None
    conv_size: int | None = None

    def __post_init__(self) -> None:
        for name in ("mbs", "seq", "heads", "dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise LivebytesError(f"{name} must be a positive integer, got {value!r}")
        for name in ("mbs", "seq", "heads", "dim", "v_heads", "dim_v", "hidden", "layers", "conv_size"):
            value = getattr(self, name)
            if isinstance(value, int) and value > MAX_SIZE:
                raise LivebytesError(f"{name}: {show(value)} is beyond any size (at most 2^50 = {MAX_SIZE:,})")
        if self.v_heads is not None and (self.v_heads <= 0 or self.v_heads % self.heads):
            raise LivebytesError(f"value heads ({self.v_heads}) must be a positive multiple of heads ({self.heads})")
        if self.dim_v is not None and self.dim_v <= 0:
            raise LivebytesError(f"dim_v must be positive, got {self.dim_v}")
        for name in ("hidden", "layers", "conv_size"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise LivebytesError(f"{name} must be a positive integer, got {value!r}")

    def layer_fields(self) -> dict:
        """The layer fields that are set (``LAYER_FIELDS`` names)."""
        return {name: getattr(self, name) for name in LAYER_FIELDS if getattr(self, name) is not None}

    @property
    def hv(self) -> int:
        return self.v_heads or self.heads

    @property
    def dv(self) -> int:
        return self.dim_v or self.dim

    def values(self) -> tuple[int, int, int, int, int, int]:
        """(S, MBS, H, HV, DK, DV): the arguments of every compiled byte function (symbols.SHAPE_SYMBOLS order)."""
        return (self.seq, self.mbs, self.heads, self.hv, self.dim, self.dv)

    @property
    def tokens(self) -> int:
        return self.mbs * self.seq

    def subs(self) -> dict:
        from .symbols import DK, DV, H, HV, MBS, S  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
        return {S: self.seq, MBS: self.mbs, H: self.heads, HV: self.hv, DK: self.dim, DV: self.dv}

    def record_dict(self) -> dict:
        """The shape as the measured records hold it (``mbs``, ``seq``, ...: the fields' own names), the format the GPU
        runners write and validate/data/records/ keeps; v_heads, dim_v and the layer fields only when set."""
        d = {"mbs": self.mbs, "seq": self.seq, "heads": self.heads, "dim": self.dim}
        if self.v_heads is not None:
            d["v_heads"] = self.v_heads
        if self.dim_v is not None:
            d["dim_v"] = self.dim_v
        return d | self.layer_fields()

    def as_dict(self) -> dict:
        """The shape as users read it (the --json ``shape`` object, schema 3): the HF/FLA names (``HF_NAMES``)."""
        return {HF_NAMES[k]: v for k, v in self.record_dict().items()}

    def label(self) -> str:
        """The shape as tables and messages name it: the shape string's ``key=value`` fields (the HF/FLA names,
        ``as_dict``'s keys; tokens as ``8K``), which ``parse_shape_list`` reads back: ``batch_size=1, seq_len=8K,
        num_heads=96, head_dim=128``; value heads and head dim only where they differ from the query/key ones,
        checkpoint only when on."""
        fields = self.as_dict()
        if fields.get("num_v_heads") == self.heads:
            del fields["num_v_heads"]
        if fields.get("head_v_dim") == self.dim:
            del fields["head_v_dim"]
        if not fields.get("checkpoint"):
            fields.pop("checkpoint", None)
        shown = {"seq_len": format_tokens(self.seq), "checkpoint": "on"}
        return ", ".join(f"{k}={shown.get(k, v)}" for k, v in fields.items())

    @classmethod
    def from_dict(cls, d: dict) -> Shape:
        """A shape from either vocabulary: the JSON's HF names (``as_dict``) or the records' field names
        (``record_dict``), translated here so that neither the records on disk nor the documents need rewriting."""
        d = {FIELD_OF.get(k, k): v for k, v in d.items()}
        return cls(mbs=int(d["mbs"]), seq=int(d["seq"]), heads=int(d["heads"]), dim=int(d.get("dim", 128)),
                   v_heads=d.get("v_heads"), dim_v=d.get("dim_v"), **{k: d[k] for k in LAYER_FIELDS if d.get(k) is not None})


LAYER_FIELDS = ("hidden", "layers", "checkpoint", "conv_size")   # Shape fields only layer models take
# The shape string's keys beyond ``HF_NAMES``: FLA's expand_v (the value head dim over head_dim), and the old short keys
# of the positional form, kept as aliases: key -> the HF name it stands for
SHAPE_KEY_ALIASES = {"hv": "num_v_heads", "dv": "head_v_dim", "hidden": "hidden_size", "layers": "num_hidden_layers",
                     "conv": "conv_size"}
EXPAND_V = "expand_v"
# The old positional forms, read as aliases of the key=value form: as written -> the HF names of its sizes, in order
VALIDATE_FORMS = {"MBS,SEQ,HEADS": ("batch_size", "seq_len", "num_heads"),
                  "MBS,SEQ,HEADS,DIM": ("batch_size", "seq_len", "num_heads", "head_dim")}
TRACE_FORMS = {"N,S,H,HV,K,V": ("batch_size", "seq_len", "num_heads", "num_v_heads", "head_dim", "head_v_dim")}   # learn's
# The allocator-trace format: written on the GPU (validate/gpu/trace.py), read by learn/traces.py; here, below both,
# so that neither imports the other (validate and learn are siblings above the core).
TRACE_FORMAT = "livebytes-trace/1"
TRACE_SYMBOLS = ("T", "N", "H", "HV", "K", "V")   # packed tokens, sequences, heads, value heads, key/value dims
SHAPE_STRING_HELP = "seq_len=8K,num_heads=16[,batch_size=1][,head_dim=128][,num_v_heads=32][,head_v_dim=64|expand_v=0.5]"


def _keyed_sizes(part: str, fields: list[str], forms: dict) -> dict:
    """The shape string's sizes by HF name: the leading positional sizes of one of ``forms`` (the old syntaxes), then
    ``key=value`` fields (an alias key read as its HF name); a key given twice is refused."""
    positional = [f for f in fields if "=" not in f]
    if fields[:len(positional)] != positional or (positional and len(positional) not in {len(f) for f in forms.values()}):
        old = " or ".join(forms)
        raise LivebytesError(f"shape {part!r}: expected key=value fields, {SHAPE_STRING_HELP} (or the old positional "
                             f"{old}, then key=value fields)")
    form = next((f for f in forms.values() if len(f) == len(positional)), ())
    sizes = dict(zip(form, positional))
    known = [*HF_NAMES.values(), EXPAND_V, *SHAPE_KEY_ALIASES]
    for field in fields[len(positional):]:
        key, _, value = (x.strip() for x in field.partition("="))
        name = SHAPE_KEY_ALIASES.get(key.lower(), key.lower())
        if name not in known or name in sizes:
            raise LivebytesError(f"shape {part!r}: unknown or repeated field {key!r} (known: "
                                 f"{', '.join(k + '=' for k in [*HF_NAMES.values(), EXPAND_V])}; aliases "
                                 f"{', '.join(k + '=' for k in SHAPE_KEY_ALIASES)})")
        sizes[name] = value
    return sizes


def _parse_one_shape(part: str, forms: dict = VALIDATE_FORMS) -> Shape:
    """``seq_len=8K,num_heads=16,head_dim=128,num_v_heads=32,batch_size=1`` (the JSON's shape keys; batch_size 1 and
    head_dim 128 by default, expand_v for the value head dim as FLA's layers take it), or one of the old positional
    ``forms`` (``MBS,SEQ,HEADS[,DIM]``) followed by key=value fields."""
    sizes = _keyed_sizes(part, [f.strip() for f in part.split(",")], forms)
    for required in ("seq_len", "num_heads"):
        if required not in sizes:
            raise LivebytesError(f"shape {part!r}: {required}= is missing (e.g. {SHAPE_STRING_HELP})")
    if EXPAND_V in sizes and "head_v_dim" in sizes:
        raise LivebytesError(f"shape {part!r}: give head_v_dim= or expand_v=, not both")
    fields = {}
    for name, text in sizes.items():
        if name == "checkpoint":
            if text.lower() not in ("on", "off"):
                raise LivebytesError(f"shape {part!r}: checkpoint= takes on or off, got {text!r}")
            fields["checkpoint"] = text.lower() == "on"
        elif name != EXPAND_V:
            fields[FIELD_OF[name]] = parse_size(text, name)
    fields.setdefault("mbs", 1)
    if EXPAND_V in sizes:
        fields["dim_v"] = head_v_dim(fields.get("dim", 128), sizes[EXPAND_V])
    return Shape(**fields)


# Beyond these a shape is almost certainly a typo (10M instead of 10K): the commands still answer, with a warning.
PLAUSIBLE_TOKENS = 1 << 24       # 16M tokens in one micro-batch: this many or more is implausible
PLAUSIBLE_HEADS = 4096
PLAUSIBLE_DIM = 4096


def implausible(shape: Shape) -> str | None:
    """Why ``shape`` is beyond anything a GPU holds, or None."""
    problems = []
    if shape.tokens >= PLAUSIBLE_TOKENS:
        problems.append(f"{shape.tokens:,} tokens per micro-batch ({format_tokens(PLAUSIBLE_TOKENS)} or more)")
    if max(shape.heads, shape.hv) > PLAUSIBLE_HEADS:
        problems.append(f"{max(shape.heads, shape.hv):,} heads (more than {PLAUSIBLE_HEADS:,})")
    if max(shape.dim, shape.dv) > PLAUSIBLE_DIM:
        problems.append(f"head dim {max(shape.dim, shape.dv):,} (more than {PLAUSIBLE_DIM:,})")
    return f"{shape.label()} is implausible: " + "; ".join(problems) if problems else None


def parse_shape_list(text: str, forms: dict = VALIDATE_FORMS) -> list[Shape]:
    """Shapes separated by ``;``, each ``seq_len=8K,num_heads=16,head_dim=128,num_v_heads=32,batch_size=1`` (one
    syntax: the JSON's shape keys; ``_parse_one_shape``). The old positional forms read as aliases: ``"1,8K,96,128"``
    (MBS, sequence, heads, dim; validate's) with ``,hv=32`` grouped value heads and ``,dv=64`` a value head dim, or
    ``forms`` a caller reads (learn's ``TRACE_FORMS``, ``N,S,H,HV,K,V``)."""
    shapes = [_parse_one_shape(p, forms) for p in filter(None, (p.strip() for p in text.split(";")))]
    if not shapes:
        raise LivebytesError("no shapes given")
    return shapes


def shape_spec(shape: Shape) -> str:
    """The shape as ``parse_shape_list`` reads it back, the key=value syntax (``Shape.as_dict``'s keys; sizes as plain
    integers, checkpoint on/off)."""
    return ",".join(f"{k}={('on' if v else 'off') if k == 'checkpoint' else v}" for k, v in shape.as_dict().items())


def positional_spec(shape: Shape) -> str:
    """The old positional form (``1,8192,96,128,hv=32``), which ``parse_shape_list`` still reads: record file names
    keep it (the records on disk keep their format)."""
    alias = {v: k for k, v in SHAPE_KEY_ALIASES.items()}
    fields = shape.as_dict()
    text = ",".join(str(fields.pop(k)) for k in VALIDATE_FORMS["MBS,SEQ,HEADS,DIM"])
    return text + "".join(f",{alias.get(k, k)}={('on' if v else 'off') if k == 'checkpoint' else v}"
                          for k, v in fields.items())


def shape_list_spec(shapes: list[Shape]) -> str:
    return ";".join(shape_spec(s) for s in shapes)

"""Protocol v4's input recipe: seeded inputs drawn on the device, one allocation per input, in a fixed order.

Each input is a declared ``InputSpec`` (name, dims, dtype, fill). ``build_inputs`` allocates it once with
``torch.empty`` and fills it in place from a seeded generator on the same device (``normal_``,
``uniform_``); the plain contract's L2 normalisation and log-sigmoid run in row chunks whose
temporaries are at most ``CHUNK_BYTES`` each and are all freed, and the cache emptied, before the next
input is allocated.

Why the allocator ends in v3's state (v3: drawn on the CPU, copied once per tensor): at every point
where v4 calls ``torch.cuda.empty_cache()`` v3's cache holds no wholly free segment either (the
protocol emptied it before the inputs, and since then only input blocks, all live, were allocated).
A temporary either splits a free block of an existing segment or gets a new segment; once every
temporary is freed, the allocator merges each freed block with its free neighbours
(``CUDACachingAllocator.cpp``, ``DeviceCachingAllocator::free_block`` -> ``try_merge_blocks``), so the
split segments are back to their earlier blocks, and the new segments are wholly free and released by
``empty_cache`` (``release_cached_blocks``). So before each input is allocated the block state is
exactly v3's, and the input gets the same block: one block per input, in the same order. This holds
for ``expandable_segments:False`` (the protocol's setting); ``tests/test_inputs.py`` checks the recipe's
side on the CPU (no tensor but the inputs outlives an input's fill, one allocation per input, the
order) and ``tests/test_gpu_validate.py`` compares v3's and v4's block layouts on the GPU.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from livebytes.estimator.shapes import Shape

CHUNK_BYTES = 64 * 2**20      # the largest temporary of a chunked fill
FILLS = ("normal", "l2norm", "logsigmoid", "uniform", "zeros", "boundaries")
GATE_LOWER_BOUND = -5.0       # the plain contract's log-space gate is clamped here (as v3 did)


@dataclass(frozen=True)
class InputSpec:
    name: str
    dims: tuple[int, ...]
    dtype: str                 # torch dtype name: bfloat16, float32, int64, int32
    fill: str
    requires_grad: bool

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n * {"bfloat16": 2, "float32": 4, "int64": 8, "int32": 4}[self.dtype]


def input_specs(shape: Shape, contract: str, grad: bool, batch_dim: bool, cu_dtype: str) -> list[InputSpec]:
    """The inputs in allocation order: q, k, v, g, beta, (A_log, dt_bias), cu_seqlens, (dO).

    ``report``: raw bf16 q/k/v/gate/beta and zero fp32 A_log [HV], dt_bias [HV*K] (the KDA report's
    configuration); ``plain``: L2-normalised bf16 q/k, bf16 v, fp32 log-space gate, fp32 post-sigmoid
    beta. Value-side inputs (v, g, beta, dO) have HV heads, q/k have H."""
    T, H, HV, K, V = shape.tokens, shape.heads, shape.hv, shape.dim, shape.dv
    lead = (1,) if batch_dim else ()          # FLA's varlen layout [1, T, H, D]; cuDNN's THD [T, H, D]
    report = contract == "report"
    specs = [
        InputSpec("q", (*lead, T, H, K), "bfloat16", "normal" if report else "l2norm", grad),   # [T, H, K] bf16
        InputSpec("k", (*lead, T, H, K), "bfloat16", "normal" if report else "l2norm", grad),   # [T, H, K] bf16
        InputSpec("v", (*lead, T, HV, V), "bfloat16", "normal", grad),                         # [T, HV, V] bf16
        InputSpec("g", (*lead, T, HV, K), "bfloat16" if report else "float32",
                  "normal" if report else "logsigmoid", grad),                                   # [T, HV, K]
        InputSpec("beta", (*lead, T, HV), "bfloat16" if report else "float32",
                  "normal" if report else "uniform", grad),                                      # [T, HV]
    ]
    if report:
        specs += [InputSpec("A_log", (HV,), "float32", "zeros", grad),                          # [HV] fp32
                  InputSpec("dt_bias", (HV * K,), "float32", "zeros", grad)]                    # [HV*K] fp32
    specs.append(InputSpec("cu_seqlens", (shape.mbs + 1,), cu_dtype, "boundaries", False))      # [N+1]
    if grad:
        specs.append(InputSpec("dO", (*lead, T, HV, V), "bfloat16", "normal", False))          # [T, HV, V] bf16
    return specs


def _row_chunks(t, temp_bytes_per_row: int):
    """Views of ``t`` over its token axis (the one before the heads), each small enough that a temporary of
    ``temp_bytes_per_row`` bytes per token stays within CHUNK_BYTES."""
    rows = t.reshape(-1, *t.shape[-2:]) if t.dim() >= 3 else t.reshape(-1, t.shape[-1])
    step = max(1, CHUNK_BYTES // max(1, temp_bytes_per_row))
    for i in range(0, rows.shape[0], step):
        yield rows[i:i + step]


def _fill(torch, t, spec: InputSpec, gen, seq: int) -> bool:
    """Fill ``t`` in place; True when temporaries were made (then the caller empties the cache)."""
    if spec.fill == "zeros":
        t.zero_()
    elif spec.fill == "uniform":
        t.uniform_(generator=gen)                                   # post-sigmoid beta in [0, 1)
    elif spec.fill == "boundaries":
        t.copy_(torch.arange(0, spec.dims[0], dtype=t.dtype) * seq)  # built on the CPU, copied in place
    else:
        t.normal_(generator=gen)
    if spec.fill == "l2norm":
        for c in _row_chunks(t, t.shape[-2] * 4):                  # temporary: [rows, H, 1] fp32 norms
            c.div_(torch.linalg.vector_norm(c, dim=-1, keepdim=True, dtype=torch.float32).clamp_min_(1e-6))
        return True
    if spec.fill == "logsigmoid":
        import torch.nn.functional as F  # deferred: torch is not in the core install (model/validate extras)
        for c in _row_chunks(t, t.shape[-2] * t.shape[-1] * 4):    # temporary: [rows, HV, K] fp32
            c.copy_(F.logsigmoid(c))
        t.clamp_min_(GATE_LOWER_BOUND)
        return True
    return False


def build_inputs(specs: list[InputSpec], device: str, seq: int, seed: int = 0,
                 release: Callable[[], None] | None = None,
                 after_each: Callable[[str, object], None] | None = None) -> dict:
    """Allocate and fill every input in order on ``device`` (``"cuda"`` on the GPU, ``"cpu"`` in tests).

    ``release`` empties the cache after a fill that made temporaries (default: ``torch.cuda.empty_cache``
    on CUDA); ``after_each(name, tensor)`` is called once an input is complete."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    if release is None:
        release = torch.cuda.empty_cache if str(device).startswith("cuda") else (lambda: None)
    gen = torch.Generator(device=device).manual_seed(seed)
    out = {}
    for spec in specs:
        t = torch.empty(spec.dims, dtype=getattr(torch, spec.dtype), device=device)
        if _fill(torch, t, spec, gen, seq):
            release()
        t.requires_grad_(spec.requires_grad)
        out[spec.name] = t
        if after_each is not None:
            after_each(spec.name, t)
    return out

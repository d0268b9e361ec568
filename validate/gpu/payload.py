"""What autograd retains for backward, measured on the CPU (the saved-payload document, seed 004).

Our own float32 implementations of the three functions the document studies: dense attention, a
tiled forward with online softmax (block_q x block_k tiles, running max / sum / output per row, one
rescale when the max moves), and the same tiled function under non-reentrant checkpointing.
``measure`` runs forward and backward under ``torch.autograd.graph.saved_tensors_hooks`` and counts
the payload in bytes, deduplicated by (storage pointer, offset, shape, stride, dtype) as the
document does, with the number of save events and the largest saved tensor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from livebytes.estimator.errors import LivebytesError

FP32_BYTES = 4
# Measuring builds [T, T] fp32 matrices in host memory: dense's scores and probabilities (its backward holds
# two more, the gradients of each), and every function's saved payload holds T * T fp32 elements (dense: the
# probabilities; tiled: the p tiles; checkpointed: the same tiles again when backward recomputes). One such
# matrix is capped at 1 GiB (T <= 16,384): a few GiB of host memory at most, and the payload's formulas are
# exact at every T, so a larger T checks nothing a smaller one does not.
MEASURE_MAX_MATRIX_BYTES = 2**30


def largest_measurable_tokens() -> int:
    """The largest T whose [T, T] fp32 matrix fits ``MEASURE_MAX_MATRIX_BYTES`` (16,384: 16,384^2 * 4 B = 1 GiB)."""
    return math.isqrt(MEASURE_MAX_MATRIX_BYTES // FP32_BYTES)


def check_measurable(T: int) -> None:
    """Refuse, before allocating anything, a measurement whose [T, T] fp32 matrix exceeds the cap."""
    matrix = T * T * FP32_BYTES                                       # [T, T] fp32
    if matrix > MEASURE_MAX_MATRIX_BYTES:
        raise LivebytesError(f"measuring at {T:,} tokens builds [T, T] fp32 matrices of {matrix / 2**30:,.2f} GiB each; "
                             f"measurements are capped at {MEASURE_MAX_MATRIX_BYTES / 2**30:g} GiB per matrix "
                             f"(--seq-len <= {largest_measurable_tokens():,}); pass --no-measure for the model alone")


DENSE_EXTRA_MATRICES = 3      # dense also holds its scores and, in backward, the gradients of scores and probabilities


def available_host_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where there is none: the check is then skipped)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_bytes_needed(fn: str, T: int, d: int, dv: int | None, block_q: int, block_k: int) -> int:
    """A lower bound on the host memory measuring ``fn`` at ``T`` tokens holds at once: the saved payload (the
    model's exact figure, ``predict_payload``), plus dense's other [T, T] fp32 matrices (module notes)."""
    from livebytes.estimator.payload import predict_payload  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.attention_payload import PAYLOAD_MODELS
    payload = predict_payload(PAYLOAD_MODELS[fn], T=T, d=d, dv=dv, bq=block_q, bk=block_k).bytes
    return payload + (DENSE_EXTRA_MATRICES * T * T * FP32_BYTES if fn == "dense" else 0)


def check_host_memory(fn: str, T: int, d: int, dv: int | None, block_q: int, block_k: int,
                      available: int | None = None) -> None:
    """Refuse, before measuring anything, when even the lower bound of what the largest row holds exceeds the
    host memory available (``available``: MemAvailable when None), with both figures."""
    available = available_host_bytes() if available is None else available
    need = host_bytes_needed(fn, T, d, dv, block_q, block_k)
    if available is not None and need > available:
        raise LivebytesError(f"measuring {fn} at {T:,} tokens holds at least {need / 2**30:,.2f} GiB of host memory "
                             f"(its saved payload{' and three more [T, T] fp32 matrices' if fn == 'dense' else ''}); "
                             f"{available / 2**30:,.2f} GiB is available (MemAvailable); pass a smaller --seq-len or --no-measure")


def dense_attention(q, k, v):
    import torch  # deferred: torch is not in the core install (model/validate extras)
    scores = (q @ k.transpose(0, 1)) / math.sqrt(q.shape[-1])       # [T, T]
    return torch.softmax(scores, dim=-1) @ v                          # [T, dv]


def tiled_attention(q, k, v, block_q: int = 32, block_k: int = 32):
    """Online-softmax attention that never materialises a [T, T] tensor; returns (out, logsumexp)."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    n_q, d = q.shape
    n_k, dv = k.shape[0], v.shape[1]
    scale = 1.0 / math.sqrt(d)
    out = torch.zeros(n_q, dv)                                        # [T, dv]
    lse = torch.zeros(n_q)                                            # [T]
    for r0 in range(0, n_q, block_q):
        rows = min(block_q, n_q - r0)
        q_blk = q[r0:r0 + rows]                                       # [rows, d] view
        acc = torch.zeros(rows, dv)                                   # unnormalised output
        run_max = torch.full((rows,), -math.inf)                      # running row max
        run_sum = torch.zeros(rows)                                   # running sum of exponentials
        for c0 in range(0, n_k, block_k):
            cols = min(block_k, n_k - c0)
            k_blk, v_blk = k[c0:c0 + cols], v[c0:c0 + cols]
            s = (q_blk @ k_blk.T) * scale                             # [rows, cols]: the only tile built
            new_max = torch.maximum(run_max, s.max(dim=-1).values)    # [rows]
            rescale = torch.where(torch.isneginf(run_max), torch.zeros_like(run_max), torch.exp(run_max - new_max))
            p = torch.exp(s - new_max[:, None])                       # [rows, cols]
            run_sum = run_sum * rescale + p.sum(dim=-1)
            acc = acc * rescale[:, None] + p @ v_blk
            run_max = new_max
        out[r0:r0 + rows] = acc / run_sum[:, None]
        lse[r0:r0 + rows] = run_max + torch.log(run_sum)
    return out, lse


def tiled_checkpointed(q, k, v, block_q: int = 32, block_k: int = 32):
    from torch.utils.checkpoint import checkpoint  # deferred: torch is not in the core install (model/validate extras)
    return checkpoint(lambda a, b, c: tiled_attention(a, b, c, block_q, block_k)[0], q, k, v, use_reentrant=False)


FUNCTIONS = {"dense": dense_attention, "tiled": tiled_attention, "checkpointed": tiled_checkpointed}


@dataclass
class SavedPayload:
    """pack hook: count bytes once per (storage, offset, shape, stride, dtype); keep the tensor's storage alive."""
    seen: set = field(default_factory=set)
    bytes: int = 0
    save_events: int = 0
    largest: int = 0

    def pack(self, t):
        self.save_events += 1
        self.largest = max(self.largest, t.numel())
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key not in self.seen:
            self.seen.add(key)
            nbytes = t.numel() * t.element_size()
            self.bytes += nbytes
        return t.detach()


@dataclass(frozen=True)
class Measurement:
    fn: str
    T: int
    d: int
    dv: int
    block_q: int
    block_k: int
    bytes: int
    save_events: int
    largest: int


def _is_allocation_failure(err: BaseException) -> bool:
    """torch's CPU allocator raises RuntimeError ("DefaultCPUAllocator: can't allocate memory") or MemoryError."""
    return isinstance(err, MemoryError) or "allocate" in str(err)


def measure(fn: str, T: int, d: int = 32, dv: int | None = None, block_q: int = 32, block_k: int = 32,
            seed: int = 0) -> Measurement:
    """The payload measured (``check_measurable`` first); an allocation failure becomes one LivebytesError."""
    check_measurable(T)
    try:
        return _measure(fn, T, d, dv, block_q, block_k, seed)
    except (RuntimeError, MemoryError) as err:
        if not _is_allocation_failure(err):
            raise
        raise LivebytesError(f"measuring {fn} at {T:,} tokens ran out of host memory ({' '.join(str(err).split())[:200]}); "
                             "pass --no-measure for the model alone") from None


def _measure(fn: str, T: int, d: int, dv: int | None, block_q: int, block_k: int, seed: int) -> Measurement:
    import torch  # deferred: torch is not in the core install (model/validate extras)
    torch.set_num_threads(1)
    dv = d if dv is None else dv
    torch.manual_seed(seed)
    q, k, v = (torch.randn(T, w, requires_grad=True) for w in (d, d, dv))
    payload = SavedPayload()
    kwargs = {} if fn == "dense" else {"block_q": block_q, "block_k": block_k}
    with torch.autograd.graph.saved_tensors_hooks(payload.pack, lambda t: t):
        out = FUNCTIONS[fn](q, k, v, **kwargs)
        (out[0] if isinstance(out, tuple) else out).sum().backward()
    return Measurement(fn, T, d, dv, block_q, block_k, payload.bytes, payload.save_events, payload.largest)


def gradients_match(T: int = 128, d: int = 32, block_q: int = 32, block_k: int = 32, seed: int = 2) -> float:
    """Largest |grad difference| between the checkpointed tiled function and dense attention."""
    import torch  # deferred: torch is not in the core install (model/validate extras)
    torch.manual_seed(seed)
    q, k, v = (torch.randn(T, d, requires_grad=True) for _ in range(3))
    upstream = torch.randn(T, d)
    (tiled_checkpointed(q, k, v, block_q, block_k) * upstream).sum().backward()
    got = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    (dense_attention(q, k, v) * upstream).sum().backward()
    return max(float((a - t.grad).abs().max()) for a, t in zip(got, (q, k, v)))

"""What a GPU adds to a traced call, as named rules on the recorded operators (none fitted to a measurement):

- **cuBLAS workspaces** (``fla_modules.blas_workspace``, CublasHandlePool.cpp): the first GEMM a thread runs gives its
  handle its workspace (``fla_modules.cublas_workspace_bytes``: 32 MiB on sm90), after the GEMM's output, kept for
  the process; the first GEMM with a 1-D bias (``addmm``: the cuBLASLt path) adds that thread's 1 MiB cuBLASLt
  workspace. The forward, the optimizer and the loss run on the caller's thread; the backward (checkpoint's
  recompute too) on autograd's device thread.
- **ATen's reduce staging** (``aten_reduce``, Reduce.cuh): a sum over the leading dims of a contiguous tensor into two
  or more outputs may stage through the allocator (staging, semaphores; an fp32 accumulation buffer for bf16 above
  32-bit indexing), after the sum's output, freed when it returns. Other reductions are named as not modelled when
  their input is large enough to matter (``NOT_MODELLED_FROM`` bytes).
- **Triton's autotuning** (``estimator.autotune``): every launch of a kernel with more than one config is declared
  with its key, so a cold first call benchmarks (the L2-flush buffer) at the first launch of each key; a kernel that
  declares ``reset_to_zero``/``restore_value`` clones would also allocate per config (named as not modelled).
"""
from __future__ import annotations

from dataclasses import dataclass

from livebytes.lifetimes import aten_reduce
from livebytes.lifetimes.fla_modules import (CUBLAS_SIZE, CUBLASLT_SIZE, CUBLASLT_WORKSPACE_BYTES,
                                             cublas_workspace_bytes)
from livebytes.estimator.compiler import equal_head_dims

NOT_MODELLED_FROM = 1 << 20     # a reduction over less than 1 MiB stages at most a few KiB: not worth a line


@dataclass(frozen=True)
class Extra:
    """A buffer only a GPU allocates: placed right after the allocation ``after`` (an Alloc id; None: at the step's
    start), ``scratch`` (freed at its step, scratch of ``after``) or kept (cached)."""
    name: str
    after: int | None
    nbytes: object             # int, or a sympy expression
    dtype: str
    source: object
    note: str
    scratch: bool


def blas_workspaces(events, seen_threads: set, capability: tuple[int, int]) -> list[Extra]:
    """The cuBLAS (and cuBLASLt) workspace of each thread's first GEMM (and first biased GEMM) among ``events``, on
    a device of compute ``capability``."""
    out = []
    for kind, ev in events:
        if kind != "gemm":
            continue
        thread = ev["thread"]
        for name, nbytes, source, wanted in ((f"cublas.workspace.{thread}", cublas_workspace_bytes(capability),
                                              CUBLAS_SIZE, True),
                                             (f"cublaslt.workspace.{thread}", CUBLASLT_WORKSPACE_BYTES, CUBLASLT_SIZE,
                                              ev["lt"])):
            if wanted and name not in seen_threads:
                seen_threads.add(name)
                out.append(Extra(name, ev.get("out"), nbytes, "uint8", source,
                                 f"the {thread} thread's handle: kept for the process", False))
    return out


def leading_sum(shape: list, stride: list, dims: list) -> tuple[int, int] | None:
    """(rows, outputs) when a sum over ``dims`` of a tensor is ATen's sum over the leading dim of a contiguous
    ``[rows, outputs]`` (size-1 dims dropped, as TensorIterator coalesces them); None otherwise."""
    ndim = len(shape)
    dims = sorted(d % ndim for d in dims) if dims else list(range(ndim))
    kept = [i for i in range(ndim) if shape[i] != 1]
    expected = 1
    for i in reversed(range(ndim)):
        if shape[i] != 1 and stride[i] != expected:
            return None                         # not contiguous
        expected *= shape[i]
    reduced = [i for i in kept if i in dims]
    if not reduced or kept[:len(reduced)] != reduced:
        return None                             # not a leading-dim sum
    rows = outputs = 1
    for i in kept:
        if i in dims:
            rows *= shape[i]
        else:
            outputs *= shape[i]
    return rows, outputs


def reduce_scratch(ev: dict, sms: int, threads_per_sm: int) -> tuple[list[Extra], str | None]:
    """The staging of one recorded reduction (``aten_reduce``) on ``sms`` SMs of ``threads_per_sm`` resident threads,
    and a not-modelled line where no rule covers it.
    ``ev["leading"]``: (rows, outputs) of a leading-dim sum, as formulas (a symbolic call) or computed here."""
    dtype = {"bfloat16": "bf16", "float32": "fp32"}.get(ev["dtype"])
    leading = ev["leading"] if "leading" in ev else leading_sum(ev["shape"], ev["stride"], ev["dims"])
    one_output = leading is not None and not getattr(leading[1], "free_symbols", None) and int(leading[1]) < 2
    if leading is None or dtype is None or one_output or not ev["op"].startswith("aten.sum"):
        size = 1
        for d in ev["shape"]:
            size *= d
        big = size * (2 if ev["dtype"] == "bfloat16" else 4) >= NOT_MODELLED_FROM
        why = None if not big else (f"{ev['op']} over {ev['shape']} {ev['dtype']} at {ev['module'] or 'the model'}: "
                                    "ATen's reduce staging not modelled for this reduction")
        return [], why
    rows, outputs = leading
    element = aten_reduce.ELEMENT_BYTES[dtype]
    out = []
    if dtype == "bf16":
        acc = aten_reduce.reduce_accumulation(rows * outputs, outputs, element)
        out.append(Extra("reduce_accumulation", ev.get("out"), acc * 4, "fp32", aten_reduce.ACCUMULATION_SOURCE,
                         "bf16 in and out over 2**31 - 1 bytes of input: the sub-iterators accumulate in fp32", True))
    staging = aten_reduce.reduce_staging(rows, outputs, sms, threads_per_sm, element)
    semaphores = aten_reduce.reduce_semaphores(rows, outputs, sms, threads_per_sm, element)
    out.append(Extra("reduce_staging", ev.get("out"), staging * 4, "fp32", aten_reduce.STAGING_SOURCE,
                     f"global reduce of [rows, outputs] = [{rows}, {outputs}] over {sms} SMs of {threads_per_sm} threads; 0 bytes when one CTA per "
                     "output", True))
    out.append(Extra("reduce_semaphores", ev.get("out"), semaphores * 4, "int32", aten_reduce.SEMAPHORE_SOURCE,
                     "cudaMemsetAsync to 0 before the launch", True))
    return out, None


# ---------------------------------------------------------------------------------------------- failing configs

@dataclass(frozen=True)
class FailingConfigs:
    """An autotuned kernel some of whose configs cannot launch on sm90 from a key value up (OutOfResources): Triton's
    ``raise_`` leaves a reference cycle that keeps the kernel's tensor arguments alive until the next garbage collection
    (``buffers.Autotune.held_until_gc``), so the arguments the step drops die at the next benchmarking step's compile.
    ``key_index``: the key's element compared with ``from_value``; ``measured``: where that was measured (words)."""
    key_index: int
    from_value: int
    arch: str
    measured: str


# fla-core 0.6.0 ops/common/chunk_delta_h.py:366 key=['H', 'HV', 'K', 'V', 'BT', 'BV', 'USE_G', 'STATE_V_FIRST']: 2 of its
# 12 configs never load on the H200 at K = V = 128 (the cold kernel lists; the KDA layer's call, STATE_V_FIRST 1, in the
# cold first-call probes: lifetimes/fla_kda.py, lifetimes/fla_gdn.py)
FAILING = {"chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64": FailingConfigs(2, 128, "sm90", "K = V = 128")}


def held_args(kernel: str, key: list, arch: str, args: list, freed_here: list) -> tuple[list, object]:
    """(the launch's arguments the step drops that a failing config holds, where that was measured as a condition on the
    shape) for a kernel of ``FAILING``; ([], None) for any other."""
    rule = FAILING.get(kernel)
    if rule is None or arch != rule.arch or key is None or not isinstance(key[rule.key_index], int):
        return [], None
    if key[rule.key_index] < rule.from_value:
        return [], None
    held = [a for a in freed_here if a.id in set(args)]
    return held, equal_head_dims(key[rule.key_index])

"""ATen's CUDA sum over the leading dim of a contiguous ``[R, M]`` tensor (``x.sum(0)``, autograd's ``sum_to`` of a
bias gradient), as buffer records: when ``setReduceConfig`` splits each output's inputs over several CTAs
(``ctas_per_output > 1``), ``gpu_reduce_kernel`` allocates a staging buffer and semaphores through the caching
allocator, after the sum's output, and frees them when it returns (Reduce.cuh:1251-1256).

The configuration below is ``setReduceConfig`` (torch 2.11.0+cu130, ``ATen/native/cuda/Reduce.cuh`` as the wheel
ships it, lines 1033-1178) for that one iterator: ``reorder_dimensions`` puts the reduced dim first, so the
iterator is ``[R, M]`` with input strides ``[M * size, size]``; the reduction is not on the fastest-striding dim,
so ``block.x`` maps to outputs, vectorised along the output (``get_output_vec_size``: 4, halved until it divides M;
the input's base address is a multiple of the allocator's 512 bytes). The accumulator is fp32 for bf16 and fp32
inputs (``reduce_dispatch``: ``OpFunctor<at::BFloat16, float>``; ``sum_functor<float>``), so ``element_size_bytes``
is 4.

Device properties, both passed in from the device preset (estimator/data/devices.json): ``multiProcessorCount`` (the
SM count) and ``maxThreadsPerMultiProcessor`` (``threads_per_sm``), which ``setReduceConfig`` reads as
``at::cuda::getCurrentDeviceProperties()`` to size the target grid (``blocks_per_sm = max_threads_per_mp /
config.num_threads; target_grid_size = num_mp * blocks_per_sm``: Reduce.cuh:1158-1161 as torch 2.13.0 ships it): 2048
on compute capability 8.0, 9.0 and 10.0, 1536 on 8.9 and 12.0: an sm89 or sm120 card's target grid is three
quarters of an sm90 card's of as many SMs.

Above 32-bit indexing (``TensorIteratorBase::can_use_32bit_indexing``: the input's largest byte offset,
``(rows * outputs - 1) * element size``, over 2**31 - 1) ``gpu_reduce_kernel`` runs sub-iterators
(``with_32bit_indexing``: the dim of largest extent, here the rows, halved until each piece fits), one after
another, each configured, staged and freed in turn: the model declares the largest sub-iterator's staging, once
(the others are as large or one row smaller, freed before the next allocates). When the output cannot hold the
accumulation (bf16 in and out: ``can_accumulate_in_output`` false) the sub-iterators share an fp32
``AccumulationBuffer`` of the output's size (Reduce.cuh:1213-1222, 975-990), allocated before them.

Not modelled: ROCm's minimum of 64 CTAs; a sum to one value (``outputs`` 1: the iterator reduces along its fastest
dim, another branch of ``setReduceConfig``), whose staging the sizes below count as 0 bytes
(``ONE_OUTPUT_NOT_MODELLED``: a model that can sum to one value says so).
"""
from __future__ import annotations

from livebytes.estimator.buffers import Group
from livebytes.estimator.declare import Declaration, source_root, vectorised

torch_src = source_root("torch")
REDUCE = "include/ATen/native/cuda/Reduce.cuh"
MAX_NUM_THREADS = 512         # mnt_wrapper<scalar_t>::MAX_NUM_THREADS (Reduce.cuh:62), every scalar but complex<double>
WARP = 32
MIN_VALUES_PER_THREAD, MAX_VALUES_PER_THREAD = 16, 256     # Reduce.cuh:1131, 1133 (CUDA)

INT32_MAX = 2**31 - 1        # can_use_32bit_indexing's bound on a byte offset (and on numel)
ELEMENT_BYTES = {"bf16": 2, "fp32": 4}
STAGING_SOURCE = torch_src(REDUCE, "gpu_reduce_kernel", 1255, "buffer = allocator.allocate(config.global_memory_size());")
ACCUMULATION_SOURCE = torch_src(REDUCE, "AccumulationBuffer::AccumulationBuffer", 985, "buffer_ = allocator.allocate(size);")
SEMAPHORE_SOURCE = torch_src(REDUCE, "gpu_reduce_kernel", 1256, "semaphores = allocator.allocate(config.semaphore_size());")
ONE_OUTPUT_NOT_MODELLED = ("ATen's global-reduce staging of a sum to one value (an [R, 1] tensor's sum(0): setReduceConfig's "
                           "fastest-dim branch), counted as 0 bytes")


def _last_pow2(n: int) -> int:
    """``last_pow2`` (Reduce.cuh:31): floor(log2(n)) as a power of 2, at least 1."""
    return max(1, 1 << (n.bit_length() - 1)) if n > 0 else 1


def leading_sum_config(rows: int, outputs: int, sms: int, threads_per_sm: int) -> dict:
    """``setReduceConfig`` for the sum over dim 0 of a contiguous ``[rows, outputs]`` tensor on ``sms`` SMs of
    ``threads_per_sm`` resident threads each: block, grid, vector size and ``ctas_per_output`` (Reduce.cuh:1033-1178)."""
    if outputs < 2:
        raise ValueError("a sum to one value reduces along the fastest dim (Reduce.cuh:1066): not this configuration")
    vec = 4                                                      # get_output_vec_size (Reduce.cuh:1008, 1107)
    while outputs % vec:
        vec //= 2
    dim0, dim1 = outputs // vec, rows                            # Reduce.cuh:1073-1074, 1108
    mnt = MAX_NUM_THREADS // vec                                 # set_block_dimension (Reduce.cuh:100-108)
    dim0_pow2 = _last_pow2(dim0) if dim0 < mnt else mnt
    dim1_pow2 = _last_pow2(dim1) if dim1 < mnt else mnt
    width = min(dim0_pow2, WARP)
    height = min(dim1_pow2, mnt // width)
    width = min(dim0_pow2, mnt // height)
    step_input, step_output = 1, width                           # output_mult[0] = split_output(block_width)
    split_warps = -(-rows // step_input) >= min(height * 16, MAX_VALUES_PER_THREAD)
    if split_warps:                                              # input_mult[1] = split_input(block_height)
        step_input *= height
    else:
        step_output *= height
    values_per_thread = -(-rows // step_input)
    target_grid = sms * (threads_per_sm // (width * height))
    grid_x = -(-(outputs // vec) // step_output)
    ctas = 1
    if split_warps and values_per_thread >= MAX_VALUES_PER_THREAD and grid_x <= target_grid:
        ctas = max(min(-(-target_grid // grid_x), -(-values_per_thread // MIN_VALUES_PER_THREAD)),
                   -(-values_per_thread // MAX_VALUES_PER_THREAD))                      # Reduce.cuh:1169
    return {"vec": vec, "block": (width, height), "grid": (grid_x, ctas)}


def fits_32bit(elements: int, element_bytes: int) -> bool:
    """``can_use_32bit_indexing`` for one contiguous operand: numel and its largest byte offset within INT32_MAX."""
    return elements <= INT32_MAX and (elements - 1) * element_bytes <= INT32_MAX


def sub_iterator_rows(rows: int, outputs: int, element_bytes: int) -> int:
    """The largest sub-iterator's rows (``with_32bit_indexing``: halve the rows, the larger half ceil(r / 2), until
    its ``[r, outputs]`` input fits 32-bit indexing); ``rows`` when it fits already."""
    while rows > 1 and not fits_32bit(rows * outputs, element_bytes):
        rows -= rows // 2
    return rows


def accumulation_elements(in_elements: int, out_elements: int, element_bytes: int) -> int:
    """fp32 values of the ``AccumulationBuffer`` a bf16-to-bf16 sum allocates when its input needs sub-iterators
    (Reduce.cuh:1213-1222: ``!can_accumulate_in_output && !can_use_32bit_indexing``): the output's size, else 0."""
    return out_elements if element_bytes == 2 and not fits_32bit(in_elements, element_bytes) else 0


def staging_elements(rows: int, outputs: int, sms: int, threads_per_sm: int, element_bytes: int = 4) -> int:
    """``global_memory_size() / element_size_bytes`` (Reduce.cuh:193-201): outputs * ctas_per_output * block.x *
    output_vec_size fp32 values when the reduce is global, else 0; 0 for one output (``ONE_OUTPUT_NOT_MODELLED``)."""
    if outputs < 2:
        return 0
    cfg = leading_sum_config(sub_iterator_rows(rows, outputs, element_bytes), outputs, sms, threads_per_sm)
    (width, _), (_, ctas) = cfg["block"], cfg["grid"]
    return outputs * ctas * width * cfg["vec"] if ctas > 1 else 0


def semaphore_count(rows: int, outputs: int, sms: int, threads_per_sm: int, element_bytes: int = 4) -> int:
    """``semaphore_size() / sizeof(int)`` (Reduce.cuh:204-209): grid.x ints when the reduce is global, else 0; 0 for one
    output (``ONE_OUTPUT_NOT_MODELLED``)."""
    if outputs < 2:
        return 0
    cfg = leading_sum_config(sub_iterator_rows(rows, outputs, element_bytes), outputs, sms, threads_per_sm)
    grid_x, ctas = cfg["grid"]
    return grid_x if ctas > 1 else 0


# the sizes as sympy functions of their integer arguments: docgen shows them so
reduce_staging = vectorised("reduce_staging", staging_elements)
reduce_semaphores = vectorised("reduce_semaphores", semaphore_count)
reduce_accumulation = vectorised("reduce_accumulation", accumulation_elements)


def accumulation_scratch(d: Declaration, name: str, in_elements, out_elements, dtype: str) -> None:
    """The fp32 ``AccumulationBuffer`` of a sum whose input (``in_elements`` of ``dtype``) needs 32-bit
    sub-iterators and whose output cannot accumulate (bf16), at the current step after the sum's output; freed at the
    step. Zero bytes, no allocation, otherwise."""
    acc = reduce_accumulation(in_elements, out_elements, ELEMENT_BYTES[dtype])       # the output's numel, fp32
    d.buffer(f"{name}.reduce_accumulation", Group.WORKSPACE, (acc,), "fp32", ACCUMULATION_SOURCE, d.current,  # [out] fp32
             note="bf16 in and out over 2**31 - 1 bytes of input: the sub-iterators accumulate in fp32; else 0 bytes",
             scratch_of=name)


def leading_sum_scratch(d: Declaration, name: str, rows, outputs, sms: int, dtype: str, *, threads_per_sm: int) -> None:
    """The scratch of ``x.sum(0)`` over a ``[rows, outputs]`` ``dtype`` tensor on ``sms`` SMs of ``threads_per_sm``
    resident threads each (the device's) at the current step, after its output,
    freed at the step (``gpu_reduce_kernel`` returns): the accumulation buffer (``accumulation_scratch``), then the
    (largest sub-iterator's) staging buffer and semaphores. Zero bytes, no allocation, when one CTA per output. The
    accumulation buffer is declared for a bf16 sum only (a float one accumulates in its output)."""
    at = d.current
    if dtype == "bf16":          # an fp32 output accumulates in place (can_accumulate_in_output): no buffer
        accumulation_scratch(d, name, rows * outputs, outputs, dtype)
    size = ELEMENT_BYTES[dtype]
    staging = reduce_staging(rows, outputs, sms, threads_per_sm, size)    # outputs * ctas_per_output * block.x * vec, fp32
    d.buffer(f"{name}.reduce_staging", Group.WORKSPACE, (staging,), "fp32", STAGING_SOURCE, at,      # [staging] fp32
             note=f"global reduce over {sms} SMs of {threads_per_sm} threads; 0 bytes when ctas_per_output is 1", scratch_of=name)
    semaphores = reduce_semaphores(rows, outputs, sms, threads_per_sm, size)    # grid.x
    d.buffer(f"{name}.reduce_semaphores", Group.WORKSPACE, (semaphores,), "int32", SEMAPHORE_SOURCE, at,  # [grid.x] int32
             note="cudaMemsetAsync to 0 before the launch", scratch_of=name)

"""The target GPU, as a library's host code asks for it, on a machine that has none.

Install before the library is imported: fla evaluates ``IS_NVIDIA_HOPPER``, ``IS_TF32_SUPPORTED``, the device
name and backend at import (``fla/utils/hardware.py``), and asks Triton's active driver for shared memory and SM
counts later (``check_shared_mem``, ``get_multiprocessor_count``). Every answer comes from ``estimator.devices.Device``.

Tensors live on ``meta`` (the recorder's stand-in for the GPU): fla calls ``check_shared_mem(arch, t.device.index)``,
and a meta tensor's index is None where a GPU tensor's is 0, which would make the lookup fail and pick the small-smem
branch; device None reads as device 0 here (as ``validate/gpu/probes/cpu_frames.py`` does for CPU tensors).
"""
from __future__ import annotations


def device_properties(device) -> dict:
    """What Triton's ``driver.active.utils.get_device_properties`` returns (triton/backends/nvidia/driver.c) for
    ``device``; the clock rates and bus width only Triton's benchmarking helpers read (triton/testing.py), so 0."""
    return {"max_shared_mem": device.shared_memory_per_block_optin, "multiprocessor_count": device.sm_count,
            "max_num_regs": 65_536, "warpSize": 32, "sm_clock_rate": 0, "mem_clock_rate": 0, "mem_bus_width": 0}


def target_driver(device, torch_device: str = "meta", who: str = "livebytes.tracer"):
    """Triton's active driver for ``device`` (an ``estimator.devices.Device``) on a machine without it: its target
    (``GPUTarget("cuda", 90, 32)`` for sm90) and properties; tensors on ``torch_device`` (the tracer's meta, the CPU
    compile probe's cpu); it benchmarks and launches nothing (``who`` says whose refusal it is)."""
    import torch  # deferred: not in the core install (the core reads trace_facts here)
    from triton.backends.compiler import GPUTarget  # deferred: not in the core install (the core reads trace_facts here)
    from triton.backends.driver import DriverBase  # deferred: not in the core install (the core reads trace_facts here)

    major, minor = device.capability

    class Utils:
        @staticmethod
        def get_device_properties(index):
            return device_properties(device)

    class TargetDriver(DriverBase):
        """Triton's active driver for a GPU that is not there: it answers queries and refuses to run anything."""
        utils = Utils()

        @staticmethod
        def is_active():
            return True

        def get_current_target(self):
            return GPUTarget("cuda", major * 10 + minor, 32)

        def get_active_torch_device(self):
            return torch.device(torch_device)

        def get_current_device(self):
            return 0

        def set_current_device(self, index):
            pass

        def get_current_stream(self, index=None):
            return 0

        def get_device_interface(self):
            return torch.cuda

        def get_benchmarker(self):
            raise RuntimeError(f"{who}: nothing is benchmarked")

        def launcher_cls(self, src, metadata):
            raise RuntimeError(f"{who}: nothing is launched")

        def map_python_to_cpp_type(self, ty):
            from triton.backends.nvidia.driver import ty_to_cpp  # deferred: not in the core install (the core reads trace_facts here)
            return ty_to_cpp(ty)

    return TargetDriver()


def describe_torch_cuda(device) -> None:
    """``torch.cuda``'s device queries answer for ``device`` (``is_available`` stays False: nothing may run there)."""
    import torch  # deferred: not in the core install (the core reads trace_facts here)
    props = type("DeviceProperties", (), {
        "name": device.product_name, "major": device.capability[0], "minor": device.capability[1],
        "multi_processor_count": device.sm_count, "total_memory": device.capacity_bytes,
        "shared_memory_per_block": 49_152, "shared_memory_per_block_optin": device.shared_memory_per_block_optin})()
    torch.cuda.get_device_name = lambda index=None: props.name
    torch.cuda.get_device_capability = lambda index=None: (props.major, props.minor)
    torch.cuda.get_device_properties = lambda index=None: props
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0


def trace_facts(device) -> dict:
    """What a trace can depend on of ``device``: the facts ``install`` shows the library that a traced choice reads.
    Triton's target and ``torch.cuda``'s capability (fla's ``IS_NVIDIA_HOPPER``/``IS_NVIDIA_SM100``/``IS_TF32_SUPPORTED``
    at import, torch's SDPA backend: ``sdpa.Target``), the SM count (fla's ``get_multiprocessor_count``: split and grid
    sizes) and shared memory per block (fla's ``check_shared_mem``: block sizes); of the product name only fla's
    ``'NVIDIA H' in get_device_name(0)`` (hardware.py:101, its other reader, ops/utils/cache.py:88, runs only where
    ``torch.cuda.is_available()``, which stays False here); ``total_memory`` no traced code reads. Two GPUs with the
    same facts trace the same step, byte for byte (``tests/test_shared_traces.py``): the trace cache keys on these,
    not on the GPU's name (``lifetimes.traced.model``)."""
    return {"capability": list(device.capability), "sm_count": device.sm_count,
            "shared_memory_per_block_optin": device.shared_memory_per_block_optin,
            "named_hopper": "NVIDIA H" in device.product_name}


def install(device) -> None:
    """Triton's driver and ``torch.cuda`` describe ``device``; call before importing the library."""
    from triton.runtime import driver  # deferred: not in the core install (the core reads trace_facts here)
    driver.set_active(target_driver(device))
    describe_torch_cuda(device)


def meta_index_is_device_0() -> None:
    """fla's shared-memory lookup by a tensor's device index: None (a meta tensor's) reads as 0. After fla's import."""
    import fla.utils.hardware as hardware  # deferred: after fla's own import, which install must precede (module doc)

    class AnyIndex(list):
        def __getitem__(self, i):
            return list.__getitem__(self, 0 if i is None else i)
    every_device = hardware.get_all_max_shared_mem
    hardware.get_all_max_shared_mem = lambda: AnyIndex(every_device())
    hardware.check_shared_mem.cache_clear()


def meta_runs_gpu_packages() -> None:
    """A package transformers routes to by the inputs' device runs for meta inputs where it runs for CUDA ones: from
    5.25.0 (integrations/hub_kernels.py ``_PACKAGE_SUPPORTED_DEVICES``, read by ``use_kernel_func_from_hub_with_fallback``
    when a model's module is imported) fla's ``chunk_kda`` and ``chunk_gated_delta_rule`` run only for inputs on cuda,
    xpu, mlu or npu, else transformers' torch reference path (a loop over 64-token chunks: under the tracer, calls that
    differ in structure between shapes); a meta tensor is the tracer's stand-in for the GPU, so the GPU's path is
    traced. Before the model's modules are imported; nothing where the table is absent (5.17.0 to 5.24.0)."""
    try:
        from transformers.integrations import hub_kernels  # deferred: not in the core install (the core reads trace_facts here)
    except ImportError:
        return
    table = getattr(hub_kernels, "_PACKAGE_SUPPORTED_DEVICES", None)
    for package, devices in (table or {}).items():
        if "cuda" in devices and "meta" not in devices:
            table[package] = (*devices, "meta")


def meta_autocast_is_cuda() -> None:
    """``torch.autocast(device_type=t.device.type, ...)`` of a meta tensor is CUDA's autocast, as the GPU's tensor would
    ask for: peft's ``_LoraFactorsProxy`` (a LoRA of an experts' parameter) turns autocast off around its fold with
    ``torch.autocast(device_type=W.device.type, enabled=False)``, which torch refuses for ``meta`` (no autocast dtype)."""
    import torch  # deferred: not in the core install (the core reads trace_facts here)

    class autocast(torch.autocast):
        def __init__(self, device_type, *args, **kwargs):
            super().__init__("cuda" if device_type == "meta" else device_type, *args, **kwargs)
    autocast.__doc__ = torch.autocast.__doc__
    torch.autocast = autocast


def _as_meta(value):
    """A CUDA device (``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")``, index 0 where a device is expected) as meta."""
    import torch  # deferred: not in the core install (the core reads trace_facts here)
    if isinstance(value, str) and value.split(":")[0] == "cuda":
        return torch.device("meta")
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device("meta")
    return value


def cuda_is_meta():
    """A function mode under which a script's ``device="cuda"`` and ``.to("cuda")`` / ``.cuda()`` make meta tensors:
    the script's own code runs unchanged, its GPU tensors on the recorder's stand-in."""
    import torch  # deferred: not in the core install (the core reads trace_facts here)
    from torch.overrides import TorchFunctionMode  # deferred: not in the core install (the core reads trace_facts here)

    class CudaIsMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = {k: _as_meta(v) if k == "device" else v for k, v in (kwargs or {}).items()}
            if func in (torch.Tensor.to, torch.Tensor.cuda):
                if func is torch.Tensor.cuda:
                    return args[0].to("meta", **{k: v for k, v in kwargs.items() if k in ("non_blocking",)})
                args = tuple(_as_meta(a) for a in args)
            return func(*args, **kwargs)
    return CudaIsMeta()

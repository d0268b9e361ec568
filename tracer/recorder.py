"""Every allocation and free of a program run on meta tensors, in order, as the CUDA caching allocator would see it.

``Recorder`` is a ``TorchDispatchMode``: it sees each ATen operator after autograd and composite decomposition,
i.e. the operators a GPU runs. A meta output whose storage is new is an allocation of ``storage.nbytes()`` bytes (the
size ``malloc`` is asked for, before the allocator's rounding); a finalizer on the storage records its free when the
last tensor (or saved tensor, or view) referencing it dies, which CPython does at the same point of the program as on
a GPU. Views and in-place operators allocate nothing.

Each allocation carries: its operator, dtype and shape, its Python frames (library files only, innermost first,
relative to site-packages), the module path (forward hooks on every module; in the backward, the module whose forward
created the running autograd node, tagged on the nodes when the module returns), the phase the driver set
(``harness``, ``forward``, ``backward``, ``optimizer``, ``zero_grad``) and the thread a GPU process runs it on
(autograd's device thread for the backward, checkpoint's recompute included; the caller's otherwise).

Alongside, for the GPU rules: every GEMM (``mm``, ``addmm``, ``bmm``, ``baddbmm``; with a 1-D bias: cuBLASLt), every
sum-type reduction (input size, dims, dtypes), every Triton launch (``launches``), and operators whose CUDA kernels
allocate scratch of their own (``GPU_SCRATCH_OPS``), so a model can name what it does not model.
"""
from __future__ import annotations

import functools
import inspect
import linecache
import sys
import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from .grouped_mm import fallback_output, takes_fallback
from . import cuda_ops, sdpa
from .values import Mirrors, meta_like, mirrorable, tensors

# operators whose CUDA kernel allocates other than their meta kernel: attention's (sdpa.py) and the others (cuda_ops.py)
KERNELS = {**sdpa.KERNELS, **cuda_ops.KERNELS}

LIBRARY_DIRS = ("fla/", "transformers/", "peft/", "liger_kernel/", "torch/nn/", "torch/optim/", "torch/autograd/", "torch/utils/checkpoint.py",
                "torch/_tensor.py", "torch/functional.py")
SKIP = ("torch/utils/_python_dispatch.py", "torch/_ops.py", "livebytes/tracer/", "/tracer/recorder.py")
ENGINE_FILES = ("torch/autograd/", "torch/_dynamo/", "torch/_compile.py")    # the autograd engine's Python entry
GEMMS = ("aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default")
REDUCTIONS = ("aten.sum.dim_IntList", "aten.sum.default", "aten.mean.dim", "aten.mean.default", "aten.amax.default",
              "aten.sum.IntList_out")
# CUDA kernels that allocate through the caching allocator beyond their outputs (sort, scan and unique temporaries)
GPU_SCRATCH_OPS = ("aten.embedding_dense_backward.default", "aten.sort.default", "aten.sort.stable", "aten.topk.default",
                   "aten.cumsum.default", "aten.nonzero.default", "aten.unique_consecutive.default",
                   "aten._unique2.default", "aten.index_put_.default", "aten._index_put_impl_.default",
                   "aten.repeat_interleave.Tensor", "aten.scatter_add_.default", "aten.index_add_.default",
                   "aten._grouped_mm.default")


def site_packages_relative(path: str) -> str:
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


@functools.lru_cache(maxsize=None)
def _library_file(filename: str) -> str | None:
    """A code file as the trace names it (relative to site-packages), None when it is no library's or is ours."""
    name = filename.replace("\\", "/")
    if any(s in name for s in SKIP):
        return None
    rel = site_packages_relative(name)
    return rel if rel.startswith(LIBRARY_DIRS) else None


@functools.lru_cache(maxsize=None)
def _line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).strip()


def library_frames(limit: int = 10) -> tuple:
    """(file, line, function, the line's text) of the library frames on the stack, innermost first."""
    f = sys._getframe(2)
    out = []
    while f is not None and len(out) < limit:
        code = f.f_code
        rel = _library_file(code.co_filename)
        if rel is not None:
            out.append((rel, f.f_lineno, code.co_name, _line(code.co_filename, f.f_lineno)))
        f = f.f_back
    return tuple(out)


def code_line(fn, contains: str | None = None) -> tuple:
    """(file, line, function, the line's text) of ``fn``'s line holding ``contains`` (its ``def`` line when None), as
    ``library_frames`` names a frame: what a harness's allocations cite (parameters: torch's ``Module._apply``; the
    batch: the model's ``forward``, the entry point it is the input of)."""
    fn = inspect.unwrap(fn)
    lines, first = inspect.getsourcelines(fn)
    offset = next((i for i, text in enumerate(lines) if contains in text), 0) if contains else 0
    filename = inspect.getsourcefile(fn)
    return (site_packages_relative(filename.replace("\\", "/")), first + offset, fn.__name__, lines[offset].strip())


@dataclass
class State:
    phase: str = "harness"
    step: int = 0
    modules: list = field(default_factory=list)     # the module path stack (forward hooks)
    autocast: str | None = None                     # the operator an autocast cast is made for (``autocast``)


class Recorder:
    """Holds the events; ``mode()`` is the dispatch mode that fills them. One per trace."""

    def __init__(self):
        self.events: list[dict] = []
        self.frames: dict[tuple, int] = {}          # frame tuple -> index in ``frame_table``
        self.state = State()
        self.mirrors = Mirrors()
        self._ids: dict[int, int] = {}              # storage address -> allocation id (removed at its free)
        self._next = 0
        self.live_bytes = 0
        self.param_of: dict[int, str] = {}        # storage address -> the parameter it belongs to (optimizer phases)
        _sole_owner_counts()                        # measured before any mode of ours is on

    # ------------------------------------------------------------------ where an event happens
    def where(self) -> dict:
        node = torch._C._current_autograd_node()
        module = self.state.modules[-1] if self.state.modules else ""
        if node is not None:
            module = node.metadata.get("livebytes_module", module) if hasattr(node, "metadata") else module
        phase = "backward" if node is not None else self.state.phase      # a harness's step holds its backward
        thread = "backward" if phase == "backward" else "forward"
        return {"phase": phase, "step": self.state.step, "module": module, "thread": thread,
                "node": node.name() if node is not None else None}

    def _frames(self, key: tuple | None = None) -> int:
        key = library_frames() if key is None else key
        if key not in self.frames:
            self.frames[key] = len(self.frames)
        return self.frames[key]

    def mark(self, phase: str, step: int | None = None) -> None:
        self.state.phase = phase
        if step is not None:
            self.state.step = step
        self.events.append({"e": "mark", "phase": phase, "step": self.state.step})

    # ------------------------------------------------------------------ storages
    def track(self, t, op: str, frames: int | None = None, param: str | None = None) -> None:
        """An output tensor: an allocation if its storage is new; ``param``: the parameter it belongs to."""
        if not isinstance(t, torch.Tensor) or t.device.type != "meta":
            return
        st = t.untyped_storage()
        addr = id(st)               # a storage keeps its Python object while it lives (PyObject preservation)
        if addr in self._ids:
            return
        nbytes = st.nbytes()
        i = self._next
        self._next += 1
        self._ids[addr] = i
        self.live_bytes += nbytes
        where = self.where()
        if param is not None:
            self.param_of[addr] = param
            where["module"] = param.rsplit(".", 1)[0]
        self.events.append({"e": "alloc", "id": i, "bytes": nbytes, "dtype": str(t.dtype).removeprefix("torch."),
                            "shape": list(t.shape), "op": op, "frames": self._frames() if frames is None else frames,
                            "param": param, **where})
        weakref.finalize(st, self._free, addr, i, nbytes)

    def _free(self, addr: int, i: int, nbytes: int) -> None:
        if self._ids.get(addr) == i:
            del self._ids[addr]
            self.param_of.pop(addr, None)
        self.live_bytes -= nbytes
        self.events.append({"e": "free", "id": i, "phase": self.state.phase})

    def adopt(self, tensors, op: str, at: tuple, names: dict | None = None) -> None:
        """Tensors that exist before the traced program (parameters, inputs): allocations of the harness, in order,
        citing ``at`` (``code_line``: the library line that makes them); ``names``: id(tensor) -> parameter name, which
        the optimizer's allocations for it inherit."""
        frames = self._frames((at,))
        for t in tensors:
            self.track(t, op, frames, param=(names or {}).get(id(t)))

    def provenance(self, args, out) -> list:
        """The parameter each output belongs to, in the optimizer: an op over a list of tensors gives output j the
        parameter of input j (``torch._foreach_*``); another op gives its output its first tensor input's."""
        if self.state.phase not in ("optimizer", "zero_grad"):
            return []
        first = args[0] if args else None
        outs = out if isinstance(out, (list, tuple)) else [out]
        if isinstance(first, (list, tuple)):
            ins = list(first)
        else:
            tensor = next((a for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)), None)
            ins = [tensor] * len(outs)
        return [self.param_of.get(id(i.untyped_storage())) if isinstance(i, torch.Tensor) and i.device.type == "meta"
                else None for i in ins[:len(outs)]]

    # ------------------------------------------------------------------ operators the GPU rules need
    def _alloc_id(self, t) -> int | None:
        """The allocation a tensor's storage is (None: not a recorded storage)."""
        if not isinstance(t, torch.Tensor) or t.device.type != "meta":
            return None
        return self._ids.get(id(t.untyped_storage()))

    def note_op(self, func, args, kwargs, out) -> None:
        name = str(func)
        if name in GEMMS:
            bias = args[0] if name == "aten.addmm.default" else None
            self.events.append({"e": "gemm", "op": name, "lt": bool(bias is not None and bias.dim() == 1),
                                "out": self._alloc_id(out), "frames": self._frames(), **self.where()})
        elif name in REDUCTIONS:
            x = args[0]
            dims = args[1] if len(args) > 1 else kwargs.get("dim")
            res = out if isinstance(out, torch.Tensor) else None
            self.events.append({"e": "reduce", "op": name, "shape": list(x.shape), "stride": list(x.stride()),
                                "dtype": str(x.dtype).removeprefix("torch."), "dims": list(dims) if dims else [],
                                "out_dtype": str(res.dtype).removeprefix("torch.") if res is not None else None,
                                "out": self._alloc_id(res), "frames": self._frames(), **self.where()})
        elif name in GPU_SCRATCH_OPS:
            self.events.append({"e": "scratch_op", "op": name, "frames": self._frames(),
                                "out": self._alloc_id(out if isinstance(out, torch.Tensor) else None), **self.where()})

    def cuda_kernel(self, func, args, kwargs, kernel=None):
        """An operator whose CUDA kernel allocates other than its meta kernel (``KERNELS``: ``sdpa``'s and ``cuda_ops``'; ``kernel``: another
        (emulation, workspace) pair, ``grouped_mm``'s): its allocations as the CUDA function makes them, in order
        (temporaries freed as it returns), and a ``scratch_op`` event for a workspace of a size only the GPU knows."""
        emulate, workspace = kernel or KERNELS[str(func)]
        made, out = emulate(func, args, kwargs)
        frames, name = self._frames(), str(func)
        for t in made:
            self.track(t, name, frames)
        del made                                         # the temporaries die here, as when the C++ call returns
        if workspace:
            self.events.append({"e": "scratch_op", "op": name, "frames": frames, "out": None, "what": workspace,
                                **self.where()})
        return out

    def launch(self, launch) -> None:
        args = [i for i in (self._alloc_id(t) for t in launch.tensors) if i is not None]
        self.events.append({"e": "launch", "kernel": launch.kernel, "key": list(launch.key) if launch.key else None,
                            "configs": launch.configs, "clones": list(launch.clones), "args": args,
                            "frames": self._frames(), **self.where()})

    def frame_table(self) -> list:
        return [[list(f) for f in frames] for frames, _ in sorted(self.frames.items(), key=lambda kv: kv[1])]

    # ------------------------------------------------------------------ the mode
    def mode(self):
        recorder = self

        class RecordingMode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return recorder.dispatch(func, args, kwargs or {})
        return RecordingMode()

    def dispatch(self, func, args, kwargs):
        """Run ``func`` on meta tensors (and on their mirrors where all have one), record its new storages."""
        if func is torch.ops.aten.add.Tensor and accumulates_in_place(args, kwargs):
            func = torch.ops.aten.add_.Tensor            # the engine's ``old_var.add_(var)``: no new storage
        elif func is torch.ops.aten.index_put.default and index_backward_in_place(args, kwargs):
            func = torch.ops.aten.index_put_.default     # ``index_backward``'s ``zeros.index_put_``: no new storage
        if str(func) in KERNELS:
            return self.cuda_kernel(func, args, kwargs)
        if takes_fallback(func, args):                   # fp32 experts: _grouped_mm_cuda's fallback (grouped_mm.py)
            return self.cuda_kernel(func, args, kwargs, (fallback_output, ""))
        has_meta = self.mirrors.any_meta((args, kwargs))
        real_in = self.mirrors.to_real((args, kwargs)) if has_meta else None
        try:
            out, meta_ran = func(*args, **kwargs), True
        except Exception:
            if real_in is None:
                raise               # a value the trace does not know: the caller says which operator
            out, meta_ran = None, False
        real_out = None
        if real_in is not None:
            real_out = func(*real_in[0], **real_in[1])
        elif not has_meta and _meta_outputs_small(out):
            real_out = func(*_on_cpu(args), **_on_cpu(kwargs))        # a small factory: its real twin
        elif meta_ran and str(func) in CONSTANT_LIKE and _meta_outputs_small(out):
            real_out = func(_blank_twin(args[0]), *args[1:], **_on_cpu(kwargs))    # its values are its input's shape's
        if not meta_ran:
            if not isinstance(real_out, (torch.Tensor, tuple, list)) or _to_cpu(kwargs):
                return real_out     # .item(), .tolist(), .cpu(): a value on the host, as on a GPU
            out = tree_map(lambda r: meta_like(r) if isinstance(r, torch.Tensor) else r, real_out)
        flat_out = list(tensors(out)) if real_out is None else tree_flatten(out)[0]
        frames = self._frames()
        params = self.provenance(args, out)
        name = f"autocast.{self.state.autocast}" if self.state.autocast else str(func)
        for j, t in enumerate(flat_out):
            self.track(t, name, frames, params[j] if j < len(params) else None)
        if real_out is not None:
            for m, r in zip(flat_out, tree_flatten(real_out)[0]):
                if isinstance(m, torch.Tensor) and m.device.type == "meta" and isinstance(r, torch.Tensor):
                    self.mirrors.add(m, r)
        self.note_op(func, args, kwargs, out)
        return out


def accumulates_in_place(args, kwargs) -> bool:
    """autograd's ``InputBuffer`` adding a gradient to the one it holds for the same input
    (torch/csrc/autograd/input_buffer.cpp, ``accumulate``): ``old_var.add_(var)`` when ``can_accumulate_inplace(old_var)``
    (a plain, non-overlapping dense tensor whose last reference and storage the buffer holds) and grad mode is off, else
    ``old_var + var``. On a GPU the first holds; under this dispatch mode ATen's ``isTensorSubclassLike`` is true for every
    tensor, so the engine always takes the second: this undoes that. A gradient that is a view of a larger result (a
    Linear's input gradient, reshaped) shares its storage with its base and is added out of place, as on a GPU.
    Recognised as: ``add.Tensor`` of two tensors of one shape and dtype, no ``alpha``, called by the engine itself (no
    library Python frame between) in the backward. Not told apart: a C++ derivative formula making the same call."""
    if kwargs or len(args) != 2 or torch.is_grad_enabled() or torch._C._current_autograd_node() is None:
        return False
    old, new = args
    if not (isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor)) or old.device.type != "meta":
        return False
    if old.shape != new.shape or old.dtype != new.dtype or not _called_by_engine():
        return False
    uses, storage_uses = _sole_owner_counts()
    return (_non_overlapping_and_dense(old) and old._use_count() == uses
            and torch._C._storage_Use_Count(old.untyped_storage()._cdata) == storage_uses)


def index_backward_in_place(args, kwargs) -> bool:
    """autograd's gradient of ``x[indices]`` (torch/csrc/autograd/FunctionsManual.cpp ``index_backward``, derivatives.yaml
    ``index.Tensor``: ``grad.new_zeros(self.sizes())`` then ``index_put_(indices, grad, true)`` into it) puts in place
    unless a tensor is ``isTensorSubclassLike``, which under this dispatch mode every tensor is: the out-of-place
    ``index_put`` then allocates a second [self] buffer beside the zeros (one [tokens x top-k, hidden] bf16 more in each
    MoE block's backward, where transformers' grouped experts index ``weighted_out[inv_perm]``). On a GPU the
    result is the zeros buffer itself. Recognised as: ``index_put.default`` with ``accumulate`` true, called by the
    engine itself (no library Python frame between) in the backward. Not told apart: another C++ derivative formula
    calling ``index_put(..., accumulate=True)`` out of place. Not modelled: CUDA's sort path for an accumulating
    ``index_put_`` (aten/src/ATen/native/cuda/Indexing.cu ``index_put_with_sort_kernel``: the linear index, its sorted
    copy and the original positions, int64 [N] each, and cub's sort storage, freed within the operator)."""
    accumulate = kwargs.get("accumulate", args[3] if len(args) > 3 else False)
    if not accumulate or torch.is_grad_enabled() or torch._C._current_autograd_node() is None:
        return False
    zeros = args[0]
    return isinstance(zeros, torch.Tensor) and zeros.device.type == "meta" and _called_by_engine()


def _non_overlapping_and_dense(t) -> bool:
    """c10's ``compute_non_overlapping_and_dense``: the strides, in increasing order, are the running product of the
    sizes (dimensions of size one ignored)."""
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _called_by_engine() -> bool:
    """The operator's Python caller is the autograd engine's entry (``run_backward``), not a library's code."""
    frame = sys._getframe(1)
    while frame is not None and any(s in frame.f_code.co_filename.replace("\\", "/") for s in SKIP):
        frame = frame.f_back     # the dispatch machinery and ours
    return frame is not None and any(e in frame.f_code.co_filename.replace("\\", "/") for e in ENGINE_FILES)


@functools.lru_cache(maxsize=1)
def _sole_owner_counts() -> tuple[int, int]:
    """(tensor use count, storage use count) of a gradient the engine's buffer alone holds, as seen from inside a
    dispatch mode (the dispatcher's own references included): measured once on a two-use input, whose first gradient
    is a plain ``mm`` result."""
    seen = []

    class Probe(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.add.Tensor and not seen:
                seen.append((args[0]._use_count(), torch._C._storage_Use_Count(args[0].untyped_storage()._cdata)))
            return func(*args, **(kwargs or {}))
    x = torch.empty(2, 2, device="meta", requires_grad=True)
    w = torch.empty(2, 2, device="meta")
    with torch.enable_grad(), Probe():
        (x.mm(w) * x.mm(w)).sum().backward()
    return seen[0]


def _meta_outputs_small(out) -> bool:
    flat = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)] if out is not None else []
    return bool(flat) and all(t.device.type == "meta" and mirrorable(t) for t in flat)


# factories whose values do not depend on their input's (``loss.backward()``'s seed, torch/autograd/__init__.py
# _make_grads: ``torch.ones_like(out)``): a small one gets a real twin even when its input has none
CONSTANT_LIKE = frozenset({"aten.ones_like.default", "aten.zeros_like.default", "aten.full_like.default"})


def _blank_twin(t):
    """A CPU tensor of ``t``'s size and dtype (its values unread: a ``CONSTANT_LIKE`` factory's input)."""
    return torch.empty(t.shape, dtype=t.dtype)


def _on_cpu(tree):
    """A factory operator's arguments with ``device=meta`` turned into CPU (its real twin)."""

    def cpu(a):
        return torch.device("cpu") if isinstance(a, torch.device) and a.type == "meta" else a
    return tree_map(cpu, tree)


def _to_cpu(kwargs: dict) -> bool:
    """A copy to the host (``.cpu()``, ``.to("cpu")``): its result is a real CPU tensor."""
    device = kwargs.get("device")
    return device is not None and getattr(device, "type", device) == "cpu"

"""CUDA autocast (``torch.autocast("cuda", dtype=torch.bfloat16)``) for a program run on meta tensors.

torch's autocast does not act on meta tensors: a tensor reaches the ``AutocastCUDA`` dispatch key only when its
backend is CUDA (c10/core/DispatchKeySet.h ``getAutocastRelatedKeySetFromBackend``: no autocast key for ``MetaBit``),
and its casts touch only ``is_cuda()`` tensors (ATen/autocast_mode.h ``is_autocast_eligible``); torch 2.11 and 2.13
alike. (A FakeTensor on a fake CUDA device does reach torch's own kernels, but autograd then asks for a CUDA device
guard, which a CPU build aborts on.) So the tracer puts kernels of its own at the same dispatch key:

- where: ``AutocastCUDA``, above Autograd, as torch's: a cast is an operator autograd records (``ToCopyBackward0``:
  the backward's fp32 gradient of a bf16 copy) and the lower-precision operator saves its bf16 inputs. While tracing,
  the key is in the thread's *included* set, so meta tensors reach it; the dispatcher drops it while it is also
  *excluded*, which is exactly when ``torch.autocast("cuda")`` is off (``set_autocast_enabled`` removes it from the
  excluded set: ATen/autocast_mode.cpp ``set_autocast_enabled``). So torch's own ``torch.autocast`` — its nesting, the
  state ``custom_fwd``/``custom_bwd`` save and restore, checkpointing's recompute region — switches these kernels.
- which operators: those the installed torch registers at ``AutocastCUDA``
  (``torch._C._dispatch_get_registrations_for_dispatch_key``), each with its policy from ``POLICIES`` (torch 2.13
  ATen/autocast_mode.h:820-957, the lists ATen/autocast_mode.cpp:181 registers for CUDA; torch 2.11's header also
  lists the Dimname overloads below and not ``rms_norm``). An operator registered there without a policy here refuses
  the trace when the model calls it (``AutocastUnknown``): a torch whose lists grew is not traced with a guess.
- the policies: ``WrapFunction_`` of ATen/autocast_mode.h (lower_precision_fp, fp32, fp32_set_opt_dtype,
  fp32_append_dtype, promote), with ``cached_cast`` and ``is_eligible`` (a floating, non-double tensor on the device:
  meta here stands for CUDA).
- the weight cache: ``cached_cast`` (ATen/autocast_mode.cpp) keeps the bf16 copy of an fp32 leaf that requires grad
  (a parameter; not a view) from its first cast until ``torch.clear_autocast_cache()``, which ``torch.autocast``
  calls when the outermost region exits: ``WeightCache``, cleared by the same call.

The casts' allocations are named ``autocast.<operator>`` in the trace, the weight cache's ``autocast.<operator>.cached``
(``Recorder``: ``State.autocast``).
Not emulated: autocast's other devices (CPU autocast stays torch's own and off), fp16 (the dtype is whatever
``torch.autocast`` sets; the H200 step uses bf16).
"""
from __future__ import annotations

import contextlib
import warnings
import weakref

import torch
import torch.cuda.amp.common as common
import torch.utils.checkpoint as checkpoint

LOWER_PRECISION_FP = (
    "_convolution.deprecated", "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d.input", "conv_transpose3d.input", "convolution", "prelu", "addmm", "addmv", "addr", "matmul",
    "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
    "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "_scaled_dot_product_flash_attention", "scaled_dot_product_attention",
    "cudnn_convolution", "cudnn_convolution_transpose")          # the last two: autocast_mode.cpp, CUDA only
FP32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt", "sinh",
    "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus", "layer_norm", "native_layer_norm",
    "rms_norm", "group_norm", "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim", "cosine_similarity",
    "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss",
    "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss",
    "triplet_margin_loss", "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm",
    "logsumexp", "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d", "_upsample_nearest_exact2d",
    "upsample_nearest3d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "_upsample_bilinear2d_aa", "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa")
FP32_SET_OPT_DTYPE = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum", "sum.dim_IntList",
    "prod.dim_Dimname", "softmax.Dimname", "log_softmax.Dimname", "cumprod.dimname", "cumsum.dimname",
    "sum.dim_DimnameList")                                        # the last six: torch 2.11's header, not 2.13's
FP32_APPEND_DTYPE = {                                             # the overload it redispatches to, dtype appended
    "norm.Scalar": "norm.ScalarOpt_dtype", "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype",
    "norm.names_ScalarOpt_dim": "norm.names_ScalarOpt_dim_dtype"}  # the last: torch 2.11's
PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler", "index_put", "tensordot",
           "scatter_add")
BANNED = ("binary_cross_entropy",)                               # autocast_mode.cpp binary_cross_entropy_banned

POLICIES = {**{n: "lower_precision_fp" for n in LOWER_PRECISION_FP}, **{n: "fp32" for n in FP32},
            **{n: "fp32_set_opt_dtype" for n in FP32_SET_OPT_DTYPE},
            **{n: "fp32_append_dtype" for n in FP32_APPEND_DTYPE}, **{n: "promote" for n in PROMOTE},
            **{n: "banned" for n in BANNED}}
KEY = "AutocastCUDA"


class AutocastUnknown(RuntimeError):
    """The installed torch autocasts an operator this emulation has no policy for."""


def registered_ops() -> list[str]:
    """The operators the installed torch registers at ``AutocastCUDA``, as ``name`` or ``name.overload`` (aten's) or
    ``namespace::name[.overload]`` (another library's: torchvision registers its detection ops there when installed)."""
    return sorted(n.removeprefix("aten::") for n in torch._C._dispatch_get_registrations_for_dispatch_key(KEY))


def policies() -> dict[str, str]:
    """Operator -> policy, for what the installed torch autocasts on CUDA; ``unknown`` where this emulation has none
    (e.g. torch 2.11's ``_cudnn_rnn`` from cudnn/AutoCastRNN.cpp, torchvision's ops): such an operator refuses the trace
    when the model calls it (``AutocastUnknown``), not before: a model that never calls it is traced."""
    return {n: POLICIES.get(n, "unknown") for n in registered_ops()}


# ---------------------------------------------------------------------------------------------- cached_cast

def is_eligible(t) -> bool:
    """``is_eligible``: a floating tensor on the device (meta standing for CUDA), not double."""
    return (isinstance(t, torch.Tensor) and t.device.type == "meta" and t.is_floating_point()
            and t.dtype is not torch.float64)


class WeightCache:
    """``cached_cast``'s cache: the lower-precision copy of an fp32 leaf requiring grad, keyed by the source tensor,
    held until ``clear``. torch keys on the TensorImpl and keeps it from being reused (a weak reference): an entry whose
    source died is held as well, until ``clear``."""

    def __init__(self):
        self.entries: dict[int, tuple] = {}
        self.orphans: list = []

    def get(self, arg, cast):
        hit = self.entries.get(id(arg))
        if hit is not None and hit[0]() is arg:
            return hit[1]
        if hit is not None:
            self.orphans.append(hit)
        out = cast(arg)
        self.entries[id(arg)] = (weakref.ref(arg), out)
        return out

    def clear(self) -> None:
        self.entries.clear()
        self.orphans.clear()


class Autocast:
    """The kernels and their cache; ``state``: the recorder's state, told what a cast is for: ``<operator>``, or
    ``<operator>.cached`` for the weight cache's copy."""

    def __init__(self, state=None):
        self.cache = WeightCache()
        self.state = state
        self.operator = ""            # the autocast operator whose arguments are being cast

    def cached_cast(self, to_type, arg):
        """``cached_cast`` (ATen/autocast_mode.cpp): tensors, lists of tensors; anything else unchanged."""
        if isinstance(arg, (list, tuple)) and any(isinstance(a, torch.Tensor) for a in arg):
            return type(arg)(self.cached_cast(to_type, a) for a in arg)
        if not is_eligible(arg) or arg.dtype == to_type:
            return arg
        if (to_type == torch.get_autocast_dtype("cuda") and arg.dtype == torch.float32 and arg.requires_grad
                and arg.is_leaf and not arg._is_view() and torch.is_autocast_cache_enabled()):
            return self.cache.get(arg, lambda t: self._cast(t, to_type, f"{self.operator}.cached"))
        return self._cast(arg, to_type, self.operator)

    def _cast(self, arg, to_type, what: str):
        """``arg.to(to_type)``, the recorder told what it is for."""
        if self.state is None:
            return torch.ops.aten.to.dtype(arg, to_type)
        before, self.state.autocast = self.state.autocast, what
        try:
            return torch.ops.aten.to.dtype(arg, to_type)
        finally:
            self.state.autocast = before

    def kernel(self, name: str, policy: str):
        """The ``WrapFunction_`` of ``policy`` for operator ``name``: autocast excluded below it, as torch's."""
        op = _overload(name)
        target = _overload(FP32_APPEND_DTYPE[name]) if policy == "fp32_append_dtype" else op
        short = name.split(".")[0]

        def run(*args, **kwargs):
            if policy == "unknown":
                raise AutocastUnknown(f"the model calls {name}, which torch autocasts on CUDA and the tracer's "
                                      "autocast does not know")
            if policy == "banned":
                raise RuntimeError(f"torch.nn.functional.{short} and torch.nn.BCELoss are unsafe to autocast")
            if policy == "fp32_append_dtype":           # the registered signature's defaults, passed on explicitly
                args = positional(op, args, kwargs)
                kwargs = {}
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCUDA)):
                self.operator = short
                args, kwargs = self.apply(policy, args, kwargs, op)
                return target(*args, **kwargs)
        return run

    def apply(self, policy: str, args: tuple, kwargs: dict, op) -> tuple[tuple, dict]:
        """The arguments ``policy`` passes on (casts made through ``cached_cast``)."""
        if policy in ("lower_precision_fp", "fp32", "promote"):
            to_type = {"lower_precision_fp": torch.get_autocast_dtype("cuda"), "fp32": torch.float32}.get(policy)
            if to_type is None:
                to_type = promote_type(torch.get_autocast_dtype("cuda"), list(args) + list(kwargs.values()))
            return (tuple(self.cached_cast(to_type, a) for a in args),
                    {k: self.cached_cast(to_type, v) for k, v in kwargs.items()})
        if policy == "fp32_set_opt_dtype":
            return set_opt_dtype(op, args, kwargs)
        return append_dtype(args, kwargs)


def promote_type(lower, args: list):
    """``promote_type``/``prioritize``: fp32 if any eligible tensor is fp32, else the lower precision (doubles
    ignored)."""
    current = lower
    for a in args:
        for t in (a if isinstance(a, (list, tuple)) else [a]):
            if not is_eligible(t):
                continue
            if current == torch.float32 or t.dtype == torch.float32:
                current = torch.float32
            elif not (current == lower and t.dtype == lower):
                raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return current


def set_opt_dtype(op, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``fp32_set_opt_dtype``: an eligible first argument gets ``dtype=float32`` unless a dtype was given (the
    argument is positional or keyword-only, as ``op``'s schema has it)."""
    at = next(i for i, a in enumerate(op._schema.arguments) if a.name == "dtype")
    given = args[at] if at < len(args) else kwargs.get("dtype")
    if not is_eligible(args[0]) or given is not None:
        return args, kwargs
    if at < len(args):
        return args[:at] + (torch.float32,) + args[at + 1:], kwargs
    return args, {**kwargs, "dtype": torch.float32}


def append_dtype(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``fp32_append_dtype``: the dtype-taking overload with float32 (the first argument's dtype when ineligible)."""
    return args, {**kwargs, "dtype": torch.float32 if is_eligible(args[0]) else args[0].dtype}


def positional(op, args: tuple, kwargs: dict) -> tuple:
    """Every argument of ``op`` positionally, defaults filled from its schema."""
    out = list(args)
    for a in op._schema.arguments[len(args):]:
        out.append(kwargs[a.name] if a.name in kwargs else a.default_value)
    return tuple(out)


def _overload(name: str):
    namespace, _, qualified = name.rpartition("::")
    base, _, overload = qualified.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace or "aten"), base), overload or "default")


@contextlib.contextmanager
def emulated(state=None):
    """While active, ``torch.autocast("cuda", ...)`` acts on meta tensors as on CUDA ones (module doc); ``state``: the
    recorder's, whose ``autocast`` names the operator a cast is for."""

    amp = Autocast(state)
    libs: dict = {}
    clear = torch.clear_autocast_cache

    def clear_both():
        clear()
        amp.cache.clear()
    undo = _cuda_is_there()
    torch.clear_autocast_cache = clear_both
    try:
        with warnings.catch_warnings():             # inside the try: a failed registration undoes those made
            warnings.simplefilter("ignore")          # "Overriding a previously registered kernel": torch's CUDA one
            for name, policy in policies().items():
                namespace, _, qualified = name.rpartition("::")
                if (namespace or "aten") not in libs:
                    libs[namespace or "aten"] = torch.library.Library(namespace or "aten", "IMPL")
                libs[namespace or "aten"].impl(qualified, amp.kernel(name, policy), KEY)
        with torch._C._IncludeDispatchKeyGuard(torch._C.DispatchKey.AutocastCUDA):
            yield amp
    finally:
        torch.clear_autocast_cache = clear
        amp.cache.clear()
        undo()
        for lib in libs.values():
            lib._destroy()


def _cuda_is_there():
    """What ``torch.autocast("cuda")`` and checkpointing ask of CUDA, answered as on the GPU; returns the undo.

    - ``torch.autocast.__init__`` (torch/amp/autocast_mode.py) disables itself when
      ``torch.cuda.amp.common.amp_definitely_not_available()`` and refuses bf16 unless ``torch.cuda.is_bf16_supported()``
      (true from compute capability 8.0, below every device of ``estimator.devices``);
    - ``torch.utils.checkpoint``'s non-reentrant recompute runs under the autocast state of the forward on the device
      ``_infer_device_type`` finds in its arguments: "cuda" on the GPU, "meta" here, for which autocast is not available
      and the recompute would run without it (other dtypes than the forward's)."""
    saved = (common.amp_definitely_not_available, torch.cuda.is_bf16_supported, checkpoint._infer_device_type)
    infer = saved[2]

    def infer_cuda(*args):
        found = infer(*args)
        return "cuda" if found == "meta" else found
    common.amp_definitely_not_available = lambda: False
    torch.cuda.is_bf16_supported = lambda including_emulation=True: True    # every target GPU is sm90 or sm100
    checkpoint._infer_device_type = infer_cuda

    def undo():
        common.amp_definitely_not_available, torch.cuda.is_bf16_supported, checkpoint._infer_device_type = saved
    return undo

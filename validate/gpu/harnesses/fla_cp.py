"""FLA's context parallelism (``fla.ops.cp``) for ``chunk_kda`` and ``chunk_gated_delta_rule``: one process per GPU
(``torchrun``), NCCL, each rank measuring its own step (``validate/gpu/cp_runner.py`` drives it).

The shape is the TOTAL sequence over the W ranks (MBS 1). Each rank builds only its own slice of every input,
seeded per rank, in the single-GPU harness's recipe at the local tokens (S/W: contiguous, or zigzag's two parts of
S/(2W)), then the caller's global boundaries ``[0, S]`` (int64) and ``build_cp_context(cu_seqlens, group, layout)``,
which allocates the local boundaries (int32) on the device. Every step's status is agreed over a gloo (CPU) group
after it, so a rank that runs out of memory after the step's last collective stops its peers at the same shape
instead of leaving them in a collective (``PeerOutOfMemory``); an out-of-memory before a collective leaves the
peers waiting until NCCL's timeout (``cp_runner``'s ``--timeout``).

torch and fla are imported inside the methods: importing this module (and listing harnesses) needs neither.
"""
from __future__ import annotations

from livebytes.estimator.shapes import Shape

from ..inputs import build_inputs, input_specs
from .base import Harness, harness
from .fla_gdn import gdn_cpu_inputs, to_device
from .fla_kda import fla_forward

VERSIONS = ("0.6.0",)
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0"}    # NVLink multicast off in every rank (the machine's setting, kept)


class PeerOutOfMemory(RuntimeError):
    """Another rank ran out of memory in this step; this rank stops at the same shape (no record of its own)."""


class CpGroup:
    """The ranks: NCCL for FLA's collectives, gloo (CPU tensors, no device memory) for the step status."""

    def __init__(self, layout: str) -> None:
        import torch.distributed as dist  # deferred: torch is not in the core install (model/validate extras)
        self.layout = layout
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.nccl = dist.group.WORLD
        self.gloo = dist.new_group(backend="gloo")

    @property
    def position(self) -> str:
        """The model's ``cp_rank``: first (rank 0), last (rank W-1) or middle."""
        return "first" if self.rank == 0 else ("last" if self.rank == self.world - 1 else "middle")

    def local_shape(self, shape: Shape) -> Shape:
        parts = self.world * (2 if self.layout == "zigzag" else 1)
        if shape.mbs != 1 or shape.seq % parts:
            raise ValueError(f"CP needs batch_size 1 and a sequence divisible by {parts}, got {shape.label()}")
        return Shape(1, shape.seq // self.world, shape.heads, shape.dim, shape.v_heads, shape.dim_v)

    def agree(self, failed: bool) -> int:
        """How many ranks failed this step (a gloo all-reduce of CPU integers)."""
        import torch  # deferred: torch is not in the core install (model/validate extras)
        import torch.distributed as dist  # deferred: torch is not in the core install (model/validate extras)
        flag = torch.tensor([int(failed)], dtype=torch.int64)
        dist.all_reduce(flag, group=self.gloo)
        return int(flag.item())

    def context(self, cu_seqlens_global):
        from fla.ops.cp import build_cp_context  # deferred: fla is not in the core install (model/validate extras)
        return build_cp_context(cu_seqlens_global, group=self.nccl, cu_seqlens_cpu=cu_seqlens_global.cpu(), layout=self.layout)


class CpHarness(Harness):
    """The CP step: the single-GPU call with ``cp_context`` (and no ``cu_seqlens`` of its own), status agreed after."""

    package, triton = "fla", True
    group: CpGroup | None = None         # set by cp_runner once the process group is up

    def step(self, x: dict):
        torch = __import__("torch")
        err = None
        try:
            o = super().step(x)
        except torch.cuda.OutOfMemoryError as e:
            err, o = e, None
        failed = self.group.agree(err is not None)
        if err is not None:
            raise err
        if failed:
            raise PeerOutOfMemory(f"{failed} other rank(s) ran out of memory in this step")
        return o


def _boundaries(shape: Shape):
    import torch  # deferred: torch is not in the core install (model/validate extras)
    return torch.tensor([0, shape.seq], dtype=torch.int64, device="cuda")       # [2] int64: the global [0, S]


@harness(*(f"fla-kda-cp@{v}" for v in VERSIONS))
class FlaKdaCp(CpHarness):
    takes_contract = True

    def inputs(self, shape: Shape) -> dict:
        local = self.group.local_shape(shape)
        specs = [s for s in input_specs(local, self.contract, not self.forward_only, batch_dim=True, cu_dtype="int64")
                 if s.name != "cu_seqlens"]
        before = [s for s in specs if s.name != "dO"]
        x = build_inputs(before, "cuda", local.seq, seed=self.group.rank)
        x["cu_seqlens_global"] = _boundaries(shape)
        x["cp_context"] = self.group.context(x["cu_seqlens_global"])
        x.update(build_inputs([s for s in specs if s.name == "dO"], "cuda", local.seq, seed=1000 + self.group.rank))
        return x

    def forward(self, x: dict):
        return fla_forward({**x, "cu_seqlens": None}, self.contract, self.recompute, cp_context=x["cp_context"])


@harness(*(f"fla-gdn-cp@{v}" for v in VERSIONS))
class FlaGdnCp(CpHarness):
    def inputs(self, shape: Shape) -> dict:
        local = self.group.local_shape(shape)
        cpu = gdn_cpu_inputs(local, not self.forward_only, seed=self.group.rank)
        dO = cpu.pop("dO", None)
        cpu.pop("cu_seqlens")
        x = to_device(cpu, not self.forward_only)
        x["cu_seqlens_global"] = _boundaries(shape)
        x["cp_context"] = self.group.context(x["cu_seqlens_global"])
        if dO is not None:
            x["dO"] = dO.to("cuda")
        return x

    def forward(self, x: dict):
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule  # deferred: fla is not in the core install (model/validate extras)
        o, _ = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], x["beta"], use_qk_l2norm_in_kernel=True,
                                      cp_context=x["cp_context"])
        return o

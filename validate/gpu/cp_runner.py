"""Protocol-v4 records of one context-parallel rank per process: ``torchrun --nproc-per-node W`` starts one per GPU.

Each rank runs the runner's protocol (``runner.measure_shape``: the 1,024-token warmup, the target-shape warmup,
``empty_cache``, the median of 3 steady steps) on its own GPU, in lockstep with the others (every step has the same
collectives on every rank), and writes its own record under ``OUT/rank<r>/``: the runner's record plus ``cp``
(world size, rank, layout, the NCCL settings) and the model's options ``cp``, ``cp_layout``, ``cp_rank``. NVLink
multicast stays off: ``NCCL_NVLS_ENABLE=0`` is set in every rank before NCCL starts (and the launcher's
environment keeps it). Each rank takes its own GPU lock (``LIVEBYTES_GPU_LOCK`` per local rank): the ranks measure
at the same time, on different GPUs. World size 1 runs the same code path (FLA's CP with one rank).

Usage (the plan's commands: validate/data/plans/h200x2_cp.sh):
    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node 2 -m livebytes.validate.gpu.cp_runner \\
        --impl fla-kda-cp@0.6.0 --cp-layout contiguous --shapes "1,64K,16,128;1,128K,32,128" --out runs/cp
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

from .harnesses.fla_cp import NVLS_OFF
from .environment import apply_alloc_conf
from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.shapes import parse_shape_list
from . import runner
from .harnesses import decline_reason, make
from .harnesses.fla_cp import CpGroup, CpHarness, PeerOutOfMemory
from ..check.records import write_record
from .triton_state import prepare_triton

LAYOUTS = ("contiguous", "zigzag")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="torchrun ... -m livebytes.validate.gpu.cp_runner", description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True, help="fla-kda-cp@0.6.0 or fla-gdn-cp@0.6.0")
    ap.add_argument("--cp-layout", default="contiguous", choices=LAYOUTS)
    ap.add_argument("--shapes", required=True, help='total shapes "seq_len=SEQ,num_heads=HEADS[,head_dim=DIM]'
                    '[,num_v_heads=HV];..." (batch_size 1; the old "1,SEQ,HEADS[,DIM][,hv=HV]" too)')
    ap.add_argument("--out", required=True)
    ap.add_argument("--contract", default="report", choices=("report", "plain"))
    ap.add_argument("--no-recompute", action="store_true")
    ap.add_argument("--triton-cache", default="cold", choices=("cold", "warm", "auto"))
    ap.add_argument("--alloc-conf", default="expandable_segments:False")
    ap.add_argument("--timeout", type=int, default=300, help="seconds a collective waits for a peer before NCCL aborts")
    return ap.parse_args(argv)


def rank_environment(local_rank: int) -> dict:
    """What each rank sets before torch and NCCL start: NVLink multicast off, its own GPU lock."""
    return {**NVLS_OFF, "LIVEBYTES_GPU_LOCK": f"/tmp/livebytes-gpu{local_rank}.lock"}


def cp_fields(record: dict, world: int, rank: int, layout: str, position: str, nccl_memory: dict | None = None) -> dict:
    """The runner's record as one CP rank's: the options the CP model takes, where the rank stood, and the device
    memory outside PyTorch before and after NCCL's communicator started (``nccl_memory``)."""
    options = dict(record.get("options", {}), cp=world, cp_layout=layout, cp_rank=position)
    return dict(record, options=options, cp={"world_size": world, "rank": rank, "layout": layout,
                                             "nonpytorch_bytes": dict(nccl_memory or {}),
                                             "nccl": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_PROTO")}})


def _start(args, local_rank: int):
    os.environ.update(rank_environment(local_rank))
    apply_alloc_conf(args.alloc_conf)
    import torch  # deferred: torch is not in the core install (model/validate extras)
    import torch.distributed as dist  # deferred: torch is not in the core install (model/validate extras)
    torch.cuda.set_device(local_rank)
    torch.cuda.init()
    before = _used_outside_pytorch(torch)                 # the CUDA context alone
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank),
                            timeout=datetime.timedelta(seconds=args.timeout))
    torch.cuda.synchronize()
    return torch, dist, {"context_only_bytes": before, "after_nccl_init_bytes": _used_outside_pytorch(torch)}


def _used_outside_pytorch(torch) -> int:
    """Device memory in use outside PyTorch's allocator (mem_get_info's used minus memory_reserved): where NCCL's
    communicator buffers show; NCCL may connect channels lazily, at the first collective (the records'
    device_memory.nonpytorch_after_bytes is after every collective of the shape)."""
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


def main(argv=None) -> int:
    args = parse_args(argv)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch, dist, nccl_memory = _start(args, local_rank)

    group = CpGroup(args.cp_layout)
    out = Path(args.out) / f"rank{group.rank}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        reason = decline_reason(args.impl)
        if reason:
            print(f"rank {group.rank}: {args.impl}: declined: {reason}", file=sys.stderr)
            return 3
        h = make(args.impl, args.contract, not args.no_recompute, False)
        if not isinstance(h, CpHarness):
            raise LivebytesError(f"{args.impl} is not a context-parallel model (fla-kda-cp, fla-gdn-cp)")
        h.group = group
        tc = prepare_triton(args.triton_cache, out, None)
        ctx = runner.RunContext(mode="shared-process", alloc_conf=args.alloc_conf, triton_cache=tc.requested,
                                triton_dir=tc.triton_dir, installed=tc.installed)
        torch._C._cuda_attach_out_of_memory_observer(ctx.observer)
        env = runner.environment()
        for shape in parse_shape_list(args.shapes):
            try:
                rec = runner.measure_shape(h, shape, env, ctx)
            except PeerOutOfMemory as err:
                print(json.dumps({"rank": group.rank, "shape": shape.record_dict(), "stopped": str(err)}), flush=True)
                ctx.earlier_shapes.append(shape.record_dict())
                continue
            path = write_record(out, cp_fields(rec, group.world, group.rank, args.cp_layout, group.position, nccl_memory))
            ctx.earlier_shapes.append(shape.record_dict())
            status = f"OOM at {rec['oom_step']}" if rec["oom"] else f"{rec['peak_bytes']} B"
            print(f"[{args.impl} rank {group.rank}/{group.world} {args.cp_layout}] {shape.label()}: {status} -> {path}", flush=True)
        return 0
    except LivebytesError as err:
        print(f"error: rank {group.rank}: {err}", file=sys.stderr)
        return 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

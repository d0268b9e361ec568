"""Whole-model step records (``validate/gpu/probes/model_step.py`` on a GPU) re-checked on the CPU: every figure a record
holds that the traced model predicts, each to the byte unless a named miss says by how much and why.

The probe's process: the model built on the CPU in bf16, moved to the GPU, the batch and the optimizer made, then
three training steps with the peak statistics reset before each (``model-step-v1``). The replay is that process:
the harness's parameters and batch, then three runs of the traced call (the first is the process's first step: in a
cold Triton cache it benchmarks every autotuned kernel, ``capacity.cold_benchmarks``). Checked per step: allocated
and reserved peaks, and for the steady steps the requested peak (the tensors' own bytes, before the allocator's
rounding); the process memory outside PyTorch; and, for a step that ran out of memory, that the verdict runs out at
that step, for the same request.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
import hashlib

from livebytes.estimator.errors import LivebytesError
from livebytes.estimator.fields import read_bytes, read_json, show

from .figures import FigureCheck, at_least, figure, named_miss, within
from livebytes.estimator.registry import shape_options, get_compiled
from livebytes.estimator.shapes import Shape
from livebytes.estimator.devices import get_device, preset_of
from livebytes.estimator.capacity import cold_benchmarks, verdict
from livebytes.estimator.replay import replay, requested_peak
from livebytes.estimator.placement import placements
from livebytes.estimator.process.memory import process_memory

MODEL_RECORDS_DIR = Path(__file__).parents[1] / "data" / "records" / "models"
# traces made under the torch a record ran (``validate.check.store_traces``), for a machine with another one: the autograd
# engine's order of frees differs between torch versions where a step's gradients change dtype (fp32-amp)
TRACE_STORE = MODEL_RECORDS_DIR / "traces"
TRACER_DIGEST = "tracer_digest"     # a stored trace's field: ``traced.model.tracer_digest()`` where it was made (``store_traces``)
KIND = "model-step"
MAX_RECORD_BYTES = 1 << 20

# (record file, field) -> (predicted - measured, why): the misses a record is known to have (``steps[*]``: each step's
# figure misses by that much, ``figures.named_miss``). A named miss passes only
# at exactly its size: a record edited anywhere still fails. Requested peaks of these steps are exact: the tensors are
# the traced ones (autograd's in-place accumulation included, ``tracer.recorder.accumulates_in_place``).
PLACEMENT = ("cudaMalloc's placement of segments: this configuration's GPU allocator trace (run 25h), replayed through "
             "the allocator model with the GPU's segment addresses, gives every block and the reserved peak to the byte; "
             "with the model's placement (each new segment below the last) ties between equal-sized cached blocks go to "
             "other segments and the peak misses by exactly this (tests/test_allocator_traces.py); the reserved "
             "figures lie inside the band of every committed placement (BAND), the allocated ones are the model "
             "placement's; the driver's placement varies between runs of one configuration (runs 23 and 25h: "
             "allocated 1 MiB apart)")
PLACEMENT_UNTRACED = ("cudaMalloc's placement of segments, as PLACEMENT shows for the KDA 1.3B and k2 configurations; "
                      "this one has no allocator trace (requested peak exact)")
PLACEMENT_A3 = ("cudaMalloc's placement of segments: run 30's allocator trace of this configuration (its figures equal to "
                "this record's), replayed with the GPU's segment addresses, gives every block and 1,173,954,560 B "
                "still allocated at its end; with the model's placement the same requests leave 1,172,905,984, this "
                "miss (a cached block too little larger than a request to be split serves it whole, and which block "
                "that is depends on where the segments lie; tests/test_allocator_traces.py)")
PLACEMENT_AND_ORDER = ("cudaMalloc's placement, and the order of the traced requests: run 30's allocator trace of this "
                       "configuration (figures equal to this record's) replays with the GPU's segment addresses to every "
                       "block and the GPU's reserved and allocated peaks; with the model's placement the GPU's own "
                       "requests reserve 415,236,096 B less at the end (a2) or peak 524,288 B lower (a3), not this "
                       "miss: the rest is where the traced request stream's order differs from the GPU's (the cold "
                       "autotuner's 256 MiB L2-flush buffers, allocated and freed around each benchmark on the GPU, are "
                       "one of the differences), not yet found")
PLACEMENT_K1 = ("cudaMalloc's placement, and the order of the traced requests: run 31's allocator trace of this record "
                "replays with the GPU's segment addresses to every block, its allocated peak 7,269,427,200 and "
                "1,108,045,824 B at its end; with the model's placement the GPU's own requests give 7,266,281,472 and "
                "1,105,948,672 (3 MiB and 2 MiB lower); the traced request stream's order against the GPU's moves "
                "another 524,288 B the other way (tests/test_allocator_traces.py), not yet found")
LIKE_K1 = ("as run 31's k1 (the same KDA layer shapes, hidden 1024 H8 D128 at 8K tokens, and the same -1,572,864 / "
           "-2,621,440 B): cudaMalloc's placement and the traced request order (PLACEMENT_K1, proved there by its "
           "allocator trace); this control ran without a trace of its own")
PLACEMENT_P41 = ("cudaMalloc's placement, and the order of the traced requests: run 41's allocator trace of this record "
                 "replays with the GPU's segment addresses to every block, its allocated peak 64,701,693,952 and "
                 "8,041,545,728 B at its end; with the model's placement the GPU's own requests give 64,701,169,664 and "
                 "8,041,021,440; the rest is the traced request stream's order against the GPU's, not yet found. What "
                 "moves: four of AdamW's 4,718,592-B states (a [2304, 1024] bf16 weight's) land in cached blocks of "
                 "5,767,168 and 5,316,608 B, served whole (a large block is split only when more than 1 MiB remains: "
                 "CUDACachingAllocator.cpp should_split); requested peaks exact")
FSDP_NCCL = ("NCCL's memory outside PyTorch's allocator (the communicator, its channels and proxy buffers, at world size "
             "1): 73,400,320 B above the control c1's process (4,439,670,784 B, the same kernels, run beside it); not "
             "modelled, as every --fsdp answer says")
FEWER_MODULES_K1C = ("the kernel modules this process loaded: 2,097,152 B fewer than run 31's k1 at the same case (the same "
                     "context before the step, the same 14,256-B stack limit, every allocator figure exact); the model "
                     "takes the case's largest measured process (validate/check/frames.py _largest_modules), which bounds "
                     "this one; which kernel k1 launched and k1c did not is not found (CUDA loads modules lazily, and "
                     "transformers turns use_cache off under checkpointing, the run's log says)")
FEWER_MODULES_B = ("the kernel modules this process loaded: 2,097,152 B fewer than run 40's at the same case (Kimi-Linear "
                   "H32 D192, the same config and optimizer, the same context and 14,256-B stack limit, every allocator "
                   "figure exact; run 40 ran two rows of 8K without checkpointing); the model takes the case's largest "
                   "measured process (validate/check/frames.py _largest_modules), which bounds this one; which kernel run "
                   "40 launched and this one did not is not found (CUDA loads modules lazily; cuBLAS picks its GEMM "
                   "kernels by shape)")
FSDP_WRAP = ("fully_shard at wrap time (_fsdp_param.py:390: each block's parameters live beside their new shards until "
             "the call returns, and its copies ran on the default and copy-in streams): the figures before the first "
             "step; not modelled, as every --fsdp answer says")
FSDP_RS_POOL = ("the reduce-scatter stream's own pool: run 32's allocator history holds 3 segments on that stream "
                "(27,262,976 x 2 and 132,120,576 = 186,646,528 B) serving each step's reduce-scatter inputs (26,788,112 "
                "B per block, 131,074,048 for the root's embeddings and head), which default-stream requests cannot "
                "reuse (CUDACachingAllocator.cpp: a cached block serves only its own stream); the default stream's "
                "requests replayed alone reserve 2,074,083,328 B, 25,165,824 above this prediction: the traced request "
                "stream against the GPU's, not yet found. Per-stream pools are not modelled (every --fsdp answer says)")
BAND = ("the reserved band: the step replayed under every placement of its segments the driver was seen to give "
        "(estimator/placement.py: the model's own and each committed allocator trace's order, estimator/data/placements.json)")
BELOW_BAND_G4 = ("below the reserved band's low end (BAND): no committed trace's order places this GDN configuration's "
                 "segments as its GPU did (the record has no allocator trace; the lowest of its placements, runs 24 "
                 "and 25h's 1.3B KDA orders, reserves 2 MiB more in the first step and 22 MiB more in the steady ones, "
                 "the model's own 22 MiB and 272 MiB more); requested peak exact")
FSDP_ALLOC = ("FSDP2's buffers at world size 1, not yet found: within 1 MiB of every allocated figure (+1,048,576 B in "
              "the first step, -623,616 / +949,248 in the steady ones, +424,960 after each step: not 512-B multiples of "
              "one buffer), where the control c1 misses by placement alone")
FSDP_RS_POOL_S42 = ("the reduce-scatter stream's own pool, as run 32's (FSDP_RS_POOL): run 42 s's allocator snapshot holds 5 "
                    "segments on that stream, 2,661,285,888 B (each block's full-fine-tune gradients reduce-scattered "
                    "every step), which default-stream requests cannot reuse (CUDACachingAllocator.cpp: a cached block "
                    "serves only its own stream); its 145 default-stream segments hold 42,844,815,360 B, 96,468,992 above "
                    "the band's high end: the traced request stream against the GPU's, not yet found. Per-stream pools "
                    "are not modelled (every --fsdp answer says)")
REQUEST_ORDER_M43 = ("the CUDA kernels' own transient requests, which the trace lacks, not cudaMalloc's placement: run 43 m's "
                     "allocator snapshot replays with the GPU's segment addresses to every block and to its reserved peak "
                     "30,503,075,840 B; the traced step under that very snapshot's placement reserves 30,469,521,408 B "
                     "(one 256 MiB segment where the GPU cut 160 and 128 MiB). The snapshot's 4,965 requests hold 605 the "
                     "trace's 4,360 do not make, among them, in every MoE block, torch.sort's cub storage "
                     "(1,333,759-1,346,047 B) and int64 [81,920] copies (655,360 B), the grouped GEMMs' workspaces (960 "
                     "and 67,584 B), 1,048,576-B blocks, and the cold autotune's repeated 256 MiB flushes; allocated and "
                     "requested peaks exact. Not modelled: CUDA kernels' transient workspaces in the MoE path")
TRANSIENTS_P44 = ("the CUDA kernels' own transient requests, which the trace lacks (REQUEST_ORDER_M43), not placement: run 44 "
                  "p's allocator snapshot gives the measured reserved and allocated peaks under the GPU's addresses and "
                  "under the model's placement alike; the traced step under the snapshot's placement reserves "
                  "57,883,492,352 B (two 128 MiB and one 320 MiB segment where the GPU had cut two of 258 MiB): one "
                  "request before each GDN convolution output (268,484,608 B), the GPU-only 256 MiB contiguous copy of "
                  "the convolution's input takes the range the trace gives that output, which then cuts a segment "
                  "(validate/data/records/runs/run44/transients); requested peaks exact")
TRANSIENTS_R44 = ("the CUDA kernels' own transient requests, which the trace lacks (TRANSIENTS_P44): run 44 r's allocator "
                  "snapshot holds every traced request and 158 more a steady step, the same sizes as run 44 p's (16,384 "
                  "tokens either way: sort and index_put_ storage, grouped-GEMM workspaces, the cuDNN SDPA backward's "
                  "537,919,744 B, GDN's 256 MiB convolution-input copies; validate/data/records/runs/run44/transients); "
                  "every placement gives the same reserved peak (a band of one value), so not placement; requested "
                  "peaks and the process exact")
PLACEMENT_R46 = ("cudaMalloc's placement: run 46's allocator history of this record replays with the GPU's segment "
                 "addresses to its allocated peak and end exactly (validate/check/allocator_traces.py replay_trace); the "
                 "GPU's own requests under the model's placement give 524,288 B more at both, the miss (b's second "
                 "steady step peaks 1,048,576 B above: the replay reads the trace's peak, not each step's); requested "
                 "peaks and reserved exact")
ORDER_A46 = ("cudaMalloc's placement (1,048,576 B at the peak, 524,288 at the end: run 46 a's allocator history replays "
             "with the GPU's segment addresses to the measured 2,238,338,048 and 778,313,728 B, with the model's "
             "placement to 1,048,576 and 524,288 B more) and the order of the traced requests against the GPU's (the "
             "other 4,194,304 B at the peak, 4,718,592 at the end, not yet found); requested peaks exact since the "
             "tracer makes log_sigmoid_forward's "
             "buffer as CUDA does (tracer/cuda_ops.py: 33,554,432 B above before)")
FIRST_AFTER_A46 = ("not yet found: after the first (cold) step the GPU held 328,204,288 B more than after each steady step "
                   "(1,106,518,016 against 778,313,728), where the model holds the same 783,556,608 B after every step; "
                   "every peak of that step is exact or named; run 46 b and c (the same protocol and hidden size, c "
                   "the same loss path as a) show no such residue, so likely GLA's first call (fla/ops/gla), not the "
                   "protocol; the history's recorded blocks fall to the same 770,449,408 B between the first and "
                   "second steps as between the second and third, so where the residue lives is not found")
OOM_FREE = ("not explained yet: at the failing request the device had 9,240,576 B less free than the model's capacity "
            "minus reserved minus the process figure; the record holds no process reading at that step. The same bytes "
            "in all three 1.3B out-of-memory records (runs 24, 25, 27: 468,519, 467,552 and 467,491 tokens): total - "
            "reserved - free at the failure is the process's reading after the first step plus 9,240,576 B, so the "
            "process grows by that much outside PyTorch early in its first steady step, whatever the length")
NAMED_MISSES: dict[tuple[str, str], tuple[int, str]] = {
    # run 26, held out (predictions committed before the run, validate/data/records/models/predictions/run26/): no trace
    ("h200_run26_ho1-v64k.json", "steps[1].max_allocated_bytes"): (2_097_152, PLACEMENT_UNTRACED),
    ("h200_run26_ho1-v64k.json", "steps[2].max_allocated_bytes"): (2_097_152, PLACEMENT_UNTRACED),
    ("h200_run26_ho3-ckpt-mbs4.json", "steps[1].max_allocated_bytes"): (524_288, PLACEMENT_UNTRACED),
    ("h200_run26_ho3-ckpt-mbs4.json", "steps[2].max_allocated_bytes"): (524_288, PLACEMENT_UNTRACED),
    ("h200_run26_ho3-ckpt-mbs4.json", "steps[*].allocated_after_bytes"): (524_288, PLACEMENT_UNTRACED),
    ("h200_run23_k1-packed.json", "steps[1].max_allocated_bytes"): (-2_621_440, PLACEMENT_UNTRACED),
    ("h200_run23_k1-packed.json", "steps[2].max_allocated_bytes"): (-2_621_440, PLACEMENT_UNTRACED),
    ("h200_run23_k2-ckpt.json", "steps[1].max_allocated_bytes"): (2_097_152, PLACEMENT),
    ("h200_run23_k2-ckpt.json", "steps[2].max_allocated_bytes"): (2_097_152, PLACEMENT),
    ("h200_run23_k4-1.3b.json", "steps[0].max_allocated_bytes"): (1_048_576, PLACEMENT),
    ("h200_run23_k4-1.3b.json", "steps[1].max_allocated_bytes"): (2_097_152, PLACEMENT),
    ("h200_run23_k4-1.3b.json", "steps[2].max_allocated_bytes"): (2_097_152, PLACEMENT),
    ("h200_run25h_k2-ckpt.json", "steps[1].max_allocated_bytes"): (2_097_152, PLACEMENT),
    ("h200_run25h_k2-ckpt.json", "steps[2].max_allocated_bytes"): (2_097_152, PLACEMENT),
    ("h200_run25h_k4-1.3b.json", "steps[0].max_allocated_bytes"): (2_097_152, PLACEMENT),
    ("h200_run25h_k4-1.3b.json", "steps[1].max_allocated_bytes"): (1_048_576, PLACEMENT),
    ("h200_run25h_k4-1.3b.json", "steps[2].max_allocated_bytes"): (1_048_576, PLACEMENT),
    ("h200_run25_g1-packed.json", "steps[1].max_allocated_bytes"): (2_097_152, PLACEMENT_UNTRACED),
    ("h200_run25_g1-packed.json", "steps[2].max_allocated_bytes"): (2_097_152, PLACEMENT_UNTRACED),
    ("h200_run25_g4-1.3b.json", "steps[0].max_allocated_bytes"): (-1_048_576, PLACEMENT_UNTRACED),
    ("h200_run25_g4-1.3b.json", "steps[0].max_reserved_bytes"): (2_097_152, BELOW_BAND_G4),
    ("h200_run25_g4-1.3b.json", "steps[1].max_allocated_bytes"): (-1_048_576, PLACEMENT_UNTRACED),
    ("h200_run25_g4-1.3b.json", "steps[1].max_reserved_bytes"): (23_068_672, BELOW_BAND_G4),
    ("h200_run25_g4-1.3b.json", "steps[2].max_allocated_bytes"): (-1_048_576, PLACEMENT_UNTRACED),
    ("h200_run25_g4-1.3b.json", "steps[2].max_reserved_bytes"): (23_068_672, BELOW_BAND_G4),
    # what stays allocated and reserved after each step: the reserved peak's miss (nothing is released after the peak),
    # and the allocated blocks' sizes, which depend on which cached block each request takes
    ("h200_run23_k1-packed.json", "steps[*].allocated_after_bytes"): (-1_572_864, PLACEMENT_UNTRACED),
    ("h200_run23_k4-1.3b.json", "steps[*].allocated_after_bytes"): (1_048_576, PLACEMENT),
    ("h200_run25h_k4-1.3b.json", "steps[*].allocated_after_bytes"): (1_048_576, PLACEMENT),
    # run 28, fp32-amp (predictions committed before the run, predictions/run28/), checked against the traces stored
    # for the records' torch 2.11 (``stored_for``; a1 is exact through them); run 30 traced a2 and a3's allocators
    # (validate/data/records/models/snapshots/h200_run30_*)
    ("h200_run28_a3-gdn-8k.json", "steps[*].allocated_after_bytes"): (-1_048_576, PLACEMENT_A3),
    ("h200_run28_a3-gdn-8k.json", "steps[1].max_allocated_bytes"): (524_288, PLACEMENT_AND_ORDER),
    ("h200_run25_g4-1.3b.json", "steps[*].allocated_after_bytes"): (-1_048_576, PLACEMENT_UNTRACED),
    ("h200_run25_g4-1.3b.json", "steps[0].reserved_after_bytes"): (2_097_152, BELOW_BAND_G4),
    ("h200_run25_g4-1.3b.json", "steps[1].reserved_after_bytes"): (23_068_672, BELOW_BAND_G4),
    ("h200_run25_g4-1.3b.json", "steps[2].reserved_after_bytes"): (23_068_672, BELOW_BAND_G4),
    # run 31 (predictions committed before the run, predictions/run31/): transformers 5.17's Kimi-Linear and
    # Qwen3-Next, checked against the traces stored for torch 2.11; k2, q1 and q2 are exact in every figure
    ("h200_run31_k1-l4-8k.json", "steps[*].allocated_after_bytes"): (-1_572_864, PLACEMENT_K1),
    ("h200_run31_k1-l4-8k.json", "steps[1].max_allocated_bytes"): (-2_621_440, PLACEMENT_K1),
    ("h200_run31_k1-l4-8k.json", "steps[2].max_allocated_bytes"): (-2_621_440, PLACEMENT_K1),
    # run 32 (predictions committed before the run, predictions/run32/): FSDP2 at world size 1 (f1) and its control
    # without FSDP (c1), side by side, checked against the traces stored for torch 2.11
    ("h200_run32_c1-kda-8k.json", "steps[*].allocated_after_bytes"): (-1_572_864, LIKE_K1),
    ("h200_run32_c1-kda-8k.json", "steps[1].max_allocated_bytes"): (-2_621_440, LIKE_K1),
    ("h200_run32_c1-kda-8k.json", "steps[2].max_allocated_bytes"): (-2_621_440, LIKE_K1),
    ("h200_run32_f1-kda-8k-fsdp1.json", "steps[*].nonpytorch.bytes"): (-73_400_320, FSDP_NCCL),
    ("h200_run32_f1-kda-8k-fsdp1.json", "before.allocated_bytes"): (1_048_576, FSDP_WRAP),
    ("h200_run32_f1-kda-8k-fsdp1.json", "before.reserved_bytes"): (-155_189_248, FSDP_WRAP),
    # above the reserved band's high end: every placement reserves the same here (BAND; the default stream's pool)
    ("h200_run32_f1-kda-8k-fsdp1.json", "steps[*].max_reserved_bytes"): (-211_812_352, FSDP_RS_POOL),
    ("h200_run32_f1-kda-8k-fsdp1.json", "steps[*].reserved_after_bytes"): (-211_812_352, FSDP_RS_POOL),
    ("h200_run32_f1-kda-8k-fsdp1.json", "steps[0].max_allocated_bytes"): (1_048_576, FSDP_ALLOC),
    ("h200_run32_f1-kda-8k-fsdp1.json", "steps[1].max_allocated_bytes"): (-623_616, FSDP_ALLOC),
    ("h200_run32_f1-kda-8k-fsdp1.json", "steps[2].max_allocated_bytes"): (949_248, FSDP_ALLOC),
    ("h200_run32_f1-kda-8k-fsdp1.json", "steps[*].allocated_after_bytes"): (424_960, FSDP_ALLOC),
    # run 34 (predictions committed before the run, predictions/run34/): the hybrids with --checkpoint; q1c exact in
    # every figure, k1c in every allocator figure
    ("h200_run34_k1c-l4-8k.json", "steps[*].nonpytorch.bytes"): (2_097_152, FEWER_MODULES_K1C),
    # run 39 (predictions committed before the run, predictions/run39/): b to the byte against the data before run 40
    ("h200_run39_b-kimi-32k.json", "steps[*].nonpytorch.bytes"): (2_097_152, FEWER_MODULES_B),
    # run 41 (predictions committed before the run, predictions/run41/): l (LoRA) and g (Liger) exact in every figure
    # (g since the tracer puts index_backward in place: recorder.index_backward_in_place); p in every reserved and process
    # figure
    ("h100_run41_p-kimi-8k-x2-packed.json", "steps[1].max_allocated_bytes"): (-2_695_168, PLACEMENT_P41),
    ("h100_run41_p-kimi-8k-x2-packed.json", "steps[2].max_allocated_bytes"): (-2_695_168, PLACEMENT_P41),
    ("h100_run41_p-kimi-8k-x2-packed.json", "steps[*].allocated_after_bytes"): (-2_695_168, PLACEMENT_P41),
    # run 42 (predictions committed before the run, predictions/run42/): FSDP2 at world size 1 on kimi-linear-small, f
    # with LoRA r16 (every requested peak exact, reserved in its band), s the full fine-tune
    ("h100_run42_f-kimi-8k-lora16-fsdp1.json", "steps[*].nonpytorch.bytes"): (-73_400_320, FSDP_NCCL),
    ("h100_run42_f-kimi-8k-lora16-fsdp1.json", "before.allocated_bytes"): (491_520, FSDP_WRAP),
    ("h100_run42_f-kimi-8k-lora16-fsdp1.json", "before.reserved_bytes"): (-1_952_448_512, FSDP_WRAP),
    ("h100_run42_f-kimi-8k-lora16-fsdp1.json", "steps[0].max_allocated_bytes"): (491_520, FSDP_ALLOC),
    ("h100_run42_f-kimi-8k-lora16-fsdp1.json", "steps[1].max_allocated_bytes"): (-557_056, FSDP_ALLOC),
    ("h100_run42_f-kimi-8k-lora16-fsdp1.json", "steps[2].max_allocated_bytes"): (-557_056, FSDP_ALLOC),
    ("h100_run42_f-kimi-8k-lora16-fsdp1.json", "steps[*].allocated_after_bytes"): (491_520, FSDP_ALLOC),
    ("h100_run42_s-kimi-8k-fsdp1.json", "steps[*].nonpytorch.bytes"): (-73_400_320, FSDP_NCCL),
    ("h100_run42_s-kimi-8k-fsdp1.json", "before.allocated_bytes"): (491_520, FSDP_WRAP),
    ("h100_run42_s-kimi-8k-fsdp1.json", "before.reserved_bytes"): (-1_948_254_208, FSDP_WRAP),
    ("h100_run42_s-kimi-8k-fsdp1.json", "steps[*].max_reserved_bytes"): (-2_757_754_880, FSDP_RS_POOL_S42),
    ("h100_run42_s-kimi-8k-fsdp1.json", "steps[*].reserved_after_bytes"): (-2_757_754_880, FSDP_RS_POOL_S42),
    ("h100_run42_s-kimi-8k-fsdp1.json", "steps[0].max_allocated_bytes"): (1_015_808, FSDP_ALLOC),
    ("h100_run42_s-kimi-8k-fsdp1.json", "steps[1].max_allocated_bytes"): (-117_248, FSDP_ALLOC),
    ("h100_run42_s-kimi-8k-fsdp1.json", "steps[2].max_allocated_bytes"): (-117_248, FSDP_ALLOC),
    ("h100_run42_s-kimi-8k-fsdp1.json", "steps[*].allocated_after_bytes"): (-1_560_576, FSDP_ALLOC),
    # run 43 (predictions committed before the run, predictions/run43/): Qwen3-Next, m LoRA r16 at 8K (every allocated,
    # requested and process figure exact), q Liger's loss at 32K with checkpointing (every figure exact)
    ("h200_run43_m-q3n-8k-lora16.json", "steps[*].max_reserved_bytes"): (-33_554_432, REQUEST_ORDER_M43),
    ("h200_run43_m-q3n-8k-lora16.json", "steps[*].reserved_after_bytes"): (-33_554_432, REQUEST_ORDER_M43),
    # run 44 (predictions committed before the run, predictions/run44/): Qwen3-Next, p two 8K sequences packed into one
    # row (an H100): requested peaks exact; its process (21,456-B limit) is in the process data since 31366b1, where the
    # prediction had estimated it 104,857,600 B low from the unpacked step's limit (run44/README.md)
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[0].max_allocated_bytes"): (311_296, TRANSIENTS_P44),
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[1].max_allocated_bytes"): (49_152, TRANSIENTS_P44),
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[2].max_allocated_bytes"): (49_152, TRANSIENTS_P44),
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[0].max_reserved_bytes"): (60_817_408, TRANSIENTS_P44),
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[0].reserved_after_bytes"): (60_817_408, TRANSIENTS_P44),
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[1].max_reserved_bytes"): (62_914_560, TRANSIENTS_P44),
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[1].reserved_after_bytes"): (62_914_560, TRANSIENTS_P44),
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[2].max_reserved_bytes"): (62_914_560, TRANSIENTS_P44),
    ("h100_run44_p-q3n-8k-x2-packed.json", "steps[2].reserved_after_bytes"): (62_914_560, TRANSIENTS_P44),
    ("h100_run44_r-q3n-8k-mbs2.json", "steps[0].max_allocated_bytes"): (-688_128, TRANSIENTS_R44),
    ("h100_run44_r-q3n-8k-mbs2.json", "steps[1].max_allocated_bytes"): (1_048_576, TRANSIENTS_R44),
    ("h100_run44_r-q3n-8k-mbs2.json", "steps[2].max_allocated_bytes"): (1_048_576, TRANSIENTS_R44),
    ("h100_run44_r-q3n-8k-mbs2.json", "steps[*].allocated_after_bytes"): (524_288, TRANSIENTS_R44),
    ("h100_run44_r-q3n-8k-mbs2.json", "steps[*].max_reserved_bytes"): (-2_097_152, TRANSIENTS_R44),
    ("h100_run44_r-q3n-8k-mbs2.json", "steps[*].reserved_after_bytes"): (-2_097_152, TRANSIENTS_R44),
    # run 46 (predictions committed before the run, predictions/run46/): a FLA's GLA, b the KDA model at D64, c FLA's
    # DeltaNet, each 1 x 8,192 cold on an H100: every requested, reserved and process figure exact
    ("h100_run46_a-gla-8k.json", "steps[0].allocated_after_bytes"): (-322_961_408, FIRST_AFTER_A46),
    ("h100_run46_a-gla-8k.json", "steps[1].max_allocated_bytes"): (5_242_880, ORDER_A46),
    ("h100_run46_a-gla-8k.json", "steps[2].max_allocated_bytes"): (5_242_880, ORDER_A46),
    ("h100_run46_a-gla-8k.json", "steps[1].allocated_after_bytes"): (5_242_880, ORDER_A46),
    ("h100_run46_a-gla-8k.json", "steps[2].allocated_after_bytes"): (5_242_880, ORDER_A46),
    ("h100_run46_b-kda-d64-8k.json", "steps[1].max_allocated_bytes"): (524_288, PLACEMENT_R46),
    ("h100_run46_b-kda-d64-8k.json", "steps[2].max_allocated_bytes"): (1_048_576, PLACEMENT_R46),
    ("h100_run46_b-kda-d64-8k.json", "steps[*].allocated_after_bytes"): (524_288, PLACEMENT_R46),
    ("h100_run46_c-deltanet-8k.json", "steps[1].max_allocated_bytes"): (524_288, PLACEMENT_R46),
    ("h100_run46_c-deltanet-8k.json", "steps[2].max_allocated_bytes"): (524_288, PLACEMENT_R46),
    ("h100_run46_c-deltanet-8k.json", "steps[*].allocated_after_bytes"): (524_288, PLACEMENT_R46),
    ("h200_run24_edge-1.3b-468519.json", "steps[1].free_bytes"): (9_240_576, OOM_FREE),
    ("h200_run25_edge-1.3b-467552.json", "steps[1].free_bytes"): (9_240_576, OOM_FREE),
    ("h200_run27_edge-1.3b-467491.json", "steps[1].free_bytes"): (9_240_576, OOM_FREE),
}


def read(path: Path) -> dict:
    """One model-step record; every problem one line."""
    data = read_json(path, MAX_RECORD_BYTES)
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise LivebytesError(f"{show(str(path))}: not a {KIND} record")
    for key in ("config", "shape", "options", "steps", "triton_cache", "gpu"):
        if key not in data:
            raise LivebytesError(f"{show(str(path))}: a {KIND} record needs {key!r}")
    return data


def record_files(source: str | Path = MODEL_RECORDS_DIR) -> list[Path]:
    p = Path(source)
    files = sorted(f for f in p.glob("*.json")) if p.is_dir() else [p]
    return [f for f in files if _is_model_record(f)]


def _is_model_record(path: Path) -> bool:
    try:
        return json.loads(read_bytes(path, MAX_RECORD_BYTES)).get("kind") == KIND
    except (OSError, ValueError, AttributeError, RecursionError):   # LivebytesError too: not one (records_from then says why)
        return False


def is_model_source(source: str) -> bool:
    """Whether ``validate --from-records SOURCE`` names model-step records (a file of one, or a folder holding them)."""
    return bool(record_files(source)) if Path(source).exists() else False


def _trace_files(data: dict) -> tuple[str, str, Path, list[str]]:
    """(the store name of the record's torch and Triton, this machine's, the record's store folder, the trace files its
    model reads there)."""
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import (installed_versions, layer_counts, store_name, stored_trace_name,
                                                  trace_spec)
    recorded, here = store_name(data.get("versions", {})), store_name(installed_versions())
    req = request_of(data)
    names = [stored_trace_name(trace_spec(req, n)) for n in layer_counts(req.depth, req.config_dict["model_type"])]
    return recorded, here, TRACE_STORE / recorded, names


def stored_for(data: dict) -> str | None:
    """The folder of traces made under the record's torch and Triton (``TRACE_STORE``/``store_name``) when this machine
    has another torch or Triton and that folder holds every trace the record's model reads; None: the record is checked
    against traces made here (where the two torches' traces are the same: bf16 steps, the allocator figures of every
    run 23-27 record exact or named through them; ``trace_notes`` says so)."""
    recorded, here, folder, names = _trace_files(data)
    if recorded == here or not folder.is_dir():
        return None
    return str(folder) if all((folder / name).is_file() for name in names) else None


def trace_notes(name: str, data: dict) -> list[str]:
    """What the check of record ``name`` rests on beyond its figures, one line each: traces made here although the
    record ran another torch or Triton and the store lacks some of its traces (the fallback ``stored_for`` takes), or
    stored traces another tracer made (their ``tracer_digest`` is not this tracer's, or they carry none): a warning,
    not a failure, as the trace may still be what this tracer records."""
    from livebytes.lifetimes.traced.model import tracer_digest  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    recorded, here, folder, names = _trace_files(data)
    if recorded == here:
        return []
    root = MODEL_RECORDS_DIR.parents[3]                          # the checkout: say the store as its path there
    where = folder.relative_to(root) if folder.is_relative_to(root) else folder
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        return [f"{name}: ran under {recorded}, this machine has {here}, and {where} lacks {len(missing)} of the "
                f"{len(names)} traces it reads: checked against traces made here (torch's order of frees may differ; "
                f"python -m livebytes.validate.check.store_traces under {recorded} stores them)"]
    made = {n: _stored_tracer(folder / n) for n in names}
    stale = [n for n, digest in made.items() if digest != tracer_digest()]
    if not stale:
        return []
    said = ", ".join(f"{n} ({made[n] or 'no digest'})" for n in stale)
    return [f"{name}: its stored traces in {where} were made by another tracer than this one ({tracer_digest()}): "
            f"{said}; checked through them as stored (python -m livebytes.validate.check.store_traces under {recorded} "
            "stores them again)"]


def _stored_tracer(path: Path) -> str | None:
    """The ``tracer_digest`` a stored trace carries (``validate.check.store_traces``), None where it has none."""
    stat = path.stat()
    return _stored_tracer_of(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _stored_tracer_of(path: str, mtime_ns: int, size: int) -> str | None:
    from livebytes.lifetimes.traced.model import _read_stored  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    digest = _read_stored(Path(path)).get(TRACER_DIGEST)
    return digest if isinstance(digest, str) else None


def request_of(data: dict):
    """The traced model's request for a model-step record (its config, options and GPU; the row option as
    ``registry.shape_options`` gives it for the record's batch, as for a query)."""
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import Request, canonical_config
    opts = data["options"]
    config = canonical_config(data["config"], "record config")
    _check_packed_batch(config, opts)
    rows = _shape_options(config, int(data["shape"]["mbs"]))
    return Request(config, _device_name(data["gpu"]), opts["optimizer"], opts["precision"], bool(opts["checkpoint"]),
                   bool(opts["packed"]), lora=opts.get("lora"), loss=opts.get("loss"), **rows)


def _shape_options(config: str, mbs: int) -> dict:
    """``registry.shape_options`` of the record's family at its batch (a traced model's: the row option of a one-row
    family, nothing else)."""
    from livebytes.lifetimes.traced.families import family  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import config_sizes  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    heads, dim = config_sizes(config)
    return shape_options(family(json.loads(config)["model_type"]).key, Shape(mbs, 1, heads, dim))


def _check_packed_batch(config: str, opts: dict) -> None:
    """A packed record's inputs (``packed_batch``: fla's cu_seqlens, or transformers' DataCollatorWithFlattening) must
    be the ones its family is traced with (``Family.packed_batch``)."""
    from livebytes.lifetimes.traced.families import family  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    if not opts.get("packed"):
        return
    row = family(json.loads(config)["model_type"])
    ran = opts.get("packed_batch", "cu_seqlens")
    if ran != row.packed_batch:
        raise LivebytesError(f"a packed {row.key} record ran the batch as {ran}; {row.key} is traced with "
                             f"{row.packed_batch}: not comparable")


def model_for(data: dict):
    """The record's traced model (compiled) and shape: traced here, or from the traces stored for the record's torch
    (``stored_for``)."""
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import canonical_config, config_sizes, options_for
    config = canonical_config(data["config"], "record config")
    opts = data["options"]
    _check_packed_batch(config, opts)
    key, options = options_for(config, opts["optimizer"], opts["precision"], opts["packed"], stored_for(data),
                               lora=opts.get("lora"), loss=opts.get("loss"))
    device = get_device(_device_name(data["gpu"]))
    heads, dim = config_sizes(config)
    shape = Shape(int(data["shape"]["mbs"]), int(data["shape"]["seq"]), heads, dim)
    fsdp = {"fsdp": opts["fsdp"]} if "fsdp" in opts else {}      # an FSDP2 record (run 32): its world size (checked)
    rows = _shape_options(config, shape.mbs)
    return get_compiled(key, device, **options, **fsdp, **rows, checkpoint=bool(opts["checkpoint"])), shape, device


def _device_name(gpu: str) -> str:
    """'NVIDIA H200' -> 'H200': the preset whose product name the record's GPU is (``devices.preset_of``); a GPU no
    preset describes keeps its name, which ``get_device`` then refuses in one line."""
    return preset_of(gpu) or gpu.removeprefix("NVIDIA ").strip()


def _replay(model, shape, data: dict, placement=None):
    """The probe's process replayed without a memory limit: harness, then one run per recorded step (``placement``:
    ``estimator.placement.Placement``, None: the model's own)."""
    return replay(model, shape, warm_steps=0, measured_steps=len(data["steps"]), empty_cache_after_warmup=False,
                  benchmarks=cold_benchmarks(model, shape, data["triton_cache"]),
                  placement=None if placement is None else placement.address)


def band_runs(model, shape, data: dict) -> list:
    """(placement, replay) of the probe's process under every placement (``estimator.placement.placements``)."""
    return [(p, _replay(model, shape, data, p)) for p in placements()]


def _fitted(data: dict) -> dict:
    """The record with the steps before its first out-of-memory one (all of them where none ran out)."""
    failed = [bool(s.get("oom")) for s in data["steps"]] + [True]
    return dict(data, steps=data["steps"][:failed.index(True)])


RESERVED_FIELDS = (("max_reserved_bytes", "reserved_peaks"), ("reserved_after_bytes", "reserved_after"))


def matching_placement(data: dict, runs: list):
    """The first placement whose replay gives every reserved figure of the record's steps that ran (the replay that
    matches a measured case), or None."""
    steps = [s for s in data["steps"] if not s.get("oom")]
    for p, run in runs:
        if all(getattr(run, attr)[i] == s[k] for i, s in enumerate(steps) for k, attr in RESERVED_FIELDS
               if k in s and i < len(getattr(run, attr))):
            return p
    return None


def measured_placement(model, shape, device_name: str, triton_cache: str):
    """The placement whose replay gives every reserved figure of a committed model-step record of this very case (the
    traced model's config, optimizer, precision, checkpointing, packing and world size, the batch and length, the GPU,
    the Triton cache), or None: no record measured it, or none of the placements replays it (another torch's trace)."""
    opts = dict(getattr(model, "options", ()))
    if "config" not in opts:
        return None
    for path in record_files():
        data = read(path)
        o, req = data["options"], request_of(data)
        if ((int(data["shape"]["mbs"]), int(data["shape"]["seq"]), data["triton_cache"], _device_name(data["gpu"]))
                != (shape.mbs, shape.seq, triton_cache, device_name) or o.get("fsdp") != opts.get("fsdp")):
            continue
        if (hashlib.sha256(req.config.encode()).hexdigest()[:12], req.optimizer, req.precision, req.checkpoint,
                req.packed, req.lora, req.loss_word) != (opts["config"], opts["optimizer"], opts["precision"],
                                                         opts["checkpoint"], opts["packed"], opts.get("lora"),
                                                         opts.get("loss", req.row.losses[0])):
            continue
        fitted = _fitted(data)
        found = matching_placement(fitted, band_runs(model, shape, fitted))
        if found is not None:
            return found
    return None


def _steady_requested(model, shape) -> int:
    return requested_peak(model, shape)


def check(path: Path) -> list[FigureCheck]:
    """Every figure of one record against the model's (``NAMED_MISSES`` where a miss is known)."""
    data = read(path)
    model, shape, device = model_for(data)
    name = path.name

    def named(field: str, measured, predicted) -> FigureCheck:
        return figure(name, field, measured, predicted, *named_miss(NAMED_MISSES, (name,), field))
    out = [named("total_memory", data.get("total_memory"), device.capacity_bytes)] + _process_checks(data, model, shape, device, named, name)
    steps = data["steps"]
    if any(s.get("oom") for s in steps):
        return out + _oom_checks(data, model, shape, device, named)
    runs = band_runs(model, shape, data)
    out += _step_checks(data, runs, named)
    for i, s in enumerate(steps):
        if i > 0 and s.get("requested_peak_bytes") is not None:
            out.append(named(f"steps[{i}].requested_peak_bytes", s["requested_peak_bytes"],
                             _steady_requested(model, shape)))
    return out


def _step_checks(data: dict, runs: list, figure) -> list[FigureCheck]:
    """What the allocator held before the first step (the model, batch and optimizer made), and each step that ran
    (``runs``: their replay under each placement, the model's own first): its allocated peak and what stayed allocated
    after it (the model's placement), and its reserved peak and what stayed reserved, inside the band of every
    placement's (``BAND``; a figure named out of it at exactly its distance from the nearer end)."""
    run = runs[0][1]
    before = data.get("before", {})
    out = [figure(f"before.{k}", before[k], v[0]) for k, v in (("allocated_bytes", run.allocated_before),
                                                                ("reserved_bytes", run.reserved_before)) if k in before and v]
    for i, s in enumerate(data["steps"][:len(run.peaks)]):
        out += [figure(f"steps[{i}].{k}", s[k], v[i]) for k, v in (
            ("max_allocated_bytes", run.peaks), ("allocated_after_bytes", run.allocated_after)) if k in s]
        out += [_band_check(figure, f"steps[{i}].{k}", s[k], [getattr(r, attr)[i] for _, r in runs])
                for k, attr in RESERVED_FIELDS if k in s]
    return out


def _band_check(figure, field: str, measured, values: list[int]) -> FigureCheck:
    """A reserved figure inside [least, greatest] of ``values`` (one per placement); one named out of the band
    (``figure`` gives it a named miss) against its nearer end: the low end for a miss above zero (the band lies above
    the GPU's figure), the high end otherwise."""
    low, high = min(values), max(values)
    named = figure(field, measured, high)
    if named.expected_error:
        return figure(field, measured, low if named.expected_error > 0 else high)
    return within(named.record, field, measured, high, low, high, BAND)


def _process_checks(data: dict, model, shape, device, figure, path_name: str) -> list[FigureCheck]:
    """The process's memory outside PyTorch (NVML, per process) and its stack limit after each step, against the
    process-memory model's after the first call: later steps load no new kernels, and the driver never lowers the
    limit (``estimator.process.memory``)."""
    p = process_memory(device, model, data["triton_cache"], shape, derived_frames=False)   # never this machine's cache
    before = data.get("before", {})
    # after CUDA init, device-wide (mem_get_info, as the context figure was measured): at least the context. Not
    # before.nonpytorch: NVML's per-process figure is another account (run 23's k2: 545,259,520 B, under the context)
    out = [at_least(path_name, "before.context_nonpytorch.bytes", before["context_nonpytorch"].get("bytes"),
                    p.context.bytes, "the CUDA context's figure; the reading is device-wide: other processes add to it")
           ] if "context_nonpytorch" in before else []
    for i, s in enumerate(data["steps"]):
        if "nonpytorch" in s:
            out.append(figure(f"steps[{i}].nonpytorch.bytes", s["nonpytorch"].get("bytes"), p.bytes))
        if "stack_limit_bytes" in s:
            out.append(figure(f"steps[{i}].stack_limit_bytes", s["stack_limit_bytes"], p.stack_limit_bytes))
    return out


def _oom_checks(data: dict, model, shape, device, figure) -> list[FigureCheck]:
    """A record that ran out of memory: the verdict runs out at the same step for the same request (the allocator's
    'Tried to allocate' figure), and every step before it is checked as a step that fitted. A measured case: the verdict
    is the replay under the placement that gives the fitted steps' reserved figures (``matching_placement``)."""
    fitted = _fitted(data)
    runs = band_runs(model, shape, fitted)                      # the steps that fitted, as they ran
    v = verdict(model, shape, device, triton_cache=data["triton_cache"], measured=matching_placement(fitted, runs))
    failed = len(fitted["steps"])
    measured = data["steps"][failed]
    out = [figure("oom step", failed, v.oom.run_step if v.oom else None)]
    if v.oom is None:
        return out
    out += _step_checks(data, runs, figure)
    f = v.oom.figures
    out += [figure(f"steps[{failed}].oom_request_bytes", measured.get("oom_request_bytes"), f.tried_bytes),  # cudaMalloc
            # at the failing request: the step's allocated maximum so far, and what the allocator held (PyTorch's
            # 'allocated_bytes' in the record is read after the exception unwound the step's tensors: not compared)
            figure(f"steps[{failed}].max_allocated_bytes", measured.get("max_allocated_bytes"), f.allocated_bytes),
            figure(f"steps[{failed}].reserved_bytes", measured.get("reserved_bytes"), f.reserved_bytes),
            # the device's free and total memory there (cudaMemGetInfo)
            figure(f"steps[{failed}].free_bytes", measured.get("free_bytes"), f.free_bytes),
            figure(f"steps[{failed}].total_bytes", measured.get("total_bytes"), device.capacity_bytes)]
    return out


def not_checkable_here(path: Path) -> str | None:
    """Why this environment cannot trace the record's model (None: it can, or its traces are stored): ``untraceable_here``
    (H200 records)."""
    from livebytes.lifetimes.traced.model import untraceable_here  # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    data = read(path)
    return None if stored_for(data) else untraceable_here(data["config"].get("model_type"))


def check_all(source: str | Path = MODEL_RECORDS_DIR,
              progress=None) -> tuple[list[FigureCheck], list[tuple[str, str]], list[str]]:
    """Every figure of every record this environment can trace, (record, why) for those it cannot, and the warnings on
    the traces the checked ones rest on (``trace_notes``). ``progress(done, total, note)``: told after each record
    checked (a config's first use traces it: a minute)."""
    files = record_files(source)
    if not files:
        raise LivebytesError(f"no {KIND} records in {show(str(source))}")
    skipped = [(f.name, why) for f in files if (why := not_checkable_here(f))]
    names = {n for n, _ in skipped}
    checkable = [f for f in files if f.name not in names]
    checks: list[FigureCheck] = []
    notes: list[str] = []
    for n, f in enumerate(checkable, 1):
        notes += trace_notes(f.name, read(f))
        checks += check(f)
        if progress:
            progress(n, len(checkable), f.name)
    return checks, skipped, notes

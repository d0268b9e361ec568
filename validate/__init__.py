"""livebytes.validate: run the real kernels (GPU), keep measurements as records, compare with models.

Split by where each part runs (issue 35 point 4):
- ``check``: what re-checks the committed records on a CPU (records, the comparison policy, the protocol's replay,
  model-step records, probe replay, frames); pure Python, no torch, and it imports nothing of ``gpu``;
- ``gpu``: what measures (the runner and its harnesses, plans, the CP runner, the allocator tracer, the autotune
  capture, the payload measurement) and ``gpu.probes``, the standalone probes; only these import torch, lazily;
- ``data/``: the measurements and run plans, no code; ``data/INDEX.md`` says what each folder holds, what writes it
  and what reads it.
"""

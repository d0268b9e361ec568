"""livebytes.validate: run the real kernels (GPU), keep measurements as records, compare with models.

Only ``runner`` and ``batch`` import torch, lazily; ``records`` and ``history`` are pure Python.
"""

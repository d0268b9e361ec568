"""livebytes.validate: run the real kernels (GPU), keep measurements as records, compare with models.

Only ``runner`` and ``batch`` import torch, lazily; ``records``, ``history`` and ``explain`` are pure Python.
"""

"""Standalone probes, each a module and a script: ``python -m livebytes.validate.gpu.probes.NAME`` or, from a checkout
with or without livebytes installed, ``python3 validate/gpu/probes/NAME.py`` (the form the run plans in
``validate/data/plans/`` use; a probe that needs a sibling puts its own folder on ``sys.path``).

``boundary_probe`` (where a process runs out of memory), ``process_memory`` (a process's own device memory),
``process_trace`` (a validator process's whole allocator history), ``model_step`` (a whole model's training step),
``cubin_usage`` (cuobjdump's per-kernel resource usage); ``cpu_frames`` and ``cpu_alloc_trace`` compile or trace on
the CPU for the H200 but belong with the probes they stand in for.
"""

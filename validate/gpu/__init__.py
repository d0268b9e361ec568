"""The GPU side of validation: what measures, writing records into ``validate/data/`` for ``validate.check``.

``runner`` (one process's protocol, ``runner_args`` its command line), ``harnesses`` (one per implementation),
``batch`` and ``session`` (plans, the ``validate`` command), ``cp_runner`` (context parallelism under torchrun),
``environment``, ``inputs``, ``oom``, ``gpu_lock``, ``triton_state`` and ``autotune`` (the autotune capture),
``boundary`` (the out-of-memory boundary plan), ``trace`` (allocator traces for ``learn``), ``traced_harness`` (a
harness on meta tensors through the tracer), ``payload`` (autograd's saved payload, measured on the CPU) and
``probes`` (standalone probes). torch is imported lazily, inside the functions that measure.
"""

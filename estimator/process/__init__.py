"""The process's own device memory outside PyTorch's allocator, one package (issue 49 point 2):

- ``memory``: the model (``process_memory``: the CUDA context, the loaded kernel modules, the stack reservation), each
  part a ``Figure`` whose status is typed;
- ``status``: that status, a ``Kind`` (measured, derived, bounded, estimated, unbounded) and its reasons, with the
  ``Hint`` that names the case a probe of this tool can run to replace a figure;
- ``estimate`` and ``loo``: a figure no process measured and no compile derived, from the nearest committed cases, and
  its rule's leave-one-out error;
- ``model_frames``: a whole model's step derived on the CPU (every Triton kernel it launches compiled for the GPU's
  architecture; ``data/process/model_frames_H200.json``), its largest frame the driver's limit;
- ``frames_store`` and ``measured_store``: the frames derived and the processes measured on this machine, kept signed
  in the private cache.

How a status reads, the commands included, is the presentation's: ``livebytes/process_words.py``. The data are
``estimator/data/process_memory.json`` and ``estimator/data/process/*.json``.
"""

"""livebytes.learn: draft models from allocator traces, and drift between traces and a hand model.

Above the core (``estimator``), beside ``validate``: the ``learn`` and ``drift`` commands read it, and the
tracer (``validate/gpu/trace.py``) writes the trace format that ``traces`` reads; the format's name and symbols
live in the core (``estimator.shapes.TRACE_FORMAT``, ``TRACE_SYMBOLS``), so validate and learn never import each other.
The core holds no learning code.
- ``traces``: the trace format and its loader; ``learn``: per-buffer shape formulas fitted exactly from traces;
- ``draft``: a learned model written as a model file; ``drift``: a hand model against learned buffers;
- ``synthetic``: traces generated from a model (tests).
"""

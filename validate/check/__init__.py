"""The CPU side of validation: every committed record re-checked against its model (no torch, no GPU).

``records`` reads and writes records, ``compare`` is the one comparison policy (``record_figures``, ``figures``,
``record_misses``), ``protocol`` replays what a measured process ran, ``model_records`` re-checks whole-model step
records, ``probe_records`` / ``probe_replay`` / ``process_check`` the boundary probes, ``frames`` writes the
process-memory data from the records; ``history``, ``explain`` and ``allocator_traces`` read allocator snapshots and
traces; ``store_traces`` keeps model-step traces for another machine. Nothing here imports ``validate.gpu``.
"""

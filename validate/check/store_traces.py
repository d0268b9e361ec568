"""Store the traces of model-step records under this machine's torch and Triton, for checking them on another machine.

A trace is the model's own code run by the tracer under the installed torch; the autograd engine's order of frees is
torch's, and it changed between 2.11 and 2.13 where a gradient changes dtype (fp32-amp: torch 2.11 frees a custom
Function's saved tensors after the engine casts its bf16 weight gradient to the fp32 parameter's dtype, 2.13 before).
Run under the record's torch (a virtual environment with it, the tracer's libraries at the record's versions):

    python -m livebytes.validate.check.store_traces validate/data/records/models/h200_run28_a1-kda-8k.json ...

Each record's request is traced at the layer counts its model reads (``lifetimes.traced.model.layer_counts``) and the
tracer's raw output is written gzipped to ``validate/data/records/models/traces/torch-<version>_triton-<version>/<spec digest>.json.gz``,
where ``validate.check.model_records.stored_for`` finds it on a machine whose torch is another. Each file carries the digest
of the tracer that made it (``tracer_digest``, the sources of ``livebytes.tracer``): a check through a trace another
tracer made says so (``model_records.trace_notes``), as the trace may not be what this tracer would record.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

from livebytes.estimator.errors import LivebytesError

from .model_records import TRACE_STORE, TRACER_DIGEST, read, request_of



def store(paths: list[Path], out: Path | None = None) -> list[Path]:
    """Trace each record's request here and write each layer count's trace into the store; the files written."""
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import (installed_versions, layer_counts, run_tracers, store_name,
                                                  stored_trace_name, trace_spec, tracer_digest)
    here = store_name(installed_versions())
    folder = out or TRACE_STORE / here
    written = []
    for path in paths:
        data = read(path)
        recorded = store_name(data.get("versions", {}))
        if recorded != here:
            raise LivebytesError(f"{path.name} ran {recorded}; this environment has {here}")
        folder.mkdir(parents=True, exist_ok=True)
        req = request_of(data)
        specs = [trace_spec(req, n) for n in layer_counts(req.depth, req.config_dict["model_type"])]
        for spec, done in zip(specs, run_tracers(specs)):
            done = {**done, TRACER_DIGEST: tracer_digest()}      # the tracer here made it (run_tracers: this install)
            target = folder / stored_trace_name(spec)
            part = target.with_name(target.name + ".part")      # whole or absent: an interrupted run leaves no trace
            with gzip.open(part, "wt", compresslevel=9) as fh:
                json.dump(done, fh, sort_keys=True)
            os.replace(part, target)
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m livebytes.validate.check.store_traces", description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="the store folder (default: the records' store for this torch)")
    args = parser.parse_args(argv)
    try:
        for path in store(args.records, args.out):
            print(path)
    except LivebytesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

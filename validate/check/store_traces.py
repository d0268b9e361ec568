"""Store the traces of model-step records under this machine's torch and Triton, for checking them on another machine.

A trace is the model's own code run by the tracer under the installed torch; the autograd engine's order of frees is
torch's, and it changed between 2.11 and 2.13 where a gradient changes dtype (fp32-amp: torch 2.11 frees a custom
Function's saved tensors after the engine casts its bf16 weight gradient to the fp32 parameter's dtype, 2.13 before).
Run under the record's torch (a virtual environment with it, the tracer's libraries at the record's versions):

    python -m livebytes.validate.check.store_traces validate/data/records/models/h200_run28_a1-kda-8k.json ...

A tracer change that touches only some operators' recording carries the stored traces that call none of them
(``--restamp --from DIGEST --changed-op NAME``: the traces the previous tracer made take this tracer's digest, the old
one kept under ``restamped``); one that calls such an operator is refused, to be stored again under its torch.

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


def _ops(trace: dict) -> set[str]:
    """Every operator a stored trace's events name (``op``: its allocations', GEMMs', reductions' and scratch ops'), in
    every run it holds. An operator that allocated nothing under the tracer that made it names no event."""
    found: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("op"), str):
                found.add(value["op"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    walk(trace)
    return found


def restamp(paths: list[Path], changed_ops: tuple[str, ...], previous: str) -> list[Path]:
    """Stored traces carried across one tracer change, from the tracer whose digest is ``previous`` to this one, where
    the change touches only ``changed_ops`` (the operators whose recording it changed, each of which allocates: an
    operator that allocated nothing names no event, so its absence proves nothing): each trace ``previous`` made that
    calls none of them is what this tracer records too, so it takes this tracer's digest, the old one kept beside it
    (``restamped``). Refused in one line, before any file is written: no ``previous`` or no operator, ``previous``
    this tracer itself, no trace ``previous`` made among ``paths``, or one of them calling a changed operator (store
    it again). A trace another tracer made, or one with no digest, is left as it is."""
    # deferred: loads sympy ~177 ms (importtime), which this module's import does not
    from livebytes.lifetimes.traced.model import tracer_digest
    if not changed_ops or not previous:
        raise LivebytesError("--restamp needs the tracer it carries traces from (--from DIGEST) and the operators the "
                             "change touches (--changed-op NAME ...)")
    if previous == tracer_digest():
        raise LivebytesError(f"--from {previous} is this tracer: nothing to carry")
    traces = {path: json.loads(gzip.open(path, "rt").read()) for path in paths}
    carried = {path: trace for path, trace in traces.items() if trace.get(TRACER_DIGEST) == previous}
    if not carried:
        raise LivebytesError(f"none of the {len(paths)} traces was made by the tracer {previous}")
    for path, trace in carried.items():
        hit = sorted(_ops(trace) & set(changed_ops))
        if hit:
            raise LivebytesError(f"{path.name} calls {', '.join(hit)}, which the tracer change touches: store it again")
    for path, trace in carried.items():
        trace["restamped"] = trace.get("restamped", []) + [{"from": previous, "changed_ops": list(changed_ops)}]
        trace[TRACER_DIGEST] = tracer_digest()
        part = path.with_name(path.name + ".part")
        with gzip.open(part, "wt", compresslevel=9) as fh:
            json.dump(trace, fh, sort_keys=True)
        os.replace(part, path)
    return list(carried)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m livebytes.validate.check.store_traces", description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", type=Path, help="model-step records (with --restamp: stored traces)")
    parser.add_argument("--out", type=Path, help="the store folder (default: the records' store for this torch)")
    parser.add_argument("--restamp", action="store_true",
                        help="carry stored traces across a tracer change that touches only --changed-op operators")
    parser.add_argument("--from", dest="previous", metavar="DIGEST", help="with --restamp: the tracer the traces were made by")
    parser.add_argument("--changed-op", action="append", default=[], metavar="NAME",
                        help="an operator whose recording the tracer change touches, e.g. aten.log_sigmoid_forward.default")
    args = parser.parse_args(argv)
    try:
        if args.restamp and args.out is not None:
            raise LivebytesError("--out stores traces anew; --restamp rewrites the given traces in place")
        written = (restamp(args.records, tuple(args.changed_op), args.previous) if args.restamp
                   else store(args.records, args.out))
        for path in written:
            print(path)
    except LivebytesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

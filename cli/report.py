"""Plain data views of predictions (for --json and for the renderers). No arithmetic beyond unit conversion."""
from __future__ import annotations

from livebytes.estimator.engine import Prediction

GiB = 2**30


def gib(nbytes: int | float) -> float:
    return nbytes / GiB


def prediction_dict(p: Prediction, measured: list | None = None, fits: dict | None = None,
                    replayed: int | None = None) -> dict:
    fwd_bytes, fwd_step = p.forward_peak()
    out = {
        "impl": p.model.key,
        "options": dict(p.model.options),
        "device": p.model.device,
        "shape": p.shape.as_dict(),
        "peak_bytes": p.peak_bytes,
        "peak_gib": round(gib(p.peak_bytes), 6),
        "peak_step": p.peak_step.name,
        "replay_peak_bytes": replayed,
        "forward_peak_bytes": fwd_bytes,
        "groups": {g.label: n for g, n in p.groups.items()},
        "buffers_at_peak": [
            {"name": b.name, "group": b.group.label, "shape": b.shape_text(), "dtype": b.dtype, "bytes": n,
             "source": str(b.source)}
            for b, n in p.at_peak if n
        ],
        "measured": [
            {"peak_bytes": r.peak_bytes, "oom": r.oom, "origin": r.origin, "device": r.device, "record": r.path.name}
            for r in (measured or [])
        ],
        "status": "measured" if measured else "predicted (never measured)",
    }
    if fits is not None:
        out["fits"] = fits
    return out

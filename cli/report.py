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


def verdict_dict(v) -> dict:
    """The three levels and the verdict (``capacity.Verdict``) as JSON keys."""
    from livebytes.estimator.capacity import oom_dict
    return {"alloc_conf": v.conf.text, "triton_cache": v.process.triton_cache,
            "allocated_peak_bytes": v.allocated_peak_bytes, "reserved_peak_bytes": v.reserved_peak_bytes,
            "process_bytes": v.process.bytes, "device_need_bytes": v.device_need_bytes,
            "assumptions": v.process.assumptions, "oom": oom_dict(v),
            "fits": {"gpu": v.device.name, "fits": v.fits, "total_bytes": v.total_bytes,
                     "capacity_bytes": v.capacity_bytes, "headroom_bytes": v.headroom_bytes}}


def capacity_plan_dict(r) -> dict:
    out = {"impl": r.model.key, "solve": r.solve, "value": r.value, "next_value": r.next_value}
    if r.at_value is not None:
        out["at_value"] = verdict_dict(r.at_value)
    out["at_next"] = verdict_dict(r.at_next)
    return out

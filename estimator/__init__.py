"""livebytes.estimator: the implementation-agnostic core (records, engine, registry, planning)."""
from .buffers import Buffer, Group, LifetimeModel, Source, Step
from .devices import DEVICES, Device, get_device
from .engine import Prediction, peak_expression, predict, step_expressions
from .errors import LivebytesError
from .registry import check_shape, get_model, spec, specs
from .shapes import Shape, parse_shape_list, parse_size

__all__ = [
    "Buffer", "Group", "LifetimeModel", "Source", "Step", "DEVICES", "Device", "get_device", "Prediction",
    "peak_expression", "predict", "step_expressions", "LivebytesError", "check_shape", "get_model", "spec", "specs",
    "Shape", "parse_shape_list", "parse_size",
]

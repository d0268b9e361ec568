"""Lifetime models, one module per implementation; importing this package registers them.

Each model file registers its own models (its specs, options and refusals close the file), one per entry of
its ``VERSIONS`` table: adding a version is one entry in that file. No model names the validator: a model is
runnable where a harness (``validate/gpu/harnesses``) is registered for its key.
"""
from __future__ import annotations

# each registers its models; this order is the registry's (`livebytes models` lists them so)
from . import fla_kda  # noqa: F401
from . import cudnn_frost  # noqa: F401
from . import cudnn_hopper  # noqa: F401
from . import fla_gdn  # noqa: F401
from . import fla_cp  # noqa: F401
from . import fla_kda_layer  # noqa: F401
from . import fla_gdn_layer  # noqa: F401
from . import traced  # noqa: F401  (the traced whole models: traced/spec.py)

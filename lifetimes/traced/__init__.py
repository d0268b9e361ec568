"""Traced whole models (``model``); importing the package registers them (``spec``)."""
from . import spec  # noqa: F401

"""Typed, validated configuration of the platform: the single source of every setting."""

from . import catalog, layout
from .errors import ConfigError, Problem
from .loader import all_keys, load_config
from .model import PlatformConfig

__all__ = ["catalog", "layout", "ConfigError", "PlatformConfig", "Problem", "all_keys", "load_config"]

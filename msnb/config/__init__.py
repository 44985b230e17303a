"""Configuration: mindformers-style YAML (inheritance, ``${}`` references), the
``monitor_config`` block, and lint rules for monitoring settings."""

from .lint import Finding, lint
from .loader import ConfigError, LoadedConfig, load_config
from .monitor_schema import EarlyStopSettings, MonitorSettings, monitor_settings, parse_monitor_config
from .report import ConfigReport, check_config

__all__ = [
    "load_config",
    "LoadedConfig",
    "ConfigError",
    "lint",
    "Finding",
    "MonitorSettings",
    "EarlyStopSettings",
    "monitor_settings",
    "parse_monitor_config",
    "check_config",
    "ConfigReport",
]

"""Configuration: models, loading, and (later) the state file and the watcher."""

from mcphost.config.loader import ConfigError, ConfigIssue, LoadedConfig, default_config, load_config, parse_config
from mcphost.config.models import Config, ServerConfig, effective_annotations

__all__ = [
    "Config",
    "ConfigError",
    "ConfigIssue",
    "LoadedConfig",
    "ServerConfig",
    "default_config",
    "effective_annotations",
    "load_config",
    "parse_config",
]

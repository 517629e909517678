"""Configuration: the models, loading with errors a person can act on, the state file and the watcher."""

from mcphost.config.loader import ConfigError, ConfigIssue, LoadedConfig, load_config, parse_config
from mcphost.config.models import Config, ServerConfig, effective_annotations

__all__ = [
    "Config",
    "ConfigError",
    "ConfigIssue",
    "LoadedConfig",
    "ServerConfig",
    "effective_annotations",
    "load_config",
    "parse_config",
]

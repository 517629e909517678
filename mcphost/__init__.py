"""mcphost: a local agent host between AI agents and their MCP servers."""

__version__ = "0.1.0"

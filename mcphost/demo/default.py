"""The config a new user runs on when there is no config file: the starter file `mcphost config init` writes, with
the bundled todo server acting for the local user. One definition for every command (the daemon, `mcp`, `call`,
`tools`, `config show`, the demo), so that writing the starter file changes nothing for any of them.
"""

from __future__ import annotations

from mcphost.config import Config
from mcphost.config.starter import embedded_default


def default_config() -> Config:
    return embedded_default()

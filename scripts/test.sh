#!/usr/bin/env bash
# Installs mcphost with its test tools into .venv, then runs lint, the type checker and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
echo "==> installing mcphost and its test tools into .venv"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

echo "==> ruff"
.venv/bin/ruff check mcphost tests bench
.venv/bin/ruff format --check mcphost tests bench
echo "==> mypy (strict)"
.venv/bin/mypy
echo "==> pytest"
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
# pytest exits 5 when it collected nothing: that is a broken suite, not a pass.
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$status"

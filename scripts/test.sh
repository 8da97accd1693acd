#!/usr/bin/env bash
# Install benchctl with every extra, build the sandbox image if it is missing, run the tests.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[dev,claude-code,codex]'
if ! docker image inspect benchctl-sandbox:latest >/dev/null 2>&1; then
  benchctl images build
fi
exec python3 -m pytest "$@"

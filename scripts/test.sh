#!/usr/bin/env bash
# Install benchctl with every extra, build the sandbox image if it is missing, run the tests.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[dev,claude-code,codex]'
benchctl images build --if-missing
exec python3 -m pytest "$@"

#!/usr/bin/env bash
# Install benchctl with every extra (and Debian's chromium for the browser tests when it is
# missing), build the sandbox image if it is missing, run the tests.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[dev,claude-code,codex,inspect,atif,ray,internals]'
if ! command -v chromium >/dev/null 2>&1; then
  echo "chromium missing; installing it with apt-get (browser tests drive it headless)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null; fi
fi
if ! command -v ip >/dev/null 2>&1; then
  echo "ip missing; installing iproute2 (the Ray cluster tests bring up loopback in a private network namespace)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq iproute2 >/dev/null; fi
fi
benchctl images build --if-missing
exec python3 -m pytest "$@"

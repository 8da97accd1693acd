#!/bin/sh
# Build the benchctl sandbox image (picks the Dockerfile or the offline path; see
# `benchctl images build --help`). Extra arguments are passed through, e.g. --offline, --tag T.
set -eu
cd "$(dirname "$0")/.."
if command -v benchctl >/dev/null 2>&1; then
    exec benchctl images build "$@"
fi
exec python3 -c 'from benchctl.cli import app; app()' images build "$@"

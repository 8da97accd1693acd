#!/usr/bin/env bash
# The whole loop on a fresh machine with Docker and no API key: install this checkout, then
# `benchctl demo` builds the sandbox image if missing, runs the demo investigation with the
# embedded scripted model, grades it with the built-in fake judge, prints the report and the
# command that opens it in the browser.
#   scripts/demo.sh [results-dir]        (default results/demo; rerunning resumes)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e .
benchctl demo "${1:-results/demo}"

#!/usr/bin/env bash
# The whole loop on a fresh machine with Docker and no API key: install, build the sandbox
# image if missing, run the demo investigation with the embedded scripted model, grade it with
# the built-in fake judge, print the report and the command that opens it in the browser.
#   scripts/demo.sh [results-dir]        (default results/demo; rerunning resumes)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/demo}
python3 -m pip install --quiet --disable-pip-version-check -e .
benchctl images build --if-missing
benchctl run configs/demo --model scripted/configs/demo/investigator.json --budget 2m --out "$out"
benchctl grade "$out" --judge scripted/py:benchctl.grading.fake_judge:judge
benchctl report "$out"
echo
echo "The agent's report: $(ls "$out"/runs/*/artifacts/report.md | head -1)"
echo "Look at the run, its transcript and its grades in the browser:"
echo "  benchctl view $out --open"

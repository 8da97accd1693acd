#!/usr/bin/env bash
# A sweep over models × budgets × seeds, the way researchers run them: one `benchctl run`
# (which runs the whole product with --concurrency and resumes on rerun), retried while some
# runs ended in `error` (those are redone; finished runs are never repeated), then a report.
#
#   MODELS="anthropic/claude-sonnet-5-5 openai/gpt-5" BUDGETS="10m 30m 2h" SEEDS=3 CONCURRENCY=8 \
#     scripts/sweep.sh configs/log-investigation results/logs [extra benchctl run args...]
#
# Environment: MODELS (required), BUDGETS (default: the task's), SEEDS (default 3),
# CONCURRENCY (default 4), HARNESSES (default react), VARIANTS, FALLBACK, RETRIES (default 2).
# Interrupt with Ctrl-C at any time and run the same command again to continue.
set -euo pipefail

if [[ $# -lt 2 || -z "${MODELS:-}" ]]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
task=$1 out=$2
shift 2

args=(run "$task" --out "$out" --seeds "${SEEDS:-3}" --concurrency "${CONCURRENCY:-4}")
for m in $MODELS; do args+=(--model "$m"); done
for b in ${BUDGETS:-}; do args+=(--budget "$b"); done
for h in ${HARNESSES:-react}; do args+=(--harness "$h"); done
for v in ${VARIANTS:-}; do args+=(--variant "$v"); done
[[ -n "${FALLBACK:-}" ]] && args+=(--fallback "$FALLBACK")
args+=("$@")

benchctl=${BENCHCTL:-benchctl}
attempt=0
while :; do
  set +e
  $benchctl "${args[@]}"
  rc=$?
  set -e
  # 0: every run finished; 1: some runs errored (redone by the next attempt); else: stop.
  if [[ $rc -ne 1 || $attempt -ge ${RETRIES:-2} ]]; then break; fi
  attempt=$((attempt + 1))
  echo "sweep.sh: some runs ended in error; retry $attempt of ${RETRIES:-2} (finished runs are skipped)" >&2
done

if $benchctl report --help >/dev/null 2>&1; then
  $benchctl report "$out" || echo "sweep.sh: benchctl report failed (runs are on disk in $out)" >&2
fi
exit $rc

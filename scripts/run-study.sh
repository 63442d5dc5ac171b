#!/usr/bin/env bash
# README command 1: set everything up, then run the main job on the embedded default
# (bundled llama-server + SmolLM2, a small problem subset unless told otherwise).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec .venv/bin/evalmislead run "$@"

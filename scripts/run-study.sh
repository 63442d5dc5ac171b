#!/usr/bin/env bash
# README command 1: set everything up, then run the main job on the embedded default
# (bundled llama-server + Qwen2.5-Coder-0.5B, a small problem subset unless told otherwise;
# `--models qwen2.5-coder-1.5b` after `bash scripts/bootstrap.sh --model-1.5b` runs the 1.5B).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec .venv/bin/evalmislead run "$@"

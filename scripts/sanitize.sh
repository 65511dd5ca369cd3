#!/usr/bin/env bash
# scripts/sanitize.sh — build with ASan+UBSan (-DEDGETRAIN_SANITIZE=ON) into build-asan and run the CPU
# test suite under it. Exit code = the test binary's (any ASan/UBSan report aborts the test => non-zero).
#
# Leak detection is off (ASAN_OPTIONS=detect_leaks=0): the Vulkan loader, lavapipe (LLVM) and Dawn, which
# the backend listing dlopens even in CPU runs, keep process-lifetime allocations LeakSanitizer reports
# as leaks in driver code we do not own. Everything else (overflows, use-after-free, UB) aborts.
#
# Environment: EDGETRAIN_ASAN_BUILD_DIR (default build-asan), EDGETRAIN_JOBS (default 2),
#              EDGETRAIN_SKIP_BUILD=1, EDGETRAIN_SANITIZE_FILTER (gtest filter; default: all but the
#              Vulkan/WebGPU suites). Extra arguments go to the test binary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${EDGETRAIN_ASAN_BUILD_DIR:-$ROOT/build-asan}
JOBS=${EDGETRAIN_JOBS:-2}

if [[ ${EDGETRAIN_SKIP_BUILD:-0} != 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEDGETRAIN_SANITIZE=ON
  ninja -C "$BUILD" -j "$JOBS" edgetrain_tests edgetrain_cli
fi

if [[ -z ${XDG_RUNTIME_DIR:-} || ! -d ${XDG_RUNTIME_DIR} ]]; then
  XDG_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/edgetrain-xdg.XXXXXX")
  chmod 0700 "$XDG_RUNTIME_DIR"
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi
export EDGETRAIN_DEPS=${EDGETRAIN_DEPS:-$ROOT/.deps}
export EDGETRAIN_TEST_BACKENDS=cpu
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# GPU-only suites are excluded; the op catalogue runs on the CPU backend only (EDGETRAIN_TEST_BACKENDS).
filter=${EDGETRAIN_SANITIZE_FILTER:--*Vulkan*:*vulkan*:*WebGpu*:*WebGPU*:*webgpu*}
echo "[sanitize] $BUILD/tests/edgetrain_tests --gtest_filter=$filter $*"
"$BUILD/tests/edgetrain_tests" --gtest_filter="$filter" "$@"

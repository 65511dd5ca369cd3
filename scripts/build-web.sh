#!/usr/bin/env bash
# scripts/build-web.sh — build the browser version of edgetrain (the library, the WebGPU backend and the CLI
# compiled to WebAssembly by Debian's emscripten) and assemble the static page in build-web/site/.
#
#   bash scripts/build-web.sh                 # install what is missing (pinned), build, assemble the page
#   python3 -m http.server -d build-web/site 8000   # then open http://localhost:8000
#
# Installs (Debian 12, pinned like scripts/setup.sh; never downgrades): emscripten; with --browser also
# Debian's chromium (the version of the chromium-common that setup.sh pins) and playwright-core from the
# pinned web/test/package-lock.json into .deps/webtest, for the page tests (tests/web/). Idempotent: a
# second run rebuilds only what changed. Needs .deps/data/kjv.txt (scripts/setup.sh makes it) for the
# bundled corpus excerpt.
#
# Environment: EDGETRAIN_WEB_BUILD_DIR (default build-web).
set -euo pipefail

EMSCRIPTEN_VER=3.1.6~dfsg-5
PLAYWRIGHT_VER=1.65.1          # must agree with web/test/package-lock.json
KJV_EXCERPT_VERSES=6000        # Genesis 1:1 into Joshua 7, 821 KiB
KJV_EXCERPT_SHA256=f1e3321bf453a5b9c6bb6ca3147296972e3b492ed685cad9b8e6a2facd44d776

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${EDGETRAIN_WEB_BUILD_DIR:-build-web}
[[ $OUT = /* ]] || OUT="$ROOT/$OUT"
DEPS=${EDGETRAIN_DEPS:-$ROOT/.deps}
BROWSER=0
[[ ${1:-} == --browser ]] && BROWSER=1

log()  { printf '[build-web] %s\n' "$*"; }
die()  { printf '[build-web] ERROR: %s\n' "$*" >&2; exit 1; }
SUDO=()
[[ $(id -u) -eq 0 ]] || SUDO=(sudo)

installed_version() { dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' "$1" 2>/dev/null | awk '$1 ~ /^.i/ {print $2}'; }

# apt_pin PKG VERSION: installed at VERSION or newer, else install VERSION (or the candidate, with a warning,
# when the archive no longer has it).
apt_pin() {
  local pkg=$1 want=$2 have
  have=$(installed_version "$pkg")
  if [[ -n $have ]] && dpkg --compare-versions "$have" ge "$want"; then
    [[ $have == "$want" ]] || log "WARNING: $pkg $have installed, newer than the pin $want (kept)"
    return 0
  fi
  if ! apt-cache madison "$pkg" 2>/dev/null | grep -q " $want "; then
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  fi
  local spec="$pkg=$want"
  if ! apt-cache madison "$pkg" 2>/dev/null | grep -q " $want "; then
    local cand
    cand=$(apt-cache policy "$pkg" | awk '/Candidate:/{print $2; exit}')
    [[ -n $cand && $cand != "(none)" ]] || die "$pkg: neither the pinned $want nor any other version is in the apt sources"
    log "WARNING: $pkg $want is not in the archive; installing $cand (update the pin)"
    spec="$pkg=$cand"
  fi
  log "apt-get install $spec"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-remove \
    -o DPkg::Lock::Timeout=600 "$spec"
}

# ---- 1. the toolchain ----
apt_pin emscripten "$EMSCRIPTEN_VER"
# Debian's emscripten runs its JavaScript tools with /usr/bin/node, whose own module path (NodeSource's node
# here) lacks Debian's node-acorn: point it at Debian's modules.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

# ---- 2. the browser for the page tests ----
if [[ $BROWSER -eq 1 ]]; then
  common=$(installed_version chromium-common)
  [[ -n $common ]] || die "chromium-common is not installed (scripts/setup.sh pins it): run scripts/setup.sh first"
  apt_pin chromium "$common"
  stamp="$DEPS/webtest/.installed-lock-sha256"
  want=$(sha256sum web/test/package-lock.json | cut -d' ' -f1)
  if [[ ! -f $stamp || $(<"$stamp") != "$want" || ! -f $DEPS/webtest/node_modules/playwright-core/package.json ]]; then
    grep -q "\"version\": \"$PLAYWRIGHT_VER\"" web/test/package-lock.json || die "web/test/package-lock.json does not pin playwright-core $PLAYWRIGHT_VER"
    log "npm ci playwright-core@$PLAYWRIGHT_VER -> $DEPS/webtest"
    rm -rf "$DEPS/webtest"
    mkdir -p "$DEPS/webtest"
    install -m 0644 web/test/package.json web/test/package-lock.json "$DEPS/webtest/"
    (cd "$DEPS/webtest" && npm ci --ignore-scripts --no-audit --no-fund --update-notifier=false --loglevel=error >/dev/null) \
      || die "npm ci of web/test/package-lock.json failed"
    printf '%s\n' "$want" > "$stamp"
  fi
fi

# ---- 3. the wasm build ----
if [[ ! -f $OUT/build.ninja ]]; then
  log "configure $OUT"
  emcmake cmake -S web/wasm -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
log "build $OUT"
ninja -C "$OUT" | grep -v '^\[' || true
[[ -f $OUT/edgetrain.wasm && $OUT/edgetrain.wasm -nt $OUT/build.ninja ]] || ninja -C "$OUT" >/dev/null  # fail loudly

# ---- 4. the page ----
SITE="$OUT/site"
mkdir -p "$SITE"
kjv="$DEPS/data/kjv.txt"
[[ -f $kjv ]] || die "$kjv is missing: run scripts/setup.sh first (it extracts the KJV text from Debian's bible-kjv)"
head -n "$KJV_EXCERPT_VERSES" "$kjv" > "$SITE/kjv-excerpt.txt.tmp"
got=$(sha256sum "$SITE/kjv-excerpt.txt.tmp" | cut -d' ' -f1)
[[ $got == "$KJV_EXCERPT_SHA256" ]] || die "kjv-excerpt.txt: sha256 $got != pinned $KJV_EXCERPT_SHA256"
mv -f "$SITE/kjv-excerpt.txt.tmp" "$SITE/kjv-excerpt.txt"
for f in web/*.html web/*.js web/*.css; do install -m 0644 "$f" "$SITE/"; done
install -m 0644 "$OUT/edgetrain.js" "$OUT/edgetrain.wasm" "$SITE/"
[[ -f $OUT/edgetrain_op_tests.wasm ]] && install -m 0644 "$OUT/edgetrain_op_tests.js" "$OUT/edgetrain_op_tests.wasm" "$SITE/"
log "page ready: $SITE ($(du -sh "$SITE" | cut -f1)); serve it with: python3 -m http.server -d ${SITE#"$ROOT"/} 8000"

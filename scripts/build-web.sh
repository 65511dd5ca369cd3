#!/usr/bin/env bash
# scripts/build-web.sh — build the browser version of edgetrain (the library, the WebGPU backend and the CLI
# compiled to WebAssembly by Debian's emscripten) and assemble the static page in build-web/site/.
#
#   bash scripts/build-web.sh                 # install what is missing (pinned), build, assemble the page
#   python3 -m http.server -d build-web/site 8000   # then open http://localhost:8000
#
# What it needs comes from scripts/setup.sh, the one place where versions are pinned: Debian's emscripten
# (3.1.6), and for the page tests (tests/web/) Debian's chromium and playwright-core in .deps/webtest; also
# .deps/data/kjv.txt for the bundled corpus excerpt. When any of these is missing, this script runs
# `EDGETRAIN_SKIP_BUILD=1 scripts/setup.sh` first. Idempotent: a second run rebuilds only what changed.
#
# Environment: EDGETRAIN_WEB_BUILD_DIR (default build-web).
set -euo pipefail

KJV_EXCERPT_VERSES=6000        # Genesis 1:1 into Joshua 7, 821 KiB
KJV_EXCERPT_SHA256=f1e3321bf453a5b9c6bb6ca3147296972e3b492ed685cad9b8e6a2facd44d776

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${EDGETRAIN_WEB_BUILD_DIR:-build-web}
[[ $OUT = /* ]] || OUT="$ROOT/$OUT"
DEPS=${EDGETRAIN_DEPS:-$ROOT/.deps}
kjv="$DEPS/data/kjv.txt"

log()  { printf '[build-web] %s\n' "$*"; }
die()  { printf '[build-web] ERROR: %s\n' "$*" >&2; exit 1; }

# ---- 1. the toolchain, the corpus, the test browser: from scripts/setup.sh ----
missing=()
command -v emcmake >/dev/null 2>&1 || missing+=(emscripten)
[[ -f $kjv ]] || missing+=("$kjv")
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
[[ -f $DEPS/webtest/node_modules/playwright-core/package.json ]] || missing+=(playwright-core)
if [[ ${#missing[@]} -gt 0 ]]; then
  log "missing: ${missing[*]}; running scripts/setup.sh (pinned installs, no native build)"
  EDGETRAIN_SKIP_BUILD=1 bash scripts/setup.sh
fi
# Debian's emscripten runs its JavaScript tools with /usr/bin/node, whose own module path (NodeSource's node
# here) lacks Debian's node-acorn: point it at Debian's modules.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

# ---- 2. the wasm build ----
if [[ ! -f $OUT/build.ninja ]]; then
  log "configure $OUT"
  emcmake cmake -S web/wasm -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
log "build $OUT"
ninja -C "$OUT" > "$OUT/build.log" 2>&1 || { grep -v '^\[' "$OUT/build.log" | tail -n 40 >&2; die "the wasm build failed (log: $OUT/build.log)"; }

# ---- 3. the page ----
SITE="$OUT/site"
mkdir -p "$SITE"
head -n "$KJV_EXCERPT_VERSES" "$kjv" > "$SITE/kjv-excerpt.txt.tmp"
got=$(sha256sum "$SITE/kjv-excerpt.txt.tmp" | cut -d' ' -f1)
[[ $got == "$KJV_EXCERPT_SHA256" ]] || die "kjv-excerpt.txt: sha256 $got != pinned $KJV_EXCERPT_SHA256"
mv -f "$SITE/kjv-excerpt.txt.tmp" "$SITE/kjv-excerpt.txt"
for f in web/*.html web/*.js web/*.css; do install -m 0644 "$f" "$SITE/"; done
install -m 0644 "$OUT/edgetrain.js" "$OUT/edgetrain.wasm" "$SITE/"
install -m 0644 "$OUT/edgetrain_op_tests.js" "$OUT/edgetrain_op_tests.wasm" "$SITE/"
log "page ready: $SITE ($(du -sh "$SITE" | cut -f1)); serve it with: python3 -m http.server -d ${SITE#"$ROOT"/} 8000"

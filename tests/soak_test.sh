#!/usr/bin/env bash
# Soak: train the tiny preset for SOAK_SECONDS (default 60) with frequent checkpoints and evaluations, then
# compare the resident set size (metrics.jsonl "rss_mb") after warm-up with the end; growth beyond
# SOAK_RSS_MARGIN_PCT percent (default 20) fails: something leaks per step, per eval or per checkpoint.
# Usage: tests/soak_test.sh path/to/edgetrain
set -euo pipefail
cli=$1
seconds=${SOAK_SECONDS:-60}
margin=${SOAK_RSS_MARGIN_PCT:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 400); do echo "In the beginning God created the heaven and the earth. And God said, Let there be light."; done > "$tmp/corpus.txt"
"$cli" train --preset tiny --backend cpu --threads 1 --corpus "$tmp/corpus.txt" --steps 100000000 --batch 4 --seq 32 \
  --checkpoint-every 50 --eval-every 50 --eval-batches 2 --log-every 1000 --time-limit "$seconds" \
  --sample-tokens 0 --out "$tmp/run" --no-progress > "$tmp/train.log"
test -s "$tmp/run/checkpoint.safetensors" || { echo "soak: no checkpoint written"; exit 1; }
# Warm-up: the first line after 10% of the run (first checkpoints and evaluations done, buffers allocated).
python3 - "$tmp/run/metrics.jsonl" "$seconds" "$margin" <<'PY'
import json, sys
path, seconds, margin = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
lines = [json.loads(l) for l in open(path) if '"rss_mb"' in l]
if len(lines) < 10:
    sys.exit(f"soak: only {len(lines)} training steps in {path}")
first = lines[0]
warm = next((l for l in lines if l["elapsed_s"] >= 0.1 * seconds), lines[len(lines) // 10])
last = lines[-1]
evals = sum(1 for l in lines if "val_loss" in l)
growth = 100.0 * (last["rss_mb"] - warm["rss_mb"]) / warm["rss_mb"]
print(f"soak: {last['step']} steps in {last['elapsed_s']:.0f} s, {evals} evaluations; RSS step 1 {first['rss_mb']:.1f} MiB, "
      f"after warm-up (step {warm['step']}) {warm['rss_mb']:.1f} MiB, end {last['rss_mb']:.1f} MiB ({growth:+.1f}%, limit +{margin:.0f}%)")
if growth > margin:
    sys.exit(f"soak: RSS grew {growth:.1f}% (> {margin:.0f}%): a leak")
PY

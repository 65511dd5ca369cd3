#!/usr/bin/env bash
# The CLI as a user runs it: train a tiny model for a few steps, then generate from and evaluate its
# checkpoint, resume it, and check that bad input gives one clear error and a non-zero exit.
set -euo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 200); do echo "In the beginning God created the heaven and the earth. And God said, Let there be light."; done > "$tmp/corpus.txt"
"$cli" train --preset tiny --backend cpu --corpus "$tmp/corpus.txt" --steps 12 --batch 4 --seq 32 --eval-every 6 \
  --eval-batches 2 --sample-tokens 20 --out "$tmp/run" --no-progress > "$tmp/train.log"
for f in checkpoint.safetensors metrics.jsonl loss.svg sample.txt; do test -s "$tmp/run/$f" || { echo "missing $f"; exit 1; }; done
grep -q '"val_loss"' "$tmp/run/metrics.jsonl"
grep -q '<svg' "$tmp/run/loss.svg"
"$cli" generate --checkpoint "$tmp/run/checkpoint.safetensors" --backend cpu --prompt "And God" --max-tokens 16 --seed 3 > "$tmp/gen1.txt"
"$cli" generate --checkpoint "$tmp/run/checkpoint.safetensors" --backend cpu --prompt "And God" --max-tokens 16 --seed 3 > "$tmp/gen2.txt"
cmp -s "$tmp/gen1.txt" "$tmp/gen2.txt" || { echo "generate is not deterministic for a fixed seed"; exit 1; }
grep -q '^And God' "$tmp/gen1.txt"
"$cli" eval --checkpoint "$tmp/run/checkpoint.safetensors" --backend cpu --corpus "$tmp/corpus.txt" --seq 32 --batches 2 | grep -q 'perplexity'
"$cli" train --resume --out "$tmp/run" --steps 16 --backend cpu --no-progress --sample-tokens 0 > "$tmp/resume.log"
test "$(grep -c '"loss"' "$tmp/run/metrics.jsonl")" -eq 16
# Bad input: one clear message on stderr, non-zero exit, the checkpoint untouched.
sum=$(sha256sum "$tmp/run/checkpoint.safetensors")
if "$cli" train --preset tiny --backend cpu --corpus "$tmp/corpus.txt" --batch 0 --out "$tmp/run" 2> "$tmp/err.txt"; then
  echo "--batch 0 was accepted"; exit 1
fi
grep -q -- "--batch must be >= 1" "$tmp/err.txt"
if "$cli" generate --checkpoint "$tmp/corpus.txt" --backend cpu 2> "$tmp/err2.txt"; then echo "a text file was accepted as a checkpoint"; exit 1; fi
grep -q "corpus.txt" "$tmp/err2.txt"
test "$sum" = "$(sha256sum "$tmp/run/checkpoint.safetensors")"
echo "cli: train, generate, eval, resume and bad-input handling work"

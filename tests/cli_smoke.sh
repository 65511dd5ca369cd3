#!/usr/bin/env bash
# The CLI as a user runs it: train a tiny model for a few steps, then generate from and evaluate its
# checkpoint, resume it, check that bad input gives one clear error and a non-zero exit, and run a
# grouped-query-attention model through train, GGUF export, --init and generate.
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
# --logits: a NumPy file of [tokens, vocab] float32 whose rows' argmax are the greedy tokens printed.
"$cli" generate --checkpoint "$tmp/run/checkpoint.safetensors" --backend cpu --prompt "And God" --max-tokens 6 \
  --temperature 0 --logits "$tmp/logits.npy" > "$tmp/greedy.txt" 2> /dev/null
python3 - "$tmp/logits.npy" "$tmp/greedy.txt" <<'PY'
import array, struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x93NUMPY\x01\x00", b[:8]
n = struct.unpack("<H", b[8:10])[0]
assert (10 + n) % 64 == 0 and b"'shape': (6, 256)" in b[10:10 + n], b[:10 + n]
v = array.array("f", b[10 + n:])
assert len(v) == 6 * 256, len(v)
greedy = bytes(max(range(256), key=lambda j: v[i * 256 + j]) for i in range(6))
text = open(sys.argv[2], "rb").read()
assert text == b"And God" + greedy + b"\n", (text, greedy)
PY
"$cli" eval --checkpoint "$tmp/run/checkpoint.safetensors" --backend cpu --corpus "$tmp/corpus.txt" --seq 32 --batches 2 | grep -q 'perplexity'
"$cli" train --resume --out "$tmp/run" --steps 16 --backend cpu --no-progress --sample-tokens 0 > "$tmp/resume.log"
test "$(grep -c '"loss"' "$tmp/run/metrics.jsonl")" -eq 16
# --checkpoint-activations: the same run recomputing each block's activations gives the same losses, bit for bit.
for ck in "" --checkpoint-activations; do
  "$cli" train --preset tiny --backend cpu --corpus "$tmp/corpus.txt" --steps 5 --batch 4 --seq 32 --eval-every 5 \
    --sample-tokens 0 --out "$tmp/ck$ck" --no-progress $ck > "$tmp/ck$ck.log"
  grep -o '"loss":[^,]*' "$tmp/ck$ck/metrics.jsonl" > "$tmp/ck$ck.losses"
done
grep -q 'recomputed per block' "$tmp/ck--checkpoint-activations.log"
test "$(wc -l < "$tmp/ck.losses")" -eq 5
cmp -s "$tmp/ck.losses" "$tmp/ck--checkpoint-activations.losses" || { echo "--checkpoint-activations changed the losses"; exit 1; }
# A device that binds 16 KiB to a kernel (EDGETRAIN_MAX_BINDING_BYTES, here on the CPU): the 32 KiB embedding/head
# is taken a part of the vocabulary at a time, said before the run; the run trains, and greedy generation from
# its checkpoint is the same in parts as whole.
EDGETRAIN_MAX_BINDING_BYTES=16384 "$cli" train --preset tiny --backend cpu --corpus "$tmp/corpus.txt" --steps 6 \
  --batch 2 --seq 16 --sample-tokens 0 --out "$tmp/parts" --no-progress > "$tmp/parts.log"
grep -q 'vocabulary in [0-9]* parts: cpu binds at most 16.0 KiB' "$tmp/parts.log" || { cat "$tmp/parts.log"; exit 1; }
EDGETRAIN_MAX_BINDING_BYTES=16384 "$cli" generate --checkpoint "$tmp/parts/checkpoint.safetensors" --backend cpu \
  --prompt "And God" --max-tokens 12 --temperature 0 > "$tmp/parts_gen.txt" 2> /dev/null
"$cli" generate --checkpoint "$tmp/parts/checkpoint.safetensors" --backend cpu --prompt "And God" --max-tokens 12 \
  --temperature 0 > "$tmp/whole_gen.txt" 2> /dev/null
cmp -s "$tmp/parts_gen.txt" "$tmp/whole_gen.txt" || { echo "generation in vocabulary parts differs"; exit 1; }
# Bad input: one clear message on stderr, non-zero exit, the checkpoint untouched.
sum=$(sha256sum "$tmp/run/checkpoint.safetensors")
if "$cli" train --preset tiny --backend cpu --corpus "$tmp/corpus.txt" --batch 0 --out "$tmp/run" 2> "$tmp/err.txt"; then
  echo "--batch 0 was accepted"; exit 1
fi
grep -q -- "--batch must be >= 1" "$tmp/err.txt"
if "$cli" generate --checkpoint "$tmp/corpus.txt" --backend cpu 2> "$tmp/err2.txt"; then echo "a text file was accepted as a checkpoint"; exit 1; fi
grep -q "corpus.txt" "$tmp/err2.txt"
test "$sum" = "$(sha256sum "$tmp/run/checkpoint.safetensors")"
# Grouped-query attention: a --config with n_kv_heads trains, exports to GGUF with head_count_kv, and that
# file starts a qlora run (adapters on k/v too) and generates.
echo '{"preset": "tiny", "n_heads": 4, "n_kv_heads": 2}' > "$tmp/gqa.json"
"$cli" train --config "$tmp/gqa.json" --backend cpu --corpus "$tmp/corpus.txt" --steps 6 --batch 4 --seq 32 \
  --sample-tokens 0 --out "$tmp/gqa" --no-progress > "$tmp/gqa.log"
"$cli" info "$tmp/gqa/checkpoint.safetensors" | grep -q '"n_kv_heads":2'
"$cli" convert "$tmp/gqa/checkpoint.safetensors" "$tmp/gqa.gguf" --to gguf-f32 > /dev/null
"$cli" info "$tmp/gqa.gguf" > "$tmp/gqa_info.txt"
grep -q 'llama.attention.head_count_kv = 2' "$tmp/gqa_info.txt"
grep -q 'blk.0.attn_k.weight F32 \[32, 16\]' "$tmp/gqa_info.txt"
"$cli" train --init "$tmp/gqa.gguf" --mode qlora --lora-targets q,k,v,o --backend cpu --corpus "$tmp/corpus.txt" \
  --steps 4 --batch 4 --seq 32 --sample-tokens 0 --out "$tmp/gqa_lora" --no-progress > "$tmp/gqa_lora.log"
"$cli" generate --checkpoint "$tmp/gqa_lora/checkpoint.safetensors" --backend cpu --prompt "And God" --max-tokens 8 \
  --seed 1 | grep -q '^And God'
echo '{"preset": "tiny", "n_heads": 4, "n_kv_heads": 3}' > "$tmp/badkv.json"
if "$cli" train --config "$tmp/badkv.json" --backend cpu --corpus "$tmp/corpus.txt" --out "$tmp/badkv" 2> "$tmp/err3.txt"; then
  echo "n_kv_heads 3 with 4 heads was accepted"; exit 1
fi
grep -q "n_kv_heads (3) must divide n_heads (4)" "$tmp/err3.txt"
echo "cli: train (also with --checkpoint-activations, and with the vocabulary in parts), generate, eval, resume, bad-input handling and grouped-query attention work"

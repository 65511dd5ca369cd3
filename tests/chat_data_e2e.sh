#!/usr/bin/env bash
# Fine-tuning on JSONL samples end to end, as a user runs it: a tiny addition Q/A set -> train with the
# prompt masked (--train-on completion) -> eval --data (reply loss, exact match, JSON) -> chat; a run stopped
# after its first step and resumed gives the uninterrupted run's losses exactly; bad lines are one error
# naming file:line; packed rows train too.
set -euo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for a in 0 1 2 3 4 5 6 7 8 9; do for b in 0 1 2 3 4 5 6 7 8 9; do
  echo "{\"prompt\": \"add $a $b\", \"completion\": \"$((a + b))\"}"
done; done > "$tmp/add.jsonl"
common=(--preset tiny --backend cpu --data "$tmp/add.jsonl" --val-fraction 0.1 --batch 8 --lr 1e-2 --warmup 2
        --eval-every 10 --eval-batches 2 --no-progress --sample-tokens 8)
"$cli" train "${common[@]}" --steps 20 --out "$tmp/a" > "$tmp/a.log"
grep -q "90 training samples" "$tmp/a.log" || { echo "expected 90 training samples:"; cat "$tmp/a.log"; exit 1; }
grep -q "the last 10 of them" "$tmp/a.log"
grep -q "chat template plain" "$tmp/a.log"
python3 - "$tmp/a/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if "loss" in l]
assert len(steps) == 20, len(steps)
per_step = steps[1]["tokens"] - steps[0]["tokens"]
for s in steps:
    # The reply " N\n\n" is 4 or 5 bytes: 8 samples train 32..40 labels of the step's 8 x seq tokens.
    assert 32 <= s["trained_tokens"] <= 40 < per_step, (s["trained_tokens"], per_step)
    assert s["trained_tokens_per_s"] < s["tokens_per_s"]
val = [l["val_loss"] for l in lines if "val_loss" in l]
assert val[-1] < 0.7 * val[0], val
PY
"$cli" eval --checkpoint "$tmp/a/checkpoint.safetensors" --backend cpu --data "$tmp/add.jsonl" --json > "$tmp/eval.json"
python3 - "$tmp/eval.json" "$tmp/a/metrics.jsonl" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
first = json.loads(open(sys.argv[2]).readline())["val_loss"]
assert e["chat_template"] == "plain" and e["samples"] == 100 and e["truncated"] == 0, e
assert e["loss"] < 0.7 * first, (e["loss"], first)
em = e["exact_match"]
assert em["total"] == 100 and 0 <= em["correct"] <= 100, em
PY
"$cli" chat --checkpoint "$tmp/a/checkpoint.safetensors" --backend cpu --prompt "add 2 3" --temperature 0 \
  --max-tokens 8 > "$tmp/chat.txt" 2> "$tmp/chat.err"
grep -q "template plain" "$tmp/chat.err"
printf 'add 1 1\nadd 2 2\n' | "$cli" chat --checkpoint "$tmp/a/checkpoint.safetensors" --backend cpu --max-tokens 8 \
  > "$tmp/chat2.txt" 2>/dev/null
test "$(wc -l < "$tmp/chat2.txt")" -eq 2
# Packed rows: 4 rows of 64 tokens hold several ~30-token samples each, so a step trains more replies than
# its 4 rows could one sample each (<= 20 labels), and the model still learns.
echo '{"preset": "tiny", "max_seq": 64}' > "$tmp/tiny64.json"
"$cli" train --config "$tmp/tiny64.json" --backend cpu --data "$tmp/add.jsonl" --val-fraction 0.1 --batch 4 --seq 64 \
  --batching pack --lr 1e-2 --warmup 2 --eval-every 10 --eval-batches 2 --no-progress --sample-tokens 0 \
  --steps 20 --out "$tmp/p" > "$tmp/p.log"
grep -q "batching pack, seq 64" "$tmp/p.log" || { cat "$tmp/p.log"; exit 1; }
python3 - "$tmp/p/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if "loss" in l]
assert all(s["trained_tokens"] >= 28 for s in steps), [s["trained_tokens"] for s in steps]
val = [l["val_loss"] for l in lines if "val_loss" in l]
assert val[-1] < 0.7 * val[0], val
PY
# Stopped after step 1 (--time-limit), resumed: the same losses as the uninterrupted run.
"$cli" train "${common[@]}" --steps 20 --out "$tmp/b" --time-limit 0.000001 > "$tmp/b1.log"
grep -q "time limit" "$tmp/b1.log"
"$cli" train --resume --out "$tmp/b" --steps 20 --backend cpu --no-progress --sample-tokens 0 > "$tmp/b2.log"
python3 - "$tmp/a/metrics.jsonl" "$tmp/b/metrics.jsonl" <<'PY'
import json, sys
a, b = ({l["step"]: l["loss"] for l in map(json.loads, open(p)) if "loss" in l} for p in sys.argv[1:])
assert a == b, [(s, a[s], b.get(s)) for s in a if a[s] != b.get(s)][:3]
PY
# A bad line: one message naming file:line, exit status 1, nothing trained.
{ head -3 "$tmp/add.jsonl"; echo '{"prompt": "add 1 1"}'; } > "$tmp/bad.jsonl"
if "$cli" train --preset tiny --backend cpu --data "$tmp/bad.jsonl" --steps 2 --out "$tmp/c" 2> "$tmp/err.txt"; then
  echo "a line without a completion was accepted"; exit 1
fi
grep -q "bad.jsonl:4: \"completion\" is missing" "$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }
test ! -e "$tmp/c/checkpoint.safetensors"
echo "chat data: train --data (masked), eval --data, chat, exact resume and bad lines work"

#!/usr/bin/env python3
# Hugging Face import against transformers itself (issue 16): random models of each architecture edgetrain
# reads, saved by the installed transformers' save_pretrained (non-default rope parameters, Llama 3 rope
# scaling, q/k/v biases, q/k norms, head_dim != hidden/heads, tied and untied heads), imported by edgetrain
# (`convert --mode fp32`), then both continue the same prompt greedily: the logits of every step and the
# tokens must agree. Configs edgetrain must refuse are checked to be refused with the field named.
#
#   python3 bench/hf_check.py --edgetrain build/edgetrain --out /tmp/hf_check [--backends cpu,vulkan]
#
# Needs torch, numpy and transformers (the H200 machine has them; CI does not). Prints one line per case and
# backend and writes OUT/hf_check.json; exit status 1 if any case disagrees.
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import transformers

PROMPT = "In the beginning God created the heaven and the earth."
STEPS = 20
REL_TOL = 1e-4  # fp32 both sides; different summation orders (max |difference| / max |logit|)


def rope(theta, llama3=None):
    """Rotary parameters as this transformers writes them: rope_parameters (5.x) or rope_theta/rope_scaling (4.x)."""
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        p = {"rope_type": "llama3" if llama3 else "default", "rope_theta": theta}
        p.update(llama3 or {})
        return {"rope_parameters": p}
    out = {"rope_theta": theta}
    if llama3:
        out["rope_scaling"] = dict(llama3, rope_type="llama3")
    return out


LLAMA3_SCALING = {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
COMMON = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=256, initializer_range=0.1)
# Linear rope scaling changes the math and edgetrain does not do it: it must be refused, naming the field.
LINEAR_ROPE = rope(10000.0)
if "rope_parameters" in LINEAR_ROPE:
    LINEAR_ROPE["rope_parameters"].update(rope_type="linear", factor=2.0)
else:
    LINEAR_ROPE["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}

# name, config class, model class, config fields, expected: "same", or a text the refusal must contain
CASES = [
    ("llama_gqa_theta500k", "LlamaConfig", "LlamaForCausalLM",
     dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False, **rope(500000.0)), "same"),
    ("llama3_rope_scaling_tied", "LlamaConfig", "LlamaForCausalLM",
     dict(COMMON, num_key_value_heads=1, tie_word_embeddings=True, **rope(500000.0, LLAMA3_SCALING)), "same"),
    ("qwen2_biases_tied", "Qwen2Config", "Qwen2ForCausalLM",
     dict(COMMON, num_key_value_heads=2, tie_word_embeddings=True, use_sliding_window=False, **rope(1000000.0)), "same"),
    ("qwen3_qknorm_headdim", "Qwen3Config", "Qwen3ForCausalLM",
     dict(COMMON, num_key_value_heads=2, head_dim=48, tie_word_embeddings=False, attention_bias=False,
          use_sliding_window=False, **rope(1000000.0)), "same"),
    ("mistral", "MistralConfig", "MistralForCausalLM",
     dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False, sliding_window=None, **rope(1000000.0)), "same"),
    ("llama_attention_bias_refused", "LlamaConfig", "LlamaForCausalLM",
     dict(COMMON, attention_bias=True, **rope(10000.0)), "attention_bias"),
    ("llama_linear_rope_scaling_refused", "LlamaConfig", "LlamaForCausalLM", dict(COMMON, **LINEAR_ROPE), "rope"),
]


def make_model(cfg_cls, model_cls, fields, seed):
    torch.manual_seed(seed)
    cfg = getattr(transformers, cfg_cls)(**fields)
    model = getattr(transformers, model_cls)(cfg).float().eval()
    with torch.no_grad():  # norms at 1 and biases at 0 would hide a reader that ignores them
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.2 * torch.randn_like(p))
    return model


@torch.no_grad()
def hf_greedy(model, ids):
    ids, rows = list(ids), []
    for _ in range(STEPS):
        logits = model(torch.tensor([ids])).logits[0, -1].double().numpy()
        rows.append(logits)
        ids.append(int(logits.argmax()))
    return np.stack(rows), ids[-STEPS:]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True)  # a random model's text is any bytes
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgetrain", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backends", default="cpu")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    ids = list(PROMPT.encode())
    results, ok_all = [], True
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; prompt of {len(ids)} byte tokens, "
          f"{STEPS} greedy steps; logits agree when max|ours - HF| / max|HF| <= {REL_TOL:g}", flush=True)
    for k, (name, cfg_cls, model_cls, fields, expect) in enumerate(CASES):
        folder = os.path.join(args.out, name)
        model = make_model(cfg_cls, model_cls, fields, 1000 + k)
        model.save_pretrained(folder, safe_serialization=True)
        ckpt = os.path.join(args.out, name + ".safetensors")
        rc, text = run([args.edgetrain, "convert", folder, ckpt, "--to", "edgetrain", "--mode", "fp32",
                        "--tokenizer", "bytes"])
        if expect != "same":
            ok = rc != 0 and expect in text
            results.append({"case": name, "expect_refused_naming": expect, "rc": rc, "message": text.strip()[-600:], "ok": ok})
            print(f"{name:36s} refused={rc != 0} names '{expect}': {'ok' if ok else 'FAILED'}  ({text.strip()[-200:]})",
                  flush=True)
            ok_all &= ok
            continue
        if rc != 0:
            results.append({"case": name, "ok": False, "message": text.strip()[-600:]})
            print(f"{name:36s} import FAILED: {text.strip()[-300:]}", flush=True)
            ok_all = False
            continue
        hf_logits, hf_tokens = hf_greedy(model, ids)
        for backend in args.backends.split(","):
            npy = os.path.join(args.out, f"{name}_{backend}.npy")
            rc, text = run([args.edgetrain, "generate", "--checkpoint", ckpt, "--prompt", PROMPT, "--temperature", "0",
                            "--max-tokens", str(STEPS), "--logits", npy, "--backend", backend])
            if rc != 0:
                results.append({"case": name, "backend": backend, "ok": False, "message": text.strip()[-600:]})
                print(f"{name:36s} {backend:7s} generate FAILED: {text.strip()[-300:]}", flush=True)
                ok_all = False
                continue
            ours = np.load(npy).astype(np.float64)
            our_tokens = [int(t) for t in ours.argmax(1)]
            same_tokens = our_tokens == hf_tokens
            # Rows after a first differing token continue different texts: compare up to it.
            n = len(ours) if same_tokens else next(i for i, (a, b) in enumerate(zip(our_tokens, hf_tokens)) if a != b) + 1
            rel = float(np.max(np.abs(ours[:n] - hf_logits[:n])) / np.max(np.abs(hf_logits[:n])))
            ok = same_tokens and rel <= REL_TOL and ours.shape == hf_logits.shape
            ok_all &= ok
            results.append({"case": name, "backend": backend, "rel_logit_error": rel, "tokens_identical": same_tokens,
                            "hf_tokens": hf_tokens, "our_tokens": our_tokens, "ok": ok})
            print(f"{name:36s} {backend:7s} logits rel error {rel:.2e}, {STEPS} greedy tokens "
                  f"{'identical' if same_tokens else 'DIFFER'}: {'ok' if ok else 'FAILED'}", flush=True)
    with open(os.path.join(args.out, "hf_check.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "rel_tol": REL_TOL,
                   "results": results}, f, indent=2)
    print("all cases agree" if ok_all else "SOME CASES FAILED")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())

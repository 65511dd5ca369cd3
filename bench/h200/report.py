#!/usr/bin/env python3
"""Turns the JSON that `edgetrain bench` wrote on the GPU machine (Vulkan and WebGPU runs, each with the
PyTorch peer measured in the same session) into the Markdown tables of docs/H200.md."""
import json
import sys


def load(path):
    with open(path) as f:
        return {c["id"]: c for c in json.load(f)["cases"]}


def fmt(v, unit):
    return f"{v / 1000:.1f} TFLOP/s" if unit == "GFLOP/s" else f"{v:.0f} GB/s"


def main(vk_path, wg_path):
    vk, wg = load(vk_path), load(wg_path)
    print("| case | Vulkan ms | Vulkan rate | PyTorch peer ms | peer rate | Vulkan / peer | WebGPU ms | WebGPU / Vulkan |")
    print("|---|---|---|---|---|---|---|---|")
    for cid, c in vk.items():
        if c.get("status") != "ok":
            print(f"| `{cid}` | {c.get('status')} | | | | | | |")
            continue
        w = wg.get(cid, {})
        peer = c.get("peer") or {}
        ratio = c.get("ratio_ours_over_peer")
        wg_ms = w.get("median_ms")
        print(f"| `{cid}` | {c['median_ms']:.4f} | {fmt(c['value'], c['unit'])} | "
              f"{peer.get('ms', float('nan')):.4f} | {fmt(c['peer_value'], c['unit']) if 'peer_value' in c else '-'} | "
              f"{ratio:.2f}x | {wg_ms:.4f} | {c['median_ms'] / wg_ms:.2f}x |" if wg_ms else "| - |")


if __name__ == "__main__":
    main(*sys.argv[1:3])

#!/usr/bin/env python3
# PyTorch peers of `edgetrain bench`: the same cases (same ids) and the same Llama training step measured
# with plain PyTorch on the same machine, written as JSON that `edgetrain bench --peer FILE` reads.
#
#   python3 bench/peer_torch.py --out peer.json                       # every op case (CUDA: realistic)
#   python3 bench/peer_torch.py --out peer.json --cases mm,adamw_step  # a subset (op names or case ids)
#   python3 bench/peer_torch.py --out peer.json --cases none --step base --batch 16 --seq 512 [--compile]
#
# fp32 with TF32 off (the attention cases and the matrix products also in bf16, ids ending in :f16; the step also with TF32 and bf16 autocast). Timing: CUDA events (perf_counter on CPU), warm-up, medians; like the
# harness, a timed sample runs the op `inner` times back to back (chosen so a sample lasts ~--target-ms)
# and is divided by inner. The rate columns of the harness are recomputed from "ms" with its own models.
import argparse
import json
import math
import os
import platform
import signal
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------- timing


class Timer:
    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def once(self, fn, inner=1):
        """Seconds of `inner` back-to-back calls of fn."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        return time.perf_counter() - t0


# As in edgetrain's bench (tools/bench_support.cpp): a GPU idle for over half a second since the last timing
# is kept busy for 2 s before the next case is timed, since its clocks and power take that long to come back.
IDLE_GAP, RAMP = 0.5, 2.0
last_end = None


def ramp_after_idle(timer, fn):
    if not timer.cuda or (last_end is not None and time.perf_counter() - last_end < IDLE_GAP):
        return
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < RAMP:
        fn()
        timer.sync()


def measure(timer, fn, args):
    """Median and min seconds per call, with the inner count and number of samples."""
    global last_end
    fn()  # first call: allocations, autotuning
    timer.sync()
    ramp_after_idle(timer, fn)
    single = min(timer.once(fn) for _ in range(3))
    inner = args.inner or max(1, min(args.max_inner, math.ceil(args.target_ms * 1e-3 / max(single, 1e-9))))
    for _ in range(args.warmup):
        timer.once(fn, inner)
    samples = []
    budget_start = time.perf_counter()
    for i in range(args.reps):
        if i >= 1 and time.perf_counter() - budget_start > args.case_seconds:
            break
        samples.append(timer.once(fn, inner) / inner)
    last_end = time.perf_counter()
    return {"median": statistics.median(samples), "min": min(samples), "inner": inner, "reps": len(samples),
            "single_call_ms": single * 1e3}


# ---------------------------------------------------------------------------------------------- cases
# Each case: (op, shape id, builder). A builder takes the device and returns (fn, what); it allocates its
# tensors once, fn runs the measured work. The ids match tools/bench.cpp exactly.


def dims(**kw):
    return "_".join(f"{k}{v}" for k, v in kw.items())


def rand(shape, dev, lo=-1.0, hi=1.0):
    return torch.empty(shape, device=dev, dtype=torch.float32).uniform_(lo, hi)


# The matrix products' half-precision peers: bf16 operands and output (cuBLAS, fp32 accumulation), what a
# user training in mixed precision runs. Their ids end in ":f16", the suffix `edgetrain bench --precision fp16`
# gives its fp16-operand cases.
HALF = ":f16"


def mm_case(M, N, K, half=False):
    def build(dev):
        t = torch.bfloat16 if half else torch.float32
        a, b = rand((M, K), dev).to(t), rand((K, N), dev).to(t)
        out = torch.empty((M, N), device=dev, dtype=t)
        return (lambda: torch.mm(a, b, out=out)), f"torch.mm(a, b) {t}" + ("" if half else ", TF32 off")
    return "mm", dims(M=M, N=N, K=K) + (HALF if half else ""), build


def dw_case(M, N, K, half=False):
    def build(dev):
        t = torch.bfloat16 if half else torch.float32
        dy, x = rand((M, N), dev).to(t), rand((M, K), dev).to(t)
        dw = torch.empty((N, K), device=dev, dtype=t)
        return (lambda: torch.mm(dy.t(), x, out=dw)), f"torch.mm(dy.t(), x) {t}" + ("" if half else ", TF32 off")
    return "linear_dW", dims(M=M, N=N, K=K) + (HALF if half else ""), build


def random_q4(N, K, gs, dev):
    """Packed codes u8 [N, K/2] (low nibble = even k) and scales [G, N], as edgetrain's interchange layout."""
    assert K % gs == 0 and K % 2 == 0
    packed = torch.randint(0, 256, (N, K // 2), device=dev, dtype=torch.uint8)
    scales = rand((K // gs, N), dev, 0.01, 0.1)
    return packed, scales


def dequantize(packed, scales, gs):
    """W[n,k] = (c[n,k] - 8) * scales[k // gs, n], fp32 [N, K]."""
    N = packed.shape[0]
    codes = torch.stack((packed & 15, packed >> 4), dim=-1).view(N, -1)
    K = codes.shape[1]
    w = (codes.to(torch.float32) - 8.0).view(N, K // gs, gs) * scales.t().unsqueeze(-1)
    return w.view(N, K)


def q4_case(M, N, K, gs, half=False):
    def build(dev):
        packed, scales = random_q4(N, K, gs, dev)
        if half:
            x = rand((M, K), dev).to(torch.bfloat16)
            return (lambda: torch.mm(x, dequantize(packed, scales, gs).to(torch.bfloat16).t())), \
                "dequantize packed 4-bit codes ((c-8)*scale per group) to bf16, then x @ W.t() in bf16, timed together"
        x = rand((M, K), dev)
        return (lambda: torch.mm(x, dequantize(packed, scales, gs).t())), \
            "dequantize packed 4-bit codes to fp32 ((c-8)*scale per group), then x @ W.t(), timed together"
    return "linear_q4gsw", dims(M=M, N=N, K=K, gs=gs) + (HALF if half else ""), build


def q4_backward_case(M, N, K, gs, half=False):
    def build(dev):
        packed, scales = random_q4(N, K, gs, dev)
        if half:
            dy = rand((M, N), dev).to(torch.bfloat16)
            return (lambda: torch.mm(dy, dequantize(packed, scales, gs).to(torch.bfloat16))), \
                "dequantize packed 4-bit codes to bf16, then dy @ W in bf16, timed together"
        dy = rand((M, N), dev)
        return (lambda: torch.mm(dy, dequantize(packed, scales, gs))), \
            "dequantize packed 4-bit codes to fp32, then dy @ W, timed together"
    return "linear_q4gsw_backward", dims(M=M, N=N, K=K, gs=gs) + (HALF if half else ""), build


def requant_case(N, K, gs):
    def build(dev):
        latent, scales = rand((N, K), dev, -0.5, 0.5), rand((K // gs, N), dev, 0.01, 0.1)
        s = scales.t().repeat_interleave(gs, dim=1)  # [N, K], outside the timing (a cached expansion)

        def fn():
            safe = torch.where(s > 0, s, torch.ones_like(s))
            c = torch.where(s > 0, torch.clamp(torch.round(latent / safe), -8, 7) + 8, torch.full_like(s, 8.0))
            c = c.to(torch.uint8)
            return c[:, 0::2] | (c[:, 1::2] << 4)
        return fn, "round-half-even(latent/s) clamped to [-8,7] + 8, packed two codes per byte"
    return "q4gsw_requant", dims(N=N, K=K, gs=gs), build


def ce_case(R, V):
    def build(dev):
        logits = rand((R, V), dev, -4.0, 4.0).requires_grad_(True)
        labels = torch.randint(0, V, (R,), device=dev)

        def fn():
            loss = F.cross_entropy(logits, labels)
            return torch.autograd.grad(loss, logits)
        return fn, "F.cross_entropy forward + backward (autograd.grad w.r.t. logits), timed together"
    return "fused_ce", dims(R=R, V=V), build


def adamw_case(P):
    def build(dev):
        p = nn.Parameter(rand((P,), dev))
        p.grad = rand((P,), dev, -1e-2, 1e-2)
        # edgetrain's adamw_step also zeroes the gradient it took: the peer does the same work.
        try:
            opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
            what = "torch.optim.AdamW(fused=True).step() + zero_grad(set_to_none=False) on one tensor"
        except (RuntimeError, ValueError, TypeError) as e:
            opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
            what = f"torch.optim.AdamW().step() + zero_grad(set_to_none=False) on one tensor (fused unavailable: {e})"

        def step():
            opt.step()
            opt.zero_grad(set_to_none=False)
        return step, what
    return "adamw_step", dims(P=P), build


def rms_case(R, D):
    def build(dev):
        x, w = rand((R, D), dev), rand((D,), dev)

        def fn():
            rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
            return x * rstd * w, rstd
        return fn, "x * rsqrt(mean(x^2) + eps) * w with plain ops (rstd kept, as edgetrain's op)"
    return "rms_norm", dims(R=R, D=D), build


def softmax_case(R, D):
    def build(dev):
        x = rand((R, D), dev, -4, 4)
        return (lambda: torch.softmax(x, -1)), "torch.softmax(x, -1)"
    return "softmax", dims(R=R, D=D), build


def causal_case(B, H, T):
    def build(dev):
        x = rand((B, H, T, T), dev, -4, 4)
        mask = torch.ones((T, T), dtype=torch.bool, device=dev).triu(1)
        scale = 1.0 / math.sqrt(64.0)
        return (lambda: torch.softmax((x * scale).masked_fill(mask, float("-inf")), -1)), \
            "softmax((x*scale).masked_fill(causal mask, -inf), -1)"
    return "causal_softmax", dims(B=B, H=H, T=T, S=T), build


def silu_case(R, D):
    def build(dev):
        g, u = rand((R, D), dev), rand((R, D), dev)
        return (lambda: F.silu(g) * u), "F.silu(g) * u"
    return "silu_mul", dims(R=R, D=D), build


def rope_tables(T, D, theta, dev):
    inv = theta ** (-torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D)  # [D/2]
    ang = torch.arange(T, device=dev, dtype=torch.float32)[:, None] * inv[None, :]  # [T, D/2]
    return torch.cos(ang), torch.sin(ang)


def apply_rope(x, cos, sin):
    """x [B, T, H, D]: rotate adjacent pairs (2i, 2i+1) by t * theta^(-2i/D); cos/sin [T, D/2]."""
    B, T, H, D = x.shape
    xp = x.view(B, T, H, D // 2, 2)
    x0, x1 = xp[..., 0], xp[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).view(B, T, H, D)


def rope_case(B, T, H, D):
    def build(dev):
        x = rand((B, T, H, D), dev)
        cos, sin = rope_tables(T, D, 10000.0, dev)
        return (lambda: apply_rope(x, cos, sin)), "adjacent-pair rotation with plain ops (cos/sin tables precomputed)"
    return "rope", dims(B=B, T=T, H=H, D=D), build


def copy_case(N):
    def build(dev):
        x, y = rand((N,), dev), torch.empty((N,), device=dev)
        return (lambda: y.copy_(x)), "y.copy_(x): device copy bandwidth probe"
    return "copy", dims(N=N), build


def attention_inputs(B, H, T, D, dev, dtype, grad):
    """q, k, v stored [B, T, H, D] (edgetrain's layout: rows of the projections) and seen as [B, H, T, D]."""
    return [torch.empty((B, T, H, D), device=dev, dtype=dtype).uniform_(-1.0, 1.0).transpose(1, 2).requires_grad_(grad)
            for _ in range(3)]


def attention_case(B, H, T, D, dtype=torch.float32):
    """Causal SDPA forward; fp32 ids match edgetrain's `attention` case, bf16 ones its fp16 case (:f16)."""
    tag = "" if dtype == torch.float32 else HALF

    def build(dev):
        q, k, v = attention_inputs(B, H, T, D, dev, dtype, False)
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), \
            f"F.scaled_dot_product_attention(is_causal=True) forward, {dtype}, [B,T,H,D] storage seen as [B,H,T,D]"
    return "attention", dims(B=B, H=H, T=T, D=D) + tag, build


def attention_backward_case(B, H, T, D, dtype=torch.float32):
    """The backward kernels alone: autograd.grad of one stored SDPA output w.r.t. q, k, v."""
    tag = "" if dtype == torch.float32 else HALF

    def build(dev):
        q, k, v = attention_inputs(B, H, T, D, dev, dtype, True)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        dout = torch.empty_like(out).uniform_(-1.0, 1.0)
        return (lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)), \
            f"torch.autograd.grad of F.scaled_dot_product_attention(is_causal=True) w.r.t. q, k, v, {dtype}"
    return "attention_backward", dims(B=B, H=H, T=T, D=D) + tag, build


def attention_fwd_bwd_case(B, H, T, D, dtype=torch.float32):
    """Forward + backward timed together (a training step's attention); peer-only ids."""
    tag = "" if dtype == torch.float32 else HALF

    def build(dev):
        q, k, v = attention_inputs(B, H, T, D, dev, dtype, True)
        dout = torch.empty((B, H, T, D), device=dev, dtype=dtype).uniform_(-1.0, 1.0)

        def fn():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return torch.autograd.grad(out, (q, k, v), dout)
        return fn, f"F.scaled_dot_product_attention(is_causal=True) forward + autograd.grad w.r.t. q, k, v, {dtype}"
    return "attention_fwd_bwd", dims(B=B, H=H, T=T, D=D) + tag, build


def attention_cases(B, H, T, D):
    return [make(B, H, T, D, dtype) for dtype in (torch.float32, torch.bfloat16)
            for make in (attention_case, attention_backward_case, attention_fwd_bwd_case)]


def all_cases(small):
    if small:
        return [mm_case(512, 512, 512), dw_case(512, 256, 256), dw_case(512, 512, 512),
                q4_case(512, 512, 512, 64), q4_case(1, 512, 512, 64), q4_case(1, 384, 512, 64),
                q4_backward_case(512, 512, 512, 64), requant_case(512, 512, 64), ce_case(512, 512),
                adamw_case(1 << 18), rms_case(512, 512), softmax_case(512, 512), causal_case(2, 4, 64),
                silu_case(512, 512), rope_case(2, 64, 4, 64), copy_case(1 << 18)] + attention_cases(4, 4, 128, 32) + half_cases(True)
    return [mm_case(4096, 4096, 4096), mm_case(8192, 8192, 8192), dw_case(4096, 2048, 2048),
            dw_case(4096, 4096, 4096), dw_case(8192, 2048, 2048), dw_case(8192, 768, 768), dw_case(8192, 768, 2048),
            mm_case(4096, 16, 2048), mm_case(4096, 16, 8192), mm_case(4096, 2048, 16), dw_case(4096, 16, 2048),
            dw_case(4096, 2048, 16), q4_case(4096, 4096, 4096, 64), q4_case(1, 4096, 4096, 64), q4_case(1, 11008, 4096, 64),
            q4_backward_case(4096, 4096, 4096, 64), requant_case(4096, 4096, 64), ce_case(8192, 32000), adamw_case(1 << 28), rms_case(8192, 4096),
            softmax_case(8192, 4096), causal_case(16, 12, 512), silu_case(8192, 11008), rope_case(16, 512, 32, 128),
            copy_case(1 << 28)] + attention_cases(16, 12, 512, 64) + step_cases(False) + half_cases(False)


def step_cases(half):
    """The training steps' own 4-bit products (group size 32) and attention (tools/bench_cases.cpp): the base
    preset's (8192 tokens, width 768, ffn 2048) and the Llama-3.2-1B shape's (4096 tokens, width 2048, ffn 8192;
    attention without its grouped key/value heads)."""
    q4 = [q4_case(8192, 768, 768, 32, half), q4_case(8192, 2048, 768, 32, half), q4_case(8192, 768, 2048, 32, half),
          q4_backward_case(8192, 2048, 768, 32, half), q4_backward_case(8192, 768, 2048, 32, half),
          q4_case(4096, 8192, 2048, 32, half), q4_case(4096, 2048, 8192, 32, half),
          q4_backward_case(4096, 8192, 2048, 32, half), q4_backward_case(4096, 2048, 8192, 32, half)]
    return q4 if half else q4 + attention_cases(4, 32, 1024, 64)


def half_cases(small):
    """The bf16 peers of the matrix-product cases (ids ending in :f16)."""
    if small:
        return [mm_case(512, 512, 512, True), dw_case(512, 512, 512, True), q4_case(512, 512, 512, 64, True),
                q4_backward_case(512, 512, 512, 64, True)]
    return [mm_case(4096, 4096, 4096, True), mm_case(8192, 8192, 8192, True), dw_case(4096, 2048, 2048, True),
            dw_case(4096, 4096, 4096, True), dw_case(8192, 2048, 2048, True), dw_case(8192, 768, 768, True),
            dw_case(8192, 768, 2048, True), mm_case(4096, 16, 2048, True), mm_case(4096, 16, 8192, True),
            mm_case(4096, 2048, 16, True),
            dw_case(4096, 16, 2048, True), dw_case(4096, 2048, 16, True), q4_case(4096, 4096, 4096, 64, True),
            q4_case(1, 4096, 4096, 64, True), q4_case(1, 11008, 4096, 64, True),
            q4_backward_case(4096, 4096, 4096, 64, True)] + step_cases(True)


# ---------------------------------------------------------------------------------------------- Llama step
# The model of src/model (ModelConfig::preset): token embedding, n_layers x (RMSNorm, rotary causal
# attention, RMSNorm, SwiGLU MLP), final RMSNorm, untied fp32 head; every block linear is fake-quantized
# q4gsw (frozen per-group scales max|w|/7, round half even, clamp [-8,7], straight-through estimator).

PRESETS = {  # dim, n_layers, n_heads, ffn_dim, max_seq (src/model/config.cpp; tools/bench.cpp step_config)
    "tiny": (32, 2, 2, 64, 32),
    "mini": (128, 4, 4, 384, 128),
    "small": (384, 8, 6, 1024, 256),
    "base": (768, 12, 12, 2048, 512),
    "llama3.2-1b": (2048, 16, 32, 8192, 1024),
}
# What a shape has besides the presets' (byte vocabulary, untied head, rope base 10000, LoRA rank 8, alpha 16
# on q,k,v,o): Llama-3.2-1B's grouped-query attention, vocabulary, tied head, rope base, and the LoRA of the
# issue's qlora peer (rank 16, alpha 32, all seven projections).
SHAPE = {"llama3.2-1b": {"kv_heads": 8, "vocab": 128256, "tied": True, "theta": 500000.0, "lora": (16, 32.0, 7)}}
DEFAULT_SHAPE = {"kv_heads": None, "vocab": 256, "tied": False, "theta": 10000.0, "lora": (8, 16.0, 4)}


class Q4Linear(nn.Module):
    def __init__(self, n_in, n_out, gs):
        super().__init__()
        assert n_in % gs == 0
        self.gs = gs
        self.weight = nn.Parameter(torch.randn(n_out, n_in) * 0.02)
        self.register_buffer("scales", torch.zeros(n_out, n_in // gs))
        self.freeze_scales()

    @torch.no_grad()
    def freeze_scales(self):
        n_out, n_in = self.weight.shape
        self.scales.copy_(self.weight.view(n_out, n_in // self.gs, self.gs).abs().amax(-1) / 7.0)

    def forward(self, x):
        w = self.weight
        n_out, n_in = w.shape
        s = self.scales.unsqueeze(-1)  # [N, G, 1]
        safe = torch.where(s > 0, s, torch.ones_like(s))
        wg = w.view(n_out, n_in // self.gs, self.gs)
        wq = torch.where(s > 0, torch.clamp(torch.round(wg / safe), -8, 7) * s, torch.zeros_like(wg)).view(n_out, n_in)
        return F.linear(x, w + (wq - w).detach())


class LoraQ4Linear(nn.Module):
    """qlora: the frozen base holds q4gsw values (dequantized once, stored in `dtype`: bf16 under autocast,
    as a PyTorch user would keep a frozen base) plus a trainable low-rank update scaled by alpha / rank."""

    def __init__(self, n_in, n_out, gs, rank, alpha, dtype, lora):
        super().__init__()
        q = Q4Linear(n_in, n_out, gs)
        with torch.no_grad():
            w, s = q.weight.view(n_out, n_in // gs, gs), q.scales.unsqueeze(-1)
            wq = torch.where(s > 0, torch.clamp(torch.round(w / torch.where(s > 0, s, torch.ones_like(s))), -8, 7) * s,
                             torch.zeros_like(w)).view(n_out, n_in)
        self.register_buffer("base", wq.to(dtype))
        self.scale = alpha / rank
        self.a = nn.Parameter(torch.randn(rank, n_in) / math.sqrt(n_in)) if lora else None
        self.b = nn.Parameter(torch.zeros(n_out, rank)) if lora else None

    def forward(self, x):
        y = F.linear(x, self.base)
        return y if self.a is None else y + F.linear(F.linear(x, self.a), self.b) * self.scale


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, dim, heads, ffn, gs, sdpa, shape, qlora, base_dtype):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.kv_heads = shape["kv_heads"] or heads
        kv = dim // heads * self.kv_heads
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        rank, alpha, n_targets = shape["lora"]

        def linear(n_in, n_out, index):  # index: q k v o gate up down (LoRA on the first n_targets)
            if not qlora:
                return Q4Linear(n_in, n_out, gs)
            return LoraQ4Linear(n_in, n_out, gs, rank, alpha, base_dtype, index < n_targets)
        self.q, self.k, self.v, self.o = linear(dim, dim, 0), linear(dim, kv, 1), linear(dim, kv, 2), linear(dim, dim, 3)
        self.gate, self.up, self.down = linear(dim, ffn, 4), linear(dim, ffn, 5), linear(ffn, dim, 6)
        if qlora:
            for p in (*self.attn_norm.parameters(), *self.mlp_norm.parameters()):
                p.requires_grad_(False)

    def forward(self, x, cos, sin, mask):
        B, T, D = x.shape
        H, hd, KV = self.heads, D // self.heads, self.kv_heads
        h = self.attn_norm(x)
        q = apply_rope(self.q(h).view(B, T, H, hd), cos, sin).transpose(1, 2)
        k = apply_rope(self.k(h).view(B, T, KV, hd), cos, sin).transpose(1, 2)
        v = self.v(h).view(B, T, KV, hd).transpose(1, 2)
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=KV != H)
        else:
            if KV != H:
                k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            a = torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(B, T, D))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab, dim, layers, heads, ffn, gs, sdpa, shape=DEFAULT_SHAPE, qlora=False,
                 base_dtype=torch.float32):
        super().__init__()
        self.dim, self.heads, self.theta = dim, heads, shape["theta"]
        self.emb = nn.Embedding(vocab, dim)
        nn.init.normal_(self.emb.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, ffn, gs, sdpa, shape, qlora, base_dtype) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        if shape["tied"]:
            self.head.weight = self.emb.weight
        else:
            nn.init.normal_(self.head.weight, std=0.02)
        if qlora:  # only the adapters train (edgetrain's qlora: embedding, head and norms frozen)
            for p in (*self.emb.parameters(), *self.head.parameters(), *self.norm.parameters()):
                p.requires_grad_(False)

    def forward(self, tokens, labels):
        T = tokens.shape[1]
        cos, sin = rope_tables(T, self.dim // self.heads, self.theta, tokens.device)
        mask = torch.ones((T, T), dtype=torch.bool, device=tokens.device).triu(1)
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


class Timeout(Exception):
    pass


def time_steps(args, dev, timer, sdpa, compile_model, precision="fp32"):
    dim, layers, heads, ffn, _ = PRESETS[args.step]
    shape = SHAPE.get(args.step, DEFAULT_SHAPE)
    torch.manual_seed(1234)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    amp = precision == "bf16" and dev.type == "cuda"
    model = Llama(args.vocab, dim, layers, heads, ffn, args.group_size, sdpa, shape, args.mode == "qlora",
                  torch.bfloat16 if amp else torch.float32).to(dev)
    trainable = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in trainable if p.dim() >= 2]
    no_decay = [p for p in trainable if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    except (RuntimeError, ValueError, TypeError):
        opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    fwd = torch.compile(model) if compile_model else model
    g = torch.Generator(device="cpu").manual_seed(42)
    batches = [(torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(dev),
                torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(dev)) for _ in range(2)]
    state = {"i": 0, "loss": None}

    # bf16: autocast over the forward (matmuls and SDPA in bf16, fp32 masters and AdamW), as users train in
    # mixed precision; tf32: fp32 tensors with TF32 tensor-core matmuls.
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"

    def step():
        tokens, labels = batches[state["i"] % 2]
        state["i"] += 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
            loss = fwd(tokens, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        state["loss"] = loss

    t0 = time.perf_counter()
    for _ in range(max(2, args.warmup)):  # compiles on the first call when compiling
        step()
    timer.sync()
    setup = time.perf_counter() - t0
    samples, start = [], time.perf_counter()
    for i in range(args.steps):
        if i >= 1 and time.perf_counter() - start > args.step_seconds:
            break
        samples.append(timer.once(step))
    med = statistics.median(samples)
    tokens = args.batch * args.seq
    peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else 0
    return {"peak_bytes": peak, "mode": args.mode, "tokens_per_s": tokens / med, "tokens_per_s_best": tokens / min(samples), "step_median_ms": med * 1e3,
            "step_min_ms": min(samples) * 1e3, "steps_timed": len(samples), "warmup_and_compile_s": setup,
            "loss_last": float(state["loss"].item()),
            "what": ("torch.compile " if compile_model else "eager ") + ("SDPA" if sdpa else "matmul+mask") +
                    " attention, fake-quant STE q4 block linears, " +
                    {"fp32": "fp32", "tf32": "fp32 with TF32 matmuls", "bf16": "bf16 autocast"}[precision] +
                    (", qlora (frozen q4-valued base, LoRA rank %d on %d projections)" % shape["lora"][::2]
                     if args.mode == "qlora" else "") +
                    ", AdamW, grad clip 1.0"}


def run_step(args, dev, timer, doc, save):
    seq_default = PRESETS[args.step][4]
    args.seq = args.seq or seq_default
    key = f"{args.step}:{dims(B=args.batch, T=args.seq, V=args.vocab)}"
    entry = doc["step"].setdefault(key, {})
    # The same entry serves `edgetrain bench --step ... --precision fp16` (its id ends in :f16): each variant
    # names its precision, and the bf16 ones are the peers of a mixed-precision step.
    doc["step"][key + HALF] = entry
    variants = [("eager", False, False, "fp32"), ("eager_sdpa", True, False, "fp32"),
                ("tf32_eager_sdpa", True, False, "tf32"), ("bf16_eager_sdpa", True, False, "bf16")]
    if args.compile:
        variants += [("compile", False, True, "fp32"), ("bf16_compile_sdpa", True, True, "bf16")]
    if args.variants:
        variants = [v for v in variants if v[0] in args.variants.split(",")]
    for name, sdpa, comp, precision in variants:
        print(f"step {key} {args.mode} {name} ...", flush=True)
        use_alarm = comp and hasattr(signal, "SIGALRM") and args.compile_timeout > 0
        try:
            if use_alarm:
                def on_alarm(signum, frame):
                    raise Timeout(f"torch.compile step took over {args.compile_timeout} s")
                signal.signal(signal.SIGALRM, on_alarm)
                signal.alarm(args.compile_timeout)
            r = time_steps(args, dev, timer, sdpa, comp, precision)
            print(f"  {r['tokens_per_s']:.0f} tokens/s, step {r['step_median_ms']:.2f} ms, "
                  f"peak {r['peak_bytes'] / 2**30:.2f} GiB", flush=True)
        except Exception as e:  # noqa: BLE001 - a peer that fails is reported, never fatal
            r = {"skipped": f"{type(e).__name__}: {e}"[:500]}
            print(f"  skipped: {r['skipped']}", flush=True)
        finally:
            if use_alarm:
                signal.alarm(0)
        entry[name] = r
        save()
        if dev.type == "cuda":
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__ or "PyTorch peers of edgetrain bench")
    ap.add_argument("--out", required=True, help="JSON file to write (rewritten after each case)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--cases", default="", help="comma-separated op names or case ids; 'none' skips the ops")
    ap.add_argument("--size", choices=["small", "realistic"], default=None,
                    help="default: realistic on CUDA, small on the CPU")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--inner", type=int, default=0, help="calls per timed sample (0 = auto, ~--target-ms)")
    ap.add_argument("--max-inner", type=int, default=50)
    ap.add_argument("--target-ms", type=float, default=25.0)
    ap.add_argument("--case-seconds", type=float, default=20.0)
    ap.add_argument("--step", choices=sorted(PRESETS), default=None, help="also time the training step")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=0, help="default: the preset's max_seq")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=0, help="default: the shape's (256 for the presets)")
    ap.add_argument("--mode", choices=["qat", "qlora"], default="qat", help="step: as edgetrain bench --mode")
    ap.add_argument("--variants", default="", help="step: comma-separated variant names (default all)")
    ap.add_argument("--group-size", type=int, default=32, help="as edgetrain's default ModelConfig::group_size")
    ap.add_argument("--step-seconds", type=float, default=120.0)
    ap.add_argument("--compile", action="store_true", help="also time a torch.compile'd step")
    ap.add_argument("--compile-timeout", type=int, default=300, help="seconds before the compiled variant is abandoned")
    args = ap.parse_args()
    if not args.vocab:
        args.vocab = SHAPE.get(args.step, DEFAULT_SHAPE)["vocab"]

    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    small = args.size == "small" if args.size else dev.type != "cuda"
    timer = Timer(dev)
    meta = {"tool": "bench/peer_torch.py", "torch": torch.__version__, "python": platform.python_version(),
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu",
            "cuda": torch.version.cuda, "size": "small" if small else "realistic", "tf32": False,
            "threads": torch.get_num_threads(), "reps": args.reps, "warmup": args.warmup}
    doc = {"meta": meta, "cases": {}, "step": {}}

    def save():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
        os.replace(tmp, args.out)

    save()
    print(f"peer_torch on {meta['device']} (torch {meta['torch']}, cuda {meta['cuda']}), size {meta['size']}", flush=True)
    wanted = [w for w in args.cases.split(",") if w]
    if wanted != ["none"]:
        for op, shape, build in all_cases(small):
            cid = f"{op}:{shape}"
            if wanted and op not in wanted and cid not in wanted and "all" not in wanted:
                continue
            print(f"{cid:46s}", end=" ", flush=True)
            fn = None
            try:
                fn, what = build(dev)
                r = measure(timer, fn, args)
                e = {"ms": r["median"] * 1e3, "min_ms": r["min"] * 1e3, "inner": r["inner"], "reps": r["reps"],
                     "single_call_ms": r["single_call_ms"], "what": what}
                print(f"{e['ms']:10.4f} ms (min {e['min_ms']:.4f}, inner {r['inner']})", flush=True)
            except Exception as ex:  # noqa: BLE001 - out of memory and the like: report, go on
                e = {"skipped": f"{type(ex).__name__}: {ex}"[:500]}
                print(f"skipped: {e['skipped']}", flush=True)
            doc["cases"][cid] = e
            save()
            del fn
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    if args.step:
        run_step(args, dev, timer, doc, save)
    save()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())

// WebGPU encoders of the Llama-block ops: rms_norm (+ backward), rope (+ backward), silu_mul (+ backward,
// on elementwise.wgsl), embedding (+ backward), gather and causal attention (+ backward).
#include <algorithm>
#include <cmath>

#include "attention.wgsl.h"
#include "attention_backward.wgsl.h"
#include "attention_backward_prep.wgsl.h"
#include "core/attention_tiles.h"
#include "embedding.wgsl.h"
#include "rms_norm.wgsl.h"
#include "rms_norm_dw.wgsl.h"
#include "rope.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {

void encode_rms_norm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  const int64_t D = s.last(), rows = s.rows();
  if (rows == 0 || D == 0) return;
  Dispatch d(ET_WG_KERNEL(rms_norm));
  d.constant("BACKWARD", 0).constant("WG", ctx.wg_size(D >= 256 ? 256 : 64));
  d.in(0).in(1).dummy().dummy().out(0).out(1).scalars().uniform();
  d.arg(u32(rows, c)).arg(u32(D, c)).arg(ctx.float_index[0]).arg(0u);
  grid_1d(static_cast<uint64_t>(rows), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// Inputs dy, x, w, rstd; outputs dx, dw.
void encode_rms_norm_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[1].shape();
  const int64_t D = s.last(), rows = s.rows();
  if (D == 0) return;
  if (rows > 0) {
    Dispatch d(ET_WG_KERNEL(rms_norm));
    d.constant("BACKWARD", 1).constant("WG", ctx.wg_size(D >= 256 ? 256 : 64));
    out.scratch_bytes.push_back(16);
    d.in(1).in(2).in(0).in(3).out(0).scratch(0).scalars().uniform();
    d.arg(u32(rows, c)).arg(u32(D, c)).arg(0u).arg(0u);
    grid_1d(static_cast<uint64_t>(rows), ctx, d.groups);
    out.dispatches.push_back(std::move(d));
  }
  if (c.ints.size() > 1 && c.ints[1] == 0) return;  // dw = 0: a frozen w, dw left as it is
  Dispatch w(ET_WG_KERNEL(rms_norm_dw));
  w.constant("WG", ctx.wg_size(64));
  w.in(0).in(1).in(3).out(1).uniform();
  w.arg(u32(rows, c)).arg(u32(D, c)).arg(static_cast<uint32_t>(c.ints[0])).arg(0u);
  grid_1d(static_cast<uint64_t>(D), ctx, w.groups);
  out.dispatches.push_back(std::move(w));
}

namespace {

// rope.wgsl's frequency table holds this many pairs; wider heads take one dispatch per block of pairs.
constexpr int64_t kRopeTablePairs = 512;

// Frequency of pair i in turns, theta^(-2i/D) / (2 pi) mod 1, as a 64-bit binary fraction {hi, lo}.
void rope_turns(double theta, int64_t i, int64_t D, uint32_t out[2]) {
  const long double two_pi = 6.283185307179586476925286766559L;
  long double f = std::pow(static_cast<long double>(theta), -2.0L * static_cast<long double>(i) / D) / two_pi;
  f -= std::floor(f);
  long double hi = std::floor(std::ldexp(f, 32));
  long double lo = std::floor(std::ldexp(std::ldexp(f, 32) - hi, 32) + 0.5L);
  if (lo >= 4294967296.0L) {
    lo -= 4294967296.0L;
    hi += 1.0L;
  }
  if (hi >= 4294967296.0L) hi = 0.0L;  // a whole turn
  out[0] = static_cast<uint32_t>(hi);
  out[1] = static_cast<uint32_t>(lo);
}

void rope_like(const OpCall& c, const EncodeContext& ctx, Encoded& out, bool backward) {
  const Shape& s = c.in[0].shape();
  const int r = s.rank();
  const int64_t T = s[r - 3], H = s[r - 2], D = s[r - 1], pairs = D / 2;
  const int64_t BT = H * D == 0 ? 0 : s.numel() / (H * D);
  if (BT == 0 || pairs == 0 || H == 0) return;
  u32(s.numel(), c);
  const bool freqs = c.has_in(1);  // the kernel forms F from them
  const bool pos = c.has_in(2);
  const bool slot = !freqs && c.floats[0].is_slot();
  for (int64_t first = 0; first < pairs; first += kRopeTablePairs) {
    const int64_t n_pairs = std::min(kRopeTablePairs, pairs - first);
    const uint64_t n = static_cast<uint64_t>(BT) * static_cast<uint64_t>(n_pairs);
    Dispatch d(ET_WG_KERNEL(rope));
    d.constant("BACKWARD", backward ? 1 : 0).constant("THETA_SLOT", slot ? 1 : 0).constant("FREQS", freqs ? 1 : 0);
    d.constant("POS", pos ? 1 : 0);
    d.constant("WG", 64);
    d.in(0);
    if (freqs) d.in(1);
    else d.dummy();
    if (pos) d.in(2);
    else d.dummy();
    d.out(0).scalars().uniform();
    d.arg(u32(static_cast<int64_t>(n), c)).arg(u32(T, c)).arg(u32(H, c)).arg(u32(D, c)).arg(u32(first, c)).arg(u32(n_pairs, c));
    d.arg(ctx.float_index[0]).arg(ctx.float_index[1]);
    for (int64_t j = 0; j < kRopeTablePairs; ++j) {
      uint32_t f[2] = {0, 0};
      if (!slot && !freqs && j < n_pairs) rope_turns(c.floats[0].value, first + j, D, f);
      d.arg(f[0]).arg(f[1]);
    }
    grid_1d(ceil_div(n, 64), ctx, d.groups);
    out.dispatches.push_back(std::move(d));
  }
}

}  // namespace

void encode_rope(const OpCall& c, const EncodeContext& ctx, Encoded& out) { rope_like(c, ctx, out, false); }
void encode_rope_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) { rope_like(c, ctx, out, true); }

// silu_mul and its backward run elementwise.wgsl (OP 6 and 7).
void encode_silu_mul(const OpCall& c, const EncodeContext& x, Encoded& o) { elementwise_map(c, x, o, 6); }
void encode_silu_mul_backward(const OpCall& c, const EncodeContext& x, Encoded& o) { elementwise_map(c, x, o, 7); }

namespace {

Dispatch index_dispatch(uint32_t op, uint64_t threads, const EncodeContext& ctx) {
  Dispatch d(ET_WG_KERNEL(embedding));
  d.constant("OP", op).constant("WG", 64);
  grid_1d(ceil_div(threads, 64), ctx, d.groups);
  return d;
}

}  // namespace

void encode_embedding(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t V = c.in[0].shape()[0], D = c.in[0].shape()[1], n = c.out[0].numel();
  const int64_t first = c.ints.size() > 0 ? c.ints[0] : 0, total = c.ints.size() > 1 ? c.ints[1] : V;
  if (n == 0) return;
  Dispatch d = index_dispatch(0, static_cast<uint64_t>(n), ctx);
  d.in(0).in(1).out(0).uniform();
  d.arg(u32(n, c)).arg(u32(V, c)).arg(u32(D, c)).arg(0u).arg(0u).arg(kNanBits).arg(u32(total, c)).arg(u32(first, c));
  d.arg(Dims4{}).arg(Dims4{});
  out.dispatches.push_back(std::move(d));
}

void encode_embedding_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t V = c.out[0].shape()[0], D = c.out[0].shape()[1], count = c.in[1].numel();
  if (V * D == 0) return;
  Dispatch d = index_dispatch(2, static_cast<uint64_t>(D), ctx);
  d.in(0).in(1).out(0).uniform();
  d.arg(u32(D, c)).arg(u32(V, c)).arg(u32(D, c)).arg(0u).arg(static_cast<uint32_t>(c.ints[0])).arg(kNanBits);
  d.arg(u32(count, c)).arg(u32(c.ints.size() > 1 ? c.ints[1] : 0, c));
  d.arg(Dims4{}).arg(Dims4{});
  out.dispatches.push_back(std::move(d));
}

void encode_gather(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape &xs = c.in[0].shape(), &is = c.in[1].shape();
  const int r = xs.rank();
  const int64_t n = is.numel();
  if (n == 0) return;
  int dim = static_cast<int>(c.ints[0] < 0 ? c.ints[0] + r : c.ints[0]);
  u32(xs.numel(), c);
  const Dims4 stride = row_strides(xs, c);
  Dispatch d = index_dispatch(1, static_cast<uint64_t>(n), ctx);
  d.in(0).in(1).out(0).uniform();
  d.arg(u32(n, c)).arg(u32(xs[dim], c)).arg(1u).arg(static_cast<uint32_t>(4 - r + dim)).arg(0u).arg(kNanBits);
  d.arg(0u).arg(0u);
  d.arg(pad4(is, c)).arg(stride);
  out.dispatches.push_back(std::move(d));
}

namespace {
struct AttnShape {
  uint32_t B, T, S, H, KV, hd;
};
// q [B,T,H,hd] and k [B,S,KV,hd] of an attention call (inputs qi, qi + 1), with every offset the kernels
// form checked to fit 32 bits.
AttnShape attention_shape(const OpCall& c, size_t qi) {
  const Shape &q = c.in[qi].shape(), &k = c.in[qi + 1].shape();
  u32(q.numel(), c);
  u32(k.numel(), c);
  return {u32(q[0], c), u32(q[1], c), u32(k[1], c), u32(q[2], c), u32(k[2], c), u32(q[3], c)};
}
// A dispatch of attention.wgsl (forward) or attention_backward.wgsl (dq: MODE 0, dkdv: MODE 1) with its
// tiles and grid (B * heads * blocks workgroups, blocks = tiles of the A side per (batch, head)); returns
// the blocks per (batch, head) for the parameters.
Dispatch attention_dispatch(gpu::AttnKernel kind, const AttnShape& a, const OpCall& c, const EncodeContext& ctx,
                            uint32_t& blocks, bool pos) {
  const gpu::AttnTiles t = gpu::attention_tiles(kind, a.hd, ctx, c);
  const uint32_t heads = kind == gpu::AttnKernel::dkdv ? a.KV : a.H;
  blocks = static_cast<uint32_t>(ceil_div(kind == gpu::AttnKernel::dkdv ? a.S : a.T, t.a_rows()));
  Dispatch d = kind == gpu::AttnKernel::forward ? Dispatch(ET_WG_KERNEL(attention)) : Dispatch(ET_WG_KERNEL(attention_backward));
  d.constant("WG", t.invocations()).constant("RI", t.ri).constant("KJ", t.kj).constant("HC", t.hc);
  d.constant("SWZ", gpu::attention_swizzle(t.hc / 4)).constant("PSW", gpu::attention_swizzle(t.b_rows() / 4));
  d.constant("HAS_POS", pos ? 1 : 0);
  if (kind != gpu::AttnKernel::forward) {
    d.constant("MODE", kind == gpu::AttnKernel::dq ? 0 : 1).constant("A_TILES", 2);
    d.constant("B_TILES", kind == gpu::AttnKernel::dq ? 1 : 2);
  }
  grid_1d(uint64_t(a.B) * heads * blocks, ctx, d.groups);
  return d;
}
// Whether the call has its optional pos input (index i).
bool has_pos(const OpCall& c, size_t i) { return c.in.size() > i && c.in[i].defined(); }
}  // namespace

void encode_attention(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const AttnShape a = attention_shape(c, 0);
  if (uint64_t(a.B) * a.T == 0) return;
  uint32_t blocks = 0;
  const bool pos = has_pos(c, 3);
  Dispatch d = attention_dispatch(gpu::AttnKernel::forward, a, c, ctx, blocks, pos);
  d.in(0).in(1).in(2);
  if (pos) d.in(3);
  else d.dummy();
  d.out(0).out(1).scalars().uniform();
  d.arg(a.B).arg(a.T).arg(a.S).arg(a.H).arg(a.KV).arg(a.hd).arg(blocks).arg(ctx.float_index[0]);
  d.arg(0xff800000u);  // -inf bits: WGSL has no infinity literal
  out.dispatches.push_back(std::move(d));
}

// Inputs dout, q, k, v, out, lse, pos (optional); outputs dq, dk, dv. Scratch 0 = [lse | D] of every query
// row and, with pos, every query's first key (the prep kernel), scratch 1 = the unused second output of
// the dq dispatch.
void encode_attention_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const AttnShape a = attention_shape(c, 1);
  if (uint64_t(a.B) * a.S == 0) return;
  const bool pos = has_pos(c, 6);
  const uint64_t rows = uint64_t(a.B) * a.H * a.T, words = 2 * rows + (pos ? uint64_t(a.B) * a.T : 0);
  out.scratch_bytes.push_back(std::max<size_t>(16, words * sizeof(float)));
  out.scratch_bytes.push_back(16);
  u32(words, c);
  if (rows > 0) {
    Dispatch prep(ET_WG_KERNEL(attention_backward_prep));
    prep.constant("HAS_POS", pos ? 1 : 0);
    prep.in(0).in(4).in(5);
    if (pos) prep.in(6);
    else prep.dummy();
    prep.scratch(0).uniform();
    prep.arg(a.B).arg(a.T).arg(a.H).arg(a.hd);
    grid_1d(ceil_div(rows, 64), ctx, prep.groups);
    out.dispatches.push_back(std::move(prep));
  }
  auto params = [&](Dispatch& d, uint32_t blocks) {
    d.arg(a.B).arg(a.T).arg(a.S).arg(a.H).arg(a.KV).arg(a.hd).arg(blocks).arg(ctx.float_index[0]);
  };
  uint32_t blocks = 0;
  if (a.T > 0) {
    Dispatch dq = attention_dispatch(gpu::AttnKernel::dq, a, c, ctx, blocks, pos);
    dq.in(0).in(1).in(2).in(3).scratch(0, Access::read).out(0).scratch(1).scalars().uniform();
    params(dq, blocks);
    out.dispatches.push_back(std::move(dq));
  }
  Dispatch dkdv = attention_dispatch(gpu::AttnKernel::dkdv, a, c, ctx, blocks, pos);
  dkdv.in(0).in(1).in(2).in(3).scratch(0, Access::read).out(1).out(2).scalars().uniform();
  params(dkdv, blocks);
  out.dispatches.push_back(std::move(dkdv));
}

}  // namespace edgetrain::wg

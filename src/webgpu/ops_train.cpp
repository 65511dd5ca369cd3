// WebGPU encoders of the training ops: q4gsw forward (tiled GEMM, or GEMV at M = 1), q4gsw input
// gradient, dense weight gradient, fused cross-entropy (+ the loss sum) and its vocabulary-part pair
// (logsumexp_rows, fused_ce_part), requantization into W_4X8, the clipped straight-through gradient of a QAT
// weight and in-place AdamW.
#include "adamw_q4gsw_step.wgsl.h"
#include "adamw_q4gsw_step_vec4.wgsl.h"
#include "adamw_step.wgsl.h"
#include "edgetrain/q4gsw.h"
#include "fused_ce.wgsl.h"
#include "fused_ce_part.wgsl.h"
#include "fused_ce_reg.wgsl.h"
#include "grad_norm.wgsl.h"
#include "linear_q4gsw.wgsl.h"
#include "linear_q4gsw_gemv.wgsl.h"
#include "logsumexp_rows.wgsl.h"
#include "q4_dequant.wgsl.h"
#include "q4gsw_requant.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {
namespace {

// Bindings 0..5 of linear_q4gsw.wgsl / linear_q4gsw_gemv.wgsl: A, W, scales, bias (or dummy), Y, params.
void q4_common(Dispatch& d, const q4::Geometry& g, uint32_t M, bool bias, const OpCall& c) {
  d.in(0).in(1).in(2);
  if (bias) d.in(3);
  else d.dummy();
  d.out(0).uniform();
  if (M != UINT32_MAX) d.arg(M);
  d.arg(u32(g.N, c)).arg(u32(g.K, c)).arg(u32(g.group_size, c)).arg(u32(g.N8(), c)).arg(u32(g.K4(), c)).arg(bias ? 1u : 0u);
}

// Large 4-bit GEMMs: W dequantized into an fp32 [N, K] scratch (q4_dequant.wgsl), then the dense large-tile
// GEMM with B(c, j) read from it through strides. False (nothing appended) when the shape does not qualify.
bool q4_via_dense(const q4::Geometry& g, int64_t M, bool backward, bool bias, const OpCall& c,
                  const EncodeContext& ctx, Encoded& out) {
  if (M <= 1 || g.N * g.K >= (int64_t(1) << 32) || uint64_t(g.N * g.K) * 4 > ctx.max_binding_bytes) return false;
  GemmShape gs{};
  gs.M = u32(M, c);
  gs.N = u32(backward ? g.K : g.N, c);
  gs.K = u32(backward ? g.N : g.K, c);
  gs.a_si = gs.K;  // A = x [M, K] or dy [M, N], contraction contiguous
  gs.a_sc = 1;
  // B(c, j) = Wd[n * K + k]: forward c = k, j = n; backward c = n, j = k.
  gs.b_sc = backward ? u32(g.K, c) : 1;
  gs.b_sj = backward ? 1 : u32(g.K, c);
  gs.bias = bias;
  gs.f16 = f16_operands(c);  // the dense GEMM rounds the dequantized W as it loads it, like the activations
  if (!big_gemm(gs, ctx)) return false;
  Dispatch dq(ET_WG_KERNEL(q4_dequant));
  dq.in(1).in(2).scratch(0).uniform();
  dq.arg(u32(g.N, c)).arg(u32(g.K, c)).arg(u32(g.group_size, c)).arg(u32(g.N8(), c));
  grid_1d(ceil_div(static_cast<uint64_t>(g.N * g.K), 256), ctx, dq.groups);
  out.dispatches.push_back(std::move(dq));
  append_gemm(gs, {Src::input, 0, Access::read}, {Src::scratch, 0, Access::read},
              bias ? Bind{Src::input, 3, Access::read} : Bind{Src::dummy, 0, Access::read},
              {Src::output, 0, Access::read_write}, ctx, out);
  out.scratch_bytes.push_back(static_cast<size_t>(g.N * g.K) * 4);
  return true;
}

// The 4-bit GEMM (M > 1) forward or backward: through a dequantized W and the large-tile GEMM when the
// shape qualifies, else linear_q4gsw.wgsl (32x32 output tiles over [M, N] forward, [M, K] backward).
void q4_gemm(const q4::Geometry& g, int64_t M, bool backward, bool bias, const OpCall& c, const EncodeContext& ctx,
             Encoded& out) {
  if (q4_via_dense(g, M, backward, bias, c, ctx, out)) return;
  Dispatch d(ET_WG_KERNEL(linear_q4gsw));
  d.constant("BACKWARD", backward ? 1 : 0).constant("F16", f16_operands(c) ? 1 : 0);
  q4_common(d, g, u32(M, c), bias, c);
  d.arg(0u);
  d.groups[0] = static_cast<uint32_t>(ceil_div(backward ? g.K : g.N, 32));
  d.groups[1] = static_cast<uint32_t>(ceil_div(M, 32));
  out.dispatches.push_back(std::move(d));
}

}  // namespace

void encode_linear_q4gsw(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& xs = c.in[0].shape();
  q4::Geometry g(c.in[2].shape()[1], xs.last(), c.ints[0]);
  const int64_t M = xs.rows();
  bool bias = c.has_in(3);
  if (M == 0) return;
  if (M == 1) {  // decoding: a GEMV reads each weight once
    Dispatch d(ET_WG_KERNEL(linear_q4gsw_gemv));
    uint32_t wg = ctx.wg_size(64);
    d.constant("WG", wg).constant("F16", f16_operands(c) ? 1 : 0);
    q4_common(d, g, UINT32_MAX, bias, c);
    d.arg(0u).arg(0u);
    grid_1d(static_cast<uint64_t>(g.N8()), ctx, d.groups);
    out.dispatches.push_back(std::move(d));
    return;
  }
  q4_gemm(g, M, false, bias, c, ctx, out);
}

void encode_linear_q4gsw_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  q4::Geometry g(c.in[2].shape()[1], c.ints[1], c.ints[0]);
  const int64_t M = c.in[0].shape().rows();
  if (M == 0) return;
  q4_gemm(g, M, true, false, c, ctx, out);
}

// dw[n,k] (+)= sum_m dy[m,n] x[m,k]: the dense GEMM with A(i=n, c=m) = dy[m*N + n], B(c=m, j=k) = x[m*K + k].
void encode_linear_dW(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  GemmShape g{};
  g.M = u32(c.in[0].shape().last(), c);
  g.N = u32(c.in[1].shape().last(), c);
  g.K = u32(c.in[0].shape().rows(), c);
  g.a_si = 1;
  g.a_sc = g.M;
  g.b_sc = g.N;
  g.b_sj = 1;
  g.accumulate = c.ints[0] != 0;
  g.f16 = f16_operands(c);
  append_gemm(g, {Src::input, 0, Access::read}, {Src::input, 1, Access::read}, {Src::dummy, 0, Access::read},
              {Src::output, 0, Access::read_write}, ctx, out);
}

void encode_fused_ce(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t R = c.in[0].shape()[0], V = c.in[0].shape()[1];
  const bool in_place = c.out[1].same_memory(c.in[0]);
  out.scratch_bytes.push_back(static_cast<size_t>(R) * 4);  // per-row loss terms
  // Rows that fit in registers (32 logits per lane of up to 1024) are read once: fused_ce_reg.wgsl.
  const uint32_t reg_wg = ctx.wg_size(1024);
  const bool in_registers = V <= 32 * static_cast<int64_t>(reg_wg);
  Dispatch rows(in_registers ? ET_WG_KERNEL(fused_ce_reg) : ET_WG_KERNEL(fused_ce));
  rows.constant("WG", in_registers ? reg_wg : ctx.wg_size(256)).constant("IN_PLACE", in_place ? 1 : 0);
  if (in_place) rows.dummy();
  else rows.in(0);
  rows.in(1).out(1).scratch(0).scalars().uniform();
  rows.arg(u32(R, c)).arg(u32(V, c)).arg(ctx.float_index[0]).arg(kNanBits);
  grid_1d(static_cast<uint64_t>(R), ctx, rows.groups);
  if (R > 0) out.dispatches.push_back(std::move(rows));
  Dispatch sum(ET_WG_KERNEL(grad_norm));
  sum.constant("WG", ctx.wg_size(256));
  sum.scratch(0, Access::read).out(0).uniform();
  sum.arg(u32(R, c)).arg(kNanBits).arg(0u).arg(u32(R, c));  // one workgroup, one chunk of R row terms
  out.dispatches.push_back(std::move(sum));
}

// One workgroup per row: online (max, sum) over the row, merged with the old lse when accumulating.
void encode_logsumexp_rows(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t R = c.in[0].shape()[0], V = c.in[0].shape()[1];
  u32(c.in[0].numel(), c);
  if (R == 0) return;
  Dispatch d(ET_WG_KERNEL(logsumexp_rows));
  d.constant("WG", ctx.wg_size(256));
  d.in(0).out(0).uniform();
  d.arg(u32(R, c)).arg(u32(V, c)).arg(c.ints[0] != 0 ? 1u : 0u).arg(0u);
  grid_1d(static_cast<uint64_t>(R), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// The part's dlogits and per-row loss terms (fused_ce_part.wgsl), then their sum (grad_norm.wgsl, adding
// the old loss when accumulating).
void encode_fused_ce_part(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t R = c.in[0].shape()[0], Vp = c.in[0].shape()[1];
  u32(c.in[0].numel(), c);
  const bool in_place = c.out[1].same_memory(c.in[0]);
  out.scratch_bytes.push_back(static_cast<size_t>(R) * 4);  // per-row loss terms
  Dispatch rows(ET_WG_KERNEL(fused_ce_part));
  rows.constant("WG", ctx.wg_size(256)).constant("IN_PLACE", in_place ? 1 : 0);
  if (in_place) rows.dummy();
  else rows.in(0);
  rows.in(1).in(2).out(1).scratch(0).scalars().uniform();
  rows.arg(u32(R, c)).arg(u32(Vp, c)).arg(ctx.float_index[0]).arg(kNanBits);
  rows.arg(u32(c.ints[0], c)).arg(u32(c.ints[1], c)).arg(0u).arg(0u);
  grid_1d(static_cast<uint64_t>(R), ctx, rows.groups);
  if (R > 0) out.dispatches.push_back(std::move(rows));
  Dispatch sum(ET_WG_KERNEL(grad_norm));
  sum.constant("WG", ctx.wg_size(256)).constant("ACCUMULATE", c.ints[2] != 0 ? 1 : 0);
  sum.scratch(0, Access::read).out(0).uniform();
  sum.arg(u32(R, c)).arg(kNanBits).arg(0u).arg(u32(R, c));  // one workgroup, one chunk of R row terms
  out.dispatches.push_back(std::move(sum));
}

void encode_q4gsw_requant(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& ls = c.in[0].shape();
  q4::Geometry g(ls[0], ls[1], c.ints[0]);
  Dispatch d(ET_WG_KERNEL(q4gsw_requant));
  d.out(1).in(1).out(0).uniform();  // the latent, clamped in place, is output 1
  d.arg(u32(g.N, c)).arg(u32(g.K, c)).arg(u32(g.group_size, c)).arg(u32(g.N8(), c)).arg(u32(g.words(), c));
  grid_1d(ceil_div(static_cast<uint64_t>(g.words()), 64), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// In-place AdamW, one element per invocation; the gradient scaled when grad_scale is given, then zeroed.
void encode_adamw_step(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t n = c.in[0].numel();
  if (n == 0) return;
  Dispatch d(ET_WG_KERNEL(adamw_step));
  uint32_t wg = ctx.wg_size(256);
  d.constant("WG", wg);
  d.out(0).out(1).out(2).out(3).in(4).scalars().uniform();
  d.arg(u32(n, c));
  for (int i = 0; i < 7; ++i) d.arg(ctx.float_index[i]);
  d.arg(uint32_t(c.has_in(4) ? 1 : 0));
  grid_1d(ceil_div(static_cast<uint64_t>(n), wg), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// AdamW on a 4-bit weight's latent, then its requantization; one thread per W_4X8 word.
void encode_adamw_q4gsw_step(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  q4::Geometry g(s[0], s[1], c.ints[0]);
  const int64_t threads = 4 * g.N8() * g.K4();
  // Rows that start on a vec4 take the kernel with 16-byte accesses.
  Dispatch d(g.K % 4 == 0 ? ET_WG_KERNEL(adamw_q4gsw_step_vec4) : ET_WG_KERNEL(adamw_q4gsw_step));
  d.out(0).out(1).out(2).out(3).in(4);
  if (c.has_in(5)) d.in(5);
  else d.dummy();
  d.out(4).scalars().uniform();
  d.arg(u32(g.N, c)).arg(u32(g.K, c)).arg(u32(g.group_size, c)).arg(u32(g.N8(), c)).arg(u32(g.K4(), c));
  d.arg(u32(threads, c));
  for (int i = 0; i < 7; ++i) d.arg(ctx.float_index[i]);
  d.arg(uint32_t(c.has_in(5) ? 1 : 0)).arg(0u).arg(0u);
  grid_1d(ceil_div(static_cast<uint64_t>(threads), 64), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace edgetrain::wg

// Encoders of the six training ops: linear_q4gsw (tiled GEMM, 128x128 *_big kernels for large products on
// GPUs, or the GEMV kernel for one row),
// linear_q4gsw_backward, linear_dW (the shared tiled GEMM contracting over M), fused_ce (+ row-loss sum),
// logsumexp_rows and fused_ce_part (cross-entropy of a vocabulary in parts), q4gsw_requant, adamw_step and
// adamw_q4gsw_step (the two in one pass).
// Shapes were validated by check_call; these only size grids and constants.
#include <algorithm>

#include "adamw_q4gsw_step.spv.h"
#include "adamw_step.spv.h"
#include "edgetrain/q4gsw.h"
#include "fused_ce.spv.h"
#include "fused_ce_reg.spv.h"
#include "fused_ce_part.spv.h"
#include "fused_ce_sum.spv.h"
#include "linear_q4gsw.spv.h"
#include "linear_q4gsw_backward.spv.h"
#include "linear_q4gsw_backward_big.spv.h"
#include "linear_q4gsw_big.spv.h"
#include "linear_q4gsw_gemv.spv.h"
#include "logsumexp_rows.spv.h"
#include "q4gsw_requant.spv.h"
#include "vulkan/kernel.h"
#include "vulkan/ops_gemm.h"

namespace edgetrain::vk {
namespace {

// Workgroup tiles along n outputs: 64 wide, 128 for the *_big kernels.
uint32_t tiles(int64_t n, bool big) {
  const int64_t t = big ? 128 : 64;
  return static_cast<uint32_t>((n + t - 1) / t);
}

// Largest power of two <= min(want, device max invocations).
uint32_t pow2_lanes(uint32_t want, const EncodeContext& ctx) { return gpu::pow2_at_most(want, ctx.max_invocations); }

// Push constants shared by the q4 kernels: M, N, K, N8, K4, G, gs.
void q4_push(Dispatch& d, int64_t M, const q4::Geometry& g, const OpCall& c) {
  d.arg(u32(M, c)).arg(u32(g.N, c)).arg(u32(g.K, c)).arg(u32(g.N8(), c)).arg(u32(g.K4(), c));
  d.arg(u32(g.groups(), c)).arg(u32(g.group_size, c));
}

}  // namespace

// y[m,n] = sum_k x[m,k] W[n,k] + bias[n]
void encode_linear_q4gsw(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor& x = c.in[0];
  q4::Geometry g(c.in[2].shape()[1], x.shape().last(), c.ints[0]);
  int64_t M = x.shape().rows();
  uint32_t has_bias = c.has_in(3) ? 1u : 0u;
  const bool f16 = f16_operands(c);
  if (M == 0) return;
  if (M == 1) {  // decoding: a GEMV reads each weight once
    Dispatch d{ET_VK_KERNEL(linear_q4gsw_gemv)};
    uint32_t lanes = pow2_lanes(128, ctx);
    uint32_t cols = std::min<uint32_t>(4, lanes / 4);
    d.spec = {cols, lanes / cols, lanes, f16 ? 1u : 0u};
    q4_push(d, M, g, c);
    d.arg(has_bias);
    grid_1d((g.N8() + cols - 1) / cols, ctx, d.groups);
    d.groups[2] = 1;
    out.dispatches.push_back(std::move(d));
    return;
  }
  if (coop_for(static_cast<uint64_t>(M), static_cast<uint64_t>(g.N), static_cast<uint64_t>(g.K), ctx)) {
    CoopOperand a = coop_fp32(0, static_cast<uint64_t>(M), static_cast<uint64_t>(g.K), u32(g.K, c), 1, 0);
    CoopOperand b;  // B(k, n) = W[n, k]: rows n of the 4-bit weight
    b.kind = 2, b.src_bind = 1, b.scale_bind = 2, b.R = static_cast<uint64_t>(g.N), b.K = static_cast<uint64_t>(g.K);
    b.q4_N = u32(g.N, c), b.q4_gs = u32(g.group_size, c);
    CoopEpilogue ep;
    ep.bias_bind = 3, ep.out_bind = 4, ep.scalar_bind = 5, ep.scratch_bind = 6, ep.flags = has_bias;
    if (append_coop(a, b, ep, f16, ctx, out)) return;
  }
  bool big = q4_big_tiles(static_cast<uint64_t>(M), static_cast<uint64_t>(g.N), static_cast<uint64_t>(g.K), ctx);
  Dispatch d{big ? ET_VK_KERNEL(linear_q4gsw_big) : ET_VK_KERNEL(linear_q4gsw)};
  d.spec = {f16 ? 1u : 0u};
  q4_push(d, M, g, c);
  d.arg(has_bias);
  d.groups[0] = tiles(g.N, big);
  d.groups[1] = tiles(M, big);
  out.dispatches.push_back(std::move(d));
}

// dx[m,k] = sum_n dy[m,n] W[n,k]
void encode_linear_q4gsw_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor& dy = c.in[0];
  q4::Geometry g(c.in[2].shape()[1], c.ints[1], c.ints[0]);
  int64_t M = dy.shape().rows();
  const bool f16 = f16_operands(c);
  if (M == 0) return;
  if (coop_for(static_cast<uint64_t>(M), static_cast<uint64_t>(g.K), static_cast<uint64_t>(g.N), ctx)) {
    CoopOperand a = coop_fp32(0, static_cast<uint64_t>(M), static_cast<uint64_t>(g.N), u32(g.N, c), 1, 0);
    CoopOperand b;  // B(n, k) = W[n, k]: rows k of the 4-bit weight, contracting over n
    b.kind = 3, b.src_bind = 1, b.scale_bind = 2, b.R = static_cast<uint64_t>(g.K), b.K = static_cast<uint64_t>(g.N);
    b.q4_N = u32(g.N, c), b.q4_gs = u32(g.group_size, c);
    CoopEpilogue ep;
    ep.out_bind = 3, ep.scalar_bind = 4, ep.scratch_bind = 5;
    if (append_coop(a, b, ep, f16, ctx, out)) return;
  }
  bool big = q4_big_tiles(static_cast<uint64_t>(M), static_cast<uint64_t>(g.K), static_cast<uint64_t>(g.N), ctx);
  Dispatch d{big ? ET_VK_KERNEL(linear_q4gsw_backward_big) : ET_VK_KERNEL(linear_q4gsw_backward)};
  d.spec = {f16 ? 1u : 0u};
  q4_push(d, M, g, c);
  d.groups[0] = tiles(g.K, big);
  d.groups[1] = tiles(M, big);
  out.dispatches.push_back(std::move(d));
}

// dw[n,k] (+)= sum_m dy[m,n] x[m,k]: the tiled GEMM with A = dy^T (rows n contiguous), B = x.
void encode_linear_dW(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor &dy = c.in[0], &x = c.in[1];
  GemmArgs a;
  a.M = dy.shape().last();  // N
  a.N = x.shape().last();   // K
  a.K = dy.shape().rows();  // M, the contraction
  a.sa_row = 1;
  a.sa_red = u32(a.M, c);
  a.sb_red = u32(a.N, c);
  a.sb_col = 1;
  a.flags = c.ints[0] ? 2u : 0u;
  a.split_k = true;
  a.f16 = f16_operands(c);
  append_gemm(a, ctx, out);
}

// loss = sum_r row_loss[r]; dlogits = (softmax - onehot) / n_valid
void encode_fused_ce(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  uint32_t R = u32(s[0], c), V = u32(s[1], c), lanes = pow2_lanes(256, ctx);
  // Rows that fit in registers (32 logits per lane of up to 1024) are read once: fused_ce_reg.comp.
  const uint32_t reg_lanes = pow2_lanes(1024, ctx);
  const bool in_registers = uint64_t(V) <= 32ull * reg_lanes;
  Dispatch rows{in_registers ? ET_VK_KERNEL(fused_ce_reg) : ET_VK_KERNEL(fused_ce)};
  rows.spec = {in_registers ? reg_lanes : lanes};
  rows.arg(R).arg(V).arg(ctx.float_index.at(0));
  grid_1d(R, ctx, rows.groups);
  if (R > 0) out.dispatches.push_back(rows);
  Dispatch sum{ET_VK_KERNEL(fused_ce_sum)};
  sum.spec = {lanes, 0u, 0u};
  sum.arg(R);
  out.dispatches.push_back(std::move(sum));
  out.scratch_bytes.push_back(static_cast<size_t>(R) * sizeof(float));
}

// One workgroup per row: online (max, sum) over the row, merged with the old lse when accumulating.
void encode_logsumexp_rows(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  u32(s.numel(), c);
  uint32_t R = u32(s[0], c), V = u32(s[1], c);
  if (R == 0) return;
  Dispatch d{ET_VK_KERNEL(logsumexp_rows)};
  d.spec = {reduce_wg(ctx)};
  d.arg(R).arg(V).arg(c.ints[0] != 0 ? 1u : 0u);
  grid_1d(R, ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// One workgroup per row writes the part's dlogits and the row's loss term, then fused_ce_sum (PART) adds the
// rows up (after the old loss when accumulating).
void encode_fused_ce_part(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  u32(s.numel(), c);
  uint32_t R = u32(s[0], c), Vp = u32(s[1], c), lanes = pow2_lanes(256, ctx);
  Dispatch rows{ET_VK_KERNEL(fused_ce_part)};
  rows.spec = {lanes};
  rows.arg(R).arg(Vp).arg(ctx.float_index.at(0)).arg(u32(c.ints[0], c)).arg(u32(c.ints[1], c));
  grid_1d(R, ctx, rows.groups);
  if (R > 0) out.dispatches.push_back(rows);
  Dispatch sum{ET_VK_KERNEL(fused_ce_sum)};
  sum.spec = {lanes, 1u, c.ints[2] != 0 ? 1u : 0u};
  sum.arg(R);
  out.dispatches.push_back(std::move(sum));
  out.scratch_bytes.push_back(static_cast<size_t>(R) * sizeof(float));
}

// W_4X8 codes from fp32 latents (clamped in place, output 1), one thread per word.
void encode_q4gsw_requant(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  q4::Geometry g(s[0], s[1], c.ints[0]);
  Dispatch d{ET_VK_KERNEL(q4gsw_requant)};
  d.arg(u32(g.N, c)).arg(u32(g.K, c)).arg(u32(g.N8(), c)).arg(u32(g.K4(), c));
  d.arg(u32(g.groups(), c)).arg(u32(g.group_size, c)).arg(u32(g.words(), c));
  grid_1d((g.words() + 63) / 64, ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// In-place AdamW, 4 elements per thread; the gradient scaled when grad_scale is given, then zeroed.
void encode_adamw_step(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  int64_t n = c.in[0].numel();
  if (n == 0) return;
  Dispatch d{ET_VK_KERNEL(adamw_step)};
  d.arg(u32(n, c));
  for (int i = 0; i < 7; ++i) d.arg(ctx.float_index.at(i));
  d.arg(uint32_t(c.has_in(4) ? 1 : 0));
  grid_1d((n + 255) / 256, ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// AdamW on a 4-bit weight's latent, then its requantization; one thread per W_4X8 word (the shader says
// why along k).
void encode_adamw_q4gsw_step(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  q4::Geometry g(s[0], s[1], c.ints[0]);
  const int64_t threads = 4 * g.N8() * g.K4();
  Dispatch d{ET_VK_KERNEL(adamw_q4gsw_step), {g.K % 4 == 0 ? 1u : 0u}};  // VEC4: rows start on a vec4
  d.arg(u32(g.N, c)).arg(u32(g.K, c)).arg(u32(g.N8(), c)).arg(u32(g.K4(), c)).arg(u32(g.group_size, c));
  d.arg(u32(threads, c));
  for (int i = 0; i < 7; ++i) d.arg(ctx.float_index.at(i));
  d.arg(uint32_t(c.has_in(5) ? 1 : 0));
  grid_1d((threads + 63) / 64, ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace edgetrain::vk

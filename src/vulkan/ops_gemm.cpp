// Encoders of the matrix products (mm, bmm, linear): all run gemm.comp; strides in push constants express
// the transposes, spec constants choose coalesced shared-memory load maps and the binding layout.
#include <cstdlib>
#include <string>

#include "gemm.spv.h"
#include "gemm8.spv.h"
#include "vulkan/kernel.h"
#include "vulkan/ops_gemm.h"

namespace edgetrain::vk {

// 128x128 tiles (8x8 per thread) only when EDGETRAIN_VK_BIG_TILES=1, both output dims fill them and shared
// memory holds two 16x129 slices. Measured on an H200 (driver 580): the 8x8 kernels ran ~10x slower than
// the 64x64 (4x4) ones (bmm 512x512x64 x192: 3.0 ms vs 0.3 ms for the same work), so 4x4 is the default.
bool big_tiles(uint64_t rows, uint64_t cols, const EncodeContext& ctx) {
  static const bool on = [] {
    const char* e = std::getenv("EDGETRAIN_VK_BIG_TILES");
    return e && std::string(e) == "1";
  }();
  return on && rows >= 128 && cols >= 128 && ctx.max_shared_bytes >= 2 * 16 * 129 * sizeof(float);
}

void encode_gemm(const GemmArgs& g, const EncodeContext& ctx, Encoded& out) {
  ET_CHECK(g.M < (1ull << 32) && g.N < (1ull << 32) && g.K < (1ull << 32), "vulkan gemm: sizes too large");
  const uint32_t t = big_tiles(g.M, g.N, ctx) ? 8 : 4;
  const uint64_t tile = 16 * t;
  Dispatch d{t == 8 ? ET_VK_KERNEL(gemm8) : ET_VK_KERNEL(gemm)};
  d.spec = {g.sa_red == 1 ? 1u : 0u, g.sb_col == 1 ? 1u : 0u, g.layout};
  d.arg(static_cast<uint32_t>(g.M)).arg(static_cast<uint32_t>(g.N)).arg(static_cast<uint32_t>(g.K));
  d.arg(g.sa_row).arg(g.sa_red).arg(g.sb_red).arg(g.sb_col);
  d.arg(g.a_batch).arg(g.b_batch).arg(g.c_batch);
  d.arg(g.alpha_idx).arg(g.flags);
  d.groups[0] = static_cast<uint32_t>((g.N + tile - 1) / tile);
  d.groups[1] = static_cast<uint32_t>((g.M + tile - 1) / tile);
  d.groups[2] = g.batch;
  ET_CHECK(d.groups[0] <= ctx.max_groups[0] && d.groups[1] <= ctx.max_groups[1] && d.groups[2] <= ctx.max_groups[2],
           "vulkan gemm: grid ", d.groups[0], "x", d.groups[1], "x", d.groups[2], " exceeds the device limits");
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  out.dispatches.push_back(std::move(d));
}

namespace {

// out[M,N] = alpha * op(a) @ op(b)
void enc_mm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape &sa = c.in[0].shape(), &sb = c.in[1].shape();
  bool ta = c.ints[0] != 0, tb = c.ints[1] != 0;
  GemmArgs g;
  g.M = ta ? sa[1] : sa[0];
  g.K = ta ? sa[0] : sa[1];
  g.N = tb ? sb[0] : sb[1];
  g.sa_row = ta ? 1 : static_cast<uint32_t>(sa[1]);
  g.sa_red = ta ? static_cast<uint32_t>(sa[1]) : 1;
  g.sb_red = tb ? 1 : static_cast<uint32_t>(sb[1]);
  g.sb_col = tb ? static_cast<uint32_t>(sb[1]) : 1;
  g.alpha_idx = ctx.float_index.at(0);
  encode_gemm(g, ctx, out);
}

// out[B,M,N] = alpha * op(a[B]) @ op(b[B]); rank 4 flattens the two batch dims.
void enc_bmm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape &sa = c.in[0].shape(), &sb = c.in[1].shape();
  int r = sa.rank();
  bool ta = c.ints[0] != 0, tb = c.ints[1] != 0;
  int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) batch *= sa[i];
  int64_t ar = sa[r - 2], ac = sa[r - 1], br = sb[r - 2], bc = sb[r - 1];
  GemmArgs g;
  g.M = ta ? ac : ar;
  g.K = ta ? ar : ac;
  g.N = tb ? br : bc;
  g.sa_row = ta ? 1 : static_cast<uint32_t>(ac);
  g.sa_red = ta ? static_cast<uint32_t>(ac) : 1;
  g.sb_red = tb ? 1 : static_cast<uint32_t>(bc);
  g.sb_col = tb ? static_cast<uint32_t>(bc) : 1;
  g.a_batch = static_cast<uint32_t>(ar * ac);
  g.b_batch = static_cast<uint32_t>(br * bc);
  g.c_batch = static_cast<uint32_t>(g.M * g.N);
  ET_CHECK(batch <= ctx.max_groups[2], "vulkan bmm: ", batch, " batches exceed the device's z grid limit ",
           ctx.max_groups[2]);
  g.batch = static_cast<uint32_t>(batch);
  g.alpha_idx = ctx.float_index.at(0);
  encode_gemm(g, ctx, out);
}

// y[..., N] = x[..., K] @ w[N, K]^T + bias
void enc_linear(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  GemmArgs g;
  g.K = c.in[0].shape().last();
  g.M = c.in[0].shape().rows();
  g.N = c.in[1].shape()[0];
  g.sa_row = static_cast<uint32_t>(g.K);
  g.sa_red = 1;
  g.sb_red = 1;
  g.sb_col = static_cast<uint32_t>(g.K);
  g.layout = 1;
  g.flags = c.in.size() > 2 && c.in[2].defined() ? 1u : 0u;
  encode_gemm(g, ctx, out);
}

}  // namespace

Encoder gemm_encoder(Op op) {
  switch (op) {
    case Op::mm: return enc_mm;
    case Op::bmm: return enc_bmm;
    case Op::linear: return enc_linear;
    default: return nullptr;
  }
}

}  // namespace edgetrain::vk

// Encoders of the matrix products (mm, bmm, linear): a low-rank adapter's narrow or shallow products
// (ops_gemm_narrow.cpp), the tensor-core path for large products on GPUs that have it (ops_gemm_coop.cpp),
// else gemm.comp (64x64 tiles) or gemm_big.comp (128x128, large products on
// GPUs); strides in push constants express the transposes, spec constants choose coalesced load maps,
// vec4 loads and the binding layout.
#include <algorithm>

#include "gemm.spv.h"
#include "gemm_big.spv.h"
#include "gemm_splitk_reduce.spv.h"
#include "vulkan/coop_matrix2.h"
#include "vulkan/kernel.h"
#include "vulkan/ops_gemm.h"

namespace edgetrain::vk {
namespace {

// When the 128x128-tile kernels (gemm_big.comp and the 4-bit *_big.comp) run instead of the 64x64 ones,
// Tuning::gemm_big: "0" never, "1" for large products on any device, "all" for every product; unset: large
// products on GPU-like devices (subgroup 32, >= 48 KiB shared memory), so never on lavapipe. Measured on an
// H200 (driver 580): fp32 mm 4096^3 5.62 -> 4.04 ms, linear_dW 4096^3 5.42 -> 3.98 ms, base step 249 ->
// 225 ms (with split-K; 275 ms without it); q4 forward 4096^3 gs64 5.67 -> 3.92 ms, q4 backward 5.97 ->
// 3.73 ms, base step 225 -> 203 ms.
bool big_for(uint64_t M, uint64_t N, uint64_t K, const EncodeContext& ctx) {
  if (ctx.max_invocations < 256 || ctx.max_shared_bytes < 2 * 16 * 33 * 16) return false;
  bool large = M >= 128 && N >= 128 && K >= 64;
  switch (ctx.tuning.gemm_big) {
    case gpu::Force::never: return false;
    case gpu::Force::all: return true;
    case gpu::Force::large: return large;
    case gpu::Force::automatic: return large && gpu_like(ctx);
  }
  return false;
}

// Contraction slices for split-K: enough workgroups to fill a large GPU (~2 per SM on 132 SMs) when the
// output alone gives too few, each slice >= 256 deep (a multiple of 16); 1 = no split. Both tile sizes:
// the 64x64 kernel meets the narrow deep products of LoRA (x A^T and dy B are [R, 16] over K or N of
// 2048-8192; the adapters' gradients [16, K] and [N, 16] over R rows), which had 32-64 workgroups each
// (on an H200 in a Llama-3.2-1B-shaped qlora step: 194 ms of a 504 ms step). Only on GPU-like devices
// (as big_for), unless forced.
// Tuning::split_k "0" turns it off; "all" splits every allowed product (up to 4 slices, to test edges).
uint32_t split_slices(const GemmArgs& g, uint64_t tiles, const EncodeContext& ctx, uint32_t& chunk) {
  const gpu::Force force = ctx.tuning.split_k;
  chunk = static_cast<uint32_t>(g.K);
  if (force == gpu::Force::never || !g.split_k || g.layout != 0 || g.batch != 1 || g.K < 32) return 1;
  if (force == gpu::Force::automatic && !gpu_like(ctx)) return 1;
  uint64_t c;
  const uint64_t s = gpu::splitk_slices(g.K, gpu::splitk_want(tiles, g.K, 256, 16, force), 16, c);
  if (s < 2 || s * g.M * g.N >= (1ull << 32)) return 1;
  chunk = static_cast<uint32_t>(c);
  return static_cast<uint32_t>(s);
}

void push_gemm(Dispatch& d, const GemmArgs& g) {
  d.arg(static_cast<uint32_t>(g.M)).arg(static_cast<uint32_t>(g.N)).arg(static_cast<uint32_t>(g.K));
  d.arg(g.sa_row).arg(g.sa_red).arg(g.sb_red).arg(g.sb_col);
  d.arg(g.a_batch).arg(g.b_batch).arg(g.c_batch);
  d.arg(g.alpha_idx).arg(g.flags);
}

}  // namespace

bool q4_big_tiles(uint64_t rows, uint64_t cols, uint64_t red, const EncodeContext& ctx) {
  return big_for(rows, cols, red, ctx);
}

void append_gemm(const GemmArgs& g, const EncodeContext& ctx, Encoded& out) {
  ET_CHECK(g.M < (1ull << 32) && g.N < (1ull << 32) && g.K < (1ull << 32), "vulkan gemm: sizes too large");
  // With cooperative matrices 2, an fp16 product of k-contiguous rows of A and a narrow B (a low-rank
  // adapter's x A^T, dy B) takes the tensor-core path: A is usually still staged in fp16 from the 4-bit
  // product of the same input just before (program.cpp reuses it), so only the GEMM is left, split-K
  // filling the GPU. So does dB = s dy^T t where dy's sides are whole 128s: A = dy^T staged k-major is
  // dy's own staging (append_coop). H200 figures: docs/PERFORMANCE.md.
  const bool a_rows = g.sa_red == 1, a_whole_t = g.sa_row == 1 && g.M % 128 == 0 && g.K % 128 == 0;
  const bool staged_rows =
      cm2_built() && ctx.cm2 && g.f16 && (a_rows || a_whole_t) && g.N <= 32 && coop_for(g.M, g.N, g.K, ctx);
  if (!staged_rows && append_narrow_gemm(g, ctx, out)) return;
  if (coop_for(g.M, g.N, g.K, ctx)) {
    CoopOperand a = coop_fp32(0, g.M, g.K, g.sa_row, g.sa_red, g.a_batch);
    CoopOperand b = coop_fp32(1, g.N, g.K, g.sb_col, g.sb_red, g.b_batch);
    CoopEpilogue ep;
    if (g.layout == 1) ep.bias_bind = 2, ep.out_bind = 3, ep.scalar_bind = 4, ep.scratch_bind = 5;
    ep.c_batch = g.c_batch;
    ep.batch = g.batch;
    ep.alpha_idx = g.alpha_idx;
    ep.flags = g.flags;
    ep.split_k = g.split_k && g.layout == 0 && g.batch == 1;
    if (append_coop(a, b, ep, g.f16, ctx, out)) return;
  }
  const bool big = big_for(g.M, g.N, g.K, ctx);
  // vec4 loads need each contiguous run to start 16-byte aligned (buffers are bound at offset 0) and to
  // hold whole vec4s: the run's extent, the other stride and the batch stride all multiples of 4.
  bool a_k = g.sa_red == 1, b_n = g.sb_col == 1;
  bool vec_a = a_k ? (g.K % 4 == 0 && g.sa_row % 4 == 0 && g.a_batch % 4 == 0)
                   : (g.sa_row == 1 && g.M % 4 == 0 && g.sa_red % 4 == 0 && g.a_batch % 4 == 0);
  bool vec_b = b_n ? (g.N % 4 == 0 && g.sb_red % 4 == 0 && g.b_batch % 4 == 0)
                   : (g.sb_red == 1 && g.K % 4 == 0 && g.sb_col % 4 == 0 && g.b_batch % 4 == 0);
  const uint64_t tile = big ? 128 : 64, gx = (g.N + tile - 1) / tile, gy = (g.M + tile - 1) / tile;
  uint32_t chunk = static_cast<uint32_t>(g.K), splits = split_slices(g, gx * gy, ctx, chunk);
  Dispatch d{big ? ET_VK_KERNEL(gemm_big) : ET_VK_KERNEL(gemm)};
  d.spec = {a_k ? 1u : 0u, b_n ? 1u : 0u, g.layout, vec_a ? 1u : 0u, vec_b ? 1u : 0u, splits > 1 ? 1u : 0u,
            g.f16 ? 1u : 0u};
  push_gemm(d, g);
  d.arg(chunk);
  d.groups[0] = static_cast<uint32_t>(gx);
  d.groups[1] = static_cast<uint32_t>(gy);
  d.groups[2] = splits > 1 ? splits : g.batch;
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  out.dispatches.push_back(std::move(d));
  if (splits == 1) return;
  append_splitk_reduce(g.M * g.N, splits, g.alpha_idx, g.flags, 0, ctx, out);
  out.scratch_bytes.push_back(static_cast<size_t>(splits) * g.M * g.N * sizeof(float));
}

void append_splitk_reduce(uint64_t count, uint32_t splits, uint32_t alpha_idx, uint32_t flags, uint32_t base,
                          const EncodeContext& ctx, Encoded& out) {
  Dispatch r{ET_VK_KERNEL(gemm_splitk_reduce)};
  r.arg(static_cast<uint32_t>(count)).arg(splits).arg(alpha_idx).arg(flags).arg(base);
  grid_1d((count + 255) / 256, ctx, r.groups);
  r.pooled_known = true;  // reads the partial sums, writes only the output
  out.dispatches.push_back(std::move(r));
}

// out[M,N] (+)= alpha * op(a) @ op(b)
void encode_mm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
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
  g.flags = c.ints.size() > 2 && c.ints[2] != 0 ? 2u : 0u;  // accumulate
  g.f16 = f16_operands(c);
  g.split_k = true;
  append_gemm(g, ctx, out);
}

// out[B,M,N] = alpha * op(a[B]) @ op(b[B]); rank 4 flattens the two batch dims.
void encode_bmm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
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
  g.a_batch = u32(ar * ac, c);
  g.b_batch = u32(br * bc, c);
  g.c_batch = u32(static_cast<int64_t>(g.M * g.N), c);
  ET_CHECK_KIND(ErrorKind::unsupported, batch <= ctx.max_groups[2], "vulkan bmm: ", batch,
                " batches exceed the device's z grid limit ", ctx.max_groups[2]);
  g.batch = static_cast<uint32_t>(batch);
  g.alpha_idx = ctx.float_index.at(0);
  g.f16 = f16_operands(c);
  append_gemm(g, ctx, out);
}

// y[..., N] = x[..., K] @ w[N, K]^T + bias
void encode_linear(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  GemmArgs g;
  g.K = c.in[0].shape().last();
  g.M = c.in[0].shape().rows();
  g.N = c.in[1].shape()[0];
  g.sa_row = static_cast<uint32_t>(g.K);
  g.sa_red = 1;
  g.sb_red = 1;
  g.sb_col = static_cast<uint32_t>(g.K);
  g.layout = 1;
  g.flags = c.has_in(2) ? 1u : 0u;
  g.f16 = f16_operands(c);
  append_gemm(g, ctx, out);
}

}  // namespace edgetrain::vk

// WebGPU encoders of the dense matrix products (mm, bmm, linear), all on the strided tiled GEMMs (gemm.wgsl,
// gemm_big.wgsl for large products, split-K with gemm_splitk_reduce.wgsl for deep ones with few tiles;
// gemm_coop.wgsl on subgroup matrices for fp16 operands where the adapter has them).
#include <algorithm>

#include "gemm.wgsl.h"
#include "gemm_big.wgsl.h"
#include "gemm_coop.wgsl.h"
#include "gemm_splitk_reduce.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {

Tuning Tuning::from_env() {
  Tuning t;
  t.gemm_big = gpu::force_from_env("EDGETRAIN_WG_GEMM_BIG", false);
  t.split_k = gpu::force_from_env("EDGETRAIN_WG_GEMM_SPLITK", false);
  t.coopmat = gpu::force_from_env("EDGETRAIN_WG_COOPMAT", false);
  return t;
}

bool coop_gemm(const GemmShape& g, const EncodeContext& ctx) {
  const gpu::Force force = ctx.tuning.coopmat;
  // gemm_coop.wgsl's workgroup memory: the fp16 A and B slices (rows padded by 8 halves) and the f32 block.
  const uint64_t tm = ctx.matrix, shared = 4 * tm * (2 * tm + 8) * 2 + 2 * tm * (4 * tm + 8) * 2 + 16 * tm * tm * 4;
  if (!g.f16 || tm == 0 || force == gpu::Force::never || shared > ctx.max_shared_bytes) return false;
  return force == gpu::Force::all || (!ctx.software && g.M >= 64 && g.N >= 64 && g.K >= 64);
}

bool big_gemm(const GemmShape& g, const EncodeContext& ctx) {
  const gpu::Force force = ctx.tuning.gemm_big;
  if (force == gpu::Force::never || ctx.max_invocations < 256 || ctx.max_size_x < 256 ||
      ctx.max_shared_bytes < 2 * 528 * 16)
    return false;
  return force == gpu::Force::all || (g.M >= 128 && g.N >= 128 && g.K >= 64);
}

namespace {

// Split-K: a deep product with few 128x128 output tiles leaves most of a large GPU idle (a step's weight
// gradient dW [768, 768] over 8192 tokens is 36 workgroups), so its contraction is cut into slices run side
// by side over z, each into its own plane of partial sums in the pooled scratch, added up in a fixed order
// by gemm_splitk_reduce.wgsl. WebGPU does not say how many multiprocessors a GPU has: like the Vulkan
// kernels on devices that do not say, enough slices (each >= 512 deep) for ~264 workgroups
// (gpu::splitk_want). Returns the slice count (1: not split) and sets kslice.
uint32_t split_slices(const GemmShape& g, uint64_t tiles, const EncodeContext& ctx, uint32_t& kslice) {
  kslice = 0;
  const gpu::Force force = ctx.tuning.split_k;
  if (g.batch != 1 || force == gpu::Force::never) return 1;
  uint64_t slice;
  const uint64_t n = gpu::splitk_slices(g.K, gpu::splitk_want(tiles, g.K, 512, 16, force), 16, slice);
  if (n < 2 || n * g.M * g.N * 4 > ctx.max_binding_bytes) return 1;  // the partial sums bind as one range
  kslice = static_cast<uint32_t>(slice);
  return static_cast<uint32_t>(n);
}

// The epilogue's flags (gemm_io.wgsl, gemm_splitk_reduce.wgsl: 1 bias, 2 accumulate, 4 alpha) and alpha's slot.
uint32_t epilogue_flags(const GemmShape& g) {
  return (g.bias ? 1u : 0u) | (g.accumulate ? 2u : 0u) | (g.alpha_index >= 0 ? 4u : 0u);
}
uint32_t alpha_slot(const GemmShape& g) { return static_cast<uint32_t>(g.alpha_index < 0 ? 0 : g.alpha_index); }

Dispatch gemm_dispatch(const GemmShape& g, Bind a, Bind b, Bind bias, Bind c, const EncodeContext& ctx) {
  const bool coop = coop_gemm(g, ctx), big = !coop && big_gemm(g, ctx);
  Kernel k = coop ? ET_WG_KERNEL(gemm_coop) : big ? ET_WG_KERNEL(gemm_big) : ET_WG_KERNEL(gemm);
  k.subgroup_matrix = coop;
  Dispatch d(k);
  if (big) d.constant("A_K", g.a_sc == 1 ? 1 : 0).constant("B_N", g.b_sj == 1 ? 1 : 0);
  d.constant("F16", g.f16 ? 1 : 0);
  d.bind(a).bind(b).bind(bias).bind(c).scalars().uniform();
  d.arg(g.M).arg(g.N).arg(g.K).arg(epilogue_flags(g));
  d.arg(g.a_si).arg(g.a_sc).arg(g.b_sc).arg(g.b_sj);
  d.arg(g.a_batch).arg(g.b_batch).arg(g.c_batch).arg(alpha_slot(g));
  d.arg(g.kslice).arg(0u).arg(0u).arg(0u);  // then padding
  const uint64_t tile = coop ? 4 * ctx.matrix : big ? 128 : 32;
  d.groups[0] = static_cast<uint32_t>(ceil_div(g.N, tile));
  d.groups[1] = static_cast<uint32_t>(ceil_div(g.M, tile));
  d.groups[2] = g.batch;
  return d;
}

}  // namespace

void append_gemm(const GemmShape& g, Bind a, Bind b, Bind bias, Bind c, const EncodeContext& ctx, Encoded& out) {
  uint32_t kslice = 0, slices = 1;
  if (!coop_gemm(g, ctx) && big_gemm(g, ctx)) slices = split_slices(g, ceil_div(g.M, 128) * ceil_div(g.N, 128), ctx, kslice);
  if (slices < 2) {
    out.dispatches.push_back(gemm_dispatch(g, a, b, bias, c, ctx));
    return;
  }
  GemmShape part = g;  // each slice's plain sum into its own plane: no alpha, bias or accumulation
  part.bias = part.accumulate = false;
  part.alpha_index = -1;
  part.a_batch = part.b_batch = 0;
  part.c_batch = g.M * g.N;
  part.kslice = kslice;
  Dispatch d = gemm_dispatch(part, a, b, {Src::dummy, 0, Access::read}, {Src::pooled, 0, Access::read_write}, ctx);
  d.groups[2] = slices;
  out.dispatches.push_back(std::move(d));
  out.pooled_scratch_bytes = std::max<size_t>(out.pooled_scratch_bytes, size_t{slices} * g.M * g.N * 4);

  Dispatch r(ET_WG_KERNEL(gemm_splitk_reduce));
  r.pooled(Access::read).bind(bias).bind(c).scalars().uniform();
  r.arg(g.M * g.N).arg(g.N).arg(slices).arg(epilogue_flags(g));
  r.arg(alpha_slot(g)).arg(0u).arg(0u).arg(0u);
  grid_1d(ceil_div(uint64_t{g.M} * g.N, 256), ctx, r.groups);
  out.dispatches.push_back(std::move(r));
}

namespace {

const Bind kA{Src::input, 0, Access::read}, kB{Src::input, 1, Access::read}, kOut{Src::output, 0, Access::read_write},
    kDummy{Src::dummy, 0, Access::read};

// A(i,c) of a [M,K] matrix (or [K,M] stored when trans) and B(c,j) of [K,N] (or [N,K] when trans).
void mm_strides(GemmShape& g, bool ta, bool tb) {
  g.a_si = ta ? 1 : g.K;
  g.a_sc = ta ? g.M : 1;
  g.b_sc = tb ? 1 : g.N;
  g.b_sj = tb ? g.K : 1;
}

}  // namespace

void encode_mm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& o = c.out[0].shape();
  bool ta = c.ints[0] != 0, tb = c.ints[1] != 0;
  GemmShape g{};
  g.M = u32(o[0], c);
  g.N = u32(o[1], c);
  g.K = u32(ta ? c.in[0].shape()[0] : c.in[0].shape()[1], c);
  mm_strides(g, ta, tb);
  g.alpha_index = static_cast<int>(ctx.float_index[0]);
  g.accumulate = c.ints.size() > 2 && c.ints[2] != 0;
  g.f16 = f16_operands(c);
  append_gemm(g, kA, kB, kDummy, kOut, ctx, out);
}

void encode_bmm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& o = c.out[0].shape();
  const Shape& a = c.in[0].shape();
  int r = o.rank();
  bool ta = c.ints[0] != 0, tb = c.ints[1] != 0;
  GemmShape g{};
  g.M = u32(o[r - 2], c);
  g.N = u32(o[r - 1], c);
  g.K = u32(ta ? a[r - 2] : a[r - 1], c);
  int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) batch *= o[i];
  g.batch = u32(batch, c);
  mm_strides(g, ta, tb);
  g.a_batch = u32(int64_t{g.M} * g.K, c);
  g.b_batch = u32(int64_t{g.K} * g.N, c);
  g.c_batch = u32(int64_t{g.M} * g.N, c);
  g.alpha_index = static_cast<int>(ctx.float_index[0]);
  g.f16 = f16_operands(c);
  append_gemm(g, kA, kB, kDummy, kOut, ctx, out);
}

void encode_linear(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  GemmShape g{};
  g.M = u32(c.in[0].shape().rows(), c);
  g.K = u32(c.in[0].shape().last(), c);
  g.N = u32(c.in[1].shape()[0], c);
  g.a_si = g.K;
  g.a_sc = 1;
  g.b_sc = 1;      // B(c,j) = w[j, c]
  g.b_sj = g.K;
  g.bias = c.has_in(2);
  g.f16 = f16_operands(c);
  Bind bias = g.bias ? Bind{Src::input, 2, Access::read} : kDummy;
  append_gemm(g, kA, kB, bias, kOut, ctx, out);
}

}  // namespace edgetrain::wg

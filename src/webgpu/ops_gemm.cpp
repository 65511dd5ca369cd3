// WebGPU encoders of the dense matrix products (mm, bmm, linear), all on the strided tiled GEMMs (gemm.wgsl,
// gemm_big.wgsl for large products).
#include "gemm.wgsl.h"
#include "gemm_big.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {

Tuning Tuning::from_env() {
  Tuning t;
  t.gemm_big = gpu::force_from_env("EDGETRAIN_WG_GEMM_BIG", false);
  return t;
}

bool big_gemm(const GemmShape& g, const EncodeContext& ctx) {
  const gpu::Force force = ctx.tuning.gemm_big;
  if (force == gpu::Force::never || ctx.max_invocations < 256 || ctx.max_size_x < 256 ||
      ctx.max_shared_bytes < 2 * 528 * 16)
    return false;
  return force == gpu::Force::all || (g.M >= 128 && g.N >= 128 && g.K >= 64);
}

Dispatch gemm_dispatch(const GemmShape& g, Bind a, Bind b, Bind bias, Bind c, const EncodeContext& ctx) {
  const bool big = big_gemm(g, ctx);
  Dispatch d(big ? ET_WG_KERNEL(gemm_big) : ET_WG_KERNEL(gemm));
  if (big) d.constant("A_K", g.a_sc == 1 ? 1 : 0).constant("B_N", g.b_sj == 1 ? 1 : 0);
  d.bind(a).bind(b).bind(bias).bind(c).scalars().uniform();
  uint32_t flags = (g.bias ? 1u : 0u) | (g.accumulate ? 2u : 0u) | (g.alpha_index >= 0 ? 4u : 0u) | (g.f16 ? 8u : 0u);
  d.arg(g.M).arg(g.N).arg(g.K).arg(flags);
  d.arg(g.a_si).arg(g.a_sc).arg(g.b_sc).arg(g.b_sj);
  d.arg(g.a_batch).arg(g.b_batch).arg(g.c_batch).arg(static_cast<uint32_t>(g.alpha_index < 0 ? 0 : g.alpha_index));
  const uint64_t tile = big ? 128 : 32;
  d.groups[0] = static_cast<uint32_t>(ceil_div(g.N, tile));
  d.groups[1] = static_cast<uint32_t>(ceil_div(g.M, tile));
  d.groups[2] = g.batch;
  return d;
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
  g.f16 = f16_operands(c);
  out.dispatches.push_back(gemm_dispatch(g, kA, kB, kDummy, kOut, ctx));
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
  out.dispatches.push_back(gemm_dispatch(g, kA, kB, kDummy, kOut, ctx));
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
  g.bias = c.in.size() > 2 && c.in[2].defined();
  g.f16 = f16_operands(c);
  Bind bias = g.bias ? Bind{Src::input, 2, Access::read} : kDummy;
  out.dispatches.push_back(gemm_dispatch(g, kA, kB, bias, kOut, ctx));
}

}  // namespace edgetrain::wg

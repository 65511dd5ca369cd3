// WebGPU encoders of the Llama-block ops: rms_norm (+ backward), embedding (+ backward) and gather.
// (silu_mul and its backward are elementwise kernels, in ops_elementwise.cpp.)
#include "embedding.wgsl.h"
#include "rms_norm.wgsl.h"
#include "rms_norm_dw.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {
namespace {

void enc_rms_norm(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  const int64_t D = s.last(), rows = s.rows();
  if (rows == 0 || D == 0) return;
  Dispatch d(ET_WG_KERNEL(rms_norm));
  d.constant("BACKWARD", 0).constant("WG", ctx.wg_size(D >= 256 ? 256 : 64));
  d.in(0).in(1).dummy().dummy().out(0).out(1).scalars().uniform();
  d.arg(u32(rows)).arg(u32(D)).arg(ctx.float_index[0]).arg(0u);
  grid_1d(static_cast<uint64_t>(rows), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// Inputs dy, x, w, rstd; outputs dx, dw.
void enc_rms_norm_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[1].shape();
  const int64_t D = s.last(), rows = s.rows();
  if (D == 0) return;
  if (rows > 0) {
    Dispatch d(ET_WG_KERNEL(rms_norm));
    d.constant("BACKWARD", 1).constant("WG", ctx.wg_size(D >= 256 ? 256 : 64));
    out.scratch_bytes.push_back(16);
    d.in(1).in(2).in(0).in(3).out(0).scratch(0).scalars().uniform();
    d.arg(u32(rows)).arg(u32(D)).arg(0u).arg(0u);
    grid_1d(static_cast<uint64_t>(rows), ctx, d.groups);
    out.dispatches.push_back(std::move(d));
  }
  Dispatch w(ET_WG_KERNEL(rms_norm_dw));
  w.constant("WG", ctx.wg_size(64));
  w.in(0).in(1).in(3).out(1).uniform();
  w.arg(u32(rows)).arg(u32(D)).arg(static_cast<uint32_t>(c.ints[0])).arg(0u);
  grid_1d(static_cast<uint64_t>(D), ctx, w.groups);
  out.dispatches.push_back(std::move(w));
}

Dispatch index_dispatch(uint32_t op, uint64_t threads, const EncodeContext& ctx) {
  Dispatch d(ET_WG_KERNEL(embedding));
  d.constant("OP", op).constant("WG", 64);
  grid_1d(ceil_div(threads, 64), ctx, d.groups);
  return d;
}

void enc_embedding(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t V = c.in[0].shape()[0], D = c.in[0].shape()[1], n = c.out[0].numel();
  if (n == 0) return;
  Dispatch d = index_dispatch(0, static_cast<uint64_t>(n), ctx);
  d.in(0).in(1).out(0).uniform();
  d.arg(u32(n)).arg(u32(V)).arg(u32(D)).arg(0u).arg(0u).arg(kNanBits).arg(0u).arg(0u);
  arg4(d, Shape4{});
  arg4(d, Shape4{});
  out.dispatches.push_back(std::move(d));
}

void enc_embedding_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const int64_t V = c.out[0].shape()[0], D = c.out[0].shape()[1], count = c.in[1].numel();
  if (V * D == 0) return;
  Dispatch d = index_dispatch(2, static_cast<uint64_t>(D), ctx);
  d.in(0).in(1).out(0).uniform();
  d.arg(u32(D)).arg(u32(V)).arg(u32(D)).arg(0u).arg(static_cast<uint32_t>(c.ints[0])).arg(kNanBits);
  d.arg(u32(count)).arg(0u);
  arg4(d, Shape4{});
  arg4(d, Shape4{});
  out.dispatches.push_back(std::move(d));
}

void enc_gather(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape &xs = c.in[0].shape(), &is = c.in[1].shape();
  const int r = xs.rank();
  const int64_t n = is.numel();
  if (n == 0) return;
  int dim = static_cast<int>(c.ints[0] < 0 ? c.ints[0] + r : c.ints[0]);
  Shape4 stride;
  for (uint32_t& v : stride.dims) v = 0;
  int64_t st = 1;
  for (int i = r - 1; i >= 0; --i) {
    stride.dims[4 - r + i] = u32(st);
    st *= xs[i];
  }
  Dispatch d = index_dispatch(1, static_cast<uint64_t>(n), ctx);
  d.in(0).in(1).out(0).uniform();
  d.arg(u32(n)).arg(u32(xs[dim])).arg(1u).arg(static_cast<uint32_t>(4 - r + dim)).arg(0u).arg(kNanBits);
  d.arg(0u).arg(0u);
  arg4(d, shape4(is));
  arg4(d, stride);
  out.dispatches.push_back(std::move(d));
}

}  // namespace

Encoder llama_encoder(Op op) {
  switch (op) {
    case Op::rms_norm: return enc_rms_norm;
    case Op::rms_norm_backward: return enc_rms_norm_backward;
    case Op::embedding: return enc_embedding;
    case Op::embedding_backward: return enc_embedding_backward;
    case Op::gather: return enc_gather;
    default: return nullptr;
  }
}

}  // namespace edgetrain::wg

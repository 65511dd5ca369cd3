// WebGPU encoders of the reductions: sum and mean over adjacent dims, and the softmax family.
#include <algorithm>

#include "reduce.wgsl.h"
#include "softmax.wgsl.h"
#include "core/reduce_geometry.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {
namespace {

void enc_reduce(const OpCall& c, const EncodeContext& ctx, Encoded& out, bool mean) {
  const Shape& s = c.in[0].shape();
  const ReduceGeometry geo = reduce_geometry(s, c.ints);
  const int64_t outer = geo.outer, reduced = geo.reduced, inner = geo.inner;
  const int64_t outs = outer * inner;
  if (outs == 0) return;
  Dispatch d(ET_WG_KERNEL(reduce));
  d.constant("MEAN", mean ? 1 : 0).constant("WG", ctx.wg_size(64));
  d.in(0).out(0).uniform();
  d.arg(u32(outs)).arg(u32(reduced)).arg(u32(inner)).arg(0u);
  grid_1d(static_cast<uint64_t>(outs), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

void enc_sum(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_reduce(c, x, o, false); }
void enc_mean(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_reduce(c, x, o, true); }

void enc_softmax_mode(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t mode) {
  const Shape& s = c.in[0].shape();
  const int64_t n = s.last(), rows = n ? s.numel() / n : 0;
  if (rows == 0) return;
  Dispatch d(ET_WG_KERNEL(softmax));
  d.constant("MODE", mode).constant("WG", ctx.wg_size(n >= 256 ? 256 : 64));
  d.in(0);
  if (mode == 2) d.in(1);
  else d.dummy();
  d.out(0).scalars().uniform();
  const int64_t T = mode == 3 ? s.dim(-2) : 1;
  d.arg(u32(rows)).arg(u32(n)).arg(u32(T)).arg(mode == 3 ? ctx.float_index[0] : 0u);
  d.arg(0xff800000u).arg(0u).arg(0u).arg(0u);  // -inf bits: WGSL has no infinity literal
  grid_1d(static_cast<uint64_t>(rows), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

void enc_softmax(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_softmax_mode(c, x, o, 0); }
void enc_log_softmax(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_softmax_mode(c, x, o, 1); }
void enc_softmax_backward(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_softmax_mode(c, x, o, 2); }
void enc_causal_softmax(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_softmax_mode(c, x, o, 3); }

}  // namespace

Encoder reduce_encoder(Op op) {
  switch (op) {
    case Op::sum: return enc_sum;
    case Op::mean: return enc_mean;
    case Op::softmax: return enc_softmax;
    case Op::log_softmax: return enc_log_softmax;
    case Op::softmax_backward: return enc_softmax_backward;
    case Op::causal_softmax: return enc_causal_softmax;
    default: return nullptr;
  }
}

}  // namespace edgetrain::wg

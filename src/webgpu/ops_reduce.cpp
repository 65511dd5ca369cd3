// WebGPU encoders of the reductions: sum and mean over adjacent dims, and the softmax family.
#include <algorithm>

#include "core/reduce_geometry.h"
#include "reduce_sum.wgsl.h"
#include "softmax.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {
namespace {

void sum_mean(const OpCall& c, const EncodeContext& ctx, Encoded& out, bool mean) {
  const Shape& s = c.in[0].shape();
  const ReduceGeometry geo = reduce_geometry(s, c.ints);
  const int64_t outer = geo.outer, reduced = geo.reduced, inner = geo.inner;
  const int64_t outs = outer * inner;
  if (outs == 0) return;
  Dispatch d(ET_WG_KERNEL(reduce_sum));
  d.constant("MEAN", mean ? 1 : 0).constant("WG", ctx.wg_size(64));
  d.in(0).out(0).uniform();
  d.arg(u32(outs, c)).arg(u32(reduced, c)).arg(u32(inner, c)).arg(0u);
  grid_1d(static_cast<uint64_t>(outs), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

// softmax.wgsl MODE: 0 softmax, 1 log_softmax, 2 softmax_backward, 3 causal_softmax.
void softmax_rows(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t mode) {
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
  d.arg(u32(rows, c)).arg(u32(n, c)).arg(u32(T, c)).arg(mode == 3 ? ctx.float_index[0] : 0u);
  d.arg(0xff800000u).arg(0u).arg(0u).arg(0u);  // -inf bits: WGSL has no infinity literal
  grid_1d(static_cast<uint64_t>(rows), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace

void encode_sum(const OpCall& c, const EncodeContext& x, Encoded& o) { sum_mean(c, x, o, false); }
void encode_mean(const OpCall& c, const EncodeContext& x, Encoded& o) { sum_mean(c, x, o, true); }
void encode_softmax(const OpCall& c, const EncodeContext& x, Encoded& o) { softmax_rows(c, x, o, 0); }
void encode_log_softmax(const OpCall& c, const EncodeContext& x, Encoded& o) { softmax_rows(c, x, o, 1); }
void encode_softmax_backward(const OpCall& c, const EncodeContext& x, Encoded& o) { softmax_rows(c, x, o, 2); }
void encode_causal_softmax(const OpCall& c, const EncodeContext& x, Encoded& o) { softmax_rows(c, x, o, 3); }

}  // namespace edgetrain::wg

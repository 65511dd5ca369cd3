// Vulkan encoders of the reduction family: sum/mean over adjacent dims, softmax, log_softmax, their
// backward and the causal softmax. Rows are one workgroup each, folded over a 2-D grid (no row caps).
// Kernels: shaders/reduce_sum.comp, shaders/softmax.comp, shaders/softmax_backward.comp.
#include <algorithm>

#include "core/reduce_geometry.h"
#include "reduce_sum.spv.h"
#include "softmax.spv.h"
#include "softmax_backward.spv.h"
#include "vulkan/kernel.h"

namespace edgetrain::vk {
namespace {

// Reductions this short (or outputs this many) run one invocation per output, looping over the reduced
// elements; longer ones get a workgroup per output.
constexpr int64_t kPerThreadMaxRed = 64;

void sum_mean(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  const ReduceGeometry geo = reduce_geometry(s, c.ints);
  const int64_t outer = geo.outer, red = geo.reduced, inner = geo.inner;
  uint32_t n_out = u32(outer * inner, c);
  u32(s.numel(), c);
  if (n_out == 0) return;
  bool per_thread = red <= kPerThreadMaxRed || n_out >= 4096;
  uint32_t wg = per_thread ? kWG : reduce_wg(ctx);
  Dispatch d(ET_VK_KERNEL(reduce_sum), {wg, per_thread ? 1u : 0u, c.op == Op::mean ? 1u : 0u});
  d.arg(u32(outer, c)).arg(u32(red, c)).arg(u32(inner, c));
  if (per_thread) threads_grid(d, n_out, wg, ctx);
  else grid_1d(n_out, ctx, d.groups);
  out.dispatches.push_back(d);
}

// One workgroup per row of the last dim: softmax (mode 0), log_softmax (1), causal_softmax (2) on
// softmax.comp, softmax_backward (3) on softmax_backward.comp.
void softmax_rows(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t mode) {
  const Shape& s = c.in[0].shape();
  uint32_t n = u32(s.last(), c);
  u32(s.numel(), c);
  if (s.numel() == 0) return;
  uint32_t rows = u32(s.numel() / n, c);
  uint32_t wg = reduce_wg(ctx);
  Dispatch d = mode == 3 ? Dispatch(ET_VK_KERNEL(softmax_backward), {wg}) : Dispatch(ET_VK_KERNEL(softmax), {wg, mode});
  d.arg(n).arg(rows);
  if (mode != 3) d.arg(mode == 2 ? u32(s.dim(-2), c) : 1u).arg(mode == 2 ? ctx.float_index[0] : 0u);
  grid_1d(rows, ctx, d.groups);
  out.dispatches.push_back(d);
}

}  // namespace

void encode_sum(const OpCall& c, const EncodeContext& ctx, Encoded& out) { sum_mean(c, ctx, out); }
void encode_mean(const OpCall& c, const EncodeContext& ctx, Encoded& out) { sum_mean(c, ctx, out); }
void encode_softmax(const OpCall& c, const EncodeContext& ctx, Encoded& out) { softmax_rows(c, ctx, out, 0); }
void encode_log_softmax(const OpCall& c, const EncodeContext& ctx, Encoded& out) { softmax_rows(c, ctx, out, 1); }
void encode_causal_softmax(const OpCall& c, const EncodeContext& ctx, Encoded& out) { softmax_rows(c, ctx, out, 2); }
void encode_softmax_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  softmax_rows(c, ctx, out, 3);
}

}  // namespace edgetrain::vk

// Vulkan encoders of the reduction family: sum/mean over adjacent dims, softmax, log_softmax, their
// backward and the causal softmax. Rows are one workgroup each, folded over a 2-D grid (no row caps).
// Kernels: shaders/reduce_sum.comp, shaders/softmax.comp, shaders/softmax_backward.comp.
#include <algorithm>

#include "reduce_sum.spv.h"
#include "softmax.spv.h"
#include "softmax_backward.spv.h"
#include "core/reduce_geometry.h"
#include "vulkan/ops_generic.h"

namespace edgetrain::vk {
namespace {
using namespace generic;

// Reductions this short (or outputs this many) run one invocation per output, looping over the reduced
// elements; longer ones get a workgroup per output.
constexpr int64_t kPerThreadMaxRed = 64;

void encode_sum_mean(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  const ReduceGeometry geo = reduce_geometry(s, c.ints);
  const int64_t outer = geo.outer, red = geo.reduced, inner = geo.inner;
  uint32_t n_out = u32(outer * inner, c);
  u32(s.numel(), c);
  if (n_out == 0) return;
  bool per_thread = red <= kPerThreadMaxRed || n_out >= 4096;
  uint32_t wg = per_thread ? kWG : reduce_wg(ctx);
  Dispatch d = kernel(ET_VK_KERNEL(reduce_sum), {wg, per_thread ? 1u : 0u, c.op == Op::mean ? 1u : 0u});
  d.arg(u32(outer, c)).arg(u32(red, c)).arg(u32(inner, c));
  if (per_thread) threads_grid(d, n_out, wg, ctx);
  else grid_1d(n_out, ctx, d.groups);
  out.dispatches.push_back(d);
}

// softmax (mode 0), log_softmax (1), causal_softmax (2): one workgroup per row of the last dim.
void rows_softmax(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t mode) {
  const Shape& s = c.in[0].shape();
  uint32_t n = u32(s.last(), c);
  u32(s.numel(), c);
  if (s.numel() == 0) return;
  uint32_t rows = u32(s.numel() / n, c);
  uint32_t wg = reduce_wg(ctx);
  Dispatch d = kernel(ET_VK_KERNEL(softmax), {wg, mode});
  d.arg(n).arg(rows).arg(mode == 2 ? u32(s.dim(-2), c) : 1u).arg(mode == 2 ? ctx.float_index[0] : 0u);
  grid_1d(rows, ctx, d.groups);
  out.dispatches.push_back(d);
}

void encode_softmax(const OpCall& c, const EncodeContext& ctx, Encoded& out) { rows_softmax(c, ctx, out, 0); }
void encode_log_softmax(const OpCall& c, const EncodeContext& ctx, Encoded& out) { rows_softmax(c, ctx, out, 1); }
void encode_causal_softmax(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  rows_softmax(c, ctx, out, 2);
}

void encode_softmax_backward(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& s = c.in[0].shape();
  uint32_t n = u32(s.last(), c);
  u32(s.numel(), c);
  if (s.numel() == 0) return;
  uint32_t rows = u32(s.numel() / n, c);
  uint32_t wg = reduce_wg(ctx);
  Dispatch d = kernel(ET_VK_KERNEL(softmax_backward), {wg});
  d.arg(n).arg(rows);
  grid_1d(rows, ctx, d.groups);
  out.dispatches.push_back(d);
}

}  // namespace

Encoder reduce_encoder(Op op) {
  switch (op) {
    case Op::sum:
    case Op::mean: return encode_sum_mean;
    case Op::softmax: return encode_softmax;
    case Op::log_softmax: return encode_log_softmax;
    case Op::softmax_backward: return encode_softmax_backward;
    case Op::causal_softmax: return encode_causal_softmax;
    default: return nullptr;
  }
}

}  // namespace edgetrain::vk

// Vulkan encoders of the elementwise family: broadcasting add/sub/mul/div, scale, where, comparisons with
// a scalar, logical_not and fill. Kernels: shaders/ew_*.comp.
#include "ew_binary.spv.h"
#include "ew_compare.spv.h"
#include "ew_fill.spv.h"
#include "ew_logical_not.spv.h"
#include "ew_scale.spv.h"
#include "ew_where.spv.h"
#include "vulkan/kernel.h"

namespace edgetrain::vk {
namespace {

// add, sub, mul, div: vec4 fast path when a, b and out share a shape, else rank-4 broadcast indexing.
void binary(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& os = c.out[0].shape();
  uint32_t n = u32(os.numel(), c);
  if (n == 0) return;
  uint32_t op = c.op == Op::add ? 0 : c.op == Op::sub ? 1 : c.op == Op::mul ? 2 : 3;
  bool fast = c.in[0].shape() == os && c.in[1].shape() == os;
  Dispatch d(ET_VK_KERNEL(ew_binary), {op, fast ? 1u : 0u});
  d.arg(pad4(os, c)).arg(bcast_strides(c.in[0].shape(), c)).arg(bcast_strides(c.in[1].shape(), c));
  d.arg(n).arg(op <= 1 ? ctx.float_index[0] : 0u);
  threads_grid(d, fast ? (uint64_t(n) + 3) / 4 : n, kWG, ctx);
  out.dispatches.push_back(d);
}

// eq, ne, lt, le, gt, ge against the scalar.
void compare(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  uint32_t n = u32(c.in[0].numel(), c);
  if (n == 0) return;
  static_assert(int(Op::ne) == int(Op::eq) + 1 && int(Op::ge) == int(Op::eq) + 5, "compare ops in order");
  uint32_t cmp = static_cast<uint32_t>(c.op) - static_cast<uint32_t>(Op::eq);  // eq, ne, lt, le, gt, ge
  Dispatch d(ET_VK_KERNEL(ew_compare), {cmp, c.in[0].dtype() == DType::i32 ? 1u : 0u});
  d.arg(n).arg(ctx.float_index[0]);
  threads_grid(d, (uint64_t(n) + 3) / 4, kWG, ctx);  // one bool word per invocation
  out.dispatches.push_back(d);
}

}  // namespace

void encode_add(const OpCall& c, const EncodeContext& ctx, Encoded& out) { binary(c, ctx, out); }
void encode_sub(const OpCall& c, const EncodeContext& ctx, Encoded& out) { binary(c, ctx, out); }
void encode_mul(const OpCall& c, const EncodeContext& ctx, Encoded& out) { binary(c, ctx, out); }
void encode_div(const OpCall& c, const EncodeContext& ctx, Encoded& out) { binary(c, ctx, out); }
void encode_eq(const OpCall& c, const EncodeContext& ctx, Encoded& out) { compare(c, ctx, out); }
void encode_ne(const OpCall& c, const EncodeContext& ctx, Encoded& out) { compare(c, ctx, out); }
void encode_lt(const OpCall& c, const EncodeContext& ctx, Encoded& out) { compare(c, ctx, out); }
void encode_le(const OpCall& c, const EncodeContext& ctx, Encoded& out) { compare(c, ctx, out); }
void encode_gt(const OpCall& c, const EncodeContext& ctx, Encoded& out) { compare(c, ctx, out); }
void encode_ge(const OpCall& c, const EncodeContext& ctx, Encoded& out) { compare(c, ctx, out); }

void encode_scale(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  uint32_t n = u32(c.out[0].numel(), c);
  if (n == 0) return;
  Dispatch d(ET_VK_KERNEL(ew_scale));
  d.arg(n).arg(ctx.float_index[0]);
  threads_grid(d, (uint64_t(n) + 3) / 4, kWG, ctx);
  out.dispatches.push_back(d);
}

void encode_where(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Shape& os = c.out[0].shape();
  uint32_t n = u32(os.numel(), c);
  if (n == 0) return;
  Dispatch d(ET_VK_KERNEL(ew_where));
  d.arg(pad4(os, c));
  for (int i = 0; i < 3; ++i) d.arg(bcast_strides(c.in[i].shape(), c));
  d.arg(n);
  threads_grid(d, n, kWG, ctx);
  out.dispatches.push_back(d);
}

void encode_logical_not(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  uint32_t n = u32(c.in[0].numel(), c);
  if (n == 0) return;
  Dispatch d(ET_VK_KERNEL(ew_logical_not));
  d.arg(n);
  threads_grid(d, (uint64_t(n) + 3) / 4, kWG, ctx);
  out.dispatches.push_back(d);
}

void encode_fill(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor& o = c.out[0];
  uint32_t n = u32(o.numel(), c);
  if (n == 0) return;
  const uint32_t kind = gpu::dtype_code(o.dtype());
  Dispatch d(ET_VK_KERNEL(ew_fill), {kind});
  d.arg(n).arg(ctx.float_index[0]);
  threads_grid(d, kind <= 2 ? uint64_t(n) : (uint64_t(n) + 3) / 4, kWG, ctx);
  out.dispatches.push_back(d);
}

}  // namespace edgetrain::vk

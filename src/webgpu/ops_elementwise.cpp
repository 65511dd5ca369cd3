// WebGPU encoders of the elementwise ops: broadcasting arithmetic, scale, where, comparisons with a scalar,
// logical_not and fill. elementwise_map also serves silu_mul and its backward (ops_llama.cpp).
#include "elementwise.wgsl.h"
#include "ew_compare.wgsl.h"
#include "ew_fill.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {

void elementwise_map(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t kind) {
  const Shape& os = c.out[0].shape();
  const int64_t n = os.numel();
  if (n == 0) return;
  // Inputs in the kernel's order: a, b, cond/u. where(cond, a, b) binds a, b, cond.
  std::vector<int> ins;
  if (kind == 4) ins = {1, 2, 0};
  else for (size_t i = 0; i < c.in.size(); ++i) ins.push_back(static_cast<int>(i));
  uint32_t alias = 0;
  for (int slot = 0; slot < 2 && slot < static_cast<int>(ins.size()); ++slot)
    if (c.out[0].same_memory(c.in[ins[slot]])) alias |= 1u << slot;
  Dispatch d(ET_WG_KERNEL(elementwise));
  uint32_t wg = ctx.wg_size(256);
  d.constant("OP", kind).constant("ALIAS", alias).constant("WG", wg);
  for (int slot = 0; slot < 3; ++slot) {
    if (slot < static_cast<int>(ins.size()) && !(alias & (1u << slot))) d.in(ins[slot]);
    else d.dummy();
  }
  d.out(0);
  if (kind == 7) d.out(1);
  else {
    out.scratch_bytes.push_back(16);
    d.scratch(0);
  }
  d.scalars().uniform();
  d.arg(u32(n, c)).arg(ctx.float_index.empty() ? 0u : ctx.float_index[0]).arg(0u).arg(0u);
  d.arg(pad4(os, c));
  for (int slot = 0; slot < 3; ++slot) {
    Dims4 s;
    for (uint32_t& v : s.d) v = 0;
    if (slot < static_cast<int>(ins.size())) s = bcast_strides(c.in[ins[slot]].shape(), c);
    d.arg(s);
  }
  grid_1d(ceil_div(static_cast<uint64_t>(n), wg), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

void encode_add(const OpCall& c, const EncodeContext& x, Encoded& o) { elementwise_map(c, x, o, 0); }
void encode_sub(const OpCall& c, const EncodeContext& x, Encoded& o) { elementwise_map(c, x, o, 1); }
void encode_mul(const OpCall& c, const EncodeContext& x, Encoded& o) { elementwise_map(c, x, o, 2); }
void encode_div(const OpCall& c, const EncodeContext& x, Encoded& o) { elementwise_map(c, x, o, 3); }
void encode_where(const OpCall& c, const EncodeContext& x, Encoded& o) { elementwise_map(c, x, o, 4); }
void encode_scale(const OpCall& c, const EncodeContext& x, Encoded& o) { elementwise_map(c, x, o, 5); }

namespace {

// kind: ew_compare.wgsl's OP code (eq, ne, lt, le, gt, ge, logical_not).
void compare(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t kind) {
  const int64_t n = c.in[0].numel();
  if (n == 0) return;
  const uint64_t words = ceil_div(static_cast<uint64_t>(n), 4);
  Dispatch d(ET_WG_KERNEL(ew_compare));
  d.constant("OP", kind).constant("X_INT", c.in[0].dtype() == DType::i32 ? 1 : 0);
  d.in(0).out(0).scalars().uniform();
  d.arg(u32(n, c)).arg(ctx.float_index.empty() ? 0u : ctx.float_index[0]).arg(u32(static_cast<int64_t>(words), c)).arg(0u);
  grid_1d(ceil_div(words, 64), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace

void encode_eq(const OpCall& c, const EncodeContext& x, Encoded& o) { compare(c, x, o, 0); }
void encode_ne(const OpCall& c, const EncodeContext& x, Encoded& o) { compare(c, x, o, 1); }
void encode_lt(const OpCall& c, const EncodeContext& x, Encoded& o) { compare(c, x, o, 2); }
void encode_le(const OpCall& c, const EncodeContext& x, Encoded& o) { compare(c, x, o, 3); }
void encode_gt(const OpCall& c, const EncodeContext& x, Encoded& o) { compare(c, x, o, 4); }
void encode_ge(const OpCall& c, const EncodeContext& x, Encoded& o) { compare(c, x, o, 5); }
void encode_logical_not(const OpCall& c, const EncodeContext& x, Encoded& o) { compare(c, x, o, 6); }

void encode_fill(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor& t = c.out[0];
  if (t.numel() == 0) return;
  const uint32_t dt = gpu::dtype_code(t.dtype());
  const uint64_t words = ceil_div(t.nbytes(), 4);
  Dispatch d(ET_WG_KERNEL(ew_fill));
  d.constant("DT", dt);
  d.out(0).scalars().uniform();
  d.arg(u32(static_cast<int64_t>(words), c)).arg(ctx.float_index[0]).arg(0u).arg(0u);
  grid_1d(ceil_div(words, 64), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace edgetrain::wg

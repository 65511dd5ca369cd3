// WebGPU encoders of the elementwise ops: broadcasting arithmetic, scale, where, silu_mul (+ backward),
// comparisons with a scalar, logical_not and fill.
#include "compare.wgsl.h"
#include "elementwise.wgsl.h"
#include "fill.wgsl.h"
#include "webgpu/kernel.h"

namespace edgetrain::wg {
namespace {

// kind: the elementwise.wgsl OP code.
void enc_map(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t kind) {
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
  d.arg(u32(n)).arg(ctx.float_index.empty() ? 0u : ctx.float_index[0]).arg(0u).arg(0u);
  arg4(d, shape4(os));
  for (int slot = 0; slot < 3; ++slot) {
    Shape4 s;
    for (uint32_t& v : s.dims) v = 0;
    if (slot < static_cast<int>(ins.size())) s = bcast_strides(c.in[ins[slot]].shape(), os);
    arg4(d, s);
  }
  grid_1d(ceil_div(static_cast<uint64_t>(n), wg), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

void enc_add(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_map(c, x, o, 0); }
void enc_sub(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_map(c, x, o, 1); }
void enc_mul(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_map(c, x, o, 2); }
void enc_div(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_map(c, x, o, 3); }
void enc_where(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_map(c, x, o, 4); }
void enc_scale(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_map(c, x, o, 5); }
void enc_silu_mul(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_map(c, x, o, 6); }
void enc_silu_mul_backward(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_map(c, x, o, 7); }

void enc_compare(const OpCall& c, const EncodeContext& ctx, Encoded& out, uint32_t kind) {
  const int64_t n = c.in[0].numel();
  if (n == 0) return;
  const uint64_t words = ceil_div(static_cast<uint64_t>(n), 4);
  Dispatch d(ET_WG_KERNEL(compare));
  d.constant("OP", kind).constant("X_INT", c.in[0].dtype() == DType::i32 ? 1 : 0);
  d.in(0).out(0).scalars().uniform();
  d.arg(u32(n)).arg(ctx.float_index.empty() ? 0u : ctx.float_index[0]).arg(u32(static_cast<int64_t>(words))).arg(0u);
  grid_1d(ceil_div(words, 64), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

void enc_eq(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_compare(c, x, o, 0); }
void enc_ne(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_compare(c, x, o, 1); }
void enc_lt(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_compare(c, x, o, 2); }
void enc_le(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_compare(c, x, o, 3); }
void enc_gt(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_compare(c, x, o, 4); }
void enc_ge(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_compare(c, x, o, 5); }
void enc_logical_not(const OpCall& c, const EncodeContext& x, Encoded& o) { enc_compare(c, x, o, 6); }

void enc_fill(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor& t = c.out[0];
  if (t.numel() == 0) return;
  uint32_t dt = 0;
  switch (t.dtype()) {
    case DType::f32: dt = 0; break;
    case DType::i32: dt = 1; break;
    case DType::u32: dt = 2; break;
    case DType::u8: dt = 3; break;
    case DType::boolean: dt = 4; break;
  }
  const uint64_t words = ceil_div(t.nbytes(), 4);
  Dispatch d(ET_WG_KERNEL(fill));
  d.constant("DT", dt);
  d.out(0).scalars().uniform();
  d.arg(u32(static_cast<int64_t>(words))).arg(ctx.float_index[0]).arg(0u).arg(0u);
  grid_1d(ceil_div(words, 64), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace

Encoder elementwise_encoder(Op op) {
  switch (op) {
    case Op::add: return enc_add;
    case Op::sub: return enc_sub;
    case Op::mul: return enc_mul;
    case Op::div: return enc_div;
    case Op::where: return enc_where;
    case Op::scale: return enc_scale;
    case Op::silu_mul: return enc_silu_mul;
    case Op::silu_mul_backward: return enc_silu_mul_backward;
    case Op::eq: return enc_eq;
    case Op::ne: return enc_ne;
    case Op::lt: return enc_lt;
    case Op::le: return enc_le;
    case Op::gt: return enc_gt;
    case Op::ge: return enc_ge;
    case Op::logical_not: return enc_logical_not;
    case Op::fill: return enc_fill;
    default: return nullptr;
  }
}

}  // namespace edgetrain::wg

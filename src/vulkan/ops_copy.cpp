// Vulkan encoders of the copy family: dim_order_copy (dtype conversion or plain copy), expand_copy /
// permute_copy (one strided-gather kernel: out index -> source offset through per-dim strides), and
// write_rows (row copy at a per-replay offset). Kernels: shaders/copy_convert.comp, copy_strided.comp,
// write_rows.comp.
#include <algorithm>

#include "copy_convert.spv.h"
#include "copy_strided.spv.h"
#include "copy_words.spv.h"
#include "vulkan/kernel.h"
#include "write_rows.spv.h"

namespace edgetrain::vk {
namespace {

// The shader's dtype kinds: 0 f32 (and any other 4-byte dtype in a same-dtype copy), 1 i32, 2 one byte.
uint32_t kind(DType t) {
  if (t == DType::i32) return 1;
  return dtype_size(t) == 1 ? 2 : 0;
}

void strided(const OpCall& c, const Dims4& src_strides, const EncodeContext& ctx, Encoded& out) {
  const Tensor& o = c.out[0];
  uint32_t n = u32(o.numel(), c);
  if (n == 0) return;
  size_t es = dtype_size(o.dtype());
  ET_CHECK_KIND(ErrorKind::unsupported, es == 1 || es == 4, "vulkan: ", op_name(c.op), ": unsupported element size ",
                es);
  Dispatch d(ET_VK_KERNEL(copy_strided), {static_cast<uint32_t>(es)});
  d.arg(pad4(o.shape(), c)).arg(src_strides).arg(n);
  threads_grid(d, es == 1 ? (uint64_t(n) + 3) / 4 : n, kWG, ctx);
  out.dispatches.push_back(d);
}

}  // namespace

void encode_dim_order_copy(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor &x = c.in[0], &o = c.out[0];
  uint32_t n = u32(x.numel(), c);
  if (n == 0) return;
  const size_t bytes = size_t(n) * dtype_size(x.dtype());
  if (x.dtype() == o.dtype() && bytes % 4 == 0) {  // whole words: the vectorized copy
    Dispatch d(ET_VK_KERNEL(copy_words));
    uint32_t words = static_cast<uint32_t>(bytes / 4);
    d.arg(words);
    grid_1d(std::max<uint64_t>(1, (uint64_t(words) / 4 + 1023) / 1024), ctx, d.groups);
    out.dispatches.push_back(d);
    return;
  }
  uint32_t src = kind(x.dtype()), dst = kind(o.dtype());
  if (x.dtype() == o.dtype()) src = dst = dtype_size(x.dtype()) == 1 ? 2 : 0;  // a plain copy of words
  Dispatch d(ET_VK_KERNEL(copy_convert), {src, dst});
  d.arg(n);
  threads_grid(d, dst == 2 ? (uint64_t(n) + 3) / 4 : n, kWG, ctx);
  out.dispatches.push_back(d);
}

void encode_expand_copy(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  strided(c, bcast_strides(c.in[0].shape(), c), ctx, out);
}

// out dim i walks x dim dims[i]: its source stride is x's stride of that dim.
void encode_permute_copy(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  strided(c, permuted_strides(c.in[0].shape(), c.ints, c), ctx, out);
}

// The grid covers x; the offset is read from the scalar block when the program runs.
void encode_write_rows(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor &x = c.in[0], &o = c.out[0];
  int64_t C = x.shape().last();
  if (C == 0 || x.numel() == 0 || o.numel() == 0) return;
  uint32_t R = u32(x.numel() / C, c), S = u32(o.numel() / C, c);
  u32(x.numel(), c);
  u32(o.numel(), c);
  ET_CHECK(R < (1u << 31) && S < (1u << 31), "vulkan: write_rows: too many rows (call: ", c.str(), ")");
  size_t es = dtype_size(x.dtype());
  ET_CHECK_KIND(ErrorKind::unsupported, es == 1 || es == 4, "vulkan: write_rows: unsupported element size ", es);
  Dispatch d(ET_VK_KERNEL(write_rows), {static_cast<uint32_t>(es)});
  d.arg(u32(C, c)).arg(R).arg(S).arg(ctx.float_index[0]);
  threads_grid(d, es == 1 ? uint64_t(x.numel()) / 4 + 2 : uint64_t(x.numel()), kWG, ctx);
  out.dispatches.push_back(d);
}

}  // namespace edgetrain::vk

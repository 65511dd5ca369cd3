// WebGPU encoders of the copies: dtype conversion (dim_order_copy), broadcast (expand_copy) and
// permutation (permute_copy), all on copy.wgsl's index map, and the in-place row copy write_rows
// (write_rows.wgsl).
#include "copy.wgsl.h"
#include "copy_words.wgsl.h"
#include "webgpu/kernel.h"
#include "write_rows.wgsl.h"

namespace edgetrain::wg {
namespace {

// copy.wgsl type codes: 0 f32, 1 i32, 2 raw 4-byte, 3 raw byte, 4 bool.
uint32_t type_code(DType t, bool converting) {
  switch (t) {
    case DType::f32: return converting ? 0 : 2;
    case DType::i32: return converting ? 1 : 2;
    case DType::u32: return 2;
    case DType::u8: return 3;
    case DType::boolean: return converting ? 4 : 3;
  }
  return 2;
}

void copy_dispatch(const OpCall& c, const Dims4& stride, const EncodeContext& ctx, Encoded& out) {
  const Tensor &x = c.in[0], &o = c.out[0];
  const int64_t n = o.numel();
  if (n == 0) return;
  const bool converting = x.dtype() != o.dtype();
  const uint32_t dst = type_code(o.dtype(), converting);
  const uint64_t words = dst >= 3 ? ceil_div(static_cast<uint64_t>(n), 4) : static_cast<uint64_t>(n);
  Dispatch d(ET_WG_KERNEL(copy));
  d.constant("SRC", type_code(x.dtype(), converting)).constant("DST", dst).constant("WG", 64);
  d.in(0).out(0).uniform();
  d.arg(u32(n, c)).arg(u32(static_cast<int64_t>(words), c)).arg(0u).arg(0u);
  d.arg(pad4(o.shape(), c)).arg(stride);
  grid_1d(ceil_div(words, 64), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace

void encode_dim_order_copy(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor &x = c.in[0], &o = c.out[0];
  const uint64_t bytes = static_cast<uint64_t>(o.numel()) * dtype_size(o.dtype());
  if (x.dtype() == o.dtype() && bytes > 0 && bytes % 16 == 0) {  // same bytes: the vector copy
    Dispatch d(ET_WG_KERNEL(copy_words));
    d.in(0).out(0).uniform();
    d.arg(u32(static_cast<int64_t>(bytes / 16), c)).arg(0u).arg(0u).arg(0u);
    grid_1d(ceil_div(bytes / 16, 1024), ctx, d.groups);
    out.dispatches.push_back(std::move(d));
    return;
  }
  copy_dispatch(c, bcast_strides(c.in[0].shape(), c), ctx, out);
}

void encode_expand_copy(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  copy_dispatch(c, bcast_strides(c.in[0].shape(), c), ctx, out);
}

void encode_permute_copy(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  copy_dispatch(c, permuted_strides(c.in[0].shape(), c.ints, c), ctx, out);
}

// x [R, C] into out [S, C] at the per-replay row offset (float 0); out is bound read_write and keeps the
// rows that are not written.
void encode_write_rows(const OpCall& c, const EncodeContext& ctx, Encoded& out) {
  const Tensor &x = c.in[0], &o = c.out[0];
  const int64_t C = x.shape().last();
  if (C == 0 || x.numel() == 0 || o.numel() == 0) return;
  const int64_t R = x.numel() / C, S = o.numel() / C;
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  ET_CHECK_KIND(ErrorKind::unsupported, es == 4 || es == 1, "webgpu: write_rows supports 4- and 1-byte dtypes, got ",
                x.str());
  // The kernel does its row arithmetic in i32 (offsets clamped to [-R-1, S+1]).
  ET_CHECK((S + R + 2) * C * es < (int64_t{1} << 31), "webgpu: write_rows: ", o.str(), " is too large");
  const int64_t threads = es == 4 ? R * C : static_cast<int64_t>(ceil_div(static_cast<uint64_t>(R * C), 4)) + 1;
  const int64_t out_words = static_cast<int64_t>(ceil_div(static_cast<uint64_t>(S * C * es), 4));
  Dispatch d(ET_WG_KERNEL(write_rows));
  d.constant("ES", static_cast<double>(es)).constant("WG", 64);
  d.in(0).out(0).scalars().uniform();
  d.arg(u32(R, c)).arg(u32(S, c)).arg(u32(C, c)).arg(ctx.float_index[0]).arg(u32(threads, c)).arg(u32(out_words, c));
  d.arg(0u).arg(0u);
  grid_1d(ceil_div(static_cast<uint64_t>(threads), 64), ctx, d.groups);
  out.dispatches.push_back(std::move(d));
}

}  // namespace edgetrain::wg

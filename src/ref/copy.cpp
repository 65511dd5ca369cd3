// Reference of the copy family: dtype conversion (dim_order_copy), broadcast (expand_copy) and
// transposition (permute_copy), all materialized into a contiguous output.
#include <cmath>
#include <cstring>
#include <limits>

#include "ref/ref.h"

namespace edgetrain::ref {
namespace {

// f32 -> i32 truncating toward zero. C++ leaves NaN and out-of-range casts undefined; we define them so
// every backend can agree: NaN -> 0, values beyond the int32 range saturate to INT32_MIN / INT32_MAX.
int32_t f32_to_i32(float v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(static_cast<double>(v));
  if (t <= static_cast<double>(std::numeric_limits<int32_t>::min())) return std::numeric_limits<int32_t>::min();
  if (t >= static_cast<double>(std::numeric_limits<int32_t>::max())) return std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(t);
}

// Element i of a f32/i32/bool tensor as a double (exact for all three); bool is 0 or 1.
double load(const View& v, int64_t i) {
  switch (v.dtype) {
    case DType::f32: return v.as<float>()[i];
    case DType::i32: return v.as<int32_t>()[i];
    default: return v.as<uint8_t>()[i] != 0 ? 1.0 : 0.0;
  }
}

}  // namespace

// x -> out, same shape. Same dtype: byte copy (any dtype). Otherwise among f32/i32/bool:
//   f32 -> i32 truncates toward zero (NaN -> 0, out of range saturates); i32 -> f32 rounds to nearest;
//   bool -> f32/i32 gives 0/1 (any nonzero byte is true); f32/i32 -> bool is x != 0 (NaN -> true).
void dim_order_copy(const Call& c) {
  const View &x = c.in[0], &out = c.out[0];
  int64_t n = x.numel();
  if (x.dtype == out.dtype) {
    std::memcpy(out.data, x.data, static_cast<size_t>(n) * dtype_size(x.dtype));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    switch (out.dtype) {
      case DType::f32:
        out.as<float>()[i] = static_cast<float>(load(x, i));
        break;
      case DType::i32:
        out.as<int32_t>()[i] = x.dtype == DType::f32 ? f32_to_i32(x.as<float>()[i]) : static_cast<int32_t>(load(x, i));
        break;
      default:  // bool; NaN != 0 is true
        out.as<uint8_t>()[i] = load(x, i) != 0.0 ? 1 : 0;
        break;
    }
  }
}

// x (any dtype) -> out of the same dtype: out[idx] = x[idx broadcast back to x's shape] (numpy rules).
void expand_copy(const Call& c) {
  const View &x = c.in[0], &out = c.out[0];
  size_t es = dtype_size(x.dtype);
  const auto* src = static_cast<const unsigned char*>(x.data);
  auto* dst = static_cast<unsigned char*>(out.data);
  int64_t idx[kMaxRank];
  for (int64_t i = 0; i < out.numel(); ++i) {
    unravel(out.shape, i, idx);
    std::memcpy(dst + i * es, src + broadcast_offset(x.shape, out.shape, idx) * es, es);
  }
}

// x (any dtype) of rank r, ints = dims (a permutation, negatives count from the back):
// out.shape[i] = x.shape[dims[i]], out[o] = x[xi] with xi[dims[i]] = o[i].
void permute_copy(const Call& c) {
  const View &x = c.in[0], &out = c.out[0];
  int r = x.shape.rank();
  size_t es = dtype_size(x.dtype);
  int64_t xs[kMaxRank];
  strides_of(x.shape, xs);
  int dims[kMaxRank];
  for (int i = 0; i < r; ++i) dims[i] = static_cast<int>(c.ints[i] < 0 ? c.ints[i] + r : c.ints[i]);
  const auto* src = static_cast<const unsigned char*>(x.data);
  auto* dst = static_cast<unsigned char*>(out.data);
  int64_t idx[kMaxRank];
  for (int64_t i = 0; i < out.numel(); ++i) {
    unravel(out.shape, i, idx);
    int64_t off = 0;
    for (int k = 0; k < r; ++k) off += idx[k] * xs[dims[k]];
    std::memcpy(dst + i * es, src + off * es, es);
  }
}

}  // namespace edgetrain::ref

// Reference of the elementwise family: broadcasting binary arithmetic, scale, where, comparisons with a
// scalar, logical_not and fill.
#include <cmath>
#include <limits>

#include "ref/ref.h"

namespace edgetrain::ref {
namespace {

// Walks out's elements and hands fn the offsets of the matching (broadcast) elements of each input.
// Every output element is written after reading only its own inputs, so an output that is the same
// buffer as a same-shaped input (in-place residual add) is still correct.
template <typename Fn>
void for_each_broadcast(const Call& c, Fn fn) {
  const Shape& os = c.out[0].shape;
  int64_t idx[kMaxRank];
  int64_t off[3] = {0, 0, 0};
  for (int64_t i = 0; i < os.numel(); ++i) {
    unravel(os, i, idx);
    for (size_t k = 0; k < c.in.size(); ++k) off[k] = broadcast_offset(c.in[k].shape, os, idx);
    fn(i, off);
  }
}

// The comparison ops: x f32 or i32, out bool. An i32 x is compared in double, where every int32 and
// every float is exact, so the result is the mathematical comparison of the two numbers. NaN compares
// false with everything except !=, as in IEEE.
template <typename Pred>
void compare(const Call& c, Pred pred) {
  const View& x = c.in[0];
  double s = c.floats[0];
  uint8_t* o = c.out[0].as<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.dtype == DType::i32 ? static_cast<double>(x.as<int32_t>()[i]) : static_cast<double>(x.as<float>()[i]);
    o[i] = pred(v, s) ? 1 : 0;
  }
}

// A float truncated toward zero into [lo, hi]; NaN gives 0 and out-of-range values saturate.
int64_t truncate_saturate(float v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(static_cast<double>(v));
  if (t <= static_cast<double>(lo)) return lo;
  if (t >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(t);
}

}  // namespace

// a, b f32 broadcast to out: out = a + alpha*b.
void add(const Call& c) {
  const float *a = c.in[0].as<float>(), *b = c.in[1].as<float>();
  float alpha = c.floats[0];
  float* o = c.out[0].as<float>();
  for_each_broadcast(c, [&](int64_t i, const int64_t* off) { o[i] = a[off[0]] + alpha * b[off[1]]; });
}

// a, b f32 broadcast to out: out = a - alpha*b.
void sub(const Call& c) {
  const float *a = c.in[0].as<float>(), *b = c.in[1].as<float>();
  float alpha = c.floats[0];
  float* o = c.out[0].as<float>();
  for_each_broadcast(c, [&](int64_t i, const int64_t* off) { o[i] = a[off[0]] - alpha * b[off[1]]; });
}

// a, b f32 broadcast to out: out = a * b.
void mul(const Call& c) {
  const float *a = c.in[0].as<float>(), *b = c.in[1].as<float>();
  float* o = c.out[0].as<float>();
  for_each_broadcast(c, [&](int64_t i, const int64_t* off) { o[i] = a[off[0]] * b[off[1]]; });
}

// a, b f32 broadcast to out: out = a / b, IEEE true division (x/0 is ±inf, 0/0 is NaN).
void div(const Call& c) {
  const float *a = c.in[0].as<float>(), *b = c.in[1].as<float>();
  float* o = c.out[0].as<float>();
  for_each_broadcast(c, [&](int64_t i, const int64_t* off) { o[i] = a[off[0]] / b[off[1]]; });
}

// x, out f32 of one shape: out = s * x.
void scale(const Call& c) {
  const float* x = c.in[0].as<float>();
  float s = c.floats[0];
  float* o = c.out[0].as<float>();
  for (int64_t i = 0; i < c.out[0].numel(); ++i) o[i] = s * x[i];
}

// cond bool, a, b f32, all broadcast to out: out = cond ? a : b (any nonzero cond byte is true).
void where(const Call& c) {
  const uint8_t* cond = c.in[0].as<uint8_t>();
  const float *a = c.in[1].as<float>(), *b = c.in[2].as<float>();
  float* o = c.out[0].as<float>();
  for_each_broadcast(c, [&](int64_t i, const int64_t* off) { o[i] = cond[off[0]] ? a[off[1]] : b[off[2]]; });
}

// x f32/i32 -> out bool, same shape: out = (x == s).
void eq(const Call& c) { compare(c, [](double v, double s) { return v == s; }); }
// x f32/i32 -> out bool: out = (x != s); NaN != s is true.
void ne(const Call& c) { compare(c, [](double v, double s) { return v != s; }); }
// x f32/i32 -> out bool: out = (x < s).
void lt(const Call& c) { compare(c, [](double v, double s) { return v < s; }); }
// x f32/i32 -> out bool: out = (x <= s).
void le(const Call& c) { compare(c, [](double v, double s) { return v <= s; }); }
// x f32/i32 -> out bool: out = (x > s).
void gt(const Call& c) { compare(c, [](double v, double s) { return v > s; }); }
// x f32/i32 -> out bool: out = (x >= s).
void ge(const Call& c) { compare(c, [](double v, double s) { return v >= s; }); }

// x bool -> out bool, same shape: out = (x == 0) as 0/1; any nonzero byte counts as true.
void logical_not(const Call& c) {
  const uint8_t* x = c.in[0].as<uint8_t>();
  uint8_t* o = c.out[0].as<uint8_t>();
  for (int64_t i = 0; i < c.out[0].numel(); ++i) o[i] = x[i] == 0 ? 1 : 0;
}

// out (any shape, any dtype)[...] = value converted to out's dtype:
//   f32: value; i32: truncated toward zero, NaN -> 0, saturating at INT32_MIN/MAX;
//   u8/u32: truncated toward zero, negatives and NaN -> 0, saturating at the type's maximum;
//   bool: value != 0 (NaN -> true, as a C++ cast of NaN to bool).
void fill(const Call& c) {
  const View& out = c.out[0];
  float v = c.floats[0];
  int64_t n = out.numel();
  switch (out.dtype) {
    case DType::f32:
      for (int64_t i = 0; i < n; ++i) out.as<float>()[i] = v;
      break;
    case DType::i32: {
      auto t = static_cast<int32_t>(truncate_saturate(v, std::numeric_limits<int32_t>::min(),
                                                      std::numeric_limits<int32_t>::max()));
      for (int64_t i = 0; i < n; ++i) out.as<int32_t>()[i] = t;
      break;
    }
    case DType::u8: {
      auto t = static_cast<uint8_t>(truncate_saturate(v, 0, std::numeric_limits<uint8_t>::max()));
      for (int64_t i = 0; i < n; ++i) out.as<uint8_t>()[i] = t;
      break;
    }
    case DType::u32: {
      auto t = static_cast<uint32_t>(truncate_saturate(v, 0, std::numeric_limits<uint32_t>::max()));
      for (int64_t i = 0; i < n; ++i) out.as<uint32_t>()[i] = t;
      break;
    }
    case DType::boolean: {
      uint8_t t = v != 0.0f ? 1 : 0;  // NaN != 0 is true
      for (int64_t i = 0; i < n; ++i) out.as<uint8_t>()[i] = t;
      break;
    }
  }
}

}  // namespace edgetrain::ref

// Fast CPU kernels for the cheap ops a training step runs many times: add/sub/mul/scale without per-element
// index arithmetic (same-shape inputs, or b broadcast along the rows), and permute_copy row by row. Each does
// the reference's fp32 operation per element, so results are bit-identical; other broadcasts run the
// reference.
#include <algorithm>
#include <cstring>

#include "cpu/kernels.h"
#include "cpu/threads.h"

namespace edgetrain::cpu::fast {
namespace {

constexpr int64_t kGrain = 1 << 15;

// b's shape equals the trailing dims of out (b repeats every b.numel() elements).
bool is_row_broadcast(const Shape& b, const Shape& out) {
  if (b.rank() > out.rank() || b.numel() == 0) return false;
  for (int i = 0; i < b.rank(); ++i)
    if (b[i] != out[out.rank() - b.rank() + i]) return false;
  return true;
}

// out[i] = f(a[i], b[i % nb]) when a has out's shape and b is out, or a row-broadcast of out.
template <typename F>
bool binary(const ref::Call& c, F f) {
  const ref::View &a = c.in[0], &b = c.in[1], &o = c.out[0];
  if (a.shape != o.shape || !is_row_broadcast(b.shape, o.shape)) return false;
  const float *ap = a.as<float>(), *bp = b.as<float>();
  float* op = o.as<float>();
  const int64_t n = o.numel(), nb = b.numel();
  if (nb == n) {
    parallel_for(n, kGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) op[i] = f(ap[i], bp[i]);
    });
    return true;
  }
  parallel_for(n / nb, std::max<int64_t>(1, kGrain / nb), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < nb; ++j) op[r * nb + j] = f(ap[r * nb + j], bp[j]);
  });
  return true;
}

}  // namespace

void add(const ref::Call& c) {
  const float alpha = c.floats[0];
  if (!binary(c, [alpha](float a, float b) { return a + alpha * b; })) ref::add(c);
}

void sub(const ref::Call& c) {
  const float alpha = c.floats[0];
  if (!binary(c, [alpha](float a, float b) { return a - alpha * b; })) ref::sub(c);
}

void mul(const ref::Call& c) {
  if (!binary(c, [](float a, float b) { return a * b; })) ref::mul(c);
}

void scale(const ref::Call& c) {
  const float* x = c.in[0].as<float>();
  const float s = c.floats[0];
  float* o = c.out[0].as<float>();
  parallel_for(c.out[0].numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) o[i] = s * x[i];
  });
}

// out = x.permute(dims): each output row (last dim) gathers from x with one stride.
void permute_copy(const ref::Call& c) {
  const ref::View &x = c.in[0], &out = c.out[0];
  const int r = x.shape.rank();
  const size_t es = dtype_size(x.dtype);
  if (r == 0 || out.numel() == 0 || (es != 4 && es != 1)) return ref::permute_copy(c);
  int64_t xs[kMaxRank], ss[kMaxRank];
  ref::strides_of(x.shape, xs);
  for (int i = 0; i < r; ++i) ss[i] = xs[c.ints[i] < 0 ? c.ints[i] + r : c.ints[i]];
  const int64_t L = out.shape[r - 1], rows = out.numel() / L, sl = ss[r - 1];
  parallel_for(rows, std::max<int64_t>(1, kGrain / L), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t rest = row, base = 0;
      for (int d = r - 2; d >= 0; --d) {
        base += (rest % out.shape[d]) * ss[d];
        rest /= out.shape[d];
      }
      if (es == 4) {
        const uint32_t* s = x.as<uint32_t>() + base;
        uint32_t* o = out.as<uint32_t>() + row * L;
        if (sl == 1) std::memcpy(o, s, static_cast<size_t>(L) * 4);
        else
          for (int64_t j = 0; j < L; ++j) o[j] = s[j * sl];
      } else {
        const uint8_t* s = x.as<uint8_t>() + base;
        uint8_t* o = out.as<uint8_t>() + row * L;
        for (int64_t j = 0; j < L; ++j) o[j] = s[j * sl];
      }
    }
  });
}

}  // namespace edgetrain::cpu::fast

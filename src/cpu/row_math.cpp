// The row helpers of row_math.h.
#include "cpu/row_math.h"

#include <cmath>
#include <limits>

namespace edgetrain::cpu::fast::rows {

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kBlock = 1024;  // floats per block of a row: small enough to stay in L1 between passes
}  // namespace

double dot(const float* a, const float* b, int64_t n) {
  double total = 0.0;
  for (int64_t b0 = 0; b0 < n; b0 += 128) {
    const int64_t len = std::min<int64_t>(128, n - b0);
    const float *pa = a + b0, *pb = b ? b + b0 : pa;
    vf acc = {};
    int64_t j = 0;
    for (; j + kLanes <= len; j += kLanes) acc += simd::load(pa + j) * simd::load(pb + j);
    float t = simd::hsum(acc);
    for (; j < len; ++j) t += pa[j] * pb[j];
    total += t;
  }
  return total;
}

bool max_sumexp(const float* x, int64_t n, float s, float& m_out, double& l_out) {
  float m = -kInf;
  double l = 0.0;
  bool bad = false;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t len = std::min(kBlock, n - b0);
    const float* p = x + b0;
    vf mv = simd::splat(-kInf);
    vi nan = {};
    int64_t j = 0;
    for (; j + kLanes <= len; j += kLanes) {
      vf v = simd::load(p + j) * s;
      nan |= v != v;
      mv = v > mv ? v : mv;
    }
    float bm = simd::hmax(mv);
    for (int64_t t = j; t < len; ++t) {
      float v = p[t] * s;
      bad |= v != v;
      bm = v > bm ? v : bm;
    }
    bad |= any(nan);
    if (bm > m) {
      l *= std::exp(static_cast<double>(m) - bm);
      m = bm;
    }
    if (bad || !std::isfinite(m)) return false;
    const vf mm = simd::splat(m);
    vf acc = {};
    for (j = 0; j + kLanes <= len; j += kLanes) acc += simd::exp(simd::load(p + j) * s - mm);
    float t = simd::hsum(acc);
    for (; j < len; ++j) t += simd::exp1(p[j] * s - m);
    l += t;
  }
  if (!std::isfinite(m)) return false;
  m_out = m;
  l_out = l;
  return true;
}

}  // namespace edgetrain::cpu::fast::rows

// Fast CPU kernels of the optimizer: AdamW (AdamwArgs, shared with adamw_q4gsw_step) and the global gradient
// norm, spread over the worker pool with fixed-order partial sums (results do not depend on the thread count).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/row_math.h"
#include "cpu/simd.h"
#include "cpu/threads.h"

namespace edgetrain::cpu::fast {

using namespace rows;

AdamwArgs AdamwArgs::of(const ref::Call& c, size_t grad_scale_input) {
  AdamwArgs a;
  a.p = c.out[0].as<float>();
  a.m = c.out[1].as<float>();
  a.v = c.out[2].as<float>();
  a.g = c.out[3].as<float>();
  a.scaled = c.has_in(grad_scale_input);
  a.s = a.scaled ? c.in[grad_scale_input].as<float>()[0] : 1.0f;
  a.lr = c.floats[0], a.b1 = c.floats[1], a.b2 = c.floats[2], a.eps = c.floats[3], a.wd = c.floats[4];
  a.bc1 = c.floats[5], a.bc2 = c.floats[6];
  return a;
}

// The reference's fp32 operations in its order, so results are bit-identical.
void AdamwArgs::run(int64_t i0, int64_t i1) const {
  const float lrwd = lr * wd, c1 = 1.0f - b1, c2 = 1.0f - b2;
  int64_t i = i0;
  for (; i + kLanes <= i1; i += kLanes) {
    vf pv = simd::load(p + i), gv = simd::load(g + i);
    if (scaled) gv = gv * s;
    pv = pv - lrwd * pv;
    vf mv = b1 * simd::load(m + i) + c1 * gv;
    vf vv = b2 * simd::load(v + i) + c2 * gv * gv;
    pv = pv - lr * (mv / bc1) / (simd::sqrt(vv / bc2) + eps);
    simd::store(p + i, pv);
    simd::store(m + i, mv);
    simd::store(v + i, vv);
    simd::store(g + i, vf{});
  }
  for (; i < i1; ++i) {
    const float gi = scaled ? g[i] * s : g[i];
    float pi = p[i];
    pi = pi - lrwd * pi;
    float mi = b1 * m[i] + c1 * gi;
    float vi = b2 * v[i] + c2 * gi * gi;
    pi = pi - lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    g[i] = 0.0f;
  }
}

// param, m, v, grad (scaled by grad_scale when given, then zeroed); floats {lr, beta1, beta2, eps, wd, bc1, bc2}.
void adamw_step(const ref::Call& c) {
  const AdamwArgs a = AdamwArgs::of(c, 4);
  parallel_for(c.in[0].numel(), 1 << 14, [&](int64_t i0, int64_t i1) { a.run(i0, i1); });
}

// norm [] = sqrt(sum of squares of every input): fixed 64K-element chunks, partials summed in order.
void grad_norm(const ref::Call& c) {
  constexpr int64_t kChunk = 1 << 16;
  struct Piece {
    const float* p;
    int64_t n;
  };
  std::vector<Piece> pieces;
  for (const ref::View& t : c.in)
    for (int64_t i = 0; i < t.numel(); i += kChunk) pieces.push_back({t.as<float>() + i, std::min(kChunk, t.numel() - i)});
  std::vector<double> part(pieces.size());
  parallel_for(static_cast<int64_t>(pieces.size()), 1, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) part[i] = dot(pieces[i].p, nullptr, pieces[i].n);
  });
  double acc = 0.0;
  for (double s : part) acc += s;
  *c.out[0].as<float>() = static_cast<float>(std::sqrt(acc));
}

}  // namespace edgetrain::cpu::fast

// What the row-wise CPU kernels share (softmax_kernels.cpp, optim_kernels.cpp, block_kernels.cpp): the SIMD
// names, how many rows a task takes, the blocked dot product and the one-pass maximum and sum of
// exponentials of a row. Every reduction has a fixed order, so results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>

#include "cpu/simd.h"

namespace edgetrain::cpu::fast::rows {

using simd::kLanes;
using simd::vf;
using simd::vi;
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Rows per task so that a task touches at least ~16K floats.
inline int64_t row_grain(int64_t row_len) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(row_len, 1)); }

inline bool any(vi m) {
  int32_t r = 0;
  for (int i = 0; i < kLanes; ++i) r |= m[i];
  return r != 0;
}

// sum_j a[j] * b[j] in float lanes per block, blocks added in double. b may be null (then a[j]^2).
double dot(const float* a, const float* b, int64_t n);

// The maximum m of s*x[j] and l = sum_j exp(s*x[j] - m), in one pass over the row (blocks: max, then the
// exp sum while the block is in cache; l is rescaled when the maximum grows). False when the row holds a
// NaN or its maximum is not finite: the caller then follows the reference's slow path.
bool max_sumexp(const float* x, int64_t n, float s, float& m_out, double& l_out);

}  // namespace edgetrain::cpu::fast::rows

// sum/mean over adjacent dims: the input seen as [outer, reduced, inner], shared by the reference and the
// GPU encoders so all of them agree on what a call means.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "edgetrain/tensor.h"

namespace edgetrain {

struct ReduceGeometry {
  int64_t outer = 1, reduced = 1, inner = 1;
};

// ints = {keepdim, dims...} as in the catalogue (dims validated by check_call: adjacent, in range).
inline ReduceGeometry reduce_geometry(const Shape& s, const std::vector<int64_t>& ints) {
  const int r = s.rank();
  int lo = r, hi = -1;
  for (size_t i = 1; i < ints.size(); ++i) {
    int d = static_cast<int>(ints[i] < 0 ? ints[i] + r : ints[i]);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  ReduceGeometry g;
  for (int i = 0; i < lo; ++i) g.outer *= s[i];
  for (int i = lo; i <= hi; ++i) g.reduced *= s[i];
  for (int i = hi + 1; i < r; ++i) g.inner *= s[i];
  return g;
}

}  // namespace edgetrain

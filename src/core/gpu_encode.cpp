// The GPU encoders' shared helpers (gpu_encode.h).
#include "core/gpu_encode.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace edgetrain::gpu {

uint32_t u32(int64_t v, const OpCall& c) {
  ET_CHECK(v >= 0 && v <= int64_t(UINT32_MAX), op_name(c.op), ": size ", v,
           " exceeds the kernels' 32-bit indexing (call: ", c.str(), ")");
  return static_cast<uint32_t>(v);
}

Dims4 pad4(const Shape& s, const OpCall& c) {
  Dims4 r;
  for (int i = 0; i < s.rank(); ++i) r.d[4 - s.rank() + i] = u32(s[i], c);
  return r;
}

Dims4 bcast_strides(const Shape& src, const OpCall& c) {
  Dims4 r = row_strides(src, c);
  for (int i = 0; i < src.rank(); ++i)
    if (src[i] == 1) r.d[4 - src.rank() + i] = 0;
  return r;
}

Dims4 row_strides(const Shape& s, const OpCall& c) {
  Dims4 r;
  for (uint32_t& v : r.d) v = 0;
  int64_t st = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    r.d[4 - s.rank() + i] = u32(st, c);
    st *= s[i];
  }
  return r;
}

Dims4 permuted_strides(const Shape& x, const std::vector<int64_t>& dims, const OpCall& c) {
  const int r = x.rank();
  const Dims4 st = row_strides(x, c);
  Dims4 out;
  for (uint32_t& v : out.d) v = 0;
  for (int i = 0; i < r; ++i) {
    int64_t dim = dims[i] < 0 ? dims[i] + r : dims[i];
    out.d[4 - r + i] = st.d[4 - r + dim];
  }
  return out;
}

uint32_t dtype_code(DType t) {
  switch (t) {
    case DType::f32: return 0;
    case DType::i32: return 1;
    case DType::u32: return 2;
    case DType::u8: return 3;
    case DType::boolean: return 4;
  }
  fail("unknown dtype ", static_cast<int>(t));
}

uint32_t pow2_at_most(uint32_t want, uint32_t limit) {
  uint32_t lim = std::min(want, limit), p = 1;
  while (p * 2 <= lim) p *= 2;
  return p;
}

void grid_1d(uint64_t workgroups, const EncodeLimits& lim, uint32_t groups[3]) {
  uint64_t x = std::max<uint64_t>(1, std::min<uint64_t>(workgroups, lim.max_groups[0]));
  uint64_t y = std::max<uint64_t>(1, ceil_div(workgroups, x));
  ET_CHECK_KIND(ErrorKind::unsupported, y <= lim.max_groups[1], lim.backend, ": ", workgroups,
                " workgroups exceed the device grid limits");
  groups[0] = static_cast<uint32_t>(x);
  groups[1] = static_cast<uint32_t>(y);
  groups[2] = 1;
}

uint64_t splitk_want(uint64_t tiles, uint64_t K, uint64_t min_depth, uint64_t step, Force force) {
  if (force == Force::all) return std::min<uint64_t>(4, K / step);
  const uint64_t target = 264;
  if (tiles * 2 > target || K < 1024) return 1;
  return std::min<uint64_t>(ceil_div(target, tiles), K / min_depth);
}

uint64_t splitk_slices(uint64_t K, uint64_t want, uint64_t step, uint64_t& slice) {
  slice = K;
  if (want < 2) return 1;
  const uint64_t depth = ceil_div(ceil_div(K, want), step) * step, n = ceil_div(K, depth);
  if (n < 2) return 1;
  slice = depth;
  return n;
}

Force force_from_env(const char* name, bool offers_large) {
  const char* e = std::getenv(name);
  if (!e) return Force::automatic;
  const std::string v(e);
  if (v == "0") return Force::never;
  if (v == "all") return Force::all;
  return offers_large ? Force::large : Force::automatic;
}

}  // namespace edgetrain::gpu

// Helpers shared by the generic encoders (ops_elementwise/copy/reduce/llama/optim.cpp): 32-bit size
// checks, rank-4 padding of shapes and broadcast strides for push constants, and grid sizing.
#pragma once

#include <algorithm>
#include <cstdint>

#include "vulkan/kernel.h"

namespace edgetrain::vk::generic {

// Shaders index with 32-bit unsigned integers.
inline uint32_t u32(int64_t v, const OpCall& c) {
  ET_CHECK(v >= 0 && v <= int64_t(UINT32_MAX), "vulkan: ", op_name(c.op), ": size ", v,
           " exceeds 32-bit indexing (call: ", c.str(), ")");
  return static_cast<uint32_t>(v);
}

// A shape as 4 dims with leading 1s (what the shaders' uvec4 `dims` expect).
struct Dims4 {
  uint32_t d[4] = {1, 1, 1, 1};
};
inline Dims4 pad4(const Shape& s, const OpCall& c) {
  Dims4 r;
  for (int i = 0; i < s.rank(); ++i) r.d[4 - s.rank() + i] = u32(s[i], c);
  return r;
}

// Element strides of `src` for each dim of a rank-4 padded output it broadcasts to, 0 where src is
// broadcast (numpy rules: src's dims align to the back of the output's, so src alone decides).
inline Dims4 bcast_strides(const Shape& src, const OpCall& c) {
  Dims4 r;
  for (uint32_t& v : r.d) v = 0;
  int64_t st = 1;
  for (int i = src.rank() - 1; i >= 0; --i) {
    r.d[4 - src.rank() + i] = src[i] == 1 ? 0u : u32(st, c);
    st *= src[i];
  }
  return r;
}

inline Dispatch kernel(Kernel k, std::vector<uint32_t> spec = {}) {
  Dispatch d;
  d.kernel = k;
  d.spec = std::move(spec);
  return d;
}

// Enough workgroups of `wg` invocations for `threads` invocations, folded by grid_1d().
inline void threads_grid(Dispatch& d, uint64_t threads, uint32_t wg, const EncodeContext& ctx) {
  grid_1d(std::max<uint64_t>(1, (threads + wg - 1) / wg), ctx, d.groups);
}

// Workgroup size of the tree-reduction kernels (spec constant 0): a power of two, at most 256, within
// the device's invocation limit and with room for two float arrays in shared memory.
inline uint32_t reduce_wg(const EncodeContext& ctx) {
  uint32_t wg = 256;
  while (wg > 1 && (wg > ctx.max_invocations || 2 * wg * 4 > ctx.max_shared_bytes)) wg /= 2;
  return wg;
}

constexpr uint32_t kWG = 128;  // local size of the one-element-per-invocation kernels

}  // namespace edgetrain::vk::generic

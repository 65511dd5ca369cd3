// What the encoders of the two GPU backends (src/vulkan, src/webgpu) share: the device limits they size
// grids by, 32-bit checks of kernel parameters, rank-4 shapes and strides, folded 1-D grids, and the
// environment switches that force a kernel path.
#pragma once

#include <cstdint>
#include <vector>

#include "edgetrain/backend.h"

namespace edgetrain::gpu {

// The part of a backend's EncodeContext that does not depend on the API.
struct EncodeLimits {
  const char* backend = "gpu";          // "vulkan" or "webgpu", for messages
  std::vector<uint32_t> float_index;    // scalar-block index of each float argument of the call
  uint32_t max_groups[3] = {65535, 65535, 65535};  // workgroups per dispatch dimension
  uint32_t max_invocations = 128;       // invocations per workgroup
  uint32_t max_shared_bytes = 16384;    // workgroup (shared) memory
};

// Sizes, strides and offsets reach kernels as 32-bit unsigned integers; throws, naming the call, for a
// value that does not fit.
uint32_t u32(int64_t v, const OpCall& c);

// A shape or a stride vector as the 4 dims (front-padded) that kernels take as one uvec4.
struct Dims4 {
  uint32_t d[4] = {1, 1, 1, 1};
};
// s with leading 1s.
Dims4 pad4(const Shape& s, const OpCall& c);
// Element strides of `src` for each dim of a rank-4 padded output it broadcasts to, 0 where src is
// broadcast (numpy rules: src's dims align to the back of the output's, so src alone decides).
Dims4 bcast_strides(const Shape& src, const OpCall& c);
// Row-major element strides of s, padded with 0s.
Dims4 row_strides(const Shape& s, const OpCall& c);
// Strides of x read in the order of a permutation: output dim i walks x's dim dims[i] (negative dims count
// from the back).
Dims4 permuted_strides(const Shape& x, const std::vector<int64_t>& dims, const OpCall& c);

// A dtype as the kernels' dtype code: 0 f32, 1 i32, 2 u32, 3 u8, 4 bool.
uint32_t dtype_code(DType t);

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
// The largest power of two <= min(want, limit) (at least 1).
uint32_t pow2_at_most(uint32_t want, uint32_t limit);

// Splits a 1-D count of workgroups into an x*y grid within the device limits. Kernels fold it back with
// linear id = wid.y * nwg.x + wid.x and return past the end, so no op is capped at 65,535 workgroups.
void grid_1d(uint64_t workgroups, const EncodeLimits& lim, uint32_t groups[3]);

// How a switch forces a kernel path. Unset (or an unknown value) leaves the choice to the encoder's
// measured default; "0" never takes the path; "all" takes it on every shape it can run (so the tests cover
// its tile edges on small shapes); "1", where a switch offers it, takes it on large shapes on any device.
enum class Force : uint8_t { automatic, never, large, all };
Force force_from_env(const char* name, bool offers_large);

// Split-K, shared by the GEMMs of both backends: a deep product with few output tiles leaves most of a large
// GPU idle, so its contraction K is cut into slices run side by side and summed by a reduction.
// splitk_want: the slices to ask for where the device does not say how many multiprocessors it has: enough
// for ~264 workgroups (two per multiprocessor of a 132-multiprocessor GPU) when the output has at most 132
// tiles and K >= 1024, each slice >= min_depth deep; force all: up to 4 slices of >= step (to test edges).
uint64_t splitk_want(uint64_t tiles, uint64_t K, uint64_t min_depth, uint64_t step, Force force);
// `want` slices evened out to a depth `slice` that is a multiple of step; returns how many that makes
// (1: not split, slice = K).
uint64_t splitk_slices(uint64_t K, uint64_t want, uint64_t step, uint64_t& slice);

}  // namespace edgetrain::gpu

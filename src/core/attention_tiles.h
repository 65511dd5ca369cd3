// Tiles of the GPU attention kernels (Vulkan attention*.comp, WebGPU attention*.wgsl), chosen by the same
// rules on both backends. A workgroup is TY rows of 16 invocations. Each kernel multiplies an "A" tile
// (TY*RI rows: the queries of the forward and of dq, the keys of dk/dv) with a "B" tile (16*KJ rows: keys,
// or queries for dk/dv): invocation (ty, tx) owns A rows ty + TY*i (i < RI) and B rows tx + 16*j (j < KJ)
// of a score tile, and A rows ty + TY*i by head-dim vec4 slots tx + 16*q of an output tile. Every tile
// lives in workgroup memory; the largest tiles that fit the device's limit are used.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/gpu_encode.h"

namespace edgetrain::gpu {

// The three kernels: the forward, the backward's dq (which also writes D = rowsum(dout * out)), and the
// backward's dk/dv.
enum class AttnKernel : uint8_t { forward, dq, dkdv };

struct AttnTiles {
  uint32_t ty = 8, ri = 1, kj = 1;
  uint32_t hc = 64;  // head-dim capacity of a tile row
  uint32_t invocations() const { return 16 * ty; }
  uint32_t a_rows() const { return ty * ri; }
  uint32_t b_rows() const { return 16 * kj; }
};

// The largest head dim the kernels take (their output tiles hold up to 2 vec4 slots per invocation).
constexpr int64_t kAttnMaxHeadDim = 128;

// Workgroup memory of kernel k with tiles t, in bytes.
size_t attention_shared_bytes(AttnKernel k, AttnTiles t);
// The tiles of kernel k for head dim hd: the capacity class of hd, and the first of a fixed list of tile
// shapes, largest first, that fits the device's workgroup memory and invocations. Throws ErrorKind::unsupported, naming the call, for hd past
// kAttnMaxHeadDim or a device too small for the smallest tiles.
AttnTiles attention_tiles(AttnKernel k, int64_t hd, const EncodeLimits& lim, const OpCall& c);
// The tensor-core kernels (Vulkan attention_coop*.comp, for the f16 flag): 4 subgroups of 32, each 16 rows
// of a 64-row A tile, B tiles of 64 rows, or 32 where workgroup memory is short (head dims past 64).
constexpr uint32_t kAttnCoopRows = 64;
// The head-dim capacity of head dim hd in the tensor-core kernels: hd rounded up to a multiple of 16 up
// to 64, 128 past it (a multiple of the 64 output columns a pass takes).
uint32_t attention_capacity(int64_t hd);
// Workgroup memory of the tensor-core kernels with capacity hc and B tiles of br rows, in bytes.
size_t attention_coop_shared_bytes(uint32_t hc, uint32_t br);
// The B-tile rows (64 or 32) of the tensor-core kernels for head dim hd within max_shared bytes, or 0
// when they do not take it (hd past kAttnMaxHeadDim, or too little memory).
uint32_t attention_coop_rows(int64_t hd, size_t max_shared);
// The swizzle mask of a tile row of `slots` vec4s (a power of two): slot s of row r is stored at
// s ^ (r & mask), so the invocations of a subgroup reading one slot of consecutive rows hit different
// banks. The mask is min(slots, 8) - 1, so s ^ (r & mask) stays within the row.
uint32_t attention_swizzle(uint32_t slots);

}  // namespace edgetrain::gpu

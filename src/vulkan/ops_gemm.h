// The shared tiled GEMM (gemm.comp) as an encoder helper, used by the gemm family and by linear_dW.
#pragma once

#include <cstdint>

#include "vulkan/kernel.h"

namespace edgetrain::vk {

// C[b][M,N] (+)= alpha * A(m,k) * B(k,n) (+ bias[n]) with A(m,k) = A[b*a_batch + m*sa_row + k*sa_red] and
// B(k,n) = B[b*b_batch + k*sb_red + n*sb_col]. layout 0 binds a,b,out,scalars; layout 1 x,w,bias,y,scalars.
struct GemmArgs {
  uint64_t M = 0, N = 0, K = 0;
  uint32_t sa_row = 0, sa_red = 1, sb_red = 0, sb_col = 1;
  uint32_t a_batch = 0, b_batch = 0, c_batch = 0, batch = 1;
  uint32_t alpha_idx = 0xffffffffu;  // scalar-block index, or none (alpha = 1)
  uint32_t flags = 0;                // bit 0 bias (layout 1), bit 1 accumulate into C
  uint32_t layout = 0;
  bool split_k = false;  // may split the contraction over workgroups (layout 0, one batch; linear_dW)
};
// Whether a (rows x cols) output gets the 128x128-tile (8x8 per thread) kernels; see ops_gemm.cpp.
bool big_tiles(uint64_t rows, uint64_t cols, const EncodeContext& ctx);

// Whether the 4-bit GEMMs use their 128x128-tile kernels (*_big.comp) for a (rows x cols) output
// contracting over red; same switch (EDGETRAIN_VK_GEMM_BIG) and device test as the fp32 GEMM's.
bool q4_big_tiles(uint64_t rows, uint64_t cols, uint64_t red, const EncodeContext& ctx);

void encode_gemm(const GemmArgs& g, const EncodeContext& ctx, Encoded& out);

}  // namespace edgetrain::vk

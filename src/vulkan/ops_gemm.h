// The GEMMs as encoder helpers (ops_gemm.cpp, ops_gemm_coop.cpp), used by the gemm family, linear_dW and the
// 4-bit GEMMs of the train family.
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
  bool f16 = false;      // operands rounded to fp16 (the f16 flag of ops.inc)
};
// A large discrete GPU (subgroup 32, >= 48 KiB of workgroup memory): where the automatic choices take the
// large tiles and split contractions (never on lavapipe, whose tests force them instead).
inline bool gpu_like(const EncodeContext& ctx) { return ctx.subgroup_size == 32 && ctx.max_shared_bytes >= 48 * 1024; }

// Whether the 4-bit GEMMs use their 128x128-tile kernels (*_big.comp) for a (rows x cols) output
// contracting over red; same switch (Tuning::gemm_big) and device test as the fp32 GEMM's.
bool q4_big_tiles(uint64_t rows, uint64_t cols, uint64_t red, const EncodeContext& ctx);

// Appends the dispatches of one GEMM (a low-rank product's kernel, tensor-core path, 128x128 or 64x64 tiles).
void append_gemm(const GemmArgs& g, const EncodeContext& ctx, Encoded& out);

// A low-rank adapter's products (ops_gemm_narrow.cpp): one side of the output <= 32 over a contraction >= 64,
// or a contraction <= 32 over an output >= 64 x 64 (layout 0, one batch). False (nothing appended) elsewhere.
bool append_narrow_gemm(const GemmArgs& g, const EncodeContext& ctx, Encoded& out);

// Appends gemm_splitk_reduce.comp: C[i] (+)= alpha * sum over `splits` planes of count partial sums that start
// at float `base` of the scratch bound at 4 (layout 0); flags bit 1 accumulates.
void append_splitk_reduce(uint64_t count, uint32_t splits, uint32_t alpha_idx, uint32_t flags, uint32_t base,
                          const EncodeContext& ctx, Encoded& out);

// ---- the tensor-core path (ops_gemm_coop.cpp; gemm_split.comp + gemm_coop.comp, or its KHR form) ----

// One operand as R rows of a length-K contraction: a row of A (r = m) or a column of B (r = n).
struct CoopOperand {
  uint32_t kind = 0;  // gemm_split.comp KIND: 0/1 fp32 (1: rows contiguous), 2 q4 rows n, 3 q4 rows k
  uint32_t src_bind = 0, scale_bind = 2;
  uint64_t R = 0, K = 0;
  uint32_t sr = 0, sk = 1, sbatch = 0;  // fp32: element (b, r, k) at b*sbatch + r*sr + k*sk
  uint32_t q4_N = 0, q4_gs = 0;         // q4: the weight's rows N and group size
};
// An fp32 operand read through strides (kind chosen from them).
CoopOperand coop_fp32(uint32_t bind, uint64_t rows, uint64_t red, uint32_t s_row, uint32_t s_red, uint32_t s_batch);

// Where the result goes: C[b*c_batch + m*N + n] (+)= alpha * sum + bias[n].
struct CoopEpilogue {
  uint32_t out_bind = 2, bias_bind = 255, scalar_bind = 3, scratch_bind = 4;  // bindings (255: no bias)
  uint32_t c_batch = 0, batch = 1;
  uint32_t alpha_idx = 0xffffffffu;
  uint32_t flags = 0;  // bit 0 add bias, bit 1 accumulate
  bool split_k = false;  // may slice the contraction over workgroups (layout 0, one batch: gemm_splitk_reduce)
};

// The push constants of gemm_coop.comp and gemm_cm2.comp (gemm_coop_io.glsl's Push), word by word, in the
// order append_coop writes them: fuse_low_rank_update reads and rewrites a GEMM dispatch's through these.
namespace coop_push {
enum : size_t { M, N, Kp, Mp, Np, c_batch, alpha_idx, flags, a_hi, a_lo, b_hi, b_lo, a_exp, b_exp, kslice, part,
                a2_hi, b2_hi, kp2, words };
}

// Whether an M x N product contracting over K takes the tensor-core path on this device (Tuning::coopmat:
// "0" never, "all" always, unset: large products).
bool coop_for(uint64_t M, uint64_t N, uint64_t K, const EncodeContext& ctx);
// Appends the split and GEMM dispatches (f16: fp16 operands, one product); false (nothing appended) when the
// scratch would exceed the device's binding range, so the caller uses the FMA kernels.
bool append_coop(const CoopOperand& a, const CoopOperand& b, const CoopEpilogue& ep, bool f16,
                 const EncodeContext& ctx, Encoded& out);

// Folds a low-rank update into the GEMM before it: `next` is mm(P [M, r], Q) with alpha 1 accumulating into
// the output of `prev` (linear_q4gsw or its backward, fp16 operands, on gemm_cm2.comp), Q [N, r] transposed
// or [r, N], r <= 64. Then out = prev's product + P Q is one GEMM over K + r: next's encoding is replaced
// by the stagings of P ([Mp][r'] rows) and Q ([r'][Np] k-major) into the pooled scratch past prev's parts,
// followed by prev's GEMM (and its split-K reduction), moved there (Dispatch::binds_call_before) with the
// extra contraction in its push constants; the GEMM adds P Q once (to slice 0 when split). A qlora step's
// y += t B^T and dx += dt A: a gemm_shallow.comp dispatch each that read and wrote the whole output. False
// (nothing changed) where the pair is anything else. ctx: next's encode context.
bool fuse_low_rank_update(const OpCall& prev, Encoded& prev_enc, const OpCall& next, const EncodeContext& ctx,
                          Encoded& next_enc);
// Whether the calls are such a pair (what fuse_low_rank_update checks before it looks at prev's encoding);
// the program tells prev's encoder (EncodeContext::low_rank_update_follows) so that it keeps gemm_cm2.comp.
bool low_rank_update_pair(const OpCall& prev, const OpCall& next, const EncodeContext& ctx);

}  // namespace edgetrain::vk

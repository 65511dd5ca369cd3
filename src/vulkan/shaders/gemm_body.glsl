// The fp32 GEMM of mm, bmm, linear and linear_dW, included by gemm.comp (64x64 tiles) and gemm_big.comp
// (128x128, large products on GPUs): C[b] (+)= alpha * op(A[b]) @ op(B[b]) (+ bias) on the main loop of
// gemm_core.glsl. Row and contraction strides in push constants cover the transposes; spec constants pick
// the coalesced load maps, vec4 loads where runs are 16-byte aligned, the binding layout, split-K (z = a K
// slice whose raw partial sums go to scratch for gemm_splitk_reduce.comp) and fp16 operands.
#include "common.glsl"

layout(constant_id = 0) const uint A_RED_CONTIG = 1;  // A's contraction index has stride 1
layout(constant_id = 1) const uint B_COL_CONTIG = 1;  // B's column index has stride 1
layout(constant_id = 2) const uint LAYOUT = 0;        // 0: a,b,out,scalars(,scratch)  1: x,w,bias,y,scalars
layout(constant_id = 3) const uint VEC_A = 0;         // A's contiguous runs: aligned, whole vec4s in range
layout(constant_id = 4) const uint VEC_B = 0;         // same for B
layout(constant_id = 5) const uint SPLIT = 0;         // 1: z = K slice, raw partials to binding 4 (layout 0)
layout(constant_id = 6) const uint F16 = 0;           // 1: operands rounded to fp16 (the f16 flag)

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer BufA { float A[]; };
layout(set = 0, binding = 0) readonly buffer BufA4 { vec4 A4[]; };
layout(set = 0, binding = 1) readonly buffer BufB { float B[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { vec4 B4[]; };
layout(set = 0, binding = 2) buffer Buf2 { float P2[]; };  // out (LAYOUT 0) or bias (LAYOUT 1)
layout(set = 0, binding = 3) buffer Buf3 { float P3[]; };  // scalars (LAYOUT 0) or y (LAYOUT 1)
layout(set = 0, binding = 4) buffer Buf4 { float P4[]; };  // scratch partials (LAYOUT 0) or scalars (1)

layout(push_constant) uniform Push {
  uint M, N, K;                  // C is [M, N], contraction K
  uint sa_row, sa_red;           // A(m, k) = A[a_batch*b + m*sa_row + k*sa_red]
  uint sb_red, sb_col;           // B(k, n) = B[b_batch*b + k*sb_red + n*sb_col]
  uint a_batch, b_batch, c_batch;
  uint alpha_idx;                // scalar-block index of alpha, or 0xffffffff for 1
  uint flags;                    // bit 0: add bias[n]; bit 1: accumulate into C
  uint k_chunk;                  // SPLIT: contraction length per slice (multiple of 16)
} pc;

#define ET_M pc.M
#define ET_SA_ROW pc.sa_row
#define ET_SA_RED pc.sa_red
#define ET_A_RED_CONTIG (A_RED_CONTIG == 1)
#define ET_VEC_A (VEC_A == 1)
#define ET_B_FP32
#define ET_N pc.N
#define ET_SB_RED pc.sb_red
#define ET_SB_COL pc.sb_col
#define ET_B_COL_CONTIG (B_COL_CONTIG == 1)
#define ET_VEC_B (VEC_B == 1)
#define ET_F16 (F16 == 1)
#include "gemm_core.glsl"

float alpha;
uint coff;

float scalar_at(uint i) { return LAYOUT == 0 ? P3[i] : P4[i]; }

void begin_tile() {
  uint b = gl_WorkGroupID.z;
  kbeg = 0;
  kend = pc.K;
  coff = b * pc.c_batch;
  if (SPLIT == 1) {  // one batch; z picks the K slice and its partial-sum plane
    kbeg = b * pc.k_chunk;
    kend = min(pc.K, kbeg + pc.k_chunk);
    coff = b * pc.M * pc.N;
    b = 0;
  }
  aoff = b * pc.a_batch;
  boff = b * pc.b_batch;
  alpha = (SPLIT == 1 || pc.alpha_idx == 0xffffffffu) ? 1.0 : scalar_at(pc.alpha_idx);
}

void store_c(uint r, uint c, vec4 v) {
  if (r >= pc.M) return;
  [[unroll]] for (uint j = 0; j < 4; ++j) {
    uint cc = c + j;
    if (cc >= pc.N) continue;
    uint idx = r * pc.N + cc;
    if (SPLIT == 1) {
      P4[coff + idx] = v[j];
      continue;
    }
    float x = alpha == 1.0 ? v[j] : alpha * v[j];
    idx += coff;
    if (LAYOUT == 0) {
      if ((pc.flags & 2u) != 0u) x = P2[idx] + x;
      P2[idx] = x;
    } else {
      if ((pc.flags & 1u) != 0u) x += P2[cc];
      if ((pc.flags & 2u) != 0u) x = P3[idx] + x;
      P3[idx] = x;
    }
  }
}

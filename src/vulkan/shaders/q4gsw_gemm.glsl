// What the two 4-bit GEMMs share (linear_q4gsw_body.glsl, linear_q4gsw_backward_body.glsl): stage A, their fp32
// activations [M, ET_Q4_RED] read row by row (x, or dy contracting over n), the rest of the setup of
// gemm_core.glsl, and the dequantization of one W_4X8 word for stage B, exactly as the reference computes
// W[n, k] = (code - 8) * scales[k / gs, n] (rounded to fp16 with the kernel's F16 spec constant, like the
// activations: the f16 flag). Included after the kernel's A/A4, W (words), S (scales [G, N]) and push
// constants (M, N, K, N8, K4, G, gs), with ET_TILE and ET_Q4_RED defined.
layout(constant_id = 0) const uint F16 = 0;
#define ET_M pc.M
#define ET_SA_ROW ET_Q4_RED
#define ET_SA_RED 1u
#define ET_A_RED_CONTIG true
#define ET_VEC_A (ET_Q4_RED % 4u == 0u)
#define ET_F16 (F16 == 1)
#include "gemm_core.glsl"

void begin_tile() {
  aoff = 0;
  boff = 0;
  kbeg = 0;
  kend = ET_Q4_RED;
}

// This thread's word (blk = 4-word block, j) of a slice of 2*BN words: every thread's at 128x128, half of
// them at 64x64 (false: no word).
bool q4_slot(out uint blk, out uint j) {
  uint wi = gl_LocalInvocationID.x;
  blk = wi >> 2;
  j = wi & 3u;
  return 2u * BN >= 256u || wi < 2u * BN;
}

// Word j of block (k4 block gk4, n8 block gn8): w0[b] = W[n, 4*gk4 + b] and w1[b] = W[n + 1, 4*gk4 + b]
// for n = 8*gn8 + 2j; 0 outside the matrix.
void q4_word(uint gk4, uint gn8, uint j, out vec4 w0, out vec4 w1) {
  uint word = (gk4 < pc.K4 && gn8 < pc.N8) ? W[4 * (gk4 * pc.N8 + gn8) + j] : 0x88888888u;
  uint gn = gn8 * 8 + 2 * j;
  uint g = min(gk4 * 4 / pc.gs, pc.G - 1);
  float s0 = S[g * pc.N + min(gn, pc.N - 1)], s1 = S[g * pc.N + min(gn + 1, pc.N - 1)];
  [[unroll]] for (uint b = 0; b < 4; ++b) {
    bool kin = gk4 * 4 + b < pc.K;
    w0[b] = (kin && gn < pc.N) ? q4_value(q4_nibble(word, b, 0)) * s0 : 0.0;
    w1[b] = (kin && gn + 1 < pc.N) ? q4_value(q4_nibble(word, b, 1)) * s1 : 0.0;
  }
  if (ET_F16) {
    w0 = et_round_f16(w0);
    w1 = et_round_f16(w1);
  }
}

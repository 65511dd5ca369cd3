// The fp32 bindings and push constants of the tensor-core GEMMs (gemm_coop.comp and cm2/gemm_cm2.comp share
// one encoder, ops_gemm_coop.cpp): every binding a call may use as fp32 (C, bias, the scalar block, split-K's
// partial sums in scratch), and loads and stores through a binding chosen by a specialization constant.
layout(set = 0, binding = 0) buffer F0 { float f0[]; };
layout(set = 0, binding = 1) buffer F1 { float f1[]; };
layout(set = 0, binding = 2) buffer F2 { float f2[]; };
layout(set = 0, binding = 3) buffer F3 { float f3[]; };
layout(set = 0, binding = 4) buffer F4 { float f4[]; };
layout(set = 0, binding = 5) buffer F5 { float f5[]; };
layout(set = 0, binding = 6) buffer F6 { float f6[]; };

layout(push_constant) uniform Push {
  uint M, N;          // C is [M, N] per batch
  uint Kp;            // padded contraction (multiple of BK)
  uint Mp, Np;        // padded rows of the A and B parts (multiples of the tile's BM and BN)
  uint c_batch;       // C elements between batches
  uint alpha_idx;     // scalar-block index of alpha, 0xffffffff for 1
  uint flags;         // bit 0: add bias[n]; bit 1: accumulate into C
  uint a_hi, a_lo;    // uvec4 offsets of A's parts: [batch][Mp][Kp] halves each (F16: a_hi only)
  uint b_hi, b_lo;    // same for B: [batch][Np][Kp]
  uint a_exp, b_exp;  // int offsets of the exponents: [batch][Mp], [batch][Np] (F16: none)
  uint kslice;        // split-K: contraction per z slice (multiple of BK); Kp when not split
  uint part;          // split-K: float offset in scratch of the partial sums [z][M][N]; 0xffffffff: none
  // gemm_cm2.comp: a low-rank update folded in (ops_gemm.h, fuse_low_rank_update): A2 [Mp][kp2] and
  // B2 [kp2][Np] fp16 (uvec4 offsets) contracted too; kp2 = 0: none. gemm_coop.comp: always 0.
  uint a2_hi, b2_hi, kp2;
} pc;

float ld(uint bind, uint i) {
  switch (bind) {
    case 0: return f0[i];
    case 1: return f1[i];
    case 2: return f2[i];
    case 3: return f3[i];
    case 4: return f4[i];
    case 5: return f5[i];
    default: return f6[i];
  }
}
void st(uint bind, uint i, float v) {
  switch (bind) {
    case 0: f0[i] = v; break;
    case 1: f1[i] = v; break;
    case 2: f2[i] = v; break;
    case 3: f3[i] = v; break;
    case 4: f4[i] = v; break;
    case 5: f5[i] = v; break;
    default: f6[i] = v; break;
  }
}

// The fp16-operand GEMM on Dawn's subgroup matrices (the matrix units, where the adapter has them), the
// WGSL twin of the Vulkan tensor-core GEMMs for the f16 flag: the operation, parameters and bindings of
// gemm.wgsl (gemm_io.wgsl), not split. The runtime compiles it with a first line of its own
// (program.cpp, coop_prelude): `enable f16; enable chromium_experimental_subgroup_matrix;` the uniformity
// diagnostic off (the subgroup index picks each subgroup's tiles), and the adapter's shape as constants
// TM (= TN = TK: 8 or 16) and SG (its fixed subgroup size).
// A workgroup of 4 subgroups computes a (4 TM)^2 block of C, each subgroup 2 x 2 result matrices. Each
// contraction slice of BK = 2 TM is staged into workgroup memory as fp16: every operand rounded to the
// nearest fp16 by f16_round.wgsl's exact integer rounding (so the conversion to f16 is exact, whatever
// rounding WGSL's conversion uses), zero past the matrix. Products accumulate in f32 in the result
// matrices; the block is then stored to workgroup memory and written through put_c (alpha, bias,
// accumulation, the matrix edge).
#include "gemm_io.wgsl"
#include "f16_round.wgsl"

alias LeftT = subgroup_matrix_left<f16, TM, TM>;
alias RightT = subgroup_matrix_right<f16, TM, TM>;
alias ResultT = subgroup_matrix_result<f32, TM, TM>;

const WB = 4u * TM;       // rows and columns of the workgroup's block
const BK = 2u * TM;       // contraction depth of a staged slice
const NT = 4u * SG;       // invocations
const AP = BK + 8u;       // row pitch of the A slice in halves (rows stay 16-byte aligned; fewer bank conflicts)
const BP = WB + 8u;       // row pitch of the B slice
var<workgroup> As: array<f16, WB * AP>;  // As[i * AP + k] = A(row0 + i, k0 + k)
var<workgroup> Bs: array<f16, BK * BP>;  // Bs[k * BP + j] = B(k0 + k, col0 + j)
var<workgroup> Cs: array<f32, WB * WB>;  // the block's sums, row-major

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_id) sg: u32) {
  let row0 = wid.y * WB;
  let col0 = wid.x * WB;
  let a_base = wid.z * p.a_batch;
  let b_base = wid.z * p.b_batch;
  let sr = (sg / 2u) * 2u * TM;  // this subgroup's rows and columns within the block
  let sc = (sg % 2u) * 2u * TM;
  var c00 = ResultT();
  var c01 = ResultT();
  var c10 = ResultT();
  var c11 = ResultT();
  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    for (var e = li; e < WB * BK; e += NT) {
      // A: consecutive invocations walk the contraction when it is contiguous (A_K), else the rows.
      var i = e / BK;
      var k = e % BK;
      if (p.a_sc != 1u) {
        i = e % WB;
        k = e / WB;
      }
      var v = 0.0;
      if (row0 + i < p.M && k0 + k < p.K) { v = operand(A[a_base + (row0 + i) * p.a_si + (k0 + k) * p.a_sc]); }
      As[i * AP + k] = f16(v);
      var j = e % WB;
      var kb = e / WB;
      if (p.b_sj != 1u) {
        j = e / BK;
        kb = e % BK;
      }
      var w = 0.0;
      if (col0 + j < p.N && k0 + kb < p.K) { w = operand(B[b_base + (k0 + kb) * p.b_sc + (col0 + j) * p.b_sj]); }
      Bs[kb * BP + j] = f16(w);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk += TM) {
      let a0 = subgroupMatrixLoad<LeftT>(&As, sr * AP + kk, false, AP);
      let a1 = subgroupMatrixLoad<LeftT>(&As, (sr + TM) * AP + kk, false, AP);
      let b0 = subgroupMatrixLoad<RightT>(&Bs, kk * BP + sc, false, BP);
      let b1 = subgroupMatrixLoad<RightT>(&Bs, kk * BP + sc + TM, false, BP);
      c00 = subgroupMatrixMultiplyAccumulate(a0, b0, c00);
      c01 = subgroupMatrixMultiplyAccumulate(a0, b1, c01);
      c10 = subgroupMatrixMultiplyAccumulate(a1, b0, c10);
      c11 = subgroupMatrixMultiplyAccumulate(a1, b1, c11);
    }
    workgroupBarrier();
  }
  subgroupMatrixStore(&Cs, sr * WB + sc, c00, false, WB);
  subgroupMatrixStore(&Cs, sr * WB + sc + TM, c01, false, WB);
  subgroupMatrixStore(&Cs, (sr + TM) * WB + sc, c10, false, WB);
  subgroupMatrixStore(&Cs, (sr + TM) * WB + sc + TM, c11, false, WB);
  workgroupBarrier();
  let alpha = alpha_value();
  let zoff = wid.z * p.c_batch;
  for (var e = li; e < WB * WB; e += NT) { put_c(row0 + e / WB, col0 + e % WB, zoff, Cs[e], alpha); }
}

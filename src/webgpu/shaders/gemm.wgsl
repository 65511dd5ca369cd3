// Dense fp32 GEMM with strided operands, batched over workgroup z (the interface and epilogue are
// gemm_io.wgsl). Strides make one kernel serve mm/bmm with transposes, linear (B(c,j) = w[j,c]) and
// linear_dW (contraction over the rows M). 32x32 output tiles on the main loop of gemm_tile.wgsl, 16-deep
// slices of A and B staged in workgroup memory.
#include "gemm_io.wgsl"
#include "gemm_tile.wgsl"
#include "f16_round.wgsl"

const TC = 16u;

var<private> i0: u32;
var<private> j0: u32;
var<private> a_base: u32;
var<private> b_base: u32;
var<private> zoff: u32;
var<private> al: f32;

fn stage(c0: u32, li: u32) {
  for (var t = 0u; t < 8u; t++) {
    let e = li + 64u * t;
    let cc = e / 32u;
    let r = e % 32u;
    let c = c0 + cc;
    var av = 0.0;
    if (c < p.K && i0 + r < p.M) { av = A[a_base + (i0 + r) * p.a_si + c * p.a_sc]; }
    As[e] = operand(av);
    var bv = 0.0;
    if (c < p.K && j0 + r < p.N) { bv = B[b_base + c * p.b_sc + (j0 + r) * p.b_sj]; }
    Bs[e] = operand(bv);
  }
}

fn put(i: u32, j: u32, v: f32) { put_c(i, j, zoff, v, al); }

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  i0 = wid.y * 32u;
  j0 = wid.x * 32u;
  a_base = wid.z * p.a_batch;
  b_base = wid.z * p.b_batch;
  zoff = wid.z * p.c_batch;
  al = alpha_value();
  gemm_tile(i0, j0, p.K, lid, li);
}

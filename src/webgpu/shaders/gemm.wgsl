// Dense fp32 GEMM with strided operands, batched over workgroup z: C[b,i,j] = alpha * sum_c A(i,c) B(c,j)
// (+ bias[j]) (+ C when accumulating). Strides make one kernel serve mm/bmm with transposes, linear
// (B(c,j) = w[j,c]) and linear_dW (contraction over the rows M). Each workgroup of 8x8 threads computes a
// 32x32 tile of C, staging 16-deep slices of A and B in workgroup memory; each thread owns 4x4 outputs.
struct Params {
  M: u32, N: u32, K: u32, flags: u32,  // flags: 1 = bias, 2 = accumulate into C, 4 = alpha from scalars
  a_si: u32, a_sc: u32, b_sc: u32, b_sj: u32,  // element strides of A(i,c) and B(c,j)
  a_batch: u32, b_batch: u32, c_batch: u32, alpha_idx: u32,
}
@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
@group(0) @binding(4) var<storage, read> scalars: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

const TM = 32u;
const TN = 32u;
const TC = 16u;
var<workgroup> As: array<f32, 512>;  // [TC][TM]
var<workgroup> Bs: array<f32, 512>;  // [TC][TN]

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i0 = wid.y * TM;
  let j0 = wid.x * TN;
  let a_base = wid.z * p.a_batch;
  let b_base = wid.z * p.b_batch;
  var acc: array<f32, 16>;
  for (var t = 0u; t < 16u; t++) { acc[t] = 0.0; }
  for (var c0 = 0u; c0 < p.K; c0 += TC) {
    for (var t = 0u; t < 8u; t++) {
      let e = li + 64u * t;
      let cc = e / TM;
      let r = e % TM;
      let c = c0 + cc;
      var av = 0.0;
      if (c < p.K && i0 + r < p.M) { av = A[a_base + (i0 + r) * p.a_si + c * p.a_sc]; }
      As[e] = av;
      var bv = 0.0;
      if (c < p.K && j0 + r < p.N) { bv = B[b_base + c * p.b_sc + (j0 + r) * p.b_sj]; }
      Bs[e] = bv;
    }
    workgroupBarrier();
    for (var cc = 0u; cc < TC; cc++) {
      var a4: array<f32, 4>;
      var b4: array<f32, 4>;
      for (var u = 0u; u < 4u; u++) {
        a4[u] = As[cc * TM + lid.y + 8u * u];
        b4[u] = Bs[cc * TN + lid.x + 8u * u];
      }
      for (var u = 0u; u < 4u; u++) {
        for (var v = 0u; v < 4u; v++) { acc[u * 4u + v] = fma(a4[u], b4[v], acc[u * 4u + v]); }
      }
    }
    workgroupBarrier();
  }
  var alpha = 1.0;
  if ((p.flags & 4u) != 0u) { alpha = scalars[p.alpha_idx]; }
  for (var u = 0u; u < 4u; u++) {
    let i = i0 + lid.y + 8u * u;
    if (i >= p.M) { continue; }
    for (var v = 0u; v < 4u; v++) {
      let j = j0 + lid.x + 8u * v;
      if (j >= p.N) { continue; }
      var r = alpha * acc[u * 4u + v];
      if ((p.flags & 1u) != 0u) { r += bias[j]; }
      let o = wid.z * p.c_batch + i * p.N + j;
      if ((p.flags & 2u) != 0u) { r += C[o]; }
      C[o] = r;
    }
  }
}

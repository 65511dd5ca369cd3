// Large-shape fp32 GEMM, the WGSL twin of src/vulkan/shaders/gemm_big.comp (chosen by ops_gemm.cpp for
// products of at least 128 x 128 x 64): same operation, parameters and bindings as gemm.wgsl, with a
// 128x128 tile per 256-thread workgroup, an 8x8 register tile per thread held in 16 vec4 accumulators,
// 16-deep k slices staged k-major in workgroup memory so both operands are read as vec4s, and the next
// slice loaded into registers while the current one is multiplied. Override constants pick load maps
// that keep global reads coalesced: A_K (A's contraction is contiguous), B_N (B's columns are).
override A_K: bool = true;
override B_N: bool = true;
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

const PITCH = 33u;  // vec4s per k row: 32 + 1 against bank conflicts
var<workgroup> As: array<vec4<f32>, 528>;  // As[k * PITCH + m / 4][m % 4] = A(row0 + m, k0 + k)
var<workgroup> Bs: array<vec4<f32>, 528>;  // Bs[k * PITCH + n / 4][n % 4] = B(k0 + k, col0 + n)

// Slot e (0..2047) of a 128 x 16 slice: which row/column and which k it is.
fn a_slot(e: u32) -> vec2<u32> {  // (m, k)
  if (A_K) { return vec2<u32>(e / 16u, e % 16u); }
  return vec2<u32>(e % 128u, e / 128u);
}
fn b_slot(e: u32) -> vec2<u32> {  // (n, k)
  if (B_N) { return vec2<u32>(e % 128u, e / 128u); }
  return vec2<u32>(e / 16u, e % 16u);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let tx = li % 16u;
  let ty = li / 16u;
  let row0 = wid.y * 128u;
  let col0 = wid.x * 128u;
  let a_base = wid.z * p.a_batch;
  let b_base = wid.z * p.b_batch;
  var acc: array<vec4<f32>, 16>;  // acc[2 * i + h]: row (i < 4 ? ty*4 + i : 64 + ty*4 + i - 4), columns h*64 + tx*4..+3
  for (var t = 0u; t < 16u; t++) { acc[t] = vec4<f32>(0.0); }
  var ra: array<f32, 8>;
  var rb: array<f32, 8>;
  // First slice into registers.
  for (var t = 0u; t < 8u; t++) {
    let e = li + 256u * t;
    let sa = a_slot(e);
    var av = 0.0;
    if (row0 + sa.x < p.M && sa.y < p.K) { av = A[a_base + (row0 + sa.x) * p.a_si + sa.y * p.a_sc]; }
    ra[t] = av;
    let sb = b_slot(e);
    var bv = 0.0;
    if (col0 + sb.x < p.N && sb.y < p.K) { bv = B[b_base + sb.y * p.b_sc + (col0 + sb.x) * p.b_sj]; }
    rb[t] = bv;
  }
  for (var k0 = 0u; k0 < p.K; k0 += 16u) {
    for (var t = 0u; t < 8u; t++) {
      let e = li + 256u * t;
      let sa = a_slot(e);
      As[sa.y * PITCH + sa.x / 4u][sa.x % 4u] = ra[t];
      let sb = b_slot(e);
      Bs[sb.y * PITCH + sb.x / 4u][sb.x % 4u] = rb[t];
    }
    workgroupBarrier();
    let kn = k0 + 16u;
    if (kn < p.K) {  // next slice in flight while this one is multiplied
      for (var t = 0u; t < 8u; t++) {
        let e = li + 256u * t;
        let sa = a_slot(e);
        var av = 0.0;
        if (row0 + sa.x < p.M && kn + sa.y < p.K) { av = A[a_base + (row0 + sa.x) * p.a_si + (kn + sa.y) * p.a_sc]; }
        ra[t] = av;
        let sb = b_slot(e);
        var bv = 0.0;
        if (col0 + sb.x < p.N && kn + sb.y < p.K) { bv = B[b_base + (kn + sb.y) * p.b_sc + (col0 + sb.x) * p.b_sj]; }
        rb[t] = bv;
      }
    }
    for (var kk = 0u; kk < 16u; kk++) {
      let a0 = As[kk * PITCH + ty];
      let a1 = As[kk * PITCH + ty + 16u];
      let b0 = Bs[kk * PITCH + tx];
      let b1 = Bs[kk * PITCH + tx + 16u];
      for (var i = 0u; i < 4u; i++) {
        acc[2u * i] = fma(vec4<f32>(a0[i]), b0, acc[2u * i]);
        acc[2u * i + 1u] = fma(vec4<f32>(a0[i]), b1, acc[2u * i + 1u]);
        acc[8u + 2u * i] = fma(vec4<f32>(a1[i]), b0, acc[8u + 2u * i]);
        acc[8u + 2u * i + 1u] = fma(vec4<f32>(a1[i]), b1, acc[8u + 2u * i + 1u]);
      }
    }
    workgroupBarrier();
  }
  var alpha = 1.0;
  if ((p.flags & 4u) != 0u) { alpha = scalars[p.alpha_idx]; }
  for (var i = 0u; i < 8u; i++) {
    let r = row0 + select(ty * 4u + i, 64u + ty * 4u + i - 4u, i >= 4u);
    if (r >= p.M) { continue; }
    for (var h = 0u; h < 2u; h++) {
      let v = acc[2u * i + h];
      for (var q = 0u; q < 4u; q++) {
        let j = col0 + h * 64u + tx * 4u + q;
        if (j >= p.N) { continue; }
        var o = alpha * v[q];
        if ((p.flags & 1u) != 0u) { o += bias[j]; }
        let idx = wid.z * p.c_batch + r * p.N + j;
        if ((p.flags & 2u) != 0u) { o += C[idx]; }
        C[idx] = o;
      }
    }
  }
}

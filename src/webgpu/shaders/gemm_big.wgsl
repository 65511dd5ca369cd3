// Large-shape fp32 GEMM, the WGSL twin of src/vulkan/shaders/gemm_big.comp (chosen by ops_gemm.cpp for
// products of at least 128 x 128 x 64): the operation, parameters and bindings of gemm.wgsl
// (gemm_io.wgsl) with a 128x128 tile per 256-thread workgroup, an 8x8 register tile per thread held in 16
// vec4 accumulators, 16-deep k slices staged k-major in workgroup memory so both operands are read as vec4s, and the next
// slice loaded into registers while the current one is multiplied. Override constants pick load maps
// that keep global reads coalesced: A_K (A's contraction is contiguous), B_N (B's columns are). Split-K
// (gemm_io.wgsl): workgroup z multiplies one slice of the contraction into its own partial-sum plane.
#include "gemm_io.wgsl"
#include "f16_round.wgsl"
override A_K: bool = true;
override B_N: bool = true;

const PITCH = 33u;  // vec4s per k row: 32 + 1 against bank conflicts
var<workgroup> As: array<vec4<f32>, 528>;  // As[k * PITCH + m / 4][m % 4] = A(row0 + m, k0 + k)
var<workgroup> Bs: array<vec4<f32>, 528>;  // Bs[k * PITCH + n / 4][n % 4] = B(k0 + k, col0 + n)

// Everything per-thread is spelled out (16 named accumulators, 8 + 8 named prefetch registers) rather than
// indexed arrays: compilers behind Dawn may place indexed function arrays in local memory (a first
// version with arrays ran at 2.2 TFLOP/s on the H200, below the 32x32 kernel).

// Slot e (0..2047) of a 128 x 16 slice: which row/column and which k it is.
fn a_slot(e: u32) -> vec2<u32> {  // (m, k)
  if (A_K) { return vec2<u32>(e / 16u, e % 16u); }
  return vec2<u32>(e % 128u, e / 128u);
}
fn b_slot(e: u32) -> vec2<u32> {  // (n, k)
  if (B_N) { return vec2<u32>(e % 128u, e / 128u); }
  return vec2<u32>(e / 16u, e % 16u);
}

var<private> row0: u32;
var<private> col0: u32;
var<private> a_base: u32;
var<private> b_base: u32;
var<private> k_end: u32;  // end of this workgroup's contraction (its slice's under split-K)

fn lda(e: u32, k0: u32) -> f32 {
  let s = a_slot(e);
  if (row0 + s.x < p.M && k0 + s.y < k_end) { return operand(A[a_base + (row0 + s.x) * p.a_si + (k0 + s.y) * p.a_sc]); }
  return 0.0;
}
fn ldb(e: u32, k0: u32) -> f32 {
  let s = b_slot(e);
  if (col0 + s.x < p.N && k0 + s.y < k_end) { return operand(B[b_base + (k0 + s.y) * p.b_sc + (col0 + s.x) * p.b_sj]); }
  return 0.0;
}
fn sta(e: u32, v: f32) {
  let s = a_slot(e);
  As[s.y * PITCH + s.x / 4u][s.x % 4u] = v;
}
fn stb(e: u32, v: f32) {
  let s = b_slot(e);
  Bs[s.y * PITCH + s.x / 4u][s.x % 4u] = v;
}

// Outputs (r, c..c+3) of this workgroup.
fn st4(r: u32, c: u32, v: vec4<f32>, alpha: f32, zoff: u32) {
  for (var q = 0u; q < 4u; q++) { put_c(r, c + q, zoff, v[q], alpha); }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let tx = li % 16u;
  let ty = li / 16u;
  row0 = wid.y * 128u;
  col0 = wid.x * 128u;
  a_base = wid.z * p.a_batch;
  b_base = wid.z * p.b_batch;  // split-K: a_batch = b_batch = 0
  // Lets of uniform values, so the loop's barriers stay in uniform control flow.
  let kb = select(0u, wid.z * p.kslice, p.kslice != 0u);
  let ke = select(p.K, min(p.K, kb + p.kslice), p.kslice != 0u);
  k_end = ke;
  var c00 = vec4<f32>(0.0); var c01 = vec4<f32>(0.0); var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
  var c20 = vec4<f32>(0.0); var c21 = vec4<f32>(0.0); var c30 = vec4<f32>(0.0); var c31 = vec4<f32>(0.0);
  var c40 = vec4<f32>(0.0); var c41 = vec4<f32>(0.0); var c50 = vec4<f32>(0.0); var c51 = vec4<f32>(0.0);
  var c60 = vec4<f32>(0.0); var c61 = vec4<f32>(0.0); var c70 = vec4<f32>(0.0); var c71 = vec4<f32>(0.0);
  var a0r = lda(li, kb); var a1r = lda(li + 256u, kb); var a2r = lda(li + 512u, kb); var a3r = lda(li + 768u, kb);
  var a4r = lda(li + 1024u, kb); var a5r = lda(li + 1280u, kb); var a6r = lda(li + 1536u, kb); var a7r = lda(li + 1792u, kb);
  var b0r = ldb(li, kb); var b1r = ldb(li + 256u, kb); var b2r = ldb(li + 512u, kb); var b3r = ldb(li + 768u, kb);
  var b4r = ldb(li + 1024u, kb); var b5r = ldb(li + 1280u, kb); var b6r = ldb(li + 1536u, kb); var b7r = ldb(li + 1792u, kb);
  for (var k0 = kb; k0 < ke; k0 += 16u) {
    sta(li, a0r); sta(li + 256u, a1r); sta(li + 512u, a2r); sta(li + 768u, a3r);
    sta(li + 1024u, a4r); sta(li + 1280u, a5r); sta(li + 1536u, a6r); sta(li + 1792u, a7r);
    stb(li, b0r); stb(li + 256u, b1r); stb(li + 512u, b2r); stb(li + 768u, b3r);
    stb(li + 1024u, b4r); stb(li + 1280u, b5r); stb(li + 1536u, b6r); stb(li + 1792u, b7r);
    workgroupBarrier();
    let kn = k0 + 16u;
    if (kn < ke) {  // next slice in flight while this one is multiplied
      a0r = lda(li, kn); a1r = lda(li + 256u, kn); a2r = lda(li + 512u, kn); a3r = lda(li + 768u, kn);
      a4r = lda(li + 1024u, kn); a5r = lda(li + 1280u, kn); a6r = lda(li + 1536u, kn); a7r = lda(li + 1792u, kn);
      b0r = ldb(li, kn); b1r = ldb(li + 256u, kn); b2r = ldb(li + 512u, kn); b3r = ldb(li + 768u, kn);
      b4r = ldb(li + 1024u, kn); b5r = ldb(li + 1280u, kn); b6r = ldb(li + 1536u, kn); b7r = ldb(li + 1792u, kn);
    }
    for (var kk = 0u; kk < 16u; kk++) {
      let a0 = As[kk * PITCH + ty];
      let a1 = As[kk * PITCH + ty + 16u];
      let b0 = Bs[kk * PITCH + tx];
      let b1 = Bs[kk * PITCH + tx + 16u];
      c00 = fma(vec4<f32>(a0.x), b0, c00); c01 = fma(vec4<f32>(a0.x), b1, c01);
      c10 = fma(vec4<f32>(a0.y), b0, c10); c11 = fma(vec4<f32>(a0.y), b1, c11);
      c20 = fma(vec4<f32>(a0.z), b0, c20); c21 = fma(vec4<f32>(a0.z), b1, c21);
      c30 = fma(vec4<f32>(a0.w), b0, c30); c31 = fma(vec4<f32>(a0.w), b1, c31);
      c40 = fma(vec4<f32>(a1.x), b0, c40); c41 = fma(vec4<f32>(a1.x), b1, c41);
      c50 = fma(vec4<f32>(a1.y), b0, c50); c51 = fma(vec4<f32>(a1.y), b1, c51);
      c60 = fma(vec4<f32>(a1.z), b0, c60); c61 = fma(vec4<f32>(a1.z), b1, c61);
      c70 = fma(vec4<f32>(a1.w), b0, c70); c71 = fma(vec4<f32>(a1.w), b1, c71);
    }
    workgroupBarrier();
  }
  let alpha = alpha_value();
  let zoff = wid.z * p.c_batch;
  let rb = row0 + ty * 4u;
  let cb = col0 + tx * 4u;
  st4(rb, cb, c00, alpha, zoff); st4(rb, cb + 64u, c01, alpha, zoff);
  st4(rb + 1u, cb, c10, alpha, zoff); st4(rb + 1u, cb + 64u, c11, alpha, zoff);
  st4(rb + 2u, cb, c20, alpha, zoff); st4(rb + 2u, cb + 64u, c21, alpha, zoff);
  st4(rb + 3u, cb, c30, alpha, zoff); st4(rb + 3u, cb + 64u, c31, alpha, zoff);
  st4(rb + 64u, cb, c40, alpha, zoff); st4(rb + 64u, cb + 64u, c41, alpha, zoff);
  st4(rb + 65u, cb, c50, alpha, zoff); st4(rb + 65u, cb + 64u, c51, alpha, zoff);
  st4(rb + 66u, cb, c60, alpha, zoff); st4(rb + 66u, cb + 64u, c61, alpha, zoff);
  st4(rb + 67u, cb, c70, alpha, zoff); st4(rb + 67u, cb + 64u, c71, alpha, zoff);
}

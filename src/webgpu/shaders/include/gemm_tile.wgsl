// The main loop of the 32x32-tile WGSL GEMMs (gemm.wgsl, linear_q4gsw.wgsl; appended by
// cmake/embed_text.cmake): a workgroup of 8x8 threads computes a 32x32 output tile, each thread 4x4
// outputs at rows i0 + lid.y + 8u and columns j0 + lid.x + 8v, summing over the contraction in
// increasing order with fma. The kernel declares `const TC: u32` (the depth of a contraction slice) and
// implements
//   fn stage(c0: u32, li: u32)              fills As[c * 32 + i] = A(i0 + i, c0 + c) and
//                                           Bs[c * 32 + j] = B(c0 + c, j0 + j) for c < TC (0 outside);
//   fn put(i: u32, j: u32, v: f32)          stores output (i, j), which may lie past the matrix.
var<workgroup> As: array<f32, 32u * TC>;
var<workgroup> Bs: array<f32, 32u * TC>;

fn gemm_tile(i0: u32, j0: u32, contraction: u32, lid: vec3<u32>, li: u32) {
  var acc: array<f32, 16>;
  for (var t = 0u; t < 16u; t++) { acc[t] = 0.0; }
  for (var c0 = 0u; c0 < contraction; c0 += TC) {
    stage(c0, li);
    workgroupBarrier();
    for (var cc = 0u; cc < TC; cc++) {
      var a4: array<f32, 4>;
      var b4: array<f32, 4>;
      for (var u = 0u; u < 4u; u++) {
        a4[u] = As[cc * 32u + lid.y + 8u * u];
        b4[u] = Bs[cc * 32u + lid.x + 8u * u];
      }
      for (var u = 0u; u < 4u; u++) {
        for (var v = 0u; v < 4u; v++) { acc[u * 4u + v] = fma(a4[u], b4[v], acc[u * 4u + v]); }
      }
    }
    workgroupBarrier();
  }
  for (var u = 0u; u < 4u; u++) {
    for (var v = 0u; v < 4u; v++) { put(i0 + lid.y + 8u * u, j0 + lid.x + 8u * v, acc[u * 4u + v]); }
  }
}

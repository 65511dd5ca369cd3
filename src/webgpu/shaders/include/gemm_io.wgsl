// The interface of the dense GEMMs gemm.wgsl, gemm_big.wgsl and gemm_coop.wgsl (one encoder, append_gemm,
// picks one): parameters, bindings, the operand rounding of the f16 flag and the epilogue. C[b,i,j] = alpha * sum_c A(i,c) B(c,j) (+ bias[j])
// (+ C when accumulating), with A(i,c) = A[b*a_batch + i*a_si + c*a_sc], B(c,j) = B[b*b_batch + c*b_sc +
// j*b_sj] and b = workgroup z. Split-K (gemm_big.wgsl only, kslice != 0): z is instead a slice of the
// contraction, [z*kslice, (z+1)*kslice), and C the pooled scratch of partial sums [z][M][N] (c_batch = M*N,
// flags 0) that gemm_splitk_reduce.wgsl adds up.
struct Params {
  M: u32, N: u32, K: u32, flags: u32,  // flags: 1 = bias, 2 = accumulate into C, 4 = alpha from scalars
  a_si: u32, a_sc: u32, b_sc: u32, b_sj: u32,  // element strides of A(i,c) and B(c,j)
  a_batch: u32, b_batch: u32, c_batch: u32, alpha_idx: u32,
  kslice: u32, pad0: u32, pad1: u32, pad2: u32,  // split-K: contraction per z slice, 0 when not split
}
@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
@group(0) @binding(4) var<storage, read> scalars: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

fn alpha_value() -> f32 {
  if ((p.flags & 4u) != 0u) { return scalars[p.alpha_idx]; }
  return 1.0;
}

// Operands rounded to fp16 (the f16 flag of ops.inc; kernels include f16_round.wgsl). A pipeline constant,
// not a parameter bit: a run-time test in the loads measured 2.2x slower fp32 GEMMs on the H200.
override F16: bool = false;

// An operand value as loaded, or rounded to fp16: the FMAs then sum fp16 products in fp32.
fn operand(v: f32) -> f32 {
  if (F16) { return round_f16(v); }
  return v;
}

// Output (i, j) of batch plane zoff = b * c_batch from the sum v; nothing past the matrix.
fn put_c(i: u32, j: u32, zoff: u32, v: f32, alpha: f32) {
  if (i >= p.M || j >= p.N) { return; }
  var r = alpha * v;
  if ((p.flags & 1u) != 0u) { r += bias[j]; }
  let o = zoff + i * p.N + j;
  if ((p.flags & 2u) != 0u) { r += C[o]; }
  C[o] = r;
}

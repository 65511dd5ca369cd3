// W[n,k] = (code - 8) * scales[k/gs, n] of a W_4X8 weight into a dense fp32 [N, K] buffer (scratch), one
// thread per element, k fastest so writes are coalesced: large 4-bit GEMMs then run on gemm_big.wgsl
// (ops_train.cpp), which outruns the 32x32 linear_q4gsw.wgsl by far on GPUs.
struct Params { N: u32, K: u32, gs: u32, N8: u32 }
@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> S: array<f32>;
@group(0) @binding(2) var<storage, read_write> D: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + li;
  if (i >= p.N * p.K) { return; }
  let n = i / p.K;
  let k = i % p.K;
  let word = W[4u * ((k / 4u) * p.N8 + n / 8u) + (n % 8u) / 2u];
  let code = (word >> (8u * (k % 4u) + 4u * (n % 2u))) & 0xFu;
  D[i] = f32(i32(code) - 8) * S[(k / p.gs) * p.N + n];
}

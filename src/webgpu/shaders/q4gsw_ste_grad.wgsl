// q4gsw_ste_grad, in place: the clipped straight-through gradient. grad[n,k] = 0 unless
// -8.5*s <= latent[n,k] < 7.5*s with s = scales[k/gs, n] (reference: src/ref/train.cpp). The bounds are
// single products, correctly rounded (exact for fp16 scales), so the kept set equals the reference's.
override WG: u32 = 256u;
struct Params { N: u32, K: u32, gs: u32, numel: u32 }
@group(0) @binding(0) var<storage, read_write> G: array<f32>;
@group(0) @binding(1) var<storage, read> L: array<f32>;
@group(0) @binding(2) var<storage, read> S: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.y * nwg.x * WG + gid.x;
  if (i >= p.numel) { return; }
  let n = i / p.K;
  let k = i % p.K;
  let s = S[(k / p.gs) * p.N + n];
  let x = L[i];
  if (!(x >= -8.5 * s && x < 7.5 * s)) { G[i] = 0.0; }
}

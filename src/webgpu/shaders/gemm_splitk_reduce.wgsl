// Finishes a split-K product of gemm_big.wgsl: C[i] = alpha * sum_z part[z * MN + i] (+ bias[i % N])
// (+ C[i] when accumulating), the slices added in a fixed order (deterministic). One invocation per output.
struct Params {
  MN: u32, N: u32, slices: u32, flags: u32,  // flags as gemm_io.wgsl: 1 = bias, 2 = accumulate, 4 = alpha
  alpha_idx: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
@group(0) @binding(3) var<storage, read> scalars: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + li;
  if (i >= p.MN) { return; }
  var v = 0.0;
  for (var z = 0u; z < p.slices; z++) { v += part[z * p.MN + i]; }
  if ((p.flags & 4u) != 0u) { v *= scalars[p.alpha_idx]; }
  if ((p.flags & 1u) != 0u) { v += bias[i % p.N]; }
  if ((p.flags & 2u) != 0u) { v += C[i]; }
  C[i] = v;
}

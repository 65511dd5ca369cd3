// In-place AdamW, one thread per element on a folded 2-D grid. All seven scalars come from the scalar
// block (indices in the uniform), so a learning-rate schedule or new bias corrections need no re-record.
// The gradient is multiplied by grad_scale[0] when given and zeroed once read (adamw_step.comp says why).
// Order per element (OPS.md section 7): decay, m, v, update.
#include "adamw.wgsl"
override WG: u32 = 256u;
struct Params { n: u32, lr: u32, b1: u32, b2: u32, eps: u32, wd: u32, bc1: u32, bc2: u32, scaled: u32 }
@group(0) @binding(0) var<storage, read_write> P: array<f32>;
@group(0) @binding(1) var<storage, read_write> Mo: array<f32>;
@group(0) @binding(2) var<storage, read_write> Vo: array<f32>;
@group(0) @binding(3) var<storage, read_write> G: array<f32>;
@group(0) @binding(4) var<storage, read> GS: array<f32>;  // grad_scale (a dummy when absent)
@group(0) @binding(5) var<storage, read> scalars: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.y * nwg.x * WG + gid.x;
  if (i >= p.n) { return; }
  let h = adamw_hyper();
  var g = G[i];
  if (p.scaled != 0u) { g = g * GS[0]; }
  let r = adamw_update(h, P[i], Mo[i], Vo[i], g);
  P[i] = r.x;
  Mo[i] = r.y;
  Vo[i] = r.z;
  G[i] = 0.0;
}

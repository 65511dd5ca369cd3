// grad_norm's first pass, over up to 7 gradients per dispatch (bindings 0..6): workgroup w takes input j,
// the last whose first workgroup p.first[j] <= w, and writes the sum of squares of its chunk
// c = w - p.first[j] (elements [c * chunk[j], (c + 1) * chunk[j])) to out[p.out_idx + w], in a fixed tree,
// so results are deterministic; grad_norm.wgsl (ROOT) then sums the partials. One dispatch per gradient had
// Dawn separate every two with a barrier (they write one scratch buffer): most of the WebGPU update phase's
// dispatches. A NaN anywhere gives NaN, tested on the bits so no fast-math assumption can drop it.
#include "workgroup_reduce.wgsl"
override WG: u32 = 256u;
struct Params {
  out_idx: u32, inputs: u32, nan_bits: u32, groups: u32,  // groups: workgroups of all inputs together
  n: array<vec4<u32>, 2>, chunk: array<vec4<u32>, 2>, first: array<vec4<u32>, 2>,  // per input j: [j / 4][j % 4]
}
@group(0) @binding(0) var<storage, read> s0: array<f32>;
@group(0) @binding(1) var<storage, read> s1: array<f32>;
@group(0) @binding(2) var<storage, read> s2: array<f32>;
@group(0) @binding(3) var<storage, read> s3: array<f32>;
@group(0) @binding(4) var<storage, read> s4: array<f32>;
@group(0) @binding(5) var<storage, read> s5: array<f32>;
@group(0) @binding(6) var<storage, read> s6: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> nan_seen: atomic<u32>;

fn is_nan(x: f32) -> bool {
  let b = bitcast<u32>(x);
  return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u;
}

fn element(j: u32, i: u32) -> f32 {
  switch j {
    case 0u: { return s0[i]; }
    case 1u: { return s1[i]; }
    case 2u: { return s2[i]; }
    case 3u: { return s3[i]; }
    case 4u: { return s4[i]; }
    case 5u: { return s5[i]; }
    default: { return s6[i]; }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = wid.y * nwg.x + wid.x;
  if (w >= p.groups) { return; }  // the whole workgroup: past the grid's last chunk
  var j = 0u;
  for (var t = 1u; t < p.inputs; t++) {
    if (w >= p.first[t / 4u][t % 4u]) { j = t; }
  }
  let n = p.n[j / 4u][j % 4u];
  let chunk = p.chunk[j / 4u][j % 4u];
  let begin = (w - p.first[j / 4u][j % 4u]) * chunk;
  let end = min(n, begin + chunk);
  var acc = 0.0;
  var bad = false;
  for (var i = begin + li; i < end; i += WG) {
    let x = element(j, i);
    if (is_nan(x)) { bad = true; }
    acc = fma(x, x, acc);
  }
  if (bad) { atomicStore(&nan_seen, 1u); }
  var r = wg_sum(acc, li);
  let any_nan = atomicLoad(&nan_seen);
  if (li == 0u) {
    if (any_nan != 0u) { r = bitcast<f32>(p.nan_bits); }
    out[p.out_idx + w] = r;
  }
}

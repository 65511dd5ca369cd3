// A 4-bit weight's update in one pass instead of adamw_step then q4gsw_requant: half the dispatches of a QAT
// update (Dawn puts a barrier before every dispatch that writes), and the latent is read once. One thread
// per W_4X8 word: rows 2r and 2r + 1 at k = 4k4 .. 4k4 + 3, threads running along k so that neighbours read
// neighbouring latents. Per element: adamw_update (adamw.wgsl, as adamw_step.wgsl), then q4gsw_requant.wgsl's
// clamp of the new latent into [-8.5s, 7.5s] and its code (code_of); rows past N and k past K are code 8.
// Eight storage buffers: WebGPU's guaranteed limit per stage.
#include "adamw.wgsl"
#include "q4gsw_code.wgsl"
struct Params {
  N: u32, K: u32, gs: u32, N8: u32, K4: u32, threads: u32,  // threads = 4 N8 row pairs x K4
  lr: u32, b1: u32, b2: u32, eps: u32, wd: u32, bc1: u32, bc2: u32,  // scalar-block indices
  scaled: u32, pad0: u32, pad1: u32,
}
@group(0) @binding(0) var<storage, read_write> L: array<f32>;
@group(0) @binding(1) var<storage, read_write> Mo: array<f32>;
@group(0) @binding(2) var<storage, read_write> Vo: array<f32>;
@group(0) @binding(3) var<storage, read_write> G: array<f32>;
@group(0) @binding(4) var<storage, read> S: array<f32>;
@group(0) @binding(5) var<storage, read> GS: array<f32>;  // grad_scale (a dummy when absent)
@group(0) @binding(6) var<storage, read_write> Wout: array<u32>;
@group(0) @binding(7) var<storage, read> scalars: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = gid.y * nwg.x * 64u + gid.x;
  if (t >= p.threads) { return; }
  let k4 = t % p.K4;
  let r = t / p.K4;
  let hp = adamw_hyper();
  var word = 0u;
  for (var h = 0u; h < 2u; h++) {
    let n = 2u * r + h;
    var s = 0.0;
    if (n < p.N) { s = S[(4u * k4 / p.gs) * p.N + n]; }  // group_size is a multiple of 4: one group per word
    for (var b = 0u; b < 4u; b++) {
      let k = 4u * k4 + b;
      var c = 8u;
      if (n < p.N && k < p.K) {
        let i = n * p.K + k;
        var g = G[i];
        if (p.scaled != 0u) { g = g * GS[0]; }
        let r = adamw_update(hp, L[i], Mo[i], Vo[i], g);
        let x = r.x;
        let lo = -8.5 * s;
        let hi = 7.5 * s;
        var xc = x;  // NaN (told by its bits: a compiler may turn the selects into min/max) stays
        if ((bitcast<u32>(x) & 0x7FFFFFFFu) <= 0x7F800000u) {
          if (x < lo) { xc = lo; } else if (x > hi) { xc = hi; }
        }
        L[i] = xc;
        Mo[i] = r.y;
        Vo[i] = r.z;
        G[i] = 0.0;
        c = code_of(x, s);  // the same code as xc's
      }
      word |= c << (8u * b + 4u * h);
    }
  }
  Wout[4u * (k4 * p.N8 + r / 4u) + r % 4u] = word;
}

// Re-quantizes fp32 latent weights [N, K] into W_4X8 words with frozen scales. Each latent is first clamped
// in place into [-8.5s, 7.5s] (clamp_to_code_range, q4gsw_code.wgsl) and written back only where that
// changed it; then code_of, code 8 where the nibble is padding.
// One thread per output word.
#include "q4gsw_code.wgsl"
struct Params { N: u32, K: u32, gs: u32, N8: u32, words: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> L: array<f32>;
@group(0) @binding(1) var<storage, read> S: array<f32>;
@group(0) @binding(2) var<storage, read_write> Wout: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.y * nwg.x * 64u + gid.x;
  if (w >= p.words) { return; }
  let blk = w / 4u;
  let jw = w % 4u;
  let k4 = blk / p.N8;
  let n8 = blk % p.N8;
  var word = 0u;
  for (var b = 0u; b < 4u; b++) {
    let k = k4 * 4u + b;
    for (var h = 0u; h < 2u; h++) {
      let n = n8 * 8u + 2u * jw + h;
      var c = 8u;
      if (n < p.N && k < p.K) {
        let i = n * p.K + k;
        let s = S[(k / p.gs) * p.N + n];
        let x = L[i];
        let xc = clamp_to_code_range(x, s);
        if (bitcast<u32>(xc) != bitcast<u32>(x)) { L[i] = xc; }
        c = code_of(x, s);  // the same code as xc's: clamping stays within the code's rounding interval
      }
      word |= c << (8u * b + 4u * h);
    }
  }
  Wout[w] = word;
}

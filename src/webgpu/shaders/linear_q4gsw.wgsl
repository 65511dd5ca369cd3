// q4gsw GEMMs on W_4X8 words. Forward (BACKWARD = false): y[m,n] = sum_k x[m,k] W[n,k] (+ bias[n]).
// Input gradient (BACKWARD = true): dx[m,k] = sum_n dy[m,n] W[n,k]. W[n,k] = (code - 8) * scales[k/gs, n].
// 32x32 output tiles on the main loop of gemm_tile.wgsl; per 32-deep contraction slice the workgroup
// stages the activations and a dequantized 32(n) x 32(k) weight block (128 words, 2 per thread); with f16
// (the f16 flag) both are rounded to fp16 as they are staged.
#include "gemm_tile.wgsl"
#include "f16_round.wgsl"
override BACKWARD: bool = false;
struct Params { M: u32, N: u32, K: u32, gs: u32, N8: u32, K4: u32, has_bias: u32, f16: u32 }
@group(0) @binding(0) var<storage, read> A: array<f32>;      // x [M, K] or dy [M, N]
@group(0) @binding(1) var<storage, read> W: array<u32>;      // W_4X8 words
@group(0) @binding(2) var<storage, read> S: array<f32>;      // scales [G, N]
@group(0) @binding(3) var<storage, read> bias: array<f32>;   // [N] (a dummy when absent)
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

const TC = 32u;

var<private> i0: u32;
var<private> j0: u32;
var<private> red_len: u32;  // contraction length: K forward, N backward
var<private> cols: u32;     // output columns: N forward, K backward

fn operand(v: f32) -> f32 {
  if (p.f16 != 0u) { return round_f16(v); }
  return v;
}

fn stage(c0: u32, li: u32) {
  for (var t = 0u; t < 16u; t++) {
    let e = li + 64u * t;
    let cc = e / 32u;
    let r = e % 32u;
    var av = 0.0;
    if (c0 + cc < red_len && i0 + r < p.M) { av = A[(i0 + r) * red_len + c0 + cc]; }
    As[e] = operand(av);
  }
  // The weight block: n in [nb, nb+32), k in [kb, kb+32).
  var nb = j0;
  var kb = c0;
  if (BACKWARD) { nb = c0; kb = j0; }
  for (var t = 0u; t < 2u; t++) {
    let e = li + 64u * t;      // 0..127: (k4 local, n8 local, word j)
    let jw = e % 4u;
    let n8 = nb / 8u + (e / 4u) % 4u;
    let k4 = kb / 4u + e / 16u;
    var word = 0x88888888u;
    if (n8 < p.N8 && k4 < p.K4) { word = W[4u * (k4 * p.N8 + n8) + jw]; }
    for (var b = 0u; b < 4u; b++) {
      let k = k4 * 4u + b;
      for (var h = 0u; h < 2u; h++) {
        let n = n8 * 8u + 2u * jw + h;
        var v = 0.0;
        if (n < p.N && k < p.K) {
          let code = (word >> (8u * b + 4u * h)) & 0xFu;
          v = f32(i32(code) - 8) * S[(k / p.gs) * p.N + n];
        }
        v = operand(v);
        if (BACKWARD) { Bs[(n - nb) * 32u + (k - kb)] = v; } else { Bs[(k - kb) * 32u + (n - nb)] = v; }
      }
    }
  }
}

fn put(i: u32, j: u32, v: f32) {
  if (i >= p.M || j >= cols) { return; }
  var r = v;
  if (!BACKWARD && p.has_bias != 0u) { r += bias[j]; }
  Y[i * cols + j] = r;
}

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let contraction = select(p.K, p.N, BACKWARD);  // a let of uniform values: the loop bound stays uniform
  red_len = contraction;
  cols = select(p.N, p.K, BACKWARD);
  i0 = wid.y * 32u;
  j0 = wid.x * 32u;
  gemm_tile(i0, j0, contraction, lid, li);
}

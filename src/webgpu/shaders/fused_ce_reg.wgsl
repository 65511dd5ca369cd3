// Fused cross-entropy for rows that fit in registers (V <= 32 * WG; ops_train.cpp picks it): one
// workgroup per row, each lane keeps its up to 32 logits (j = li + i*WG) in a private array, so the row
// is read once and dlogits written once, instead of streaming it twice like fused_ce.wgsl. Exact max,
// then the sum of exp(x - max), both merged in a fixed tree (deterministic). Labels < 0 ignore the row,
// labels >= V give a NaN row and loss; IN_PLACE binds the logits once read_write (as fused_ce.wgsl).
override WG: u32 = 1024u;
override IN_PLACE: bool = false;
const C: u32 = 32u;
struct Params { R: u32, V: u32, n_valid_idx: u32, nan_bits: u32 }
@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> labels: array<i32>;
@group(0) @binding(2) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;
@group(0) @binding(4) var<storage, read> scalars: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<f32, WG>;
var<workgroup> xy: f32;

fn ld(i: u32) -> f32 {
  if (IN_PLACE) { return dlogits[i]; }
  return logits[i];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let r = wid.y * nwg.x + wid.x;
  if (r >= p.R) { return; }  // uniform per workgroup
  let base = r * p.V;
  let y = labels[r];
  let inv_n = 1.0 / scalars[p.n_valid_idx];
  if (y < 0 || u32(y) >= p.V) {
    var v = 0.0;
    if (y >= 0) { v = bitcast<f32>(p.nan_bits); }
    for (var j = li; j < p.V; j += WG) { dlogits[base + j] = v; }
    if (li == 0u) { partial[r] = v; }
    return;
  }
  var x: array<f32, 32>;
  var m = -3.4e38;
  for (var i = 0u; i < C; i++) {
    let j = li + i * WG;
    x[i] = -3.4e38;
    if (j < p.V) { x[i] = ld(base + j); }
    m = max(m, x[i]);
  }
  if (li == 0u) { xy = ld(base + u32(y)); }
  red[li] = m;
  storageBarrier();  // every read of the logits happens before any lane overwrites them in place
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    if (li < s) { red[li] = max(red[li], red[li + s]); }
    workgroupBarrier();
  }
  let mu = red[0];
  workgroupBarrier();
  var l = 0.0;
  for (var i = 0u; i < C; i++) {
    if (li + i * WG < p.V) { l += exp(x[i] - mu); }
  }
  red[li] = l;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    if (li < s) { red[li] += red[li + s]; }
    workgroupBarrier();
  }
  let z = red[0];
  let xt = xy;
  for (var i = 0u; i < C; i++) {
    let j = li + i * WG;
    if (j < p.V) {
      var v = exp(x[i] - mu) / z;
      if (j == u32(y)) { v -= 1.0; }
      dlogits[base + j] = v * inv_n;
    }
  }
  if (li == 0u) { partial[r] = (mu + log(z) - xt) * inv_n; }
}

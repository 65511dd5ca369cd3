// fused_ce_part: one workgroup per row (rows folded over a 2-D grid) of one vocabulary part, columns
// first .. first+Vp-1, with the full row's lse given (logsumexp_rows). Lane 0 reads x[y - first] (when y
// is in this part) before a barrier, then the lanes write dlogits = (exp(x - lse) - onehot) / n_valid and
// lane 0 the row's loss term ((first == 0 ? lse : 0) - x[y - first]) / n_valid to `partial`; grad_norm.wgsl
// (a plain sum, ACCUMULATE adding the old loss) adds them. Labels < 0 give zeros, labels >= total a NaN row
// and loss. IN_PLACE: dlogits is the logits buffer, bound once read_write, and the logits binding holds a
// dummy (WebGPU forbids a writable binding aliasing another).
override WG: u32 = 256u;
override IN_PLACE: bool = false;
struct Params { R: u32, Vp: u32, n_valid_idx: u32, nan_bits: u32, first: u32, total: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> labels: array<i32>;
@group(0) @binding(2) var<storage, read> lse: array<f32>;
@group(0) @binding(3) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<f32>;
@group(0) @binding(5) var<storage, read> scalars: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;
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
  let base = r * p.Vp;
  let y = labels[r];
  let valid = y >= 0 && u32(y) < p.total;
  let here = valid && u32(y) >= p.first && u32(y) - p.first < p.Vp;
  if (li == 0u) {
    var v = 0.0;
    if (here) { v = ld(base + u32(y) - p.first); }
    xy = v;
  }
  storageBarrier();  // every read of x[y] happens before any lane overwrites it in place
  workgroupBarrier();
  if (!valid) {
    var v = 0.0;
    if (y >= 0) { v = bitcast<f32>(p.nan_bits); }
    for (var j = li; j < p.Vp; j += WG) { dlogits[base + j] = v; }
    if (li == 0u) { partial[r] = v; }
    return;
  }
  let inv_n = 1.0 / scalars[p.n_valid_idx];
  let l = lse[r];
  let yj = u32(y) - p.first;  // wraps past Vp when y is in an earlier part: never matches j
  for (var j = li; j < p.Vp; j += WG) {
    var v = exp(ld(base + j) - l);
    if (here && j == yj) { v -= 1.0; }
    dlogits[base + j] = v * inv_n;
  }
  if (li == 0u) {
    var own = 0.0;
    if (p.first == 0u) { own = l; }
    partial[r] = (own - xy) * inv_n;
  }
}

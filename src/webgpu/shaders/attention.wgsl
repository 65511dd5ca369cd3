// Causal attention forward, flash-attention style (the twin of src/vulkan/shaders/attention.comp): one
// workgroup per (batch, query head, block of AR queries), heavy (late) blocks first. The query block stays
// in As; key tiles of BR keys stream through Bs (K for the scores, then V), and an online softmax keeps per
// row the running max m, the running sum l of exp(s - m) (per invocation, summed at the end) and the
// output rows, rescaled when m grows. Layouts: q, out [B,T,H,hd]; k, v [B,S,KV,hd]; lse [B,H,T]; query t
// sees keys j <= t + S - T of kv head h / (H / KV). out = sum_j p_j v_j / l, lse = m + log(l).
// HAS_POS (sample packing, S == T): query t sees keys [first(t), t] only, first(t) = t - clamp(pos[b,t], 0, t);
// the key loop starts at the tile holding the block's smallest first(). Off, the kernel is the plain one.
#include "attention_tiles.wgsl"
override HAS_POS: bool = false;
struct Params { B: u32, T: u32, S: u32, H: u32, KV: u32, hd: u32, nqb: u32, scale_idx: u32, neg_inf: u32 }
@group(0) @binding(0) var<storage, read> Q: array<f32>;
@group(0) @binding(1) var<storage, read> K: array<f32>;
@group(0) @binding(2) var<storage, read> V: array<f32>;
@group(0) @binding(3) var<storage, read> tok_pos: array<i32>;  // [B, T], a dummy unless HAS_POS
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<storage, read_write> LSE: array<f32>;
@group(0) @binding(6) var<storage, read> scalars: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;

// The first key query t of sequence b sees under HAS_POS.
fn first_key(b: u32, t: u32) -> u32 { return t - u32(clamp(tok_pos[b * p.T + t], 0, i32(t))); }

fn src(which: u32, i: u32) -> f32 {
  if (which == 0u) { return Q[i]; }
  if (which == 1u) { return K[i]; }
  return V[i];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wgid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let wid = wgid.y * nwg.x + wgid.x;
  if (wid >= p.B * p.H * p.nqb) { return; }
  let tx = li % TX;
  let ty = li / TX;
  let bh = wid / p.nqb;
  let qb = p.nqb - 1u - (wid - bh * p.nqb);
  let b = bh / p.H;
  let h = bh - b * p.H;
  let g = h / (p.H / p.KV);
  let t0 = qb * AR;
  let nq = min(AR, p.T - t0);
  let off = p.S - p.T;
  let qstride = p.H * p.hd;
  let kstride = p.KV * p.hd;
  let qbase = ((b * p.T + t0) * p.H + h) * p.hd;
  let kbase = (b * p.S * p.KV + g) * p.hd;
  let scale = scalars[p.scale_idx];
  let hd4 = (p.hd + 3u) / 4u;
  let neg_inf = bitcast<f32>(p.neg_inf);

  load_tile(0u, 0u, AR, 0u, qbase, qstride, nq, p.hd, li);
  var m: array<f32, 8>;
  var l: array<f32, 8>;
  var acc: array<vec4<f32>, 16>;
  for (var i = 0u; i < RI; i++) { m[i] = neg_inf; }
  let kend = t0 + nq + off;  // keys [0, kend) are seen by some query of the block
  var first: array<u32, 8>;
  var cbeg = 0u;
  if (HAS_POS) {
    for (var i = 0u; i < RI; i++) {
      let t = t0 + ty + TY * i;
      if (t < p.T) { first[i] = first_key(b, t); }
    }
    cbeg = first_of_block(b, t0, nq) / BR * BR;
  }
  for (var c0 = cbeg; c0 < kend; c0 += BR) {
    let nk = min(BR, p.S - c0);
    workgroupBarrier();  // the previous tile's readers of Bs and Xs are done
    load_tile(1u, 0u, BR, 1u, kbase + c0 * kstride, kstride, nk, p.hd, li);
    workgroupBarrier();
    var s = dot_tiles(0u, 0u, tx, ty);
    // Scale and mask (future keys and keys past S get -inf); each row's max over this invocation's keys.
    var tmax: array<f32, 8>;
    for (var i = 0u; i < RI; i++) {
      let t = t0 + ty + TY * i;
      tmax[i] = neg_inf;
      for (var j = 0u; j < KJ; j++) {
        let c = c0 + tx + TX * j;
        var x = neg_inf;
        if (c < p.S && c <= t + off && (!HAS_POS || c >= first[i])) { x = scale * s[i * KJ_MAX + j]; }
        s[i * KJ_MAX + j] = x;
        tmax[i] = max(tmax[i], x);
      }
    }
    row_share(tmax, tx, ty);
    workgroupBarrier();
    for (var i = 0u; i < RI; i++) {
      // Tile 0 holds key 0, which every query sees: from then on m is finite. Under HAS_POS a row's first
      // tiles may hold none of its keys (mn = -inf): they add exp(-inf - 0) = 0.
      let mn = max(m[i], row_max(ty + TY * i));
      var alpha = 1.0;
      if (m[i] != mn) { alpha = exp(m[i] - mn); }
      var mz = mn;
      if (HAS_POS && mn == neg_inf) { mz = 0.0; }
      var sum = 0.0;
      for (var j = 0u; j < KJ; j++) {
        let e = exp(s[i * KJ_MAX + j] - mz);  // exp(-inf) = 0 for masked keys
        s[i * KJ_MAX + j] = e;
        sum += e;
      }
      l[i] = l[i] * alpha + sum;
      m[i] = mn;
      for (var d = 0u; d < DQ; d++) { acc[i * DQ_MAX + d] *= alpha; }
    }
    workgroupBarrier();  // every invocation has read the row maxima before P overwrites them
    for (var i = 0u; i < RI; i++) {
      for (var j = 0u; j < KJ; j++) { put_score(ty + TY * i, tx + TX * j, s[i * KJ_MAX + j]); }
    }
    load_tile(1u, 0u, BR, 2u, kbase + c0 * kstride, kstride, nk, p.hd, li);
    workgroupBarrier();
    pv_tiles(&acc, 0u, tx, ty);
  }
  workgroupBarrier();
  row_share(l, tx, ty);
  workgroupBarrier();
  for (var i = 0u; i < RI; i++) {
    let r = ty + TY * i;
    if (r >= nq) { continue; }
    let sum = row_sum(r);
    let inv = 1.0 / sum;
    let orow = qbase + r * qstride;
    for (var d = 0u; d < DQ; d++) {
      let slot = tx + TX * d;
      if (slot >= hd4) { continue; }
      let val = acc[i * DQ_MAX + d] * inv;
      for (var c = 0u; c < 4u; c++) {
        if (4u * slot + c < p.hd) { O[orow + 4u * slot + c] = val[c]; }
      }
    }
    if (tx == 0u) { LSE[(b * p.H + h) * p.T + t0 + r] = m[i] + log(sum); }
  }
}

// Causal attention backward without atomics (deterministic), the twin of
// src/vulkan/shaders/attention_backward.comp: probabilities are recomputed from q, k and the forward's
// lse. WebGPU guarantees only 8 storage buffers per kernel, so the rows' lse and D = rowsum(dout * out)
// come from the scratch buffer AUX = [lse | D] that attention_backward_prep.wgsl fills first (the Vulkan
// dq kernel computes D itself), and the two outputs of a dispatch share bindings 5 and 6. HAS_POS (sample
// packing, S == T): AUX also holds each query's first key [B, T] after them (u32; lse and D are f32 bits),
// query t sees keys [first(t), t] only; dq starts its key loop at the tile of its block's smallest first(),
// dk/dv skips every query block none of whose queries sees a key of its key block.
//   MODE 0, dq (OUT0 = dq, OUT1 = a dummy): one workgroup per (batch, query head, block of AR queries); per
//     tile of BR keys: dP = dout V^T (V in Bs), then S = Q K^T (K in Bs), P = exp(scale S - lse),
//     dS = P (dP - D), dq += dS K; dq *= scale.
//   MODE 1, dk/dv (OUT0 = dk, OUT1 = dv): one workgroup per (batch, kv head, block of AR keys), keeping its
//     K and V rows, over every query head of the group and every block of BR queries that sees a key of
//     the block: S^T = K Q^T, dP^T = V dout^T, dv += P^T dout, dk += dS^T Q; dk *= scale.
#include "attention_tiles.wgsl"
override MODE: u32 = 0u;
override HAS_POS: bool = false;
struct Params { B: u32, T: u32, S: u32, H: u32, KV: u32, hd: u32, nblocks: u32, scale_idx: u32 }
@group(0) @binding(0) var<storage, read> DOUT: array<f32>;
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> AUX: array<u32>;  // lse [B*H*T], D [B*H*T] (f32 bits), first keys
@group(0) @binding(5) var<storage, read_write> OUT0: array<f32>;
@group(0) @binding(6) var<storage, read_write> OUT1: array<f32>;
@group(0) @binding(7) var<storage, read> scalars: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

// The first key query t of sequence b sees (HAS_POS; first_of_block: attention_tiles.wgsl).
fn first_key(b: u32, t: u32) -> u32 { return AUX[2u * p.B * p.H * p.T + b * p.T + t]; }

fn src(which: u32, i: u32) -> f32 {
  if (which == 0u) { return DOUT[i]; }
  if (which == 1u) { return Q[i]; }
  if (which == 2u) { return K[i]; }
  return V[i];
}

// Stores one head-dim slot (fewer values at the end of an odd head dim) of a row at float offset o.
fn store_slot(which: u32, o: u32, slot: u32, val: vec4<f32>) {
  for (var c = 0u; c < 4u; c++) {
    if (4u * slot + c < p.hd) {
      if (which == 0u) { OUT0[o + c] = val[c]; } else { OUT1[o + c] = val[c]; }
    }
  }
}

fn dq_block(wid: u32, tx: u32, ty: u32, li: u32) {
  let bh = wid / p.nblocks;
  let qb = p.nblocks - 1u - (wid - bh * p.nblocks);
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
  let lbase = (b * p.H + h) * p.T + t0;
  let nrows = p.B * p.H * p.T;
  let DO = AR * HC4;
  let scale = scalars[p.scale_idx];
  let hd4 = (p.hd + 3u) / 4u;
  load_tile(0u, 0u, AR, 1u, qbase, qstride, nq, p.hd, li);
  load_tile(0u, DO, AR, 0u, qbase, qstride, nq, p.hd, li);
  var L: array<f32, 8>;
  var D: array<f32, 8>;
  for (var i = 0u; i < RI; i++) {
    let r = ty + TY * i;
    if (r < nq) {
      L[i] = bitcast<f32>(AUX[lbase + r]);
      D[i] = bitcast<f32>(AUX[nrows + lbase + r]);
    }
  }
  var acc: array<vec4<f32>, 16>;
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
    load_tile(1u, 0u, BR, 3u, kbase + c0 * kstride, kstride, nk, p.hd, li);
    workgroupBarrier();
    let dp = dot_tiles(DO, 0u, tx, ty);
    workgroupBarrier();
    load_tile(1u, 0u, BR, 2u, kbase + c0 * kstride, kstride, nk, p.hd, li);
    workgroupBarrier();
    let s = dot_tiles(0u, 0u, tx, ty);
    for (var i = 0u; i < RI; i++) {
      let t = t0 + ty + TY * i;
      for (var j = 0u; j < KJ; j++) {
        let c = c0 + tx + TX * j;
        var pr = 0.0;
        if (t < p.T && c < p.S && c <= t + off && (!HAS_POS || c >= first[i])) {
          pr = exp(scale * s[i * KJ_MAX + j] - L[i]);
        }
        put_score(ty + TY * i, tx + TX * j, pr * (dp[i * KJ_MAX + j] - D[i]));
      }
    }
    workgroupBarrier();
    pv_tiles(&acc, 0u, tx, ty);
  }
  for (var i = 0u; i < RI; i++) {
    let r = ty + TY * i;
    if (r >= nq) { continue; }
    for (var d = 0u; d < DQ; d++) {
      let slot = tx + TX * d;
      if (slot < hd4) { store_slot(0u, qbase + r * qstride + 4u * slot, slot, acc[i * DQ_MAX + d] * scale); }
    }
  }
}

fn dkdv_block(wid: u32, tx: u32, ty: u32, li: u32) {
  let bg = wid / p.nblocks;
  let kb = wid - bg * p.nblocks;
  let b = bg / p.KV;
  let g = bg - b * p.KV;
  let G = p.H / p.KV;
  let c0 = kb * AR;
  let nk = min(AR, p.S - c0);
  let off = p.S - p.T;
  let qstride = p.H * p.hd;
  let kstride = p.KV * p.hd;
  let kbase = ((b * p.S + c0) * p.KV + g) * p.hd;
  let nrows = p.B * p.H * p.T;
  let VO = AR * HC4;
  let DO = BR * HC4;
  let scale = scalars[p.scale_idx];
  let hd4 = (p.hd + 3u) / 4u;
  load_tile(0u, 0u, AR, 2u, kbase, kstride, nk, p.hd, li);
  load_tile(0u, VO, AR, 3u, kbase, kstride, nk, p.hd, li);
  var ak: array<vec4<f32>, 16>;
  var av: array<vec4<f32>, 16>;
  // Query t sees key c0 from t = c0 - off on: the blocks of BR queries from the one holding it.
  var tfirst = 0u;
  if (c0 > off) { tfirst = (c0 - off) / BR * BR; }
  for (var h = g * G; h < g * G + G; h++) {
    let lbase = (b * p.H + h) * p.T;
    for (var t0 = tfirst; t0 < p.T; t0 += BR) {
      let nq = min(BR, p.T - t0);
      let qbase = ((b * p.T + t0) * p.H + h) * p.hd;
      if (HAS_POS && first_of_block(b, t0, nq) >= c0 + nk) { continue; }  // uniform: no query sees the keys
      workgroupBarrier();  // the previous block's readers of Bs and Xs are done
      load_tile(1u, 0u, BR, 1u, qbase, qstride, nq, p.hd, li);
      load_tile(1u, DO, BR, 0u, qbase, qstride, nq, p.hd, li);
      workgroupBarrier();
      var s = dot_tiles(0u, 0u, tx, ty);    // K . Q
      var dp = dot_tiles(VO, DO, tx, ty);   // V . dout
      var L: array<f32, 4>;
      var D: array<f32, 4>;
      var first: array<u32, 4>;
      for (var j = 0u; j < KJ; j++) {
        let t = t0 + tx + TX * j;
        if (t < p.T) {
          L[j] = bitcast<f32>(AUX[lbase + t]);
          D[j] = bitcast<f32>(AUX[nrows + lbase + t]);
          if (HAS_POS) { first[j] = first_key(b, t); }
        }
      }
      for (var i = 0u; i < RI; i++) {
        let c = c0 + ty + TY * i;
        for (var j = 0u; j < KJ; j++) {
          let t = t0 + tx + TX * j;
          var pr = 0.0;
          if (t < p.T && c < p.S && c <= t + off && (!HAS_POS || c >= first[j])) {
            pr = exp(scale * s[i * KJ_MAX + j] - L[j]);
          }
          s[i * KJ_MAX + j] = pr;
          dp[i * KJ_MAX + j] = pr * (dp[i * KJ_MAX + j] - D[j]);
          put_score(ty + TY * i, tx + TX * j, pr);
        }
      }
      workgroupBarrier();
      pv_tiles(&av, DO, tx, ty);  // dv += P^T dout
      workgroupBarrier();
      for (var i = 0u; i < RI; i++) {
        for (var j = 0u; j < KJ; j++) { put_score(ty + TY * i, tx + TX * j, dp[i * KJ_MAX + j]); }
      }
      workgroupBarrier();
      pv_tiles(&ak, 0u, tx, ty);  // dk += dS^T q
    }
  }
  for (var i = 0u; i < RI; i++) {
    let r = ty + TY * i;
    if (r >= nk) { continue; }
    for (var d = 0u; d < DQ; d++) {
      let slot = tx + TX * d;
      if (slot < hd4) {
        store_slot(0u, kbase + r * kstride + 4u * slot, slot, ak[i * DQ_MAX + d] * scale);
        store_slot(1u, kbase + r * kstride + 4u * slot, slot, av[i * DQ_MAX + d]);
      }
    }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wgid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let wid = wgid.y * nwg.x + wgid.x;
  var n = p.B * p.KV * p.nblocks;
  if (MODE == 0u) { n = p.B * p.H * p.nblocks; }
  if (wid >= n) { return; }
  if (MODE == 0u) { dq_block(wid, li % TX, li / TX, li); } else { dkdv_block(wid, li % TX, li / TX, li); }
}

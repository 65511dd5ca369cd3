// Fused cross-entropy for rows that fit in registers (V <= 32 * WG; ops_train.cpp picks it): one
// workgroup per row, each lane keeps its up to 32 logits (j = li + i*WG) in 32 named registers, so the row
// is read once and dlogits written once, instead of streaming it twice like fused_ce.wgsl. Exact max,
// then the sum of exp(x - max), both merged in a fixed tree (deterministic). Labels < 0 ignore the row,
// labels >= V give a NaN row and loss; IN_PLACE binds the logits once read_write (as fused_ce.wgsl).
#include "fused_ce_io.wgsl"
#include "workgroup_reduce.wgsl"
override WG: u32 = 1024u;
var<workgroup> xy: f32;

// Logit j of the row at base, -3.4e38 past the row's end.
fn lg(base: u32, j: u32) -> f32 {
  if (j < p.V) { return ld(base + j); }
  return -3.4e38;
}
fn ex(x: f32, j: u32, mu: f32) -> f32 {
  if (j < p.V) { return exp(x - mu); }
  return 0.0;
}
fn put(base: u32, j: u32, x: f32, mu: f32, z: f32, y: u32, inv_n: f32) {
  if (j >= p.V) { return; }
  var v = exp(x - mu) / z;
  if (j == y) { v -= 1.0; }
  dlogits[base + j] = v * inv_n;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let r = wid.y * nwg.x + wid.x;
  if (r >= p.R) { return; }  // uniform per workgroup
  let base = r * p.V;
  let y = labels[r];
  let inv_n = 1.0 / scalars[p.n_valid_idx];
  if (label_outside(r, base, y, li)) { return; }
  // 32 named registers, not an indexed array: compilers behind Dawn may put indexed function arrays in
  // local memory.
  let x0 = lg(base, li + 0u * WG);
  let x1 = lg(base, li + 1u * WG);
  let x2 = lg(base, li + 2u * WG);
  let x3 = lg(base, li + 3u * WG);
  let x4 = lg(base, li + 4u * WG);
  let x5 = lg(base, li + 5u * WG);
  let x6 = lg(base, li + 6u * WG);
  let x7 = lg(base, li + 7u * WG);
  let x8 = lg(base, li + 8u * WG);
  let x9 = lg(base, li + 9u * WG);
  let x10 = lg(base, li + 10u * WG);
  let x11 = lg(base, li + 11u * WG);
  let x12 = lg(base, li + 12u * WG);
  let x13 = lg(base, li + 13u * WG);
  let x14 = lg(base, li + 14u * WG);
  let x15 = lg(base, li + 15u * WG);
  let x16 = lg(base, li + 16u * WG);
  let x17 = lg(base, li + 17u * WG);
  let x18 = lg(base, li + 18u * WG);
  let x19 = lg(base, li + 19u * WG);
  let x20 = lg(base, li + 20u * WG);
  let x21 = lg(base, li + 21u * WG);
  let x22 = lg(base, li + 22u * WG);
  let x23 = lg(base, li + 23u * WG);
  let x24 = lg(base, li + 24u * WG);
  let x25 = lg(base, li + 25u * WG);
  let x26 = lg(base, li + 26u * WG);
  let x27 = lg(base, li + 27u * WG);
  let x28 = lg(base, li + 28u * WG);
  let x29 = lg(base, li + 29u * WG);
  let x30 = lg(base, li + 30u * WG);
  let x31 = lg(base, li + 31u * WG);
  var m = max(x0, x1);
  m = max(m, x2);
  m = max(m, x3);
  m = max(m, x4);
  m = max(m, x5);
  m = max(m, x6);
  m = max(m, x7);
  m = max(m, x8);
  m = max(m, x9);
  m = max(m, x10);
  m = max(m, x11);
  m = max(m, x12);
  m = max(m, x13);
  m = max(m, x14);
  m = max(m, x15);
  m = max(m, x16);
  m = max(m, x17);
  m = max(m, x18);
  m = max(m, x19);
  m = max(m, x20);
  m = max(m, x21);
  m = max(m, x22);
  m = max(m, x23);
  m = max(m, x24);
  m = max(m, x25);
  m = max(m, x26);
  m = max(m, x27);
  m = max(m, x28);
  m = max(m, x29);
  m = max(m, x30);
  m = max(m, x31);
  if (li == 0u) { xy = ld(base + u32(y)); }
  storageBarrier();  // every read of the logits happens before any lane overwrites them in place
  let mu = wg_max(m, li);
  var l = 0.0;
  l += ex(x0, li + 0u * WG, mu);
  l += ex(x1, li + 1u * WG, mu);
  l += ex(x2, li + 2u * WG, mu);
  l += ex(x3, li + 3u * WG, mu);
  l += ex(x4, li + 4u * WG, mu);
  l += ex(x5, li + 5u * WG, mu);
  l += ex(x6, li + 6u * WG, mu);
  l += ex(x7, li + 7u * WG, mu);
  l += ex(x8, li + 8u * WG, mu);
  l += ex(x9, li + 9u * WG, mu);
  l += ex(x10, li + 10u * WG, mu);
  l += ex(x11, li + 11u * WG, mu);
  l += ex(x12, li + 12u * WG, mu);
  l += ex(x13, li + 13u * WG, mu);
  l += ex(x14, li + 14u * WG, mu);
  l += ex(x15, li + 15u * WG, mu);
  l += ex(x16, li + 16u * WG, mu);
  l += ex(x17, li + 17u * WG, mu);
  l += ex(x18, li + 18u * WG, mu);
  l += ex(x19, li + 19u * WG, mu);
  l += ex(x20, li + 20u * WG, mu);
  l += ex(x21, li + 21u * WG, mu);
  l += ex(x22, li + 22u * WG, mu);
  l += ex(x23, li + 23u * WG, mu);
  l += ex(x24, li + 24u * WG, mu);
  l += ex(x25, li + 25u * WG, mu);
  l += ex(x26, li + 26u * WG, mu);
  l += ex(x27, li + 27u * WG, mu);
  l += ex(x28, li + 28u * WG, mu);
  l += ex(x29, li + 29u * WG, mu);
  l += ex(x30, li + 30u * WG, mu);
  l += ex(x31, li + 31u * WG, mu);
  let z = wg_sum(l, li);
  let xt = xy;
  put(base, li + 0u * WG, x0, mu, z, u32(y), inv_n);
  put(base, li + 1u * WG, x1, mu, z, u32(y), inv_n);
  put(base, li + 2u * WG, x2, mu, z, u32(y), inv_n);
  put(base, li + 3u * WG, x3, mu, z, u32(y), inv_n);
  put(base, li + 4u * WG, x4, mu, z, u32(y), inv_n);
  put(base, li + 5u * WG, x5, mu, z, u32(y), inv_n);
  put(base, li + 6u * WG, x6, mu, z, u32(y), inv_n);
  put(base, li + 7u * WG, x7, mu, z, u32(y), inv_n);
  put(base, li + 8u * WG, x8, mu, z, u32(y), inv_n);
  put(base, li + 9u * WG, x9, mu, z, u32(y), inv_n);
  put(base, li + 10u * WG, x10, mu, z, u32(y), inv_n);
  put(base, li + 11u * WG, x11, mu, z, u32(y), inv_n);
  put(base, li + 12u * WG, x12, mu, z, u32(y), inv_n);
  put(base, li + 13u * WG, x13, mu, z, u32(y), inv_n);
  put(base, li + 14u * WG, x14, mu, z, u32(y), inv_n);
  put(base, li + 15u * WG, x15, mu, z, u32(y), inv_n);
  put(base, li + 16u * WG, x16, mu, z, u32(y), inv_n);
  put(base, li + 17u * WG, x17, mu, z, u32(y), inv_n);
  put(base, li + 18u * WG, x18, mu, z, u32(y), inv_n);
  put(base, li + 19u * WG, x19, mu, z, u32(y), inv_n);
  put(base, li + 20u * WG, x20, mu, z, u32(y), inv_n);
  put(base, li + 21u * WG, x21, mu, z, u32(y), inv_n);
  put(base, li + 22u * WG, x22, mu, z, u32(y), inv_n);
  put(base, li + 23u * WG, x23, mu, z, u32(y), inv_n);
  put(base, li + 24u * WG, x24, mu, z, u32(y), inv_n);
  put(base, li + 25u * WG, x25, mu, z, u32(y), inv_n);
  put(base, li + 26u * WG, x26, mu, z, u32(y), inv_n);
  put(base, li + 27u * WG, x27, mu, z, u32(y), inv_n);
  put(base, li + 28u * WG, x28, mu, z, u32(y), inv_n);
  put(base, li + 29u * WG, x29, mu, z, u32(y), inv_n);
  put(base, li + 30u * WG, x30, mu, z, u32(y), inv_n);
  put(base, li + 31u * WG, x31, mu, z, u32(y), inv_n);
  if (li == 0u) { partial[r] = (mu + log(z) - xt) * inv_n; }
}

// The online softmax of a row (running max m and sum l of exp(x - m), a pair s = (m, l)) and its workgroup
// merge, shared by the WGSL kernels that start with `#include "online_softmax.wgsl"` (fused_ce,
// logsumexp_rows; appended at embed time as workgroup_reduce.wgsl is). The kernel declares `override WG`,
// its 1-D workgroup size, a power of two.
var<workgroup> os_m: array<f32, WG>;
var<workgroup> os_l: array<f32, WG>;

// Starts a pair: no element yet.
fn online_empty() -> vec2<f32> { return vec2<f32>(-3.4e38, 0.0); }

// Adds x to the pair s, rescaling the sum when x is the new maximum.
fn online_add(s: vec2<f32>, x: f32) -> vec2<f32> {
  if (x > s.x) { return vec2<f32>(x, s.y * exp(s.x - x) + 1.0); }
  return vec2<f32>(s.x, s.y + exp(x - s.x));
}

// Every invocation's pair merged in a fixed tree order, returned to all; li is the caller's
// local_invocation_index. Contains barriers: call it from uniform control flow.
fn wg_online_merge(s: vec2<f32>, li: u32) -> vec2<f32> {
  os_m[li] = s.x;
  os_l[li] = s.y;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k /= 2u) {
    if (li < k) {
      let ma = os_m[li];
      let mb = os_m[li + k];
      let mx = max(ma, mb);
      os_l[li] = os_l[li] * exp(ma - mx) + os_l[li + k] * exp(mb - mx);
      os_m[li] = mx;
    }
    workgroupBarrier();
  }
  let r = vec2<f32>(os_m[0], os_l[0]);
  workgroupBarrier();  // every invocation has read r before a later call overwrites the arrays
  return r;
}

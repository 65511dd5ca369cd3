// Workgroup tree reductions, shared by the WGSL kernels that start with `#include "workgroup_reduce.wgsl"`
// (cmake/embed_text.cmake appends this file to them at embed time: WGSL has no includes). The kernel
// declares `override WG: u32`, its 1-D workgroup size, a power of two. Pairs are added in a fixed order,
// so results are deterministic run to run.
var<workgroup> wg_red: array<f32, WG>;

// The sum (is_max false) or the maximum of v over the workgroup, returned to every invocation; li is the
// caller's local_invocation_index. Contains barriers: call it from uniform control flow.
fn wg_reduce(v: f32, li: u32, is_max: bool) -> f32 {
  wg_red[li] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    if (li < s) {
      if (is_max) { wg_red[li] = max(wg_red[li], wg_red[li + s]); } else { wg_red[li] += wg_red[li + s]; }
    }
    workgroupBarrier();
  }
  let r = wg_red[0];
  workgroupBarrier();  // every invocation has read r before the next call overwrites wg_red
  return r;
}
fn wg_sum(v: f32, li: u32) -> f32 { return wg_reduce(v, li, false); }
fn wg_max(v: f32, li: u32) -> f32 { return wg_reduce(v, li, true); }

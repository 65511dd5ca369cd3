// adamw_q4gsw_step for K % 4 == 0 (adamw_q4gsw_body.wgsl): a row's four elements start on a vec4, so each
// thread reads and writes them as one 16-byte access per array (on Vulkan the same kernel with scalar
// accesses took 2.3 ms of the base step's update where vec4 accesses take 1.4).
#include "adamw.wgsl"
#include "q4gsw_code.wgsl"
#include "adamw_q4gsw_body.wgsl"
@group(0) @binding(0) var<storage, read_write> L: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> Mo: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> Vo: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> G: array<vec4<f32>>;

fn load_row(i0: u32, valid: u32) -> Row {
  let j = i0 / 4u;
  return Row(L[j], Mo[j], Vo[j], G[j]);
}

fn store_row(i0: u32, valid: u32, row: Row) {
  let j = i0 / 4u;
  L[j] = row.l;
  Mo[j] = row.m;
  Vo[j] = row.v;
  G[j] = vec4<f32>(0.0);
}

// A 4-bit weight's update in one pass instead of adamw_step then q4gsw_requant (adamw_q4gsw_body.wgsl),
// reading and writing a row's four elements one by one: any K. adamw_q4gsw_step_vec4.wgsl takes K % 4 == 0.
#include "adamw.wgsl"
#include "q4gsw_code.wgsl"
#include "adamw_q4gsw_body.wgsl"
@group(0) @binding(0) var<storage, read_write> L: array<f32>;
@group(0) @binding(1) var<storage, read_write> Mo: array<f32>;
@group(0) @binding(2) var<storage, read_write> Vo: array<f32>;
@group(0) @binding(3) var<storage, read_write> G: array<f32>;

fn load_row(i0: u32, valid: u32) -> Row {
  var row: Row;
  for (var b = 0u; b < valid; b++) {
    row.l[b] = L[i0 + b];
    row.m[b] = Mo[i0 + b];
    row.v[b] = Vo[i0 + b];
    row.g[b] = G[i0 + b];
  }
  return row;
}

fn store_row(i0: u32, valid: u32, row: Row) {
  for (var b = 0u; b < valid; b++) {
    L[i0 + b] = row.l[b];
    Mo[i0 + b] = row.m[b];
    Vo[i0 + b] = row.v[b];
    G[i0 + b] = 0.0;
  }
}

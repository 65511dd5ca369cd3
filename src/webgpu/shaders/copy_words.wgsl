// A plain copy of n4 16-byte vectors (dim_order_copy between equal dtypes when the byte count is a multiple
// of 16; ops_copy.cpp). Memory-bound: each thread moves four vectors, loads before stores, so a GPU has
// enough bytes in flight to approach its bandwidth.
struct Params { n4: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read> X: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> O: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  let base = (wid.y * nwg.x + wid.x) * 1024u + lid.x;
  var v: array<vec4<u32>, 4>;
  for (var j = 0u; j < 4u; j++) {
    let i = base + 256u * j;
    if (i < p.n4) { v[j] = X[i]; }
  }
  for (var j = 0u; j < 4u; j++) {
    let i = base + 256u * j;
    if (i < p.n4) { O[i] = v[j]; }
  }
}

// coef = min(1, max_norm / (norm + 1e-6)); a NaN norm gives NaN (tested on the bits).
struct Params { max_idx: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read> N: array<f32>;
@group(0) @binding(1) var<storage, read_write> O: array<f32>;
@group(0) @binding(2) var<storage, read> scalars: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(1)
fn main() {
  let norm = N[0];
  if ((bitcast<u32>(norm) & 0x7FFFFFFFu) > 0x7F800000u) {
    O[0] = norm;
    return;
  }
  O[0] = min(1.0, scalars[p.max_idx] / (norm + 1e-6));
}

// What the two fused cross-entropy kernels share (fused_ce.wgsl streams a row twice, fused_ce_reg.wgsl
// holds it in registers): parameters, bindings, the logits read and the rows whose label is not a class.
// IN_PLACE: dlogits is the logits buffer, bound once read_write (WebGPU forbids a writable binding
// aliasing another), and the logits binding holds a dummy.
override IN_PLACE: bool = false;
struct Params { R: u32, V: u32, n_valid_idx: u32, nan_bits: u32 }  // nan_bits: WGSL has no NaN constant
@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> labels: array<i32>;
@group(0) @binding(2) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;
@group(0) @binding(4) var<storage, read> scalars: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

fn ld(i: u32) -> f32 {
  if (IN_PLACE) { return dlogits[i]; }
  return logits[i];
}

// Row r (at base) with label y < 0 (ignored: zeros) or y >= V (a NaN row and loss make the mistake
// visible) is written here, and true returned; false for a class label.
fn label_outside(r: u32, base: u32, y: i32, li: u32) -> bool {
  if (y >= 0 && u32(y) < p.V) { return false; }
  var v = 0.0;
  if (y >= 0) { v = bitcast<f32>(p.nan_bits); }
  for (var j = li; j < p.V; j += WG) { dlogits[base + j] = v; }
  if (li == 0u) { partial[r] = v; }
  return true;
}

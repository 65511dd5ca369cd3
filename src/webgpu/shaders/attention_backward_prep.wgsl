// The rows' part of the attention backward on WebGPU (attention_backward.wgsl reads it): one invocation per
// query row (b, h, t) copies lse and computes D = rowsum(dout * out) into AUX = [lse | D], each [B, H, T]
// (f32 bits in u32 words). HAS_POS (sample packing): the rows of head 0 also write each query's first key
// t - clamp(pos[b, t], 0, t) after them, [B, T]. A separate kernel because WebGPU guarantees only 8
// storage buffers per kernel (Vulkan's dq kernel computes D itself and reads pos directly).
override HAS_POS: bool = false;
struct Params { B: u32, T: u32, H: u32, hd: u32 }
@group(0) @binding(0) var<storage, read> DOUT: array<f32>;
@group(0) @binding(1) var<storage, read> OUT: array<f32>;
@group(0) @binding(2) var<storage, read> LSE: array<f32>;
@group(0) @binding(3) var<storage, read> tok_pos: array<i32>;  // [B, T], a dummy unless HAS_POS
@group(0) @binding(4) var<storage, read_write> AUX: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wgid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let row = (wgid.y * nwg.x + wgid.x) * 64u + li;  // (b * H + h) * T + t
  let n = p.B * p.H * p.T;
  if (row >= n) { return; }
  let t = row % p.T;
  let bh = row / p.T;
  let b = bh / p.H;
  let h = bh - b * p.H;
  let base = ((b * p.T + t) * p.H + h) * p.hd;
  var d = 0.0;
  for (var e = 0u; e < p.hd; e++) { d += DOUT[base + e] * OUT[base + e]; }
  AUX[row] = bitcast<u32>(LSE[row]);
  AUX[n + row] = bitcast<u32>(d);
  if (HAS_POS && h == 0u) { AUX[2u * n + b * p.T + t] = t - u32(clamp(tok_pos[b * p.T + t], 0, i32(t))); }
}

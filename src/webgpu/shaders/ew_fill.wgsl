// fill: every element = the scalar converted to the output dtype, one thread per output word.
// DT: 0 f32, 1 i32 (truncate, NaN -> 0, saturate), 2 u32 (truncate, NaN/negative -> 0, saturate),
// 3 u8 (as u32 but up to 255, four per word), 4 bool (value != 0, NaN -> true, four per word).
override DT: u32 = 0u;
struct Params { words: u32, v_idx: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read_write> O: array<u32>;
@group(0) @binding(1) var<storage, read> scalars: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

fn sat_u(v: f32, hi: f32, hi_u: u32) -> u32 {
  let t = trunc(v);
  if (!(t > 0.0)) { return 0u; }   // NaN, zero, negatives
  if (t >= hi) { return hi_u; }
  return u32(t);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.y * nwg.x * 64u + gid.x;
  if (w >= p.words) { return; }
  let v = scalars[p.v_idx];
  let bits = bitcast<u32>(v);
  let nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  var word = 0u;
  switch (DT) {
    case 0u: { word = bits; }
    case 1u: {
      let t = trunc(v);
      if (nan) { word = 0u; }
      else if (t >= 2147483648.0) { word = 0x7FFFFFFFu; }
      else if (t <= -2147483648.0) { word = 0x80000000u; }
      else { word = bitcast<u32>(i32(t)); }
    }
    case 2u: { word = sat_u(v, 4294967296.0, 0xFFFFFFFFu); }
    case 3u: { word = sat_u(v, 255.0, 255u) * 0x01010101u; }
    default: { word = select(0u, 0x01010101u, (bits & 0x7FFFFFFFu) != 0u); }
  }
  O[w] = word;
}

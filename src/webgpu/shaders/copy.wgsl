// Copies with an index map and dtype conversion, one thread per output word: out element o (a 4-D index
// over the output shape) reads x at dot(index, stride) (strides give permutations, broadcasts or plain
// copies). SRC/DST: 0 f32, 1 i32, 2 raw 4-byte, 3 raw byte, 4 bool. Byte outputs pack four per word.
// Conversions follow the reference: f32 -> i32 truncates (NaN -> 0, saturating), -> bool is x != 0
// (NaN -> true), bool -> number is 0/1.
override SRC: u32 = 2u;
override DST: u32 = 2u;
override WG: u32 = 64u;
struct Params { n: u32, words: u32, pad0: u32, pad1: u32, shape: vec4<u32>, stride: vec4<u32> }
@group(0) @binding(0) var<storage, read> X: array<u32>;
@group(0) @binding(1) var<storage, read_write> O: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

fn src_offset(o: u32) -> u32 {
  var rem = o;
  let i3 = rem % p.shape.w; rem /= p.shape.w;
  let i2 = rem % p.shape.z; rem /= p.shape.z;
  let i1 = rem % p.shape.y; rem /= p.shape.y;
  return dot(vec4<u32>(rem, i1, i2, i3), p.stride);
}
fn src_byte(off: u32) -> u32 { return (X[off / 4u] >> (8u * (off % 4u))) & 0xFFu; }

// The source element as bits of the destination type.
fn convert(off: u32) -> u32 {
  if (SRC == DST || (SRC == 3u && DST == 4u) || (SRC == 4u && DST == 3u)) {
    if (SRC >= 3u) { return src_byte(off); }
    return X[off];
  }
  if (SRC == 4u || SRC == 3u) {
    let b = src_byte(off) != 0u;
    if (DST == 0u) { return bitcast<u32>(select(0.0, 1.0, b)); }
    return select(0u, 1u, b);
  }
  let bits = X[off];
  if (DST == 4u) {
    if (SRC == 0u) { return select(0u, 1u, (bits & 0x7FFFFFFFu) != 0u); }
    return select(0u, 1u, bits != 0u);
  }
  if (SRC == 1u && DST == 0u) { return bitcast<u32>(f32(bitcast<i32>(bits))); }
  // f32 -> i32
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) { return 0u; }
  let t = trunc(bitcast<f32>(bits));
  if (t >= 2147483648.0) { return 0x7FFFFFFFu; }
  if (t <= -2147483648.0) { return 0x80000000u; }
  return bitcast<u32>(i32(t));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.y * nwg.x * WG + gid.x;
  if (w >= p.words) { return; }
  if (DST < 3u) {
    O[w] = convert(src_offset(w));
    return;
  }
  var word = 0u;
  for (var b = 0u; b < 4u; b++) {
    let e = w * 4u + b;
    if (e >= p.n) { break; }
    word |= (convert(src_offset(e)) & 0xFFu) << (8u * b);
  }
  O[w] = word;
}

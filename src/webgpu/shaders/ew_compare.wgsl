// Comparisons with a scalar (eq, ne, lt, le, gt, ge; x f32 or i32) and logical_not, writing bool bytes.
// One thread per output word of four bools, so no two threads write one word. An i32 x is compared
// exactly with the f32 scalar (via its floor/ceil, as integers), never through a rounding conversion.
// OP: 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge, 6 logical_not. X_INT: x is i32.
override OP: u32 = 0u;
override X_INT: bool = false;
struct Params { n: u32, s_idx: u32, words: u32, pad: u32 }
@group(0) @binding(0) var<storage, read> X: array<u32>;
@group(0) @binding(1) var<storage, read_write> O: array<u32>;
@group(0) @binding(2) var<storage, read> scalars: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn is_nan(b: u32) -> bool { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

// A u32 whose unsigned order is the numeric order of the (non-NaN) f32 bits; -0 and +0 map together.
fn order_key(b: u32) -> u32 {
  if ((b & 0x7FFFFFFFu) == 0u) { return 0x80000000u; }
  if ((b & 0x80000000u) != 0u) { return ~b; }
  return b | 0x80000000u;
}

// floor/ceil that stay exact for denormal s (which a device may flush to zero before rounding).
fn is_denormal(b: u32) -> bool { return (b & 0x7F800000u) == 0u && (b & 0x007FFFFFu) != 0u; }
fn floor_x(s: f32) -> f32 {
  let b = bitcast<u32>(s);
  if (is_denormal(b)) { return select(0.0, -1.0, (b & 0x80000000u) != 0u); }
  return floor(s);
}
fn ceil_x(s: f32) -> f32 {
  let b = bitcast<u32>(s);
  if (is_denormal(b)) { return select(1.0, 0.0, (b & 0x80000000u) != 0u); }
  return ceil(s);
}

// x < s for an integer x: x < ceil(s); saturates outside the i32 range.
fn int_lt(x: i32, s: f32) -> bool {
  let c = ceil_x(s);
  if (c > 2147483520.0) { return true; }    // ceil(s) >= 2^31 (the largest f32 below 2^31 is 2147483520)
  if (c < -2147483648.0) { return false; }
  return x < i32(c);
}
fn int_gt(x: i32, s: f32) -> bool {
  let f = floor_x(s);
  if (f < -2147483648.0) { return true; }
  if (f > 2147483520.0) { return false; }
  return x > i32(f);
}

fn test1(bits: u32, s: f32) -> bool {
  let sbits = bitcast<u32>(s);
  if (X_INT) {
    let x = bitcast<i32>(bits);
    if (is_nan(sbits)) { return OP == 1u; }
    let lt = int_lt(x, s);
    let gt = int_gt(x, s);
    switch (OP) {
      case 0u: { return !lt && !gt; }
      case 1u: { return lt || gt; }
      case 2u: { return lt; }
      case 3u: { return !gt; }
      case 4u: { return gt; }
      default: { return !lt; }
    }
  }
  if (is_nan(bits) || is_nan(sbits)) { return OP == 1u; }
  // Ordered on the bits, so denormals compare exactly even where the device flushes them to zero.
  let kx = order_key(bits);
  let ks = order_key(sbits);
  switch (OP) {
    case 0u: { return kx == ks; }
    case 1u: { return kx != ks; }
    case 2u: { return kx < ks; }
    case 3u: { return kx <= ks; }
    case 4u: { return kx > ks; }
    default: { return kx >= ks; }
  }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.y * nwg.x * 64u + gid.x;
  if (w >= p.words) { return; }
  var word = 0u;
  for (var b = 0u; b < 4u; b++) {
    let e = w * 4u + b;
    if (e >= p.n) { break; }
    var t = false;
    if (OP == 6u) {
      t = ((X[e / 4u] >> (8u * (e % 4u))) & 0xFFu) == 0u;
    } else {
      t = test1(X[e], scalars[p.s_idx]);
    }
    if (t) { word |= 1u << (8u * b); }
  }
  O[w] = word;
}

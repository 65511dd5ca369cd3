// rope / rope_backward on x [B, T, H, D] (or [T, H, D]): pair i = (x[2i], x[2i+1]) at position
// p = t + pos_offset rotates by a = ±p * theta^(-2i/D). One invocation per (b, t, pair) computes the angle
// once and rotates that pair in all H heads; a dispatch covers pairs [first, first + pairs).
// Precision: the reference computes a in double, and an fp32 product p * freq is off by ~p * 6e-8 rad.
// So the angle is reduced modulo one turn in exact integer fixed point: the encoder passes each pair's
// frequency in turns, F = freq / (2 pi), as a 64-bit binary fraction (hi, lo) computed on the host; the
// integer part of p times F and the fractional part of p (as a 32-bit fraction) times F are summed modulo
// 1 with u32 arithmetic, so no floating-point contraction or reassociation by a compiler can change it.
// The reduced angle (|s| <= pi/4) goes through short sin/cos polynomials (WGSL's sin/cos have no
// accuracy bound that would do). THETA_SLOT (theta is a per-replay slot, so no host table): F is derived
// on the GPU from fp32 exp2/log2, accurate to ~1e-7 relative in the frequency only. FREQS (rope's freqs
// input): F is that fp32 frequency times 1/(2 pi), formed exactly in integer arithmetic on the GPU.
// POS (rope's pos input, packed samples): the position is pos[b, t] + pos_offset instead of t + pos_offset.
override BACKWARD: bool = false;
override THETA_SLOT: bool = false;
override FREQS: bool = false;
override POS: bool = false;
override WG: u32 = 64u;
struct Params {
  n: u32,       // B*T*pairs invocations
  T: u32,
  H: u32,
  D: u32,
  first: u32,   // first pair of this dispatch
  pairs: u32,   // pairs handled by this dispatch (<= 512)
  theta_idx: u32,
  pos_idx: u32,
  freq: array<vec4<u32>, 256>,  // pair first + 2j: (hi, lo) in .xy, pair first + 2j + 1 in .zw
}
@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read> freqs: array<f32>;  // a dummy unless FREQS
@group(0) @binding(2) var<storage, read> tok_pos: array<i32>;  // [B*T], a dummy unless POS
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
@group(0) @binding(4) var<storage, read> scalars: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

// a * b as a 64-bit value (lo, hi).
fn mul64(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xFFFFu;
  let a1 = a >> 16u;
  let b0 = b & 0xFFFFu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let mid = (p00 >> 16u) + (p01 & 0xFFFFu) + (p10 & 0xFFFFu);
  let lo = (mid << 16u) | (p00 & 0xFFFFu);
  let hi = a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
  return vec2<u32>(lo, hi);
}
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn neg64(a: vec2<u32>) -> vec2<u32> { return add64(~a, vec2<u32>(1u, 0u)); }

// 1/(2 pi) as a 96-bit binary fraction, least significant word first.
const INV_2PI = vec3<u32>(0x7f09d5f4u, 0x9391054au, 0x28be60dbu);

// The fp32 frequency f (radians per position) in turns mod 1, as a 64-bit fraction (lo, hi): with
// f = m * 2^(e - 150) (m the 24-bit significand), f / (2 pi) * 2^64 = (m * INV_2PI) >> (182 - e), a 120-bit
// product shifted right. Exact but for INV_2PI's truncation (2^-96 relative). Zero and subnormal f give 0;
// so do f >= 2^32 (and inf/NaN), which no rotary embedding has.
fn turns_of(f: f32) -> vec2<u32> {
  let bits = bitcast<u32>(abs(f));
  let e = bits >> 23u;
  if (e == 0u || e >= 159u) { return vec2<u32>(0u, 0u); }
  let m = (bits & 0x7FFFFFu) | 0x800000u;
  let p0 = mul64(m, INV_2PI.x);
  let p1 = mul64(m, INV_2PI.y);
  let p2 = mul64(m, INV_2PI.z);
  let s1 = add64(vec2<u32>(p0.y, 0u), vec2<u32>(p1.x, 0u));  // word 1 and its carry
  let s2 = add64(add64(vec2<u32>(p1.y, 0u), vec2<u32>(p2.x, 0u)), vec2<u32>(s1.y, 0u));
  var w = array<u32, 8>(p0.x, s1.x, s2.x, p2.y + s2.y, 0u, 0u, 0u, 0u);
  let sh = 182u - e;  // 24..181
  let ws = sh / 32u;
  let bs = sh % 32u;
  // (a >> bs) | (b << (32 - bs)), the second term absent when bs = 0 (a shift by 32 is taken mod 32).
  let lo = (w[ws] >> bs) | select(0u, w[ws + 1u] << (32u - bs), bs != 0u);
  let hi = (w[ws + 1u] >> bs) | select(0u, w[ws + 2u] << (32u - bs), bs != 0u);
  if (f < 0.0) { return neg64(vec2<u32>(lo, hi)); }
  return vec2<u32>(lo, hi);
}

// Frequency of pair i in turns, as a 64-bit fraction (lo, hi).
fn turns(i: u32) -> vec2<u32> {
  if (FREQS) { return turns_of(freqs[i]); }
  if (THETA_SLOT) {
    let freq = exp2(-f32(2u * i) / f32(p.D) * log2(scalars[p.theta_idx]));
    let f = fract(freq * 0.15915494309189535);
    let hi = f * 4294967296.0;
    let h = min(floor(hi), 4294967295.0);
    return vec2<u32>(u32(min((hi - h) * 4294967296.0, 4294967295.0)), u32(h));
  }
  let j = i - p.first;
  let v = p.freq[j / 2u];
  if ((j & 1u) == 0u) { return vec2<u32>(v.y, v.x); }
  return vec2<u32>(v.w, v.z);
}

// sin and cos of |s| <= ~pi/4 (Taylor to s^9 / s^10; truncation < 2e-10).
fn sincos_small(s: f32) -> vec2<f32> {
  let z = s * s;
  let sn = s + s * z * (-1.0 / 6.0 + z * (1.0 / 120.0 + z * (-1.0 / 5040.0 + z * (1.0 / 362880.0))));
  let cs = 1.0 + z * (-0.5 + z * (1.0 / 24.0 + z * (-1.0 / 720.0 + z * (1.0 / 40320.0 + z * (-1.0 / 3628800.0)))));
  return vec2<f32>(sn, cs);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let q = gid.y * nwg.x * WG + gid.x;
  if (q >= p.n) { return; }
  let i = p.first + q % p.pairs;
  let bt = q / p.pairs;
  let t = bt % p.T;
  let F = turns(i);

  // p = P + f with P an integer and f in [0, 1).
  let off = scalars[p.pos_idx];
  let fl = floor(off);
  var tp = i32(t);
  if (POS) { tp = tok_pos[bt]; }
  var P = i32(fl) + tp;
  var f = off - fl;
  if (f >= 1.0) {
    f = 0.0;
    P += 1;
  }
  // P * F mod 1: the integer part of P * F.hi * 2^-32 drops out.
  let Pa = u32(abs(P));
  let mh = mul64(Pa, F.y);
  var rev = add64(vec2<u32>(0u, mh.x), mul64(Pa, F.x));
  if (P < 0) { rev = neg64(rev); }
  // f * F with f as a 32-bit fraction: q * F.hi * 2^-64 + q * F.lo * 2^-96.
  let fq = u32(f * 4294967296.0);
  rev = add64(rev, add64(mul64(fq, F.y), vec2<u32>(mul64(fq, F.x).y, 0u)));

  // rev = k/4 + s/(2 pi) with |s| <= pi/4: add 1/8 turn, take the quarter k, centre the remainder.
  let w = add64(rev, vec2<u32>(0u, 0x20000000u));
  let k = w.y >> 30u;
  let rem_hi = i32(w.y & 0x3FFFFFFFu) - 0x20000000;
  let s = (f32(rem_hi) + f32(w.x) * 2.3283064365386963e-10) * 1.4629180792671596e-09;
  let sc = sincos_small(s);
  var sn = sc.x;
  var cs = sc.y;
  if (k == 1u) { sn = sc.y; cs = -sc.x; }
  else if (k == 2u) { sn = -sc.x; cs = -sc.y; }
  else if (k == 3u) { sn = -sc.y; cs = sc.x; }
  if (BACKWARD) { sn = -sn; }

  var base = bt * p.H * p.D + 2u * i;
  for (var h = 0u; h < p.H; h++) {
    let x0 = X[base];
    let x1 = X[base + 1u];
    Y[base] = x0 * cs - x1 * sn;
    Y[base + 1u] = x0 * sn + x1 * cs;
    base += p.D;
  }
}

// Re-quantizes fp32 latent weights [N, K] into W_4X8 words with frozen scales. Each latent is first clamped
// in place into [-8.5s, 7.5s] (single products, so the same bounds as every backend; NaN stays) and written
// back only where that changed it; then code = clamp(roundEven(latent / s), -8, 7) + 8, code 8 where s == 0,
// latent is NaN, or the nibble is padding.
// One thread per output word. WGSL division need not be correctly rounded, and a quotient one ulp off
// flips an exact .5 tie, so the quotient is computed exactly: a 24-bit integer long division of the
// mantissas gives the correctly rounded fp32 quotient whenever it matters (0.5 <= |q| < 16); outside that
// range the code is 8 or the clamp limit regardless of rounding.
struct Params { N: u32, K: u32, gs: u32, N8: u32, words: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> L: array<f32>;
@group(0) @binding(1) var<storage, read> S: array<f32>;
@group(0) @binding(2) var<storage, read_write> Wout: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

// (mantissa with the leading bit at 2^23, exponent e) so that |x| = mant * 2^(e - 23); x finite, non-zero.
fn split(b: u32) -> vec2<i32> {
  let ex = i32((b >> 23u) & 0xFFu);
  var m = b & 0x7FFFFFu;
  if (ex == 0) {  // subnormal: normalize
    let sh = countLeadingZeros(m) - 8u;
    return vec2<i32>(i32(m << sh), -126 - i32(sh));
  }
  return vec2<i32>(i32(m | 0x800000u), ex - 127);
}

fn code_of(lat: f32, s: f32) -> u32 {
  let lb = bitcast<u32>(lat);
  let sb = bitcast<u32>(s);
  let labs = lb & 0x7FFFFFFFu;
  let sabs = sb & 0x7FFFFFFFu;
  if (sabs == 0u || labs > 0x7F800000u || sabs > 0x7F800000u) { return 8u; }  // s == 0, NaN latent or scale
  let neg = ((lb ^ sb) & 0x80000000u) != 0u;
  var q = 0.0;  // |fl(latent / s)| rounded to an integer, for the cases that matter
  if (labs == 0x7F800000u) {
    if (sabs == 0x7F800000u) { return 8u; }  // inf / inf is NaN
    q = 16.0;
  } else if (sabs == 0x7F800000u || labs == 0u) {
    q = 0.0;
  } else {
    let a = split(labs);
    let d = split(sabs);
    var num = u32(a.x);
    let den = u32(d.x);
    var e = a.y - d.y;
    if (num < den) { num <<= 1u; e -= 1; }   // now 1 <= num/den < 2 and |q| = (num/den) * 2^e
    if (e < -1) {
      q = 0.0;                                // |q| < 0.5 rounds to 0 whatever the last bit
    } else if (e >= 4) {
      q = 16.0;                               // |q| >= 16 clamps
    } else {
      var quo = 0u;
      var rem = num;
      for (var i = 0u; i < 24u; i++) {
        quo <<= 1u;
        if (rem >= den) { rem -= den; quo |= 1u; }
        rem <<= 1u;
      }
      if (rem > den || (rem == den && (quo & 1u) == 1u)) { quo += 1u; }  // round to nearest even
      let fq = ldexp(f32(quo), e - 23);       // exact: quo <= 2^24 and the result is in [0.5, 16]
      q = round(fq);                          // WGSL round: half to even
    }
  }
  var c = i32(min(q, 16.0));
  if (neg) { c = -c; }
  return u32(clamp(c, -8, 7) + 8);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = gid.y * nwg.x * 64u + gid.x;
  if (w >= p.words) { return; }
  let blk = w / 4u;
  let jw = w % 4u;
  let k4 = blk / p.N8;
  let n8 = blk % p.N8;
  var word = 0u;
  for (var b = 0u; b < 4u; b++) {
    let k = k4 * 4u + b;
    for (var h = 0u; h < 2u; h++) {
      let n = n8 * 8u + 2u * jw + h;
      var c = 8u;
      if (n < p.N && k < p.K) {
        let i = n * p.K + k;
        let s = S[(k / p.gs) * p.N + n];
        let x = L[i];
        let lo = -8.5 * s;
        let hi = 7.5 * s;
        var xc = x;  // NaN (told by its bits: a compiler may turn the selects into min/max) stays
        if ((bitcast<u32>(x) & 0x7FFFFFFFu) <= 0x7F800000u) {
          if (x < lo) { xc = lo; } else if (x > hi) { xc = hi; }
        }
        if (bitcast<u32>(xc) != bitcast<u32>(x)) { L[i] = xc; }
        c = code_of(x, s);  // the same code as xc's: clamping stays within the code's rounding interval
      }
      word |= c << (8u * b + 4u * h);
    }
  }
  Wout[w] = word;
}

// q4gsw_requant's code of one latent: clamp(roundEven(latent / s), -8, 7) + 8, 8 where s == 0 or a NaN is
// involved. WGSL division need not be correctly rounded, and a quotient one ulp off flips an exact .5 tie,
// so where that could matter (near a .5 boundary, subnormals) the quotient is computed exactly: a 24-bit
// integer long division of the mantissas gives the correctly rounded fp32 quotient (0.5 <= |q| < 16);
// outside that range the code is 8 or the clamp limit regardless of rounding. Included by q4gsw_requant.wgsl and adamw_q4gsw_step.wgsl.

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

// |fl(a / s)| rounded (saturated at 16) from the device's division where that decides it, -1 elsewhere:
// for a and s normal with 2^-126 <= s < 2^126 WGSL's division is within 2.5 ulp of a/s, so a quotient
// >= 16 (clamped) or more than 2^-14 from a rounding boundary k + 0.5 rounds as the exact one. Subnormals
// (a device may flush them) and quotients near a boundary take the exact division.
fn fast_quotient(labs: u32, sabs: u32) -> f32 {
  if (labs < 0x00800000u || sabs < 0x00800000u || sabs >= 0x7E800000u) { return -1.0; }
  let x = bitcast<f32>(labs) / bitcast<f32>(sabs);
  if (x >= 16.0) { return 16.0; }
  if (abs(fract(x) - 0.5) <= 0.00006103515625) { return -1.0; }  // 2^-14
  return floor(x + 0.5);  // not a tie: floor(x) or floor(x) + 1
}

// |a / s| correctly rounded to fp32, then rounded half to even (saturated at 16), by integer long division
// of the mantissas; a, s finite and non-zero.
fn exact_quotient(labs: u32, sabs: u32) -> f32 {
  let a = split(labs);
  let d = split(sabs);
  var num = u32(a.x);
  let den = u32(d.x);
  var e = a.y - d.y;
  if (num < den) { num <<= 1u; e -= 1; }  // now 1 <= num/den < 2 and |q| = (num/den) * 2^e
  if (e < -1) { return 0.0; }             // |q| < 0.5 rounds to 0 whatever the last bit
  if (e >= 4) { return 16.0; }            // |q| >= 16 clamps
  var quo = 0u;
  var rem = num;
  for (var i = 0u; i < 24u; i++) {
    quo <<= 1u;
    if (rem >= den) { rem -= den; quo |= 1u; }
    rem <<= 1u;
  }
  if (rem > den || (rem == den && (quo & 1u) == 1u)) { quo += 1u; }  // round to nearest even
  return round(ldexp(f32(quo), e - 23));  // exact in [0.5, 16], then WGSL round: half to even
}

// A latent clamped into [-8.5s, 7.5s], the range whose codes are -8..7 (single products: the same bounds
// on every backend). NaN stays, told by its bits: a compiler may turn the selects into min/max.
fn clamp_to_code_range(x: f32, s: f32) -> f32 {
  if ((bitcast<u32>(x) & 0x7FFFFFFFu) > 0x7F800000u) { return x; }
  let lo = -8.5 * s;
  let hi = 7.5 * s;
  if (x < lo) { return lo; }
  if (x > hi) { return hi; }
  return x;
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
    q = fast_quotient(labs, sabs);
    if (q < 0.0) { q = exact_quotient(labs, sabs); }
  }
  var c = i32(min(q, 16.0));
  if (neg) { c = -c; }
  return u32(clamp(c, -8, 7) + 8);
}

// q4gsw_requant's code of one latent: clamp(roundEven(fl(latent / s)), -8, 7) + 8, bit-exact with the
// reference even at .5 ties: GLSL division may be off by a few ulp, so where that could change the code
// (near a .5 boundary, subnormals) the correctly rounded quotient is rebuilt with integer long division on
// the mantissas; s == 0, a NaN or x/inf give 8. Included by q4gsw_requant.comp and adamw_q4gsw_step.comp.

// Finite non-zero |x| = m * 2^e with m in [2^23, 2^24) (subnormals normalized).
void decompose(uint bits, out uint m, out int e) {
  uint ex = (bits >> 23) & 0xffu, fr = bits & 0x7fffffu;
  if (ex == 0u) {
    int sh = 23 - findMSB(fr);
    m = fr << uint(sh);
    e = -149 - sh;
  } else {
    m = fr | 0x800000u;
    e = int(ex) - 150;
  }
}

// roundEven(fl(a / s)) for finite non-zero a, s > 0, saturated to 9 (enough for the clamp to 7).
int rounded_quotient(uint abits, uint sbits) {
  uint ma, ms;
  int ea, es;
  decompose(abits, ma, ea);
  decompose(sbits, ms, es);
  int d = ea - es;  // a/s = (ma/ms) * 2^d with ma/ms in (1/2, 2)
  if (d >= 5) return 9;   // a/s > 16
  if (d <= -3) return 0;  // a/s < 1/4
  uint q = ma >= ms ? 1u : 0u, rem = ma - q * ms;
  for (int i = 0; i < 26; ++i) {  // q = floor(ma * 2^26 / ms), in [2^25, 2^27)
    rem <<= 1;
    q <<= 1;
    if (rem >= ms) {
      rem -= ms;
      q |= 1u;
    }
  }
  int drop = findMSB(q) - 23;  // keep 24 significant bits, round half to even with the sticky remainder
  uint qr = q >> uint(drop), low = q & ((1u << uint(drop)) - 1u), half_ = 1u << uint(drop - 1);
  if (low > half_ || (low == half_ && (rem != 0u || (qr & 1u) == 1u))) qr += 1u;
  float f = ldexp(float(qr), d - 26 + drop);  // exact: fl(a/s)
  return int(roundEven(f));
}

// roundEven(fl(a / s)) saturated to 16, from the device's division where that is certain: for normal a
// and s with 2^-126 <= s < 2^126 the division is within 2.5 ulp of a/s (Vulkan's precision rule), so a
// quotient below 16 that lies more than 2^-14 from a rounding boundary k + 0.5 rounds as the exact one
// does. False (the caller divides exactly) for subnormals, which a device may flush, and near boundaries.
bool fast_quotient(uint aa, uint sa, out int q) {
  q = 0;
  if (aa < 0x00800000u || sa < 0x00800000u || sa >= 0x7e800000u) return false;
  const float x = uintBitsToFloat(aa) / uintBitsToFloat(sa);
  if (x >= 16.0) {
    q = 16;
    return true;
  }
  const float f = x - floor(x);
  if (abs(f - 0.5) <= 0.00006103515625) return false;  // 2^-14
  q = int(floor(x)) + (f > 0.5 ? 1 : 0);
  return true;
}

// A latent clamped into [-8.5s, 7.5s], the range whose codes are -8..7 (single products: the same bounds
// on every backend). NaN stays, told by its bits: drivers may turn the selects into min/max, which drop NaN.
float clamp_to_code_range(float x, float s) {
  precise const float lo = -8.5 * s, hi = 7.5 * s;
  if ((floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u) return x;
  return x < lo ? lo : (x > hi ? hi : x);
}

uint requant_code(float a, float s) {
  uint ab = floatBitsToUint(a), sb = floatBitsToUint(s);
  uint aa = ab & 0x7fffffffu, sa = sb & 0x7fffffffu;
  if (sa == 0u) return 8u;                              // s == 0
  if (aa > 0x7f800000u || sa > 0x7f800000u) return 8u;  // NaN
  if (sa == 0x7f800000u) return 8u;                     // x/inf = 0, inf/inf = NaN
  bool neg = ((ab ^ sb) & 0x80000000u) != 0u;
  int q;
  if (aa == 0x7f800000u) q = 9;  // inf / finite
  else if (aa == 0u) q = 0;
  else if (!fast_quotient(aa, sa, q)) q = rounded_quotient(aa, sa);
  int v = clamp(neg ? -q : q, -8, 7);
  return uint(v + 8);
}

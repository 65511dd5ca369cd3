// q4gsw_requant: latent fp32 [N,K] -> W_4X8 codes, one thread per u32 word (4 k x 2 n). Each latent is first
// clamped in place into [-8.5s, 7.5s] (the bounds are single products, so the same on every backend; NaN
// stays), and written back only where that changed it. Bit-exact with the reference
// c = clamp(roundEven(fl(latent/s)), -8, 7) + 8 even at .5 ties: GLSL division may be off by a few ulp, so
// the correctly rounded quotient is rebuilt with integer long division on the mantissas.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer BufL { float L[]; };
layout(set = 0, binding = 1) readonly buffer BufS { float S[]; };
layout(set = 0, binding = 2) writeonly buffer BufW { uint W[]; };
layout(set = 0, binding = 3) writeonly buffer BufLo { float Lo[]; };  // the same buffer as binding 0

layout(push_constant) uniform Push {
  uint N, K, N8, K4, G, gs, words;
} pc;

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
  else q = rounded_quotient(aa, sa);
  int v = clamp(neg ? -q : q, -8, 7);
  return uint(v + 8);
}

void main() {
  uint w = linear_group_id() * 64 + gl_LocalInvocationID.x;
  if (w >= pc.words) return;
  uint blk = w / 4, j = w % 4;
  uint k4 = blk / pc.N8, n8 = blk % pc.N8;
  uint word = 0u;
  for (uint p = 0; p < 2; ++p) {
    uint n = 8 * n8 + 2 * j + p;
    for (uint bk = 0; bk < 4; ++bk) {
      uint k = 4 * k4 + bk;
      uint c = 8u;
      if (n < pc.N && k < pc.K) {
        const uint i = n * pc.K + k;
        precise const float s = S[(k / pc.gs) * pc.N + n], x = L[i];
        precise const float lo = -8.5 * s, hi = 7.5 * s;
        // NaN is told by its bits: drivers may turn the selects below into min/max, which drop NaN.
        float xc = x;
        if ((floatBitsToUint(x) & 0x7fffffffu) <= 0x7f800000u) xc = x < lo ? lo : (x > hi ? hi : x);
        if (floatBitsToUint(xc) != floatBitsToUint(x)) Lo[i] = xc;
        c = requant_code(x, s);  // the same code as xc's: clamping stays within the code's rounding interval
      }
      word |= c << (8 * bk + 4 * p);
    }
  }
  W[w] = word;
}

// q4gsw format helpers: W_4X8 packing, interchange bytes, quantization (see include/edgetrain/q4gsw.h).
#include "edgetrain/q4gsw.h"

#include <cmath>

#include "edgetrain/error.h"
#include "edgetrain/half.h"

namespace edgetrain::q4 {

Geometry::Geometry(int64_t n, int64_t k, int64_t gs) : N(n), K(k), group_size(gs) {
  ET_CHECK(N >= 1 && K >= 1, "q4gsw: weight must be at least 1x1, got N=", N, " K=", K);
  ET_CHECK(gs > 0 && gs % 4 == 0, "q4gsw: group_size must be a positive multiple of 4, got ", gs);
  ET_CHECK(N <= (int64_t{1} << 31) && K <= (int64_t{1} << 31), "q4gsw: weight too large: N=", N, " K=", K);
}

std::vector<uint32_t> pack_w4x8(const Geometry& g, const uint8_t* codes) {
  std::vector<uint32_t> w(static_cast<size_t>(g.words()), 0x88888888u);  // padding = code 8 (value 0)
  const int64_t N8 = g.N8();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      uint32_t c = codes[n * g.K + k];
      ET_CHECK(c < 16, "q4gsw: code ", c, " at (", n, ", ", k, ") is not 4-bit");
      uint32_t& word = w[static_cast<size_t>(w4x8_word(n, k, N8))];
      int sh = w4x8_shift(n, k);
      word = (word & ~(0xFu << sh)) | (c << sh);
    }
  return w;
}

std::vector<uint8_t> unpack_w4x8(const Geometry& g, const uint32_t* words) {
  std::vector<uint8_t> codes(static_cast<size_t>(g.N * g.K));
  const int64_t N8 = g.N8();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      codes[n * g.K + k] = (words[w4x8_word(n, k, N8)] >> w4x8_shift(n, k)) & 0xF;
  return codes;
}

std::vector<uint8_t> codes_to_interchange(const Geometry& g, const uint8_t* codes) {
  const int64_t rb = g.interchange_row_bytes();
  std::vector<uint8_t> bytes(static_cast<size_t>(g.N * rb));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t j = 0; j < rb; ++j) {
      uint8_t lo = codes[n * g.K + 2 * j];
      uint8_t hi = 2 * j + 1 < g.K ? codes[n * g.K + 2 * j + 1] : 8;  // odd K: pad code 8 (value 0)
      ET_CHECK(lo < 16 && hi < 16, "q4gsw: code out of range at row ", n);
      bytes[n * rb + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  return bytes;
}

std::vector<uint8_t> interchange_to_codes(const Geometry& g, const uint8_t* bytes) {
  const int64_t rb = g.interchange_row_bytes();
  std::vector<uint8_t> codes(static_cast<size_t>(g.N * g.K));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) codes[n * g.K + k] = (bytes[n * rb + k / 2] >> (4 * (k % 2))) & 0xF;
  return codes;
}

uint8_t requant_code(float latent, float scale) {
  if (scale == 0.0f) return 8;
  float q = std::nearbyint(latent / scale);  // round half to even under the default rounding mode
  if (std::isnan(q)) return 8;               // a NaN latent gives value 0, never an undefined conversion
  q = std::fmin(std::fmax(q, -8.0f), 7.0f);
  return static_cast<uint8_t>(static_cast<int>(q) + 8);
}

namespace {

// The scale of a group with largest magnitude amax: amax / 7 rounded to fp16 (so every scale is exactly a
// GGUF Q4_0 block scale), never 0 for a nonzero group (a scale below half's range becomes its smallest
// subnormal) and never above half's largest finite value.
float fresh_scale(float amax) {
  if (amax == 0.0f) return 0.0f;
  const float s = round_to_f16(std::fmin(amax / 7.0f, 65504.0f));
  return s > 0.0f ? s : f16_to_f32(1);
}

// A scale s (fp16-representable) for which every w[k] is exactly (c - 8) * s with c in 0..15, or 0 when
// there is none. Tries the finest grid first: the largest magnitude amax is code magnitude j = 8 (only for a
// negative value), 7, ..., 1. Makes quantize() the identity on weights that are already q4gsw values (a
// dequantized export read back), so a model survives an F32 round trip bit for bit.
float grid_scale(const float* w, int64_t n, float amax, bool amax_negative) {
  for (int j = amax_negative ? 8 : 7; j >= 1; --j) {
    const float s = amax / static_cast<float>(j);
    if (!(s > 0.0f) || round_to_f16(s) != s) continue;
    bool exact = true;
    for (int64_t k = 0; k < n && exact; ++k) {
      const float q = std::nearbyint(w[k] / s);
      exact = q >= -8.0f && q <= 7.0f && q * s == w[k];
    }
    if (exact) return s;
  }
  return 0.0f;
}

}  // namespace

Quantized quantize(const Geometry& g, const float* w) {
  Quantized q;
  q.scales.assign(static_cast<size_t>(g.groups() * g.N), 0.0f);
  q.codes.assign(static_cast<size_t>(g.N * g.K), 8);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.groups(); ++gi) {
      int64_t k0 = gi * g.group_size, k1 = std::min(g.K, k0 + g.group_size);
      const float* wg = w + n * g.K + k0;
      float amax = 0.0f;
      bool amax_negative = false;
      for (int64_t k = 0; k < k1 - k0; ++k)
        if (std::fabs(wg[k]) > amax) amax = std::fabs(wg[k]), amax_negative = wg[k] < 0;
      float s = grid_scale(wg, k1 - k0, amax, amax_negative);
      if (s == 0.0f) s = fresh_scale(amax);
      q.scales[gi * g.N + n] = s;
      for (int64_t k = k0; k < k1; ++k) q.codes[n * g.K + k] = requant_code(w[n * g.K + k], s);
    }
  return q;
}

RangeStats range_stats(const Geometry& g, const float* latent, const float* scales) {
  RangeStats r;
  r.total = g.N * g.K;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const float x = latent[n * g.K + k], s = scales[(k / g.group_size) * g.N + n];
      r.outside += !in_range(x, s);
      if (s > 0) r.max_ratio = std::fmax(r.max_ratio, std::fabs(static_cast<double>(x) / s));
    }
  return r;
}

std::vector<float> dequantize(const Geometry& g, const uint8_t* codes, const float* scales) {
  std::vector<float> w(static_cast<size_t>(g.N * g.K));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      w[n * g.K + k] = static_cast<float>(static_cast<int>(codes[n * g.K + k]) - 8) * scales[(k / g.group_size) * g.N + n];
  return w;
}

}  // namespace edgetrain::q4

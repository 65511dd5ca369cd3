// The K-quant block types of GGUF (super-blocks of 256 values) that llama.cpp's Q4_K_M/Q5_K_M/Q6_K files are
// made of: decoding Q4_K, Q5_K and Q6_K to f32, and llama.cpp's reference Q4_K quantizer. The layouts are
// ggml's (ggml-common.h):
//   Q4_K, 144 bytes: fp16 d, fp16 dmin, 12 bytes of eight 6-bit scales and eight 6-bit mins, 128 bytes of
//        4-bit codes. Sub-block j (32 values) is d*sc_j * q - dmin*m_j. Codes of sub-blocks 2i and 2i+1 share
//        bytes 32i..32i+31: the low nibble is sub-block 2i, the high nibble 2i+1.
//   Q5_K, 176 bytes: as Q4_K plus 32 bytes qh of fifth bits (bit 2i of qh[l] for sub-block 2i's value l,
//        bit 2i+1 for 2i+1's) between the scales and the low nibbles; codes 0..31.
//   Q6_K, 210 bytes: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales, fp16 d; sixteen
//        sub-blocks of 16 values, value = d * scale * (q - 32). Each half of 128 values takes 64 ql bytes and
//        32 qh bytes: value l (0..31) of its quarters 0..3 is ql[l] low, ql[l+32] low, ql[l] high,
//        ql[l+32] high, with qh[l] bits 0-1, 2-3, 4-5, 6-7 on top.
#include <cmath>
#include <cstring>

#include "edgetrain/error.h"
#include "edgetrain/half.h"
#include "io/gguf.h"

namespace edgetrain::gguf {

namespace {

constexpr int kQ4KBytes = 144, kQ5KBytes = 176, kQ6KBytes = 210;

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

}  // namespace

void k_scale_min(const uint8_t* s, int j, uint8_t* sc, uint8_t* m) {
  // Bytes 0-3: scales 0-3 in the low 6 bits; bytes 4-7: mins 0-3 likewise; bytes 8-11: scale (low nibble)
  // and min (high nibble) low 4 bits of sub-blocks 4-7, whose top 2 bits sit in bits 6-7 of bytes 0-3
  // (scales) and 4-7 (mins).
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Sub-block values are computed as (d*sc) * q - dmin*m: both products are exact in f32 (11 + 6 + 5 bits),
// so the one rounding is the subtraction's, whatever the order or a fused multiply-add.
void decode_q4_k(const uint8_t* src, uint64_t numel, float* dst) {
  for (uint64_t b = 0; b < numel / kQK; ++b) {
    const uint8_t* blk = src + b * kQ4KBytes;
    const float d = half(blk), dmin = half(blk + 2);
    const uint8_t* scales = blk + 4;
    const uint8_t* q = blk + 16;
    float* y = dst + b * kQK;
    for (int pair = 0; pair < 4; ++pair, q += 32) {
      uint8_t sc, m;
      k_scale_min(scales, 2 * pair, &sc, &m);
      const float d_lo = d * sc, m_lo = dmin * m;
      k_scale_min(scales, 2 * pair + 1, &sc, &m);
      const float d_hi = d * sc, m_hi = dmin * m;
      for (int l = 0; l < 32; ++l) y[64 * pair + l] = d_lo * static_cast<float>(q[l] & 0xF) - m_lo;
      for (int l = 0; l < 32; ++l) y[64 * pair + 32 + l] = d_hi * static_cast<float>(q[l] >> 4) - m_hi;
    }
  }
}

void decode_q5_k(const uint8_t* src, uint64_t numel, float* dst) {
  for (uint64_t b = 0; b < numel / kQK; ++b) {
    const uint8_t* blk = src + b * kQ5KBytes;
    const float d = half(blk), dmin = half(blk + 2);
    const uint8_t* scales = blk + 4;
    const uint8_t* qh = blk + 16;
    const uint8_t* q = blk + 48;
    float* y = dst + b * kQK;
    for (int pair = 0; pair < 4; ++pair, q += 32) {
      uint8_t sc, m;
      k_scale_min(scales, 2 * pair, &sc, &m);
      const float d_lo = d * sc, m_lo = dmin * m;
      k_scale_min(scales, 2 * pair + 1, &sc, &m);
      const float d_hi = d * sc, m_hi = dmin * m;
      const int bit_lo = 2 * pair, bit_hi = 2 * pair + 1;
      for (int l = 0; l < 32; ++l)
        y[64 * pair + l] = d_lo * static_cast<float>((q[l] & 0xF) | (((qh[l] >> bit_lo) & 1) << 4)) - m_lo;
      for (int l = 0; l < 32; ++l)
        y[64 * pair + 32 + l] = d_hi * static_cast<float>((q[l] >> 4) | (((qh[l] >> bit_hi) & 1) << 4)) - m_hi;
    }
  }
}

// d * scale * (q - 32): 11 + 7 + 5 significant bits at most, exact in f32.
void decode_q6_k(const uint8_t* src, uint64_t numel, float* dst) {
  for (uint64_t b = 0; b < numel / kQK; ++b) {
    const uint8_t* blk = src + b * kQ6KBytes;
    const float d = half(blk + 208);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk + 64 * h;
      const uint8_t* qh = blk + 128 + 32 * h;
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * h;
      float* y = dst + b * kQK + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;  // 16 values per scale: quarter k's scales are sc[2k] and sc[2k+1]
        const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q0);
        y[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q1);
        y[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q2);
        y[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q3);
      }
    }
  }
}

// ---- llama.cpp's Q4_K quantizer (quantize_row_q4_K_ref) ----
// Every step below is llama.cpp's f32 arithmetic in llama.cpp's order: the result must be its bytes, and
// f32 sums are not associative. This file is compiled with -ffp-contract=off (CMakeLists.txt) so that no
// compiler fuses a multiply and an add that llama.cpp's build rounds separately.

namespace {

// llama.cpp's round-to-nearest-int: adding 1.5 * 2^23 leaves round-half-even(v) in the low mantissa bits
// for |v| < 2^22; kept as that arithmetic so the rare larger value gives llama.cpp's number too.
int nearest_int(float v) {
  const float t = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// One sub-block of 32: codes L (0..15) and a scale/min pair minimizing the weighted squared error of
// scale * L - the_min, searched over 21 candidate grids (llama.cpp's make_qkx2_quants with nmax = 15,
// rmin = -1, rdelta = 0.1, nstep = 20, squared error). Returns the scale; *the_min >= 0.
float fit_sub_block(const float* x, const float* w, uint8_t* L, float* the_min) {
  constexpr int n = 32, nmax = 15, nstep = 20;
  constexpr float rmin = -1.0f, rdelta = 0.1f;
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(l < 0 ? 0 : l > nmax ? nmax : l);
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = diff * diff;
    best_error += w[i] * diff;
  }
  uint8_t Laux[n];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = l < 0 ? 0 : l > nmax ? nmax : l;
      Laux[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = diff * diff;
        cur_error += w[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, n);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

void quantize_q4_k_block(const float* x, uint8_t* blk) {
  uint8_t L[kQK];
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;  // scales are positive: the min is subtracted
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);  // larger values weigh more
    scales[j] = fit_sub_block(xs, weights, L + 32 * j, &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  // The 6-bit scales and mins relative to the block's largest, then the fp16 super-scales.
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* s = blk + 4;
  for (int j = 0; j < 8; ++j) {
    // llama.cpp keeps nearest_int's low byte before taking the minimum with 63.
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      s[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  const uint16_t hd = f32_to_f16(max_scale / 63.0f), hmin = f32_to_f16(max_min / 63.0f);
  std::memcpy(blk, &hd, 2);
  std::memcpy(blk + 2, &hmin, 2);
  // Codes again against the stored (rounded) scales and mins; a sub-block whose scale rounds to 0 keeps
  // the codes of its fit.
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k_scale_min(s, j, &sc, &m);
    const float d = f16_to_f32(hd) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(hmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((x[32 * j + i] + dm) / d);
      L[32 * j + i] = static_cast<uint8_t>(l < 0 ? 0 : l > 15 ? 15 : l);
    }
  }
  uint8_t* q = blk + 16;
  for (int pair = 0; pair < 4; ++pair, q += 32)
    for (int l = 0; l < 32; ++l)
      q[l] = static_cast<uint8_t>(L[64 * pair + l] | (L[64 * pair + 32 + l] << 4));
}

}  // namespace

std::vector<uint8_t> quantize_q4_k(const float* w, uint64_t numel) {
  ET_CHECK(numel % kQK == 0, "quantizing to Q4_K: ", numel, " values are not whole blocks of ", kQK);
  for (uint64_t i = 0; i < numel; ++i)
    ET_CHECK_KIND(ErrorKind::numeric, std::isfinite(w[i]), "quantizing to Q4_K: value ", i, " is ", w[i],
                  " (only finite values can be quantized)");
  std::vector<uint8_t> out(static_cast<size_t>(numel / kQK * kQ4KBytes), 0);
  for (uint64_t b = 0; b < numel / kQK; ++b) quantize_q4_k_block(w + b * kQK, out.data() + b * kQ4KBytes);
  return out;
}

}  // namespace edgetrain::gguf

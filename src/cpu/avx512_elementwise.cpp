// AVX-512 elementwise kernels for the CPU backend (see avx512.h): SwiGLU forward and backward with a
// 16-lane exp, and q4gsw requantization 16 latents at a time. Tails run the same vector code under masks,
// so every element gets the same operations wherever a range starts or ends. This file is compiled with
// AVX-512 enabled and includes no standard header with inline code (see avx512.h for why).
#include <immintrin.h>

#include "cpu/avx512.h"

namespace edgetrain::cpu::avx512 {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline __mmask16 lane_mask(int64_t n) {
  return n >= 16  ? static_cast<__mmask16>(0xFFFF)
         : n <= 0 ? static_cast<__mmask16>(0)
                  : static_cast<__mmask16>((1u << n) - 1);
}

// exp(x) per lane: simd.h's algorithm (range reduction by ln 2 in two parts, the same degree-6 polynomial,
// the same limits: +inf above 88.72, 0 below -87.34, NaN stays NaN), with fused multiply-adds and scalef
// for 2^k, so within ~2 ulp of it rather than bit-identical.
inline __m512 exp16(__m512 x) {
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3365447f), _CMP_LT_OQ);
  const __mmask16 over = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.7228391f), _CMP_GT_OQ);
  // min/max return their second operand when either is NaN: x second keeps a NaN.
  x = _mm512_min_ps(_mm512_set1_ps(88.3762626f), x);
  x = _mm512_max_ps(_mm512_set1_ps(-87.3365447f), x);
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  __m512 res = _mm512_scalef_ps(p, k);
  res = _mm512_mask_mov_ps(res, under, _mm512_setzero_ps());
  return _mm512_mask_mov_ps(res, over, _mm512_set1_ps(__builtin_inff()));
}

inline __m512 sigmoid_of_neg_exp(__m512 e) {
  return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

inline __m512 neg(__m512 x) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
}

}  // namespace

void silu_mul(const float* g, const float* u, float* h, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 m = lane_mask(i1 - i);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i), uv = _mm512_maskz_loadu_ps(m, u + i);
    const __m512 s = sigmoid_of_neg_exp(exp16(neg(gv)));
    _mm512_mask_storeu_ps(h + i, m, _mm512_mul_ps(_mm512_mul_ps(gv, s), uv));
  }
}

// 1 - s is e*s (e = exp(-g)) where that avoids cancellation (g > 0), and 1 - s where e may overflow.
void silu_mul_backward(const float* dh, const float* g, const float* u, float* dg, float* du, int64_t i0, int64_t i1) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 m = lane_mask(i1 - i);
    const __m512 dhv = _mm512_maskz_loadu_ps(m, dh + i), gv = _mm512_maskz_loadu_ps(m, g + i),
                 uv = _mm512_maskz_loadu_ps(m, u + i);
    const __m512 e = exp16(neg(gv));
    const __m512 s = sigmoid_of_neg_exp(e);
    const __m512 oms =
        _mm512_mask_mov_ps(_mm512_mul_ps(e, s), _mm512_cmp_ps_mask(e, one, _CMP_GT_OQ), _mm512_sub_ps(one, s));
    const __m512 dgv = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(dhv, uv), s), _mm512_fmadd_ps(gv, oms, one));
    _mm512_mask_storeu_ps(dg + i, m, dgv);
    _mm512_mask_storeu_ps(du + i, m, _mm512_mul_ps(_mm512_mul_ps(dhv, gv), s));
  }
}

// Eight pairs per step: 16 floats widened to two registers of doubles, split into first and second members,
// rotated with explicitly rounded products and sums (never contracted into fused multiply-adds), interleaved
// back and narrowed.
void rope_rows(const float* x, float* y, const double* cs, const double* sn, int64_t D, int64_t rows) {
  constexpr int kR = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512i first = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0),
                second = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i lo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), hi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  const int64_t pairs = D / 2;
  for (int64_t r = 0; r < rows; ++r, x += D, y += D)
    for (int64_t i = 0; i < pairs; i += 8) {
      const __mmask16 m = lane_mask(2 * (pairs - i));
      const __mmask8 m8 = static_cast<__mmask8>(lane_mask(pairs - i));
      const __m512 v = _mm512_maskz_loadu_ps(m, x + 2 * i);
      const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
      const __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
      const __m512d x0 = _mm512_permutex2var_pd(a, first, b), x1 = _mm512_permutex2var_pd(a, second, b);
      const __m512d c = _mm512_maskz_loadu_pd(m8, cs + i), s = _mm512_maskz_loadu_pd(m8, sn + i);
      const __m512d y0 = _mm512_sub_round_pd(_mm512_mul_round_pd(x0, c, kR), _mm512_mul_round_pd(x1, s, kR), kR);
      const __m512d y1 = _mm512_add_round_pd(_mm512_mul_round_pd(x0, s, kR), _mm512_mul_round_pd(x1, c, kR), kR);
      const __m256 ya = _mm512_cvtpd_ps(_mm512_permutex2var_pd(y0, lo, y1));
      const __m256 yb = _mm512_cvtpd_ps(_mm512_permutex2var_pd(y0, hi, y1));
      _mm512_mask_storeu_ps(y + 2 * i, m, _mm512_insertf32x8(_mm512_castps256_ps512(ya), yb, 1));
    }
}

// Per 8-row block and 16 k: the codes of rows 2q and 2q + 1 side by side in a byte per k, narrowed to 16
// bytes = the four W_4X8 words (k4 .. k4 + 3) of pair q. Codes: q4::requant_code (0 scale or NaN quotient:
// 8; else nearbyint(latent / scale) clamped to -8..7, plus 8); latents: q4::clamp_to_range.
void requant_blocks(float* latent, const float* scales, uint32_t* w, int64_t N, int64_t K, int64_t gs, int64_t b0,
                    int64_t b1) {
  const int64_t N8 = (N + 7) / 8, K4 = (K + 3) / 4;
  const __m512i eight = _mm512_set1_epi32(8);
  const bool one_group = gs % 16 == 0;  // then the 16 k of a chunk share one scale per row
  for (int64_t n8 = b0; n8 < b1; ++n8)
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
      const __mmask16 valid = lane_mask(K - k0);
      __m512i grow = _mm512_setzero_si512();  // per lane: the first scale of its group's row of scales
      if (!one_group) {
        alignas(64) int32_t row[16];
        for (int l = 0; l < 16; ++l) row[l] = static_cast<int32_t>(min64(k0 + l, K - 1) / gs * N);
        grow = _mm512_load_si512(row);
      }
      const int64_t k4 = k0 / 4, nk4 = min64(4, K4 - k4);
      for (int64_t q = 0; q < 4; ++q) {
        __m512i pair = _mm512_setzero_si512();
        for (int64_t p = 0; p < 2; ++p) {
          const int64_t n = 8 * n8 + 2 * q + p;
          __m512i code = eight;
          if (n < N) {
            float* lp = latent + n * K + k0;
            const __m512 x = _mm512_maskz_loadu_ps(valid, lp);
            const __m512 s = one_group ? _mm512_set1_ps(scales[(k0 / gs) * N + n])
                                       : _mm512_i32gather_ps(
                                             _mm512_add_epi32(grow, _mm512_set1_epi32(static_cast<int>(n))), scales, 4);
            const __m512 r = _mm512_roundscale_ps(_mm512_div_ps(x, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __mmask16 zero_s = _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_EQ_OQ);
            const __mmask16 nan_r = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
            const __m512 c = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-8.0f)), _mm512_set1_ps(7.0f));
            code = _mm512_mask_mov_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(c), eight),
                                         static_cast<__mmask16>(zero_s | nan_r | ~valid), eight);
            const __m512 lo = _mm512_mul_ps(_mm512_set1_ps(-8.5f), s), hi = _mm512_mul_ps(_mm512_set1_ps(7.5f), s);
            const __mmask16 below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
            const __mmask16 above = static_cast<__mmask16>(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ) & ~below);
            __m512 y = _mm512_mask_mov_ps(x, below, lo);
            y = _mm512_mask_mov_ps(y, above, hi);
            _mm512_mask_storeu_ps(lp, valid, y);
          }
          pair = _mm512_or_si512(pair, _mm512_slli_epi32(code, static_cast<unsigned>(4 * p)));
        }
        alignas(16) uint32_t words[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(words), _mm512_cvtepi32_epi8(pair));
        for (int64_t j = 0; j < nk4; ++j) w[4 * ((k4 + j) * N8 + n8) + q] = words[j];
      }
    }
}

}  // namespace edgetrain::cpu::avx512

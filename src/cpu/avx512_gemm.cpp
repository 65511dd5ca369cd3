// AVX-512 matrix products for the CPU backend (see avx512.h): a 12 x 32 register-tile kernel (24 zmm
// accumulators; per step of the contraction two loads of B and twelve broadcasts of A), the contraction cut
// into blocks that stay in cache, and the packing of B (fp32 transposed, or q4gsw decoded once per call
// instead of once per tile). This file is compiled with AVX-512 enabled and includes no standard header
// with inline code (see avx512.h for why).
#include <immintrin.h>

#include "cpu/avx512.h"

namespace edgetrain::cpu::avx512 {
namespace {

// Contraction steps per block: A's rows (or columns) and B's panel rows of one block stay in L1/L2 while
// every tile of a range uses them. A block boundary only splits the chain (C is stored and reloaded), so the
// results do not depend on it.
constexpr int64_t kBlock = 384;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline __mmask16 lane_mask(int64_t n) {  // the first n of 16 lanes (n may be <= 0 or >= 16)
  return n >= 16  ? static_cast<__mmask16>(0xFFFF)
         : n <= 0 ? static_cast<__mmask16>(0)
                  : static_cast<__mmask16>((1u << n) - 1);
}

// Where a tile's chains start (C, the bias row, or 0) and whether this block ends them (then scaled by alpha).
struct Ends {
  bool load_c;
  const float* init;  // bias + j0, when not load_c; may be null
  bool last;
  float alpha;
};

// C[0..MR) x [0..32) (lanes masked by m0, m1) (+)= sum over l < L of A(i, l) * B(l, 0..32). A(i, l) is
// a[i * as + l] (COLS false) or a[l * as + i] (COLS true); B(l, .) is b + l * bs.
template <int MR, bool COLS>
__attribute__((noinline)) void tile(int64_t L, const float* a, int64_t as, const float* b, int64_t bs, float* c,
                                    int64_t ldc, __mmask16 m0, __mmask16 m1, const Ends& e) {
  __m512 acc0[MR], acc1[MR];
  const __m512 init0 = e.init ? _mm512_maskz_loadu_ps(m0, e.init) : _mm512_setzero_ps();
  const __m512 init1 = e.init ? _mm512_maskz_loadu_ps(m1, e.init + 16) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    acc0[i] = e.load_c ? _mm512_maskz_loadu_ps(m0, c + i * ldc) : init0;
    acc1[i] = e.load_c ? _mm512_maskz_loadu_ps(m1, c + i * ldc + 16) : init1;
  }
  for (int64_t l = 0; l < L; ++l) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(COLS ? a[i] : a[i * as]);
      acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
    }
    a += COLS ? as : 1;
    b += bs;
  }
  if (e.last && e.alpha != 1.0f) {
    const __m512 al = _mm512_set1_ps(e.alpha);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) acc0[i] = _mm512_mul_ps(acc0[i], al), acc1[i] = _mm512_mul_ps(acc1[i], al);
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    _mm512_mask_storeu_ps(c + i * ldc, m0, acc0[i]);
    _mm512_mask_storeu_ps(c + i * ldc + 16, m1, acc1[i]);
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, __mmask16, __mmask16,
                        const Ends&);

template <bool COLS>
TileFn tile_fn(int64_t rows) {
  switch (rows) {
    case 1:
      return tile<1, COLS>;
    case 2:
      return tile<2, COLS>;
    case 3:
      return tile<3, COLS>;
    case 4:
      return tile<4, COLS>;
    case 5:
      return tile<5, COLS>;
    case 6:
      return tile<6, COLS>;
    case 7:
      return tile<7, COLS>;
    case 8:
      return tile<8, COLS>;
    case 9:
      return tile<9, COLS>;
    case 10:
      return tile<10, COLS>;
    case 11:
      return tile<11, COLS>;
    default:
      return tile<12, COLS>;
  }
}

}  // namespace

void gemm_tiles(const Gemm& g, int64_t t0, int64_t t1) {
  const int64_t np = g.panels();
  const int64_t blocks = (g.L + kBlock - 1) / kBlock;
  const int64_t per_block = blocks > 0 ? (g.L + blocks - 1) / blocks : 0;  // balanced blocks of <= kBlock
  for (int64_t l0 = 0; l0 < g.L; l0 += per_block) {
    const int64_t lb = min64(per_block, g.L - l0);
    Ends e{g.accumulate || l0 > 0, nullptr, l0 + lb >= g.L, g.alpha};
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = (t / np) * kTileRows, p = t % np, j0 = p * kPanel;
      const int64_t rows = min64(kTileRows, g.M - i0), cols = g.N - j0;
      const float* a = g.a_cols ? g.a + l0 * g.lda + i0 : g.a + i0 * g.lda + l0;
      const float* b = g.b_panels ? g.b + p * g.L * kPanel + l0 * kPanel : g.b + l0 * g.ldb + j0;
      const int64_t bs = g.b_panels ? kPanel : g.ldb;
      TileFn fn = g.a_cols ? tile_fn<true>(rows) : tile_fn<false>(rows);
      e.init = g.bias ? g.bias + j0 : nullptr;
      fn(lb, a, g.lda, b, bs, g.c + i0 * g.ldc + j0, g.ldc, lane_mask(cols), lane_mask(cols - 16), e);
    }
  }
}

void pack_transposed(const float* w, int64_t ldw, int64_t N, int64_t L, int64_t p0, int64_t p1, float* panels) {
  const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(static_cast<int>(ldw)));
  for (int64_t p = p0; p < p1; ++p) {
    float* out = panels + (p - p0) * L * kPanel;
    const int64_t n0 = p * kPanel;
    const __mmask16 m0 = lane_mask(N - n0), m1 = lane_mask(N - n0 - 16);
    const float* w0 = w + n0 * ldw;
    const float* w1 = m1 ? w + (n0 + 16) * ldw : w;
    for (int64_t l = 0; l < L; ++l) {  // column l of 32 rows of W: two gathers
      _mm512_storeu_ps(out + l * kPanel, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m0, rows, w0 + l, 4));
      _mm512_storeu_ps(out + l * kPanel + 16, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m1, rows, w1 + l, 4));
    }
  }
}

// W^T panels: the W_4X8 words of one k4 (four k) and four 8-row blocks (32 n) are 64 contiguous bytes;
// word q holds rows n0 + 2q (low nibble) and n0 + 2q + 1 (high nibble), byte b is k = 4 k4 + b.
void pack_q4_transposed(const uint32_t* w, const float* scales, int64_t N, int64_t K, int64_t gs, int64_t p0,
                        int64_t p1, float* panels) {
  const int64_t N8 = (N + 7) / 8, K4 = (K + 3) / 4;
  const __m512i lo_idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi_idx = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512i nib = _mm512_set1_epi32(0xF), eight = _mm512_set1_epi32(8);
  for (int64_t p = p0; p < p1; ++p) {
    float* out = panels + (p - p0) * K * kPanel;
    const int64_t n0 = p * kPanel, n8 = n0 / 8;
    const __mmask16 words = lane_mask(4 * (N8 - n8));  // whole 8-row blocks that exist
    const __mmask16 s0 = lane_mask(N - n0), s1 = lane_mask(N - n0 - 16);
    for (int64_t k4 = 0; k4 < K4; ++k4) {
      const __m512i v = _mm512_maskz_loadu_epi32(words, w + 4 * (k4 * N8 + n8));
      const float* sg = scales + (4 * k4 / gs) * N + n0;  // gs % 4 == 0: one group for the four k
      const __m512 sc0 = _mm512_maskz_loadu_ps(s0, sg), sc1 = _mm512_maskz_loadu_ps(s1, sg + 16);
      for (int64_t b = 0; b < 4 && 4 * k4 + b < K; ++b) {
        const __m512i byte = _mm512_srli_epi32(v, static_cast<unsigned>(8 * b));
        const __m512i lo = _mm512_and_si512(byte, nib), hi = _mm512_and_si512(_mm512_srli_epi32(byte, 4), nib);
        const __m512i c0 = _mm512_sub_epi32(_mm512_permutex2var_epi32(lo, lo_idx, hi), eight);
        const __m512i c1 = _mm512_sub_epi32(_mm512_permutex2var_epi32(lo, hi_idx, hi), eight);
        float* o = out + (4 * k4 + b) * kPanel;
        _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_cvtepi32_ps(c0), sc0));
        _mm512_storeu_ps(o + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(c1), sc1));
      }
    }
  }
}

// W panels: row n of panel p is W[n, 32p .. 32p+31]. For 16 consecutive k and one 8-row block, the block's
// four words of each of the four k4 (16 bytes each) are loaded once into one register; each of the 8 rows
// then picks, per lane, its word (its pair of rows and the lane's k4), byte (k) and nibble (row parity).
void pack_q4(const uint32_t* w, const float* scales, int64_t N, int64_t K, int64_t gs, int64_t p0, int64_t p1,
             float* panels) {
  const int64_t N8 = (N + 7) / 8, K4 = (K + 3) / 4;
  const __m512i k4_of_lane = _mm512_set_epi32(12, 12, 12, 12, 8, 8, 8, 8, 4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i byte_shift = _mm512_set_epi32(24, 16, 8, 0, 24, 16, 8, 0, 24, 16, 8, 0, 24, 16, 8, 0);
  const __m512i nib = _mm512_set1_epi32(0xF), eight = _mm512_set1_epi32(8), four = _mm512_set1_epi32(4);
  const bool one_group = gs % 16 == 0;  // then the 16 k of a half panel share one scale per row
  for (int64_t p = p0; p < p1; ++p) {
    float* out = panels + (p - p0) * N * kPanel;
    for (int64_t h = 0; h < 2; ++h) {  // the two 16-lane halves of the panel's 32 columns
      const int64_t k0 = p * kPanel + 16 * h;
      const __mmask16 valid = lane_mask(K - k0);
      if (valid == 0) {
        for (int64_t n = 0; n < N; ++n) _mm512_storeu_ps(out + n * kPanel + 16 * h, _mm512_setzero_ps());
        continue;
      }
      const int64_t k4 = k0 / 4, nk4 = min64(4, K4 - k4);
      __m512i grow = _mm512_setzero_si512();  // per lane: the first scale of its group's row of scales
      if (!one_group) {
        alignas(64) int32_t row[16];
        for (int l = 0; l < 16; ++l) row[l] = static_cast<int32_t>(min64(k0 + l, K - 1) / gs * N);
        grow = _mm512_load_si512(row);
      }
      for (int64_t n8 = 0; n8 < N8; ++n8) {
        __m512i block = _mm512_setzero_si512();  // lane 4j + q: word q of k4 + j
        for (int64_t j = 0; j < nk4; ++j) {
          const __m128i q4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 4 * ((k4 + j) * N8 + n8)));
          block = _mm512_mask_broadcast_i32x4(block, static_cast<__mmask16>(0xF << (4 * j)), q4);
        }
        for (int64_t r = 0; r < 8 && 8 * n8 + r < N; ++r) {
          const int64_t n = 8 * n8 + r;
          const __m512i word =
              _mm512_permutexvar_epi32(_mm512_add_epi32(k4_of_lane, _mm512_set1_epi32(static_cast<int>(r / 2))), block);
          const __m512i shift = r % 2 ? _mm512_add_epi32(byte_shift, four) : byte_shift;
          const __m512i code = _mm512_sub_epi32(_mm512_and_si512(_mm512_srlv_epi32(word, shift), nib), eight);
          const __m512 sc = one_group ? _mm512_set1_ps(scales[(k0 / gs) * N + n])
                                      : _mm512_i32gather_ps(
                                            _mm512_add_epi32(grow, _mm512_set1_epi32(static_cast<int>(n))), scales, 4);
          _mm512_storeu_ps(out + n * kPanel + 16 * h, _mm512_maskz_mul_ps(valid, _mm512_cvtepi32_ps(code), sc));
        }
      }
    }
  }
}

}  // namespace edgetrain::cpu::avx512

// Fast CPU matrix products: mm, bmm, linear and linear_dW, tiled over the backend's worker pool. Where the CPU
// has AVX-512, the tiles run avx512_gemm.cpp's kernel; elsewhere each tile is a single-threaded OpenBLAS
// sgemm call with the right transposes and strides (OpenBLAS's own threads stay idle: one pool, ours).
// fp16 operands (the f16 flag) are rounded copies fed to the same kernels: the CPU has no faster fp16 path,
// so this exists for the semantics (and --precision fp16 runs on the CPU are for checking numerics).
#include <cblas.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "cpu/avx512.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"

namespace edgetrain::cpu::fast {
namespace {

// Below this many multiply-adds a product runs as one call on the calling thread.
constexpr int64_t kSmallWork = 64 * 64 * 64;

void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// Tile length along a split dimension of size n: at least 64, and at most ~16 tiles. Depends only on n.
int64_t tile_len(int64_t n) {
  int64_t t = (n + 15) / 16;
  t = (t + 15) / 16 * 16;
  return std::max<int64_t>(64, t);
}

#ifdef EDGETRAIN_AVX512_KERNELS
// Output tiles per task of the AVX-512 path: at least ~64 x 64 outputs' worth of tiles.
constexpr int64_t kTileGrain = 8;

// The AVX-512 form of gemm() (alpha 1 or beta 0; beta 0 or 1; K >= 1). op(B) transposed is packed into
// panels first (on the calling thread: about 1/M of the product's work); plain B is read where it lies.
void gemm_avx512(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc, bool threaded) {
  avx512::Gemm g{M, N, K, a, lda, ta, b, ldb, false, c, ldc, beta != 0.0f, alpha};
  thread_local std::vector<float> panels;
  if (tb) {
    panels.resize(static_cast<size_t>(g.panels() * K * avx512::kPanel));
    avx512::pack_transposed(b, ldb, N, K, 0, g.panels(), panels.data());
    g.b = panels.data(), g.ldb = avx512::kPanel, g.b_panels = true;
  }
  run_gemm_tiles(g, threaded);
}
#endif

}  // namespace

const float* gemm_operand(const float* p, int64_t n, bool f16, std::vector<float>& buf) {
  if (!f16) return p;
  buf.resize(static_cast<size_t>(n));
  parallel_for(n, 4096, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) buf[i] = ref::gemm_operand(p[i], true);
  });
  return buf.data();
}

#ifdef EDGETRAIN_AVX512_KERNELS
void run_gemm_tiles(const avx512::Gemm& g, bool threaded) {
  if (!threaded || g.M * g.N * g.L <= kSmallWork) return avx512::gemm_tiles(g, 0, g.tiles());
  parallel_for(g.tiles(), kTileGrain, [&](int64_t t0, int64_t t1) { avx512::gemm_tiles(g, t0, t1); });
}
#endif

void sgemm1(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // no products: C = beta*C (beta 0 overwrites, even NaN)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  blas_single_threaded();
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
#ifdef EDGETRAIN_AVX512_KERNELS
  if (use_avx512() && K > 0 && (alpha == 1.0f || beta == 0.0f) && (beta == 0.0f || beta == 1.0f))
    return gemm_avx512(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, M * N * K > kSmallWork);
#endif
  if (M * N * std::max<int64_t>(K, 1) <= kSmallWork || K <= 0) {
    sgemm1(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  blas_single_threaded();
  // Split the longer output dimension; the tile holds the other one whole.
  if (M >= N) {
    const int64_t t = tile_len(M), tiles = (M + t - 1) / t;
    parallel_for(tiles, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) {
        int64_t m0 = i * t, mr = std::min(t, M - m0);
        const float* ap = ta ? a + m0 : a + m0 * lda;
        sgemm1(ta, tb, mr, N, K, alpha, ap, lda, b, ldb, beta, c + m0 * ldc, ldc);
      }
    });
  } else {
    const int64_t t = tile_len(N), tiles = (N + t - 1) / t;
    parallel_for(tiles, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) {
        int64_t n0 = i * t, nr = std::min(t, N - n0);
        const float* bp = tb ? b + n0 * ldb : b + n0;
        sgemm1(ta, tb, M, nr, K, alpha, a, lda, bp, ldb, beta, c + n0, ldc);
      }
    });
  }
}

// a [M, K] ([K, M] if trans_a), b [K, N] ([N, K] if trans_b); out [M, N] = alpha * op(a) @ op(b).
void mm(const ref::Call& c) {
  const ref::View &a = c.in[0], &b = c.in[1], &o = c.out[0];
  const bool ta = c.ints[0] != 0, tb = c.ints[1] != 0;
  const int64_t M = o.shape[0], N = o.shape[1], K = ta ? a.shape[0] : a.shape[1];
  const float alpha = c.floats[0];
  // BLAS skips the product when alpha == 0, so inf/NaN inputs would not give the reference's NaN.
  if (alpha == 0.0f) return ref::mm(c);
  const bool accumulate = ref::flag_at(c, 2), f16 = ref::f16_flag(c, 3);
  std::vector<float> ra, rb;
  gemm(ta, tb, M, N, K, alpha, gemm_operand(a.as<float>(), a.numel(), f16, ra), ta ? M : K,
       gemm_operand(b.as<float>(), b.numel(), f16, rb), tb ? K : N, accumulate ? 1.0f : 0.0f, o.as<float>(), N);
}

// Batched mm over the leading dims. Many small products (attention) run one product per task, each an
// OpenBLAS call (measured faster than the AVX-512 tiles at attention's shapes: K = 32 is a short chain for
// a 12 x 32 tile, and transposed B would need packing per product); large ones are tiled by gemm() one
// after another.
void bmm(const ref::Call& c) {
  const ref::View &a = c.in[0], &b = c.in[1], &o = c.out[0];
  const int r = a.shape.rank();
  const bool ta = c.ints[0] != 0, tb = c.ints[1] != 0;
  const int64_t M = o.shape[r - 2], N = o.shape[r - 1], K = ta ? a.shape[r - 2] : a.shape[r - 1];
  const float alpha = c.floats[0];
  if (alpha == 0.0f) return ref::bmm(c);
  int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) batch *= a.shape[i];
  const bool f16 = ref::f16_flag(c, 2);
  std::vector<float> ra, rb;
  const float *ap = gemm_operand(a.as<float>(), a.numel(), f16, ra), *bp = gemm_operand(b.as<float>(), b.numel(), f16, rb);
  float* op = o.as<float>();
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  if (batch > 1 && M * N * std::max<int64_t>(K, 1) <= 256 * 256 * 64) {
    parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i)
        sgemm1(ta, tb, M, N, K, alpha, ap + i * M * K, lda, bp + i * K * N, ldb, 0.0f, op + i * M * N, N);
    });
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    gemm(ta, tb, M, N, K, alpha, ap + i * M * K, lda, bp + i * K * N, ldb, 0.0f, op + i * M * N, N);
}

// x [..., K], w [N, K], bias [N] optional; y [..., N] = x @ w^T + bias.
void linear(const ref::Call& c) {
  const ref::View &x = c.in[0], &w = c.in[1];
  const int64_t K = x.shape.last(), N = w.shape[0], M = x.shape.rows();
  float* y = c.out[0].as<float>();
  float beta = 0.0f;
  if (c.has_in(2)) {
    const float* bias = c.in[2].as<float>();
    for (int64_t m = 0; m < M; ++m) std::copy(bias, bias + N, y + m * N);
    beta = 1.0f;
  }
  const bool f16 = ref::f16_flag(c, 0);
  std::vector<float> rx, rw;
  gemm(false, true, M, N, K, 1.0f, gemm_operand(x.as<float>(), x.numel(), f16, rx), K,
       gemm_operand(w.as<float>(), w.numel(), f16, rw), K, beta, y, N);
}

// dy [..., N], x [..., K] (same M rows), ints {accumulate, f16?}; dw [N, K] (+)= dy^T @ x.
void linear_dW(const ref::Call& c) {
  const ref::View &dy = c.in[0], &x = c.in[1];
  const int64_t N = dy.shape.last(), K = x.shape.last(), M = dy.shape.rows();
  const bool f16 = ref::f16_flag(c, 1);
  std::vector<float> rdy, rx;
  gemm(true, false, N, K, M, 1.0f, gemm_operand(dy.as<float>(), dy.numel(), f16, rdy), N,
       gemm_operand(x.as<float>(), x.numel(), f16, rx), K, c.ints[0] ? 1.0f : 0.0f, c.out[0].as<float>(), K);
}

}  // namespace edgetrain::cpu::fast

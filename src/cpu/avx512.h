// The CPU fast kernels written for AVX-512 (avx512_gemm.cpp, avx512_elementwise.cpp: compiled with AVX-512
// enabled, called only when isa.h's use_avx512() says the CPU has it). They are leaf functions over raw
// pointers and index ranges: threads, buffers and the choice of path stay in the portable files that call
// them (gemm_kernels.cpp, q4_kernels.cpp, block_kernels.cpp), so no inline function or template of a
// shared header is ever compiled with AVX-512 into a copy that another file's code could end up using.
// Every result depends only on the shapes and values, never on how a range is split among threads.
#pragma once

#include <cstdint>

namespace edgetrain::cpu::avx512 {

// ---- matrix products (avx512_gemm.cpp) ----

// Columns per panel of a packed right-hand operand, and rows per output tile.
constexpr int64_t kPanel = 32;
constexpr int64_t kTileRows = 12;

// C[M, N] = alpha * (A[M, L] @ B[L, N]), + C when accumulate, + bias[j] on column j when bias is given (those
// two need alpha 1). Every output element is one fp32 fused multiply-add chain over l = 0..L-1 in order,
// started from C (accumulate), bias[j] or 0, then scaled by alpha.
struct Gemm {
  int64_t M, N, L;
  const float* a;  // element (i, l) at a[i * lda + l], or at a[l * lda + i] when a_cols (A stored transposed)
  int64_t lda;
  bool a_cols;
  const float* b;  // element (l, j) at b[l * ldb + j], or packed (b_panels): see pack_* below
  int64_t ldb;
  bool b_panels;
  float* c;  // element (i, j) at c[i * ldc + j]
  int64_t ldc;
  bool accumulate;
  float alpha = 1.0f;
  const float* bias = nullptr;  // [N]; not with accumulate
  // Output tiles: kTileRows rows by one panel of kPanel columns, panel index fastest.
  int64_t panels() const { return (N + kPanel - 1) / kPanel; }
  int64_t tiles() const { return (M + kTileRows - 1) / kTileRows * panels(); }
};
// Computes the output tiles [t0, t1).
void gemm_tiles(const Gemm& g, int64_t t0, int64_t t1);

// Packed B: panel p (columns 32p..32p+31) is L rows of 32 floats at b + p * L * 32, zero past column N. The
// pack functions write panels [p0, p1), panel p at panels + (p - p0) * L * 32.
// B = W^T, W [N, L] row-major (ldw): the operand of x @ W^T.
void pack_transposed(const float* w, int64_t ldw, int64_t N, int64_t L, int64_t p0, int64_t p1, float* panels);

// q4gsw weights W [N, K] (W_4X8 words, scales [G, N], group size gs): panels [p0, p1) of
//   W^T (rows k, columns n: the operand of x @ W^T, linear_q4gsw), or
//   W   (rows n, columns k: the operand of dy @ W, linear_q4gsw_backward).
void pack_q4_transposed(const uint32_t* w, const float* scales, int64_t N, int64_t K, int64_t gs, int64_t p0,
                        int64_t p1, float* panels);
void pack_q4(const uint32_t* w, const float* scales, int64_t N, int64_t K, int64_t gs, int64_t p0, int64_t p1,
             float* panels);

// ---- elementwise (avx512_elementwise.cpp); ranges [i0, i1) of flat arrays ----

// h = g * sigmoid(g) * u
void silu_mul(const float* g, const float* u, float* h, int64_t i0, int64_t i1);
// dg = dh*u*s*(1 + g*(1 - s)), du = dh*g*s with s = sigmoid(g)
void silu_mul_backward(const float* dh, const float* g, const float* u, float* dg, float* du, int64_t i0, int64_t i1);
// RoPE of `rows` rows of D floats (x and y advance by D per row; pairs (2i, 2i+1)): y0 = x0*cs[i] - x1*sn[i],
// y1 = x0*sn[i] + x1*cs[i] in double, rounded to float — the reference's operations, without fused
// multiply-adds, so bit-identical.
void rope_rows(const float* x, float* y, const double* cs, const double* sn, int64_t D, int64_t rows);
// q4gsw_requant of the 8-row blocks [b0, b1): latent [N, K] clamped in place, W_4X8 words written; bit-identical
// to the reference.
void requant_blocks(float* latent, const float* scales, uint32_t* w, int64_t N, int64_t K, int64_t gs, int64_t b0,
                    int64_t b1);

}  // namespace edgetrain::cpu::avx512

// Reference of the matrix products: mm, bmm (with transpose flags and alpha) and the dense linear.
// Dot products accumulate in double (this is the spec; see train.cpp) and round to fp32 once. With the
// f16 flag every operand value is rounded to fp16 first (gemm_operand).
#include "edgetrain/half.h"
#include "ref/ref.h"

namespace edgetrain::ref {

float gemm_operand(float v, bool f16) { return f16 ? round_to_f16(v) : v; }

namespace {

// One [M, N] product of op(a) and op(b) where a, b point at row-major matrices as stored:
// a is [M, K] (or [K, M] when ta), b is [K, N] (or [N, K] when tb).
// accumulate: out += the product (summed in double with the old value, rounded once).
void matmul(const float* a, const float* b, float* out, int64_t M, int64_t N, int64_t K, bool ta, bool tb,
            double alpha, bool f16, bool accumulate = false) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        double av = gemm_operand(ta ? a[k * M + i] : a[i * K + k], f16);
        double bv = gemm_operand(tb ? b[j * K + k] : b[k * N + j], f16);
        acc += av * bv;
      }
      out[i * N + j] = static_cast<float>((accumulate ? static_cast<double>(out[i * N + j]) : 0.0) + alpha * acc);
    }
}

}  // namespace

// a [M, K] ([K, M] if trans_a), b [K, N] ([N, K] if trans_b), ints {trans_a, trans_b, accumulate?, f16?},
// floats {alpha}; out [M, N] (+)= alpha * op(a) @ op(b).
void mm(const Call& c) {
  const View &a = c.in[0], &b = c.in[1], &o = c.out[0];
  const bool ta = c.ints[0] != 0, tb = c.ints[1] != 0;
  const int64_t M = o.shape[0], N = o.shape[1], K = ta ? a.shape[0] : a.shape[1];
  matmul(a.as<float>(), b.as<float>(), o.as<float>(), M, N, K, ta, tb, c.floats[0], f16_flag(c, 3), flag_at(c, 2));
}

// a [..., M, K] / b [..., K, N] of rank 3 or 4 with equal leading (batch) dims, flags and alpha as mm;
// out[..., M, N] = alpha * op(a[batch]) @ op(b[batch]) for every batch index.
void bmm(const Call& c) {
  const View &a = c.in[0], &b = c.in[1], &o = c.out[0];
  const int r = a.shape.rank();
  const bool ta = c.ints[0] != 0, tb = c.ints[1] != 0;
  const int64_t M = o.shape[r - 2], N = o.shape[r - 1], K = ta ? a.shape[r - 2] : a.shape[r - 1];
  int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) batch *= a.shape[i];
  for (int64_t i = 0; i < batch; ++i)
    matmul(a.as<float>() + i * M * K, b.as<float>() + i * K * N, o.as<float>() + i * M * N, M, N, K, ta, tb,
           c.floats[0], f16_flag(c, 2));
}

// x [..., K] (M = rows), w [N, K], bias [N] optional, ints {f16?}; y [..., N].
// y[m,n] = sum_k x[m,k] * w[n,k] + bias[n]   (the bias is added in fp32, never rounded)
void linear(const Call& c) {
  const View &x = c.in[0], &w = c.in[1];
  const bool f16 = f16_flag(c, 0);
  const float* bias = c.has_in(2) ? c.in[2].as<float>() : nullptr;
  const int64_t K = x.shape.last(), N = w.shape[0], M = x.shape.rows();
  const float *xp = x.as<float>(), *wp = w.as<float>();
  float* y = c.out[0].as<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(gemm_operand(xp[m * K + k], f16)) * gemm_operand(wp[n * K + k], f16);
      if (bias) acc += bias[n];
      y[m * N + n] = static_cast<float>(acc);
    }
}

}  // namespace edgetrain::ref

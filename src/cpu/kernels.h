// Declarations shared by the CPU fast-kernel files (gemm, q4, fused, attention and elementwise kernels)
// and their registry (fast_kernels.cpp). Each kernel has the reference's contract: same inputs, outputs, semantics.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/avx512.h"
#include "ref/ref.h"

namespace edgetrain::cpu::fast {

// ---- gemm_kernels.cpp ----
void mm(const ref::Call& c);
void bmm(const ref::Call& c);
void linear(const ref::Call& c);
void linear_dW(const ref::Call& c);

// C[M,N] = alpha * op(A) @ op(B) + beta * C (row-major; op transposes when ta/tb), spread over the worker
// pool in tiles whose size depends only on the shape: the AVX-512 kernel's tiles where the CPU has it,
// else single-threaded OpenBLAS sgemm calls. So results do not depend on the thread count, and BLAS
// threads never nest inside ours.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// One OpenBLAS sgemm on the calling thread (for use inside a parallel_for body).
void sgemm1(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
#ifdef EDGETRAIN_AVX512_KERNELS
// The AVX-512 kernel's tiles of g, spread over the worker pool (or on the calling thread when not threaded or
// small); tiles, not threads, fix each output's arithmetic.
void run_gemm_tiles(const avx512::Gemm& g, bool threaded = true);
#endif

// The operand array of a matrix product: `p` itself, or with the call's f16 flag (ops.inc) a copy of its
// n values rounded to fp16 in `buf` (so the BLAS products below see exactly the reference's operands).
const float* gemm_operand(const float* p, int64_t n, bool f16, std::vector<float>& buf);

// ---- q4_kernels.cpp ----
void linear_q4gsw(const ref::Call& c);
void linear_q4gsw_backward(const ref::Call& c);
void q4gsw_requant(const ref::Call& c);
void adamw_q4gsw_step(const ref::Call& c);

// ---- optim_kernels.cpp ----
// adamw_step's arithmetic over elements [i0, i1) of a call's param, m, v and grad (outputs 0..3), for
// adamw_step and adamw_q4gsw_step.
struct AdamwArgs {
  float *p = nullptr, *m = nullptr, *v = nullptr, *g = nullptr;
  bool scaled = false;
  float s = 1, lr = 0, b1 = 0, b2 = 0, eps = 0, wd = 0, bc1 = 1, bc2 = 1;
  static AdamwArgs of(const ref::Call& c, size_t grad_scale_input);
  void run(int64_t i0, int64_t i1) const;
};
void adamw_step(const ref::Call& c);
void grad_norm(const ref::Call& c);

// ---- softmax_kernels.cpp ----
void fused_ce(const ref::Call& c);
void logsumexp_rows(const ref::Call& c);
void fused_ce_part(const ref::Call& c);
void softmax(const ref::Call& c);
void log_softmax(const ref::Call& c);
void softmax_backward(const ref::Call& c);
void causal_softmax(const ref::Call& c);

// ---- block_kernels.cpp ----
void rms_norm(const ref::Call& c);
void rms_norm_backward(const ref::Call& c);
void silu_mul(const ref::Call& c);
void silu_mul_backward(const ref::Call& c);
void rope(const ref::Call& c);
void rope_backward(const ref::Call& c);
void embedding(const ref::Call& c);
void embedding_backward(const ref::Call& c);

// ---- attention_kernels.cpp ----
void attention(const ref::Call& c);
void attention_backward(const ref::Call& c);

// ---- elementwise_kernels.cpp ----
void add(const ref::Call& c);
void sub(const ref::Call& c);
void mul(const ref::Call& c);
void scale(const ref::Call& c);
void permute_copy(const ref::Call& c);

}  // namespace edgetrain::cpu::fast

// Registry of the CPU backend's fast kernels (threads + OpenBLAS). Ops without one run the reference.
// Every kernel listed here is tested against the reference by tests/test_ops.cpp (the shared cases) and
// tests/test_cpu_fast.cpp (larger shapes, thread-count independence).
#include <cblas.h>

#include "cpu/cpu_backend.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"

namespace edgetrain::cpu {

// OpenBLAS's own choice for the products left to it: its DYNAMIC_ARCH build picks a kernel for the CPU at
// load time.
std::string fast_kernels_name() { return std::string(isa_name()) + ", OpenBLAS " + openblas_get_corename(); }

Kernel fast_kernel(Op op) {
  switch (op) {
    // matrix products (gemm_kernels.cpp)
    case Op::mm: return fast::mm;
    case Op::bmm: return fast::bmm;
    case Op::linear: return fast::linear;
    case Op::linear_dW: return fast::linear_dW;
    // 4-bit linears (q4_kernels.cpp)
    case Op::linear_q4gsw: return fast::linear_q4gsw;
    case Op::linear_q4gsw_backward: return fast::linear_q4gsw_backward;
    case Op::q4gsw_requant: return fast::q4gsw_requant;
    case Op::adamw_q4gsw_step: return fast::adamw_q4gsw_step;
    // row-wise and fused (softmax_kernels.cpp, optim_kernels.cpp, block_kernels.cpp)
    case Op::fused_ce: return fast::fused_ce;
    case Op::logsumexp_rows: return fast::logsumexp_rows;
    case Op::fused_ce_part: return fast::fused_ce_part;
    case Op::adamw_step: return fast::adamw_step;
    case Op::grad_norm: return fast::grad_norm;
    case Op::rms_norm: return fast::rms_norm;
    case Op::rms_norm_backward: return fast::rms_norm_backward;
    case Op::softmax: return fast::softmax;
    case Op::log_softmax: return fast::log_softmax;
    case Op::softmax_backward: return fast::softmax_backward;
    case Op::causal_softmax: return fast::causal_softmax;
    case Op::silu_mul: return fast::silu_mul;
    case Op::silu_mul_backward: return fast::silu_mul_backward;
    case Op::rope: return fast::rope;
    case Op::rope_backward: return fast::rope_backward;
    case Op::embedding: return fast::embedding;
    case Op::embedding_backward: return fast::embedding_backward;
    // causal attention (attention_kernels.cpp)
    case Op::attention: return fast::attention;
    case Op::attention_backward: return fast::attention_backward;
    // elementwise and copies (elementwise_kernels.cpp)
    case Op::add: return fast::add;
    case Op::sub: return fast::sub;
    case Op::mul: return fast::mul;
    case Op::scale: return fast::scale;
    case Op::permute_copy: return fast::permute_copy;
    default: return nullptr;
  }
}

}  // namespace edgetrain::cpu

// Op functions: the readable way to build computations. A Graph allocates each op's outputs and either
// records the call into a Program (to replay later) or, without one, runs it at once (eager).
#pragma once

#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "edgetrain/backend.h"
#include "edgetrain/precision.h"

namespace edgetrain {

// Tensors larger than one kernel binding (Backend::max_binding_bytes) are taken a part of their rows at a
// time. rows_per_binding: how many of `rows` rows, each `row_bytes` wide in the widest tensor indexed by
// them, one binding takes — all when they fit or the backend has no limit; else the most that fit with
// each part's start a multiple of the backend's binding alignment in a tensor of `view_row_bytes` per row
// (the one that is viewed). Fails naming the sizes when not even one aligned row fits.
int64_t rows_per_binding(const Backend& b, int64_t rows, uint64_t row_bytes, uint64_t view_row_bytes);
// Views of t's rows (Tensor::rows), each within one binding: {t} itself when it fits.
std::vector<Tensor> binding_parts(const Backend& b, const Tensor& t);

class Graph {
 public:
  explicit Graph(Backend& b) : backend_(b) {}              // eager
  Graph(Backend& b, Program& p) : backend_(b), program_(&p) {}  // recording

  Backend& backend() const { return backend_; }
  Program* program() const { return program_; }
  // With fp16, the matrix products below (linear_q4gsw and its backward, linear_dW, mm, bmm, linear) and
  // attention (+backward) are recorded with the f16 flag: fp16 operands, fp32 accumulation (ops.inc). Other ops are unaffected, and
  // calls made through call()/apply() keep the ints they are given. fp32 (the default) records exactly what
  // it always did.
  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }
  // Records (or runs) a call whose outputs the caller provides.
  void call(Op op, std::vector<Tensor> in, std::vector<Tensor> out, std::vector<int64_t> ints = {},
            std::vector<Scalar> floats = {});
  // A new tensor for an op's output: recording, one whose memory the program plans at finalize (shared
  // with tensors whose uses do not overlap; read it back only if you keep it beyond the recording);
  // eager, a zero-filled one.
  Tensor alloc(Shape shape, DType dtype);
  // Allocates the outputs infer_outputs names, then records (or runs).
  std::vector<Tensor> apply(Op op, std::vector<Tensor> in, std::vector<int64_t> ints = {},
                            std::vector<Scalar> floats = {});

  // Training ops.
  Tensor linear_q4gsw(const Tensor& x, const Tensor& w, const Tensor& scales, int64_t group_size,
                      const Tensor& bias = {});
  Tensor linear_q4gsw_backward(const Tensor& dy, const Tensor& w, const Tensor& scales, int64_t group_size,
                               int64_t K);
  Tensor linear_dW(const Tensor& dy, const Tensor& x);
  void linear_dW_into(const Tensor& dy, const Tensor& x, const Tensor& dw, bool accumulate);
  // Returns {loss [1], dlogits}; with in_place the gradient overwrites the logits buffer.
  std::pair<Tensor, Tensor> fused_ce(const Tensor& logits, const Tensor& labels, Scalar n_valid,
                                     bool in_place = false);
  // Clamps latent in place into the range its codes round from, then writes the codes w.
  void q4gsw_requant(const Tensor& latent, const Tensor& scales, int64_t group_size, const Tensor& w);
  // AdamW on g * grad_scale[0] (grad_scale: one f32, or undefined for g as it is); g is zeroed.
  void adamw_step(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, Scalar lr, Scalar beta1,
                  Scalar beta2, Scalar eps, Scalar weight_decay, Scalar bc1, Scalar bc2,
                  const Tensor& grad_scale = Tensor());
  // adamw_step on a 4-bit weight's latent, then q4gsw_requant of it into w, in one pass over the weight.
  void adamw_q4gsw_step(const Tensor& latent, const Tensor& m, const Tensor& v, const Tensor& g,
                        const Tensor& scales, int64_t group_size, const Tensor& w, Scalar lr, Scalar beta1,
                        Scalar beta2, Scalar eps, Scalar weight_decay, Scalar bc1, Scalar bc2,
                        const Tensor& grad_scale = Tensor());

  // Generic ops.
  Tensor mm(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false, Scalar alpha = 1.0f);
  // out (+)= alpha * op(a) @ op(b) into a given tensor (accumulate: added to what it holds).
  void mm_into(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, Scalar alpha,
               bool accumulate);
  Tensor bmm(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false, Scalar alpha = 1.0f);
  Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {});
  Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1.0f);
  Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1.0f);
  Tensor mul(const Tensor& a, const Tensor& b);
  Tensor div(const Tensor& a, const Tensor& b);
  Tensor scale(const Tensor& x, Scalar s);
  Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
  Tensor compare(Op op, const Tensor& x, Scalar s);  // eq/ne/lt/le/gt/ge
  Tensor logical_not(const Tensor& x);
  void fill(const Tensor& out, Scalar value);
  Tensor full(Shape shape, DType dtype, Scalar value);
  Tensor to_dtype(const Tensor& x, DType dtype);                  // dim_order_copy
  Tensor expand(const Tensor& x, Shape shape);                    // expand_copy
  Tensor permute(const Tensor& x, std::vector<int64_t> dims);     // permute_copy
  void write_rows(const Tensor& x, const Tensor& out, Scalar row_offset);
  Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
  Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
  Tensor softmax(const Tensor& x);
  Tensor log_softmax(const Tensor& x);
  Tensor softmax_backward(const Tensor& y, const Tensor& dy);
  Tensor causal_softmax(const Tensor& x, Scalar scale);

  // Llama block.
  std::pair<Tensor, Tensor> rms_norm(const Tensor& x, const Tensor& w, Scalar eps);  // {y, rstd}
  std::pair<Tensor, Tensor> rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                              const Tensor& rstd);  // {dx, dw}
  // freqs [D/2] (optional): each pair's frequency, replacing theta^(-2i/D) (rope scaling; see ops.inc).
  // pos [B, T] i32 (optional): each token's position within its packed sample, replacing t (ops.inc).
  Tensor rope(const Tensor& x, Scalar theta, Scalar pos_offset = 0.0f, const Tensor& freqs = Tensor(),
              const Tensor& pos = Tensor());
  Tensor rope_backward(const Tensor& dy, Scalar theta, Scalar pos_offset = 0.0f, const Tensor& freqs = Tensor(),
                       const Tensor& pos = Tensor());
  Tensor silu_mul(const Tensor& g, const Tensor& u);
  std::pair<Tensor, Tensor> silu_mul_backward(const Tensor& dh, const Tensor& g, const Tensor& u);
  Tensor embedding(const Tensor& w, const Tensor& idx);
  Tensor embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab);
  Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
  // Causal attention, grouped-query: q [B,T,H,hd], k and v [B,S,KV,hd] -> {out [B,T,H,hd], lse [B,H,T]}.
  // pos [B, T] i32 (optional, S == T): packed samples; query t sees only its own sample's keys (ops.inc).
  std::pair<Tensor, Tensor> attention(const Tensor& q, const Tensor& k, const Tensor& v, Scalar scale,
                                      const Tensor& pos = Tensor());
  // Its gradients {dq, dk, dv} from the forward's out and lse (and the forward's pos).
  std::tuple<Tensor, Tensor, Tensor> attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                                        const Tensor& v, const Tensor& out, const Tensor& lse,
                                                        Scalar scale, const Tensor& pos = Tensor());
  Tensor grad_norm(const std::vector<Tensor>& xs);
  Tensor clip_coef(const Tensor& norm, Scalar max_norm);

 private:
  // The ints of a matrix product or attention call: as given, plus the f16 flag under Precision::fp16.
  std::vector<int64_t> precision_ints(std::vector<int64_t> ints) const;

  Backend& backend_;
  Program* program_ = nullptr;
  Precision precision_ = Precision::fp32;
};

}  // namespace edgetrain

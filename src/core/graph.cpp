// Op functions over a Graph: allocate outputs, then record into the program or run eagerly.
#include "edgetrain/graph.h"

#include <algorithm>
#include <numeric>

namespace edgetrain {

void Graph::call(Op op, std::vector<Tensor> in, std::vector<Tensor> out, std::vector<int64_t> ints,
                 std::vector<Scalar> floats) {
  OpCall c{op, std::move(in), std::move(out), std::move(ints), std::move(floats)};
  if (program_) program_->record(std::move(c));
  else backend_.run(std::move(c));
}

int64_t rows_per_binding(const Backend& b, int64_t rows, uint64_t row_bytes, uint64_t view_row_bytes) {
  const uint64_t limit = b.max_binding_bytes();
  if (limit == 0 || uint64_t(rows) * row_bytes <= limit) return rows;
  // A part starts at first * view_row_bytes: first must be a multiple of `unit` for that to be aligned.
  const uint64_t align = std::max<uint64_t>(1, b.binding_alignment());
  const uint64_t unit = align / std::gcd(align, std::max<uint64_t>(1, view_row_bytes));
  const uint64_t fit = limit / std::max<uint64_t>(1, row_bytes) / unit * unit;
  ET_CHECK_KIND(ErrorKind::unsupported, fit >= 1, b.name(), ": ", unit, " rows of ", row_bytes,
                " bytes (the fewest a part may take at an aligned offset) exceed the ", limit,
                " bytes one binding may cover");
  return static_cast<int64_t>(fit);
}

std::vector<Tensor> binding_parts(const Backend& b, const Tensor& t) {
  if (t.shape().rank() == 0 || t.shape()[0] == 0) return {t};
  const int64_t n = t.shape()[0];
  const uint64_t row = t.nbytes() / static_cast<uint64_t>(n);
  const int64_t step = rows_per_binding(b, n, row, row);
  if (step >= n) return {t};
  std::vector<Tensor> parts;
  for (int64_t first = 0; first < n; first += step) parts.push_back(t.rows(first, std::min(step, n - first)));
  return parts;
}

Tensor Graph::alloc(Shape shape, DType dtype) {
  return program_ ? program_->planned_tensor(shape, dtype) : backend_.zeros(shape, dtype);
}

std::vector<Tensor> Graph::apply(Op op, std::vector<Tensor> in, std::vector<int64_t> ints,
                                 std::vector<Scalar> floats) {
  std::vector<Tensor> outs;
  for (const OutSpec& s : infer_outputs(op, in, ints)) outs.push_back(alloc(s.shape, s.dtype));
  call(op, std::move(in), outs, std::move(ints), std::move(floats));
  return outs;
}

// The required inputs v, then the optional ones up to the last defined one (an undefined one before a
// defined one stays, as a placeholder the backends bind as absent).
static std::vector<Tensor> with_optional(std::vector<Tensor> v, std::initializer_list<Tensor> opts) {
  size_t n = 0, i = 0;
  for (const Tensor& t : opts) {
    ++i;
    if (t.defined()) n = i;
  }
  for (const Tensor& t : opts) {
    if (n-- == 0) break;
    v.push_back(t);
  }
  return v;
}
static std::vector<Tensor> with_optional(std::vector<Tensor> v, const Tensor& opt) {
  return with_optional(std::move(v), {opt});
}

std::vector<int64_t> Graph::precision_ints(std::vector<int64_t> ints) const {
  if (precision_ == Precision::fp16) ints.push_back(1);
  return ints;
}

Tensor Graph::linear_q4gsw(const Tensor& x, const Tensor& w, const Tensor& scales, int64_t gs, const Tensor& bias) {
  return apply(Op::linear_q4gsw, with_optional({x, w, scales}, bias), precision_ints({gs}))[0];
}
Tensor Graph::linear_q4gsw_backward(const Tensor& dy, const Tensor& w, const Tensor& scales, int64_t gs, int64_t K) {
  return apply(Op::linear_q4gsw_backward, {dy, w, scales}, precision_ints({gs, K}))[0];
}
Tensor Graph::linear_dW(const Tensor& dy, const Tensor& x) { return apply(Op::linear_dW, {dy, x}, precision_ints({0}))[0]; }
void Graph::linear_dW_into(const Tensor& dy, const Tensor& x, const Tensor& dw, bool accumulate) {
  call(Op::linear_dW, {dy, x}, {dw}, precision_ints({accumulate ? 1 : 0}));
}
std::pair<Tensor, Tensor> Graph::fused_ce(const Tensor& logits, const Tensor& labels, Scalar n_valid, bool in_place) {
  if (!in_place) {
    auto o = apply(Op::fused_ce, {logits, labels}, {}, {n_valid});
    return {o[0], o[1]};
  }
  Tensor loss = alloc(Shape{}, DType::f32);
  call(Op::fused_ce, {logits, labels}, {loss, logits}, {}, {n_valid});
  return {loss, logits};
}
void Graph::q4gsw_requant(const Tensor& latent, const Tensor& scales, int64_t gs, const Tensor& w) {
  call(Op::q4gsw_requant, {latent, scales}, {w, latent}, {gs});
}
void Graph::adamw_step(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, Scalar lr, Scalar b1,
                       Scalar b2, Scalar eps, Scalar wd, Scalar bc1, Scalar bc2, const Tensor& grad_scale) {
  call(Op::adamw_step, {p, m, v, g, grad_scale}, {p, m, v, g}, {}, {lr, b1, b2, eps, wd, bc1, bc2});
}
void Graph::adamw_q4gsw_step(const Tensor& latent, const Tensor& m, const Tensor& v, const Tensor& g,
                             const Tensor& scales, int64_t gs, const Tensor& w, Scalar lr, Scalar b1, Scalar b2,
                             Scalar eps, Scalar wd, Scalar bc1, Scalar bc2, const Tensor& grad_scale) {
  call(Op::adamw_q4gsw_step, {latent, m, v, g, scales, grad_scale}, {latent, m, v, g, w}, {gs},
       {lr, b1, b2, eps, wd, bc1, bc2});
}

Tensor Graph::mm(const Tensor& a, const Tensor& b, bool ta, bool tb, Scalar alpha) {
  return apply(Op::mm, {a, b}, precision_ints({ta, tb, 0}), {alpha})[0];
}
void Graph::mm_into(const Tensor& a, const Tensor& b, const Tensor& out, bool ta, bool tb, Scalar alpha,
                    bool accumulate) {
  call(Op::mm, {a, b}, {out}, precision_ints({ta, tb, accumulate ? 1 : 0}), {alpha});
}
Tensor Graph::bmm(const Tensor& a, const Tensor& b, bool ta, bool tb, Scalar alpha) {
  return apply(Op::bmm, {a, b}, precision_ints({ta, tb}), {alpha})[0];
}
Tensor Graph::linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  return apply(Op::linear, with_optional({x, w}, bias), precision_ints({}))[0];
}
Tensor Graph::add(const Tensor& a, const Tensor& b, Scalar alpha) { return apply(Op::add, {a, b}, {}, {alpha})[0]; }
Tensor Graph::sub(const Tensor& a, const Tensor& b, Scalar alpha) { return apply(Op::sub, {a, b}, {}, {alpha})[0]; }
Tensor Graph::mul(const Tensor& a, const Tensor& b) { return apply(Op::mul, {a, b})[0]; }
Tensor Graph::div(const Tensor& a, const Tensor& b) { return apply(Op::div, {a, b})[0]; }
Tensor Graph::scale(const Tensor& x, Scalar s) { return apply(Op::scale, {x}, {}, {s})[0]; }
Tensor Graph::where(const Tensor& c, const Tensor& a, const Tensor& b) { return apply(Op::where, {c, a, b})[0]; }
Tensor Graph::compare(Op op, const Tensor& x, Scalar s) {
  ET_CHECK(op == Op::eq || op == Op::ne || op == Op::lt || op == Op::le || op == Op::gt || op == Op::ge,
           "Graph::compare: ", op_name(op), " is not a comparison");
  return apply(op, {x}, {}, {s})[0];
}
Tensor Graph::logical_not(const Tensor& x) { return apply(Op::logical_not, {x})[0]; }
void Graph::fill(const Tensor& out, Scalar value) { call(Op::fill, {}, {out}, {}, {value}); }
Tensor Graph::full(Shape shape, DType dtype, Scalar value) {
  Tensor t = alloc(shape, dtype);
  fill(t, value);
  return t;
}
Tensor Graph::to_dtype(const Tensor& x, DType dtype) {
  Tensor t = alloc(x.shape(), dtype);
  call(Op::dim_order_copy, {x}, {t});
  return t;
}
Tensor Graph::expand(const Tensor& x, Shape shape) {
  Tensor t = alloc(shape, x.dtype());
  call(Op::expand_copy, {x}, {t});
  return t;
}
Tensor Graph::permute(const Tensor& x, std::vector<int64_t> dims) { return apply(Op::permute_copy, {x}, dims)[0]; }
void Graph::write_rows(const Tensor& x, const Tensor& out, Scalar row_offset) {
  call(Op::write_rows, {x}, {out}, {}, {row_offset});
}
static std::vector<int64_t> reduce_ints(const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<int64_t> v{keepdim ? 1 : 0};
  v.insert(v.end(), dims.begin(), dims.end());
  return v;
}
Tensor Graph::sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return apply(Op::sum, {x}, reduce_ints(dims, keepdim))[0];
}
Tensor Graph::mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return apply(Op::mean, {x}, reduce_ints(dims, keepdim))[0];
}
Tensor Graph::softmax(const Tensor& x) { return apply(Op::softmax, {x}, {-1})[0]; }
Tensor Graph::log_softmax(const Tensor& x) { return apply(Op::log_softmax, {x}, {-1})[0]; }
Tensor Graph::softmax_backward(const Tensor& y, const Tensor& dy) { return apply(Op::softmax_backward, {y, dy}, {-1})[0]; }
Tensor Graph::causal_softmax(const Tensor& x, Scalar scale) { return apply(Op::causal_softmax, {x}, {}, {scale})[0]; }

std::pair<Tensor, Tensor> Graph::rms_norm(const Tensor& x, const Tensor& w, Scalar eps) {
  auto o = apply(Op::rms_norm, {x, w}, {}, {eps});
  return {o[0], o[1]};
}
std::pair<Tensor, Tensor> Graph::rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                                   const Tensor& rstd) {
  auto o = apply(Op::rms_norm_backward, {dy, x, w, rstd}, {0});
  return {o[0], o[1]};
}
Tensor Graph::rope(const Tensor& x, Scalar theta, Scalar pos_offset, const Tensor& freqs, const Tensor& pos) {
  return apply(Op::rope, with_optional({x}, {freqs, pos}), {}, {theta, pos_offset})[0];
}
Tensor Graph::rope_backward(const Tensor& dy, Scalar theta, Scalar pos_offset, const Tensor& freqs, const Tensor& pos) {
  return apply(Op::rope_backward, with_optional({dy}, {freqs, pos}), {}, {theta, pos_offset})[0];
}
Tensor Graph::silu_mul(const Tensor& g, const Tensor& u) { return apply(Op::silu_mul, {g, u})[0]; }
std::pair<Tensor, Tensor> Graph::silu_mul_backward(const Tensor& dh, const Tensor& g, const Tensor& u) {
  auto o = apply(Op::silu_mul_backward, {dh, g, u});
  return {o[0], o[1]};
}
Tensor Graph::embedding(const Tensor& w, const Tensor& idx) { return apply(Op::embedding, {w, idx})[0]; }
Tensor Graph::embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab) {
  Tensor dw = alloc(Shape{vocab, dout.shape().last()}, DType::f32);
  call(Op::embedding_backward, {dout, idx}, {dw}, {0});
  return dw;
}
Tensor Graph::gather(const Tensor& x, int64_t dim, const Tensor& index) { return apply(Op::gather, {x, index}, {dim})[0]; }
std::pair<Tensor, Tensor> Graph::attention(const Tensor& q, const Tensor& k, const Tensor& v, Scalar scale,
                                           const Tensor& pos) {
  auto o = apply(Op::attention, with_optional({q, k, v}, pos), precision_ints({}), {scale});
  return {o[0], o[1]};
}
std::tuple<Tensor, Tensor, Tensor> Graph::attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                                             const Tensor& v, const Tensor& out, const Tensor& lse,
                                                             Scalar scale, const Tensor& pos) {
  auto o = apply(Op::attention_backward, with_optional({dout, q, k, v, out, lse}, pos), precision_ints({}), {scale});
  return {o[0], o[1], o[2]};
}
// More gradients than one kernel may bind (Backend::max_call_bindings; the call adds its output, the scalar
// block and a scratch buffer) are normed in groups, then the groups' norms together: sqrt(sum of g_i^2).
Tensor Graph::grad_norm(const std::vector<Tensor>& xs) {
  const uint32_t limit = backend_.max_call_bindings();
  const size_t group = limit == 0 ? xs.size() : static_cast<size_t>(std::max<int64_t>(2, int64_t{limit} - 3));
  if (xs.size() <= group) return apply(Op::grad_norm, xs)[0];
  std::vector<Tensor> norms;
  for (size_t i = 0; i < xs.size(); i += group)
    norms.push_back(apply(Op::grad_norm, std::vector<Tensor>(xs.begin() + static_cast<std::ptrdiff_t>(i),
                                                             xs.begin() + static_cast<std::ptrdiff_t>(std::min(xs.size(), i + group))))[0]);
  return grad_norm(norms);
}
Tensor Graph::clip_coef(const Tensor& norm, Scalar max_norm) { return apply(Op::clip_coef, {norm}, {}, {max_norm})[0]; }

}  // namespace edgetrain

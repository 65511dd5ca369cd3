// Op signatures: what every op accepts (counts, dtypes, shapes, aliasing) and what its outputs are.
// One function per op; check_call() and infer_outputs() share them, and every backend calls check_call()
// at record time, so misuse fails the same way everywhere, with the op and the shapes in the message.
#include <algorithm>
#include <cstdint>

#include "edgetrain/backend.h"
#include "edgetrain/q4gsw.h"

namespace edgetrain {
namespace {

struct Ctx {
  const OpCall& c;
  const OpInfo& info;
  std::vector<OutSpec> expect;  // filled by the op's signature unless outputs_given
  bool outputs_given = false;   // the op validates caller-chosen outputs itself
  bool inferring = false;       // infer_outputs(): no outputs are present

  template <typename... A>
  [[noreturn]] void bad(const A&... a) const {
    fail(info.name, ": ", a..., " (call: ", c.str(), ")");
  }
  const Tensor& in(size_t i) const { return c.in[i]; }
  bool has_in(size_t i) const { return i < c.in.size() && c.in[i].defined(); }
  int64_t ival(size_t i) const { return c.ints[i]; }
  void dtype(const Tensor& t, DType want, const char* what) const {
    if (t.dtype() != want) bad(what, " must be ", dtype_name(want), ", got ", t.str());
  }
  void rank_at_least(const Tensor& t, int r, const char* what) const {
    if (t.shape().rank() < r) bad(what, " must have rank >= ", r, ", got ", t.str());
  }
  void rank_is(const Tensor& t, int r, const char* what) const {
    if (t.shape().rank() != r) bad(what, " must have rank ", r, ", got ", t.str());
  }
  void flag(size_t i, const char* what) const {
    if (ival(i) != 0 && ival(i) != 1) bad(what, " must be 0 or 1, got ", ival(i));
  }
  // The optional trailing f16 flag of the matrix products, at int index i when given.
  void f16_flag(size_t i) const {
    if (c.ints.size() > i) flag(i, "f16");
  }
  void out(Shape s, DType t) { expect.push_back({s, t}); }
};

Shape with_last(const Shape& s, int64_t last) {
  int64_t d[kMaxRank];
  for (int i = 0; i < s.rank(); ++i) d[i] = s[i];
  d[s.rank() - 1] = last;
  return Shape::of(d, s.rank());
}

Shape append_dim(const Ctx& x, const Shape& s, int64_t last) {
  if (s.rank() >= kMaxRank) x.bad("result would exceed rank ", kMaxRank);
  int64_t d[kMaxRank];
  for (int i = 0; i < s.rank(); ++i) d[i] = s[i];
  d[s.rank()] = last;
  return Shape::of(d, s.rank() + 1);
}

// numpy broadcasting; fails naming both shapes.
Shape broadcast(const Ctx& x, const Shape& a, const Shape& b) {
  int r = std::max(a.rank(), b.rank());
  int64_t d[kMaxRank];
  for (int i = 0; i < r; ++i) {
    int ia = a.rank() - r + i, ib = b.rank() - r + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) x.bad("shapes ", a.str(), " and ", b.str(), " do not broadcast");
    d[i] = da == 1 ? db : da;
  }
  return Shape::of(d, r);
}

// ---- training ops ----

void q4_weight(const Ctx& x, const Tensor& w, const Tensor& scales, int64_t N, int64_t K, int64_t gs) {
  if (gs <= 0 || gs % 4 != 0) x.bad("group_size must be a positive multiple of 4, got ", gs);
  if (N < 1 || K < 1) x.bad("weight must have N >= 1 and K >= 1, got N=", N, " K=", K);
  q4::Geometry g(N, K, gs);
  x.dtype(w, DType::u32, "w (W_4X8 words)");
  if (w.numel() != g.words())
    x.bad("w must hold 4*ceil(K/4)*ceil(N/8) = ", g.words(), " W_4X8 words for N=", N, " K=", K, ", got ",
          w.str());
  x.dtype(scales, DType::f32, "scales");
  if (scales.shape() != Shape{g.groups(), N})
    x.bad("scales must be [ceil(K/group_size), N] = [", g.groups(), ", ", N, "], got ", scales.str());
}

void sig_linear_q4gsw(Ctx& x) {
  const Tensor &a = x.in(0), &scales = x.in(2);
  x.dtype(a, DType::f32, "x");
  x.rank_at_least(a, 1, "x");
  x.rank_is(scales, 2, "scales");
  int64_t N = scales.shape()[1], K = a.shape().last();
  q4_weight(x, x.in(1), scales, N, K, x.ival(0));
  x.f16_flag(1);
  if (x.has_in(3)) {
    x.dtype(x.in(3), DType::f32, "bias");
    if (x.in(3).shape() != Shape{N}) x.bad("bias must be [N] = [", N, "], got ", x.in(3).str());
  }
  x.out(with_last(a.shape(), N), DType::f32);
}

void sig_linear_q4gsw_backward(Ctx& x) {
  const Tensor &dy = x.in(0), &scales = x.in(2);
  x.dtype(dy, DType::f32, "dy");
  x.rank_at_least(dy, 1, "dy");
  x.rank_is(scales, 2, "scales");
  int64_t N = scales.shape()[1], K = x.ival(1);
  if (dy.shape().last() != N) x.bad("dy's last dim must be N = ", N, ", got ", dy.str());
  q4_weight(x, x.in(1), scales, N, K, x.ival(0));
  x.f16_flag(2);
  x.out(with_last(dy.shape(), K), DType::f32);
}

// A latent f32 [N, K] that is requantized with its scales [ceil(K / group_size), N] (int 0: group_size).
q4::Geometry requant_geometry(Ctx& x, const Tensor& lat, const Tensor& scales) {
  x.dtype(lat, DType::f32, "latent");
  x.rank_is(lat, 2, "latent");
  x.rank_is(scales, 2, "scales");
  int64_t N = lat.shape()[0], K = lat.shape()[1], gs = x.ival(0);
  if (gs <= 0 || gs % 4 != 0) x.bad("group_size must be a positive multiple of 4, got ", gs);
  if (N < 1 || K < 1) x.bad("latent must be non-empty, got ", lat.str());
  q4::Geometry g(N, K, gs);
  x.dtype(scales, DType::f32, "scales");
  if (scales.shape() != Shape{g.groups(), N})
    x.bad("scales must be [ceil(K/group_size), N] = [", g.groups(), ", ", N, "], got ", scales.str());
  return g;
}

void sig_q4gsw_requant(Ctx& x) {
  const Tensor &lat = x.in(0), &scales = x.in(1);
  x.out(Shape{requant_geometry(x, lat, scales).words()}, DType::u32);
  x.out(lat.shape(), DType::f32);
  if (!x.inferring && x.c.out.size() > 1 && !x.c.out[1].same_memory(lat))
    x.bad("output 1 must be the latent tensor itself (q4gsw_requant clamps it in place)");
  if (x.inferring) x.bad("output 1 is the latent input (in place); use Graph::q4gsw_requant");
}

void sig_linear_dW(Ctx& x) {
  const Tensor &dy = x.in(0), &a = x.in(1);
  x.dtype(dy, DType::f32, "dy");
  x.dtype(a, DType::f32, "x");
  x.rank_at_least(dy, 1, "dy");
  x.rank_at_least(a, 1, "x");
  if (dy.shape().rows() != a.shape().rows())
    x.bad("dy and x must have the same number of rows M, got ", dy.str(), " and ", a.str());
  x.flag(0, "accumulate");
  x.f16_flag(1);
  x.out(Shape{dy.shape().last(), a.shape().last()}, DType::f32);
}

void sig_fused_ce(Ctx& x) {
  const Tensor &lg = x.in(0), &lab = x.in(1);
  x.dtype(lg, DType::f32, "logits");
  x.rank_is(lg, 2, "logits");
  x.dtype(lab, DType::i32, "labels");
  if (lab.shape() != Shape{lg.shape()[0]}) x.bad("labels must be [R] = [", lg.shape()[0], "], got ", lab.str());
  if (lg.shape()[1] < 1) x.bad("logits must have V >= 1 columns, got ", lg.str());
  x.out(Shape{}, DType::f32);
  x.out(lg.shape(), DType::f32);
}

// A part of a vocabulary: rows first .. first+Vp-1 of `total` (int arguments at fi and ti; ti < 0: no total).
// Token ids and labels are i32, so the whole vocabulary must be one too.
void vocab_part(const Ctx& x, int64_t Vp, size_t fi, int ti) {
  const int64_t first = x.ival(fi), total = ti >= 0 ? x.ival(static_cast<size_t>(ti)) : first + Vp;
  if (first < 0) x.bad("first must be >= 0, got ", first);
  if (total < first + Vp) x.bad("total = ", total, " must be >= first + Vp = ", first, " + ", Vp);
  if (total > INT32_MAX) x.bad("total = ", total, " exceeds the i32 ids (", INT32_MAX, ")");
}

void sig_logsumexp_rows(Ctx& x) {
  const Tensor& a = x.in(0);
  x.dtype(a, DType::f32, "x");
  x.rank_is(a, 2, "x");
  if (a.shape()[1] < 1) x.bad("x must have V >= 1 columns, got ", a.str());
  x.flag(0, "accumulate");
  x.out(Shape{a.shape()[0]}, DType::f32);
}

void sig_fused_ce_part(Ctx& x) {
  const Tensor &lg = x.in(0), &lab = x.in(1), &lse = x.in(2);
  x.dtype(lg, DType::f32, "logits");
  x.rank_is(lg, 2, "logits");
  const int64_t R = lg.shape()[0], Vp = lg.shape()[1];
  x.dtype(lab, DType::i32, "labels");
  if (lab.shape() != Shape{R}) x.bad("labels must be [R] = [", R, "], got ", lab.str());
  x.dtype(lse, DType::f32, "lse");
  if (lse.shape() != Shape{R}) x.bad("lse must be [R] = [", R, "], got ", lse.str());
  if (Vp < 1) x.bad("logits must have Vp >= 1 columns, got ", lg.str());
  vocab_part(x, Vp, 0, 1);
  x.flag(2, "accumulate");
  x.out(Shape{}, DType::f32);
  x.out(lg.shape(), DType::f32);
}

// adamw_step's tensors (inputs 0..3, updated in place as outputs 0..3) and its optional grad_scale input.
void adamw_tensors(Ctx& x, size_t grad_scale_input, const char* op) {
  for (size_t i = 0; i < 4; ++i) {
    static const char* names[] = {"param", "m", "v", "grad"};
    x.dtype(x.in(i), DType::f32, names[i]);
    if (x.in(i).numel() != x.in(0).numel())
      x.bad(names[i], " must have as many elements as param ", x.in(0).str(), ", got ", x.in(i).str());
  }
  if (x.c.has_in(grad_scale_input)) {
    x.dtype(x.in(grad_scale_input), DType::f32, "grad_scale");
    if (x.in(grad_scale_input).numel() != 1) x.bad("grad_scale must hold one value, got ", x.in(grad_scale_input).str());
  }
  for (size_t i = 0; i < 4; ++i) {
    x.out(x.in(i).shape(), DType::f32);
    if (!x.inferring && i < x.c.out.size() && !x.c.out[i].same_memory(x.in(i)))
      x.bad("output ", i, " must be the same tensor as input ", i, " (", op, " updates in place)");
  }
}

void sig_adamw_step(Ctx& x) {
  adamw_tensors(x, 4, "adamw_step");
  if (x.inferring) x.bad("outputs are the inputs (in place); use Graph::adamw_step");
}

// latent [N, K] with adamw_step's m, v, grad of its shape; scales and w as q4gsw_requant's.
void sig_adamw_q4gsw_step(Ctx& x) {
  const Tensor &lat = x.in(0), &scales = x.in(4);
  x.rank_is(lat, 2, "latent");
  for (size_t i = 1; i < 4; ++i)
    if (x.in(i).shape() != lat.shape())
      x.bad(i == 1 ? "m" : i == 2 ? "v" : "grad", " must have the latent's shape ", lat.str(), ", got ", x.in(i).str());
  adamw_tensors(x, 5, "adamw_q4gsw_step");
  x.out(Shape{requant_geometry(x, lat, scales).words()}, DType::u32);
  if (x.inferring) x.bad("outputs 0..3 are the inputs (in place); use Graph::adamw_q4gsw_step");
}

// ---- matrix products ----

void sig_mm(Ctx& x) {
  const Tensor &a = x.in(0), &b = x.in(1);
  x.dtype(a, DType::f32, "a");
  x.dtype(b, DType::f32, "b");
  x.rank_is(a, 2, "a");
  x.rank_is(b, 2, "b");
  x.flag(0, "trans_a");
  x.flag(1, "trans_b");
  x.f16_flag(2);
  int64_t M = x.ival(0) ? a.shape()[1] : a.shape()[0], Ka = x.ival(0) ? a.shape()[0] : a.shape()[1];
  int64_t Kb = x.ival(1) ? b.shape()[1] : b.shape()[0], N = x.ival(1) ? b.shape()[0] : b.shape()[1];
  if (Ka != Kb) x.bad("contraction sizes differ: op(a) has K=", Ka, ", op(b) has K=", Kb);
  x.out(Shape{M, N}, DType::f32);
}

void sig_bmm(Ctx& x) {
  const Tensor &a = x.in(0), &b = x.in(1);
  x.dtype(a, DType::f32, "a");
  x.dtype(b, DType::f32, "b");
  int r = a.shape().rank();
  if (r != 3 && r != 4) x.bad("a must have rank 3 or 4, got ", a.str());
  if (b.shape().rank() != r) x.bad("a and b must have the same rank, got ", a.str(), " and ", b.str());
  for (int i = 0; i < r - 2; ++i)
    if (a.shape()[i] != b.shape()[i]) x.bad("batch dims differ: ", a.str(), " and ", b.str());
  x.flag(0, "trans_a");
  x.flag(1, "trans_b");
  x.f16_flag(2);
  const Shape &sa = a.shape(), &sb = b.shape();
  int64_t M = x.ival(0) ? sa[r - 1] : sa[r - 2], Ka = x.ival(0) ? sa[r - 2] : sa[r - 1];
  int64_t Kb = x.ival(1) ? sb[r - 1] : sb[r - 2], N = x.ival(1) ? sb[r - 2] : sb[r - 1];
  if (Ka != Kb) x.bad("contraction sizes differ: op(a) has K=", Ka, ", op(b) has K=", Kb);
  Shape o = sa;
  o[r - 2] = M;
  o[r - 1] = N;
  x.out(o, DType::f32);
}

void sig_linear(Ctx& x) {
  const Tensor &a = x.in(0), &w = x.in(1);
  x.dtype(a, DType::f32, "x");
  x.dtype(w, DType::f32, "w");
  x.rank_at_least(a, 1, "x");
  x.rank_is(w, 2, "w");
  if (w.shape()[1] != a.shape().last()) x.bad("w must be [N, K] with K = ", a.shape().last(), ", got ", w.str());
  x.f16_flag(0);
  int64_t N = w.shape()[0];
  if (x.has_in(2)) {
    x.dtype(x.in(2), DType::f32, "bias");
    if (x.in(2).shape() != Shape{N}) x.bad("bias must be [N] = [", N, "], got ", x.in(2).str());
  }
  x.out(with_last(a.shape(), N), DType::f32);
}

// ---- elementwise ----

void binary(Ctx& x) {
  x.dtype(x.in(0), DType::f32, "a");
  x.dtype(x.in(1), DType::f32, "b");
  x.out(broadcast(x, x.in(0).shape(), x.in(1).shape()), DType::f32);
}
void sig_add(Ctx& x) { binary(x); }
void sig_sub(Ctx& x) { binary(x); }
void sig_mul(Ctx& x) { binary(x); }
void sig_div(Ctx& x) { binary(x); }

void sig_scale(Ctx& x) {
  x.dtype(x.in(0), DType::f32, "x");
  x.out(x.in(0).shape(), DType::f32);
}

void sig_where(Ctx& x) {
  x.dtype(x.in(0), DType::boolean, "cond");
  x.dtype(x.in(1), DType::f32, "a");
  x.dtype(x.in(2), DType::f32, "b");
  x.out(broadcast(x, broadcast(x, x.in(0).shape(), x.in(1).shape()), x.in(2).shape()), DType::f32);
}

void compare(Ctx& x) {
  DType t = x.in(0).dtype();
  if (t != DType::f32 && t != DType::i32) x.bad("x must be f32 or i32, got ", x.in(0).str());
  x.out(x.in(0).shape(), DType::boolean);
}
void sig_eq(Ctx& x) { compare(x); }
void sig_ne(Ctx& x) { compare(x); }
void sig_lt(Ctx& x) { compare(x); }
void sig_le(Ctx& x) { compare(x); }
void sig_gt(Ctx& x) { compare(x); }
void sig_ge(Ctx& x) { compare(x); }

void sig_logical_not(Ctx& x) {
  x.dtype(x.in(0), DType::boolean, "x");
  x.out(x.in(0).shape(), DType::boolean);
}

void sig_fill(Ctx& x) {
  x.outputs_given = true;
  if (x.inferring) x.bad("the output's shape and dtype are the caller's choice; use Graph::full");
}

// ---- copies ----

bool convertible(DType t) { return t == DType::f32 || t == DType::i32 || t == DType::boolean; }

void sig_dim_order_copy(Ctx& x) {
  x.outputs_given = true;
  if (x.inferring) x.bad("the output dtype is the caller's choice; use Graph::to_dtype");
  const Tensor &a = x.in(0), &o = x.c.out[0];
  if (a.shape() != o.shape()) x.bad("out must have x's shape ", a.shape().str(), ", got ", o.str());
  if (a.dtype() != o.dtype() && !(convertible(a.dtype()) && convertible(o.dtype())))
    x.bad("cannot convert ", dtype_name(a.dtype()), " to ", dtype_name(o.dtype()),
          " (conversions exist among f32, i32 and bool)");
}

void sig_expand_copy(Ctx& x) {
  x.outputs_given = true;
  if (x.inferring) x.bad("the output shape is the caller's choice; use Graph::expand");
  const Tensor &a = x.in(0), &o = x.c.out[0];
  if (a.dtype() != o.dtype()) x.bad("out must have x's dtype, got ", o.str());
  if (a.shape().rank() > o.shape().rank() || broadcast(x, a.shape(), o.shape()) != o.shape())
    x.bad("x ", a.shape().str(), " does not broadcast to ", o.shape().str());
}

void sig_permute_copy(Ctx& x) {
  const Tensor& a = x.in(0);
  int r = a.shape().rank();
  if (static_cast<int>(x.c.ints.size()) != r) x.bad("dims must list ", r, " dims, got ", x.c.ints.size());
  bool seen[kMaxRank] = {};
  Shape o = a.shape();
  for (int i = 0; i < r; ++i) {
    int64_t d = x.ival(i);
    if (d < 0) d += r;
    if (d < 0 || d >= r || seen[d]) x.bad("dims must be a permutation of 0..", r - 1);
    seen[d] = true;
    o[i] = a.shape()[static_cast<int>(d)];
  }
  x.out(o, a.dtype());
}

void sig_write_rows(Ctx& x) {
  x.outputs_given = true;
  if (x.inferring) x.bad("writes into an existing tensor; use Graph::write_rows");
  const Tensor &a = x.in(0), &o = x.c.out[0];
  x.rank_at_least(a, 1, "x");
  x.rank_at_least(o, 1, "out");
  if (a.dtype() != o.dtype()) x.bad("out must have x's dtype, got ", o.str());
  if (a.shape().last() != o.shape().last()) x.bad("x and out must have the same row length, got ", a.str(), " and ", o.str());
}

// ---- reductions ----

void reduce(Ctx& x) {
  const Tensor& a = x.in(0);
  x.dtype(a, DType::f32, "x");
  x.flag(0, "keepdim");
  int r = a.shape().rank();
  size_t nd = x.c.ints.size() - 1;
  if (nd == 0) x.bad("dims must name at least one dim");
  std::vector<int64_t> dims;
  for (size_t i = 0; i < nd; ++i) {
    int64_t d = x.ival(1 + i);
    if (d < -r || d >= r) x.bad("dim ", d, " out of range for rank ", r);
    dims.push_back(d < 0 ? d + r : d);
  }
  std::sort(dims.begin(), dims.end());
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1) x.bad("dims must be distinct and adjacent");
  int64_t d[kMaxRank];
  int n = 0;
  for (int i = 0; i < r; ++i) {
    bool red = i >= dims.front() && i <= dims.back();
    if (!red) d[n++] = a.shape()[i];
    else if (x.ival(0)) d[n++] = 1;
  }
  x.out(Shape::of(d, n), DType::f32);
}
void sig_sum(Ctx& x) { reduce(x); }
void sig_mean(Ctx& x) { reduce(x); }

void last_dim(Ctx& x, const Tensor& a) {
  x.rank_at_least(a, 1, "x");
  int r = a.shape().rank();
  int64_t d = x.ival(0);
  if (d != -1 && d != r - 1) x.bad("only the last dim is supported (dim=-1 or ", r - 1, "), got ", d);
}

void sig_softmax(Ctx& x) {
  x.dtype(x.in(0), DType::f32, "x");
  last_dim(x, x.in(0));
  x.out(x.in(0).shape(), DType::f32);
}
void sig_log_softmax(Ctx& x) { sig_softmax(x); }

void sig_softmax_backward(Ctx& x) {
  x.dtype(x.in(0), DType::f32, "y");
  x.dtype(x.in(1), DType::f32, "dy");
  if (x.in(0).shape() != x.in(1).shape()) x.bad("y and dy must have the same shape");
  last_dim(x, x.in(0));
  x.out(x.in(0).shape(), DType::f32);
}

void sig_causal_softmax(Ctx& x) {
  const Tensor& a = x.in(0);
  x.dtype(a, DType::f32, "x");
  x.rank_at_least(a, 2, "x");
  if (a.shape().dim(-1) < a.shape().dim(-2)) x.bad("x [..., T, S] needs S >= T, got ", a.str());
  x.out(a.shape(), DType::f32);
}

// ---- Llama block ----

void sig_rms_norm(Ctx& x) {
  const Tensor &a = x.in(0), &w = x.in(1);
  x.dtype(a, DType::f32, "x");
  x.dtype(w, DType::f32, "w");
  x.rank_at_least(a, 1, "x");
  if (w.shape() != Shape{a.shape().last()}) x.bad("w must be [D] = [", a.shape().last(), "], got ", w.str());
  x.out(a.shape(), DType::f32);
  x.out(Shape{a.shape().rows()}, DType::f32);
}

void sig_rms_norm_backward(Ctx& x) {
  const Tensor &dy = x.in(0), &a = x.in(1), &w = x.in(2), &rstd = x.in(3);
  for (size_t i = 0; i < 4; ++i) x.dtype(x.in(i), DType::f32, "every input");
  x.rank_at_least(a, 1, "x");
  if (dy.shape() != a.shape()) x.bad("dy and x must have the same shape");
  if (w.shape() != Shape{a.shape().last()}) x.bad("w must be [D] = [", a.shape().last(), "], got ", w.str());
  if (rstd.shape() != Shape{a.shape().rows()}) x.bad("rstd must be [rows] = [", a.shape().rows(), "]");
  x.flag(0, "accumulate");
  x.out(a.shape(), DType::f32);
  x.out(w.shape(), DType::f32);
}

void rope_like(Ctx& x) {
  const Tensor& a = x.in(0);
  x.dtype(a, DType::f32, "x");
  int r = a.shape().rank();
  if (r != 3 && r != 4) x.bad("x must be [B, T, H, D] or [T, H, D], got ", a.str());
  if (a.shape().last() % 2 != 0) x.bad("head dim D must be even, got ", a.str());
  if (x.has_in(1)) {
    x.dtype(x.in(1), DType::f32, "freqs");
    if (x.in(1).shape() != Shape{a.shape().last() / 2})
      x.bad("freqs must be [D/2] = [", a.shape().last() / 2, "] (one frequency per pair), got ", x.in(1).str());
  }
  if (x.has_in(2)) {
    const Shape want = r == 4 ? Shape{a.shape()[0], a.shape()[1]} : Shape{a.shape()[0]};
    x.dtype(x.in(2), DType::i32, "pos");
    if (x.in(2).shape() != want)
      x.bad("pos must be ", want.str(), " (each token's position within its sample), got ", x.in(2).str());
  }
  x.out(a.shape(), DType::f32);
}
void sig_rope(Ctx& x) { rope_like(x); }
void sig_rope_backward(Ctx& x) { rope_like(x); }

void sig_silu_mul(Ctx& x) {
  x.dtype(x.in(0), DType::f32, "g");
  x.dtype(x.in(1), DType::f32, "u");
  if (x.in(0).shape() != x.in(1).shape()) x.bad("g and u must have the same shape");
  x.out(x.in(0).shape(), DType::f32);
}

void sig_silu_mul_backward(Ctx& x) {
  for (size_t i = 0; i < 3; ++i) {
    x.dtype(x.in(i), DType::f32, "every input");
    if (x.in(i).shape() != x.in(0).shape()) x.bad("dh, g and u must have the same shape");
  }
  x.out(x.in(0).shape(), DType::f32);
  x.out(x.in(0).shape(), DType::f32);
}

void sig_embedding(Ctx& x) {
  const Tensor &w = x.in(0), &idx = x.in(1);
  x.dtype(w, DType::f32, "w");
  x.rank_is(w, 2, "w");
  x.dtype(idx, DType::i32, "idx");
  if (x.c.ints.size() == 1) x.bad("give both first and total (a part of a table) or neither");
  if (x.c.ints.size() == 2) vocab_part(x, w.shape()[0], 0, 1);
  x.out(append_dim(x, idx.shape(), w.shape()[1]), DType::f32);
}

void sig_embedding_backward(Ctx& x) {
  x.outputs_given = true;
  if (x.inferring) x.bad("the vocabulary size is the caller's choice; use Graph::embedding_backward");
  const Tensor &dout = x.in(0), &idx = x.in(1), &dw = x.c.out[0];
  x.dtype(dout, DType::f32, "dout");
  x.dtype(idx, DType::i32, "idx");
  x.dtype(dw, DType::f32, "dw");
  x.rank_is(dw, 2, "dw");
  x.flag(0, "accumulate");
  if (x.c.ints.size() > 1) vocab_part(x, dw.shape()[0], 1, -1);
  if (dout.shape() != append_dim(x, idx.shape(), dw.shape()[1]))
    x.bad("dout must be idx.shape + [D] with D = ", dw.shape()[1], ", got ", dout.str());
}

void sig_gather(Ctx& x) {
  const Tensor &a = x.in(0), &idx = x.in(1);
  x.dtype(a, DType::f32, "x");
  x.dtype(idx, DType::i32, "index");
  int r = a.shape().rank();
  if (idx.shape().rank() != r) x.bad("index must have x's rank ", r, ", got ", idx.str());
  int64_t d = x.ival(0);
  if (d < -r || d >= r) x.bad("dim ", d, " out of range for rank ", r);
  if (d < 0) d += r;
  for (int i = 0; i < r; ++i)
    if (i != d && idx.shape()[i] > a.shape()[i])
      x.bad("index size ", idx.shape()[i], " exceeds x size ", a.shape()[i], " in dim ", i);
  x.out(idx.shape(), DType::f32);
}

// q [B,T,H,hd], k and v [B,S,KV,hd] with S >= T and KV dividing H; returns {B, T, S, H, KV, hd} after
// checking them (names in messages as the catalogue's).
struct AttnDims {
  int64_t B, T, S, H, KV, hd;
};
AttnDims attention_dims(const Ctx& x, const Tensor& q, const Tensor& k, const Tensor& v) {
  x.dtype(q, DType::f32, "q");
  x.dtype(k, DType::f32, "k");
  x.dtype(v, DType::f32, "v");
  x.rank_is(q, 4, "q [B, T, H, hd]");
  x.rank_is(k, 4, "k [B, S, KV, hd]");
  if (v.shape() != k.shape()) x.bad("v must have k's shape ", k.shape().str(), ", got ", v.str());
  const Shape &qs = q.shape(), &ks = k.shape();
  AttnDims d{qs[0], qs[1], ks[1], qs[2], ks[2], qs[3]};
  if (ks[0] != d.B || ks[3] != d.hd)
    x.bad("k must be [B, S, KV, hd] with q's B = ", d.B, " and hd = ", d.hd, ", got ", k.str());
  if (d.hd < 1 || d.H < 1 || d.KV < 1) x.bad("heads and head dim must be >= 1, got q ", q.str(), " and k ", k.str());
  if (d.H % d.KV != 0) x.bad("the ", d.KV, " kv heads of k must divide the ", d.H, " query heads of q");
  if (d.S < d.T) x.bad("k's S = ", d.S, " must be >= q's T = ", d.T, " (the last T of S positions are the queries)");
  return d;
}

// The optional pos [B, T] (sample packing) at input i: i32, and only with S == T, where query t is
// position t of the sequence (with a KV cache the queries' positions are not the sequence's).
void attention_pos(const Ctx& x, size_t i, const AttnDims& d) {
  if (!x.has_in(i)) return;
  x.dtype(x.in(i), DType::i32, "pos");
  if (x.in(i).shape() != Shape{d.B, d.T})
    x.bad("pos must be [B, T] = [", d.B, ", ", d.T, "] (each query's position within its sample), got ", x.in(i).str());
  if (d.S != d.T)
    x.bad("pos (sample packing) needs k's S = ", d.S, " equal to q's T = ", d.T,
          " (training shape; a KV cache with S > T has no packed samples)");
}

void sig_attention(Ctx& x) {
  const AttnDims d = attention_dims(x, x.in(0), x.in(1), x.in(2));
  attention_pos(x, 3, d);
  x.out(x.in(0).shape(), DType::f32);
  x.out(Shape{d.B, d.H, d.T}, DType::f32);
}

void sig_attention_backward(Ctx& x) {
  const Tensor &dout = x.in(0), &q = x.in(1), &out = x.in(4), &lse = x.in(5);
  const AttnDims d = attention_dims(x, q, x.in(2), x.in(3));
  x.dtype(dout, DType::f32, "dout");
  x.dtype(out, DType::f32, "out");
  x.dtype(lse, DType::f32, "lse");
  if (dout.shape() != q.shape()) x.bad("dout must have q's shape ", q.shape().str(), ", got ", dout.str());
  if (out.shape() != q.shape()) x.bad("out must have q's shape ", q.shape().str(), ", got ", out.str());
  if (lse.shape() != Shape{d.B, d.H, d.T}) x.bad("lse must be [B, H, T] = [", d.B, ", ", d.H, ", ", d.T, "], got ", lse.str());
  attention_pos(x, 6, d);
  x.out(q.shape(), DType::f32);
  x.out(x.in(2).shape(), DType::f32);
  x.out(x.in(3).shape(), DType::f32);
}

// ---- optimizer helpers ----

void sig_grad_norm(Ctx& x) {
  for (const Tensor& t : x.c.in) x.dtype(t, DType::f32, "every input");
  x.out(Shape{}, DType::f32);
}

void sig_clip_coef(Ctx& x) {
  x.dtype(x.in(0), DType::f32, "norm");
  if (x.in(0).numel() != 1) x.bad("norm must hold one element, got ", x.in(0).str());
  x.out(Shape{}, DType::f32);
}

void run_signature(Ctx& x) {
  switch (x.c.op) {
#define ET_OP(name, family, inputs, outputs, ints, floats, summary) \
  case Op::name:                                                   \
    sig_##name(x);                                                 \
    break;
#include "edgetrain/ops.inc"
#undef ET_OP
  }
}

void check_counts(const OpCall& c, const OpInfo& info, bool check_outputs) {
  auto count = [&](const char* what, size_t n, const ArgList& a) {
    if (n < a.min_count() || n > a.max_count())
      fail(info.name, ": expected ", a.min_count(),
           a.max_count() == a.min_count() ? std::string()
           : a.max_count() == SIZE_MAX    ? std::string(" or more")
                                          : cat(" to ", a.max_count()),
           " ", what, ", got ", n, " (call: ", c.str(), ")");
  };
  count("inputs", c.in.size(), info.inputs);
  if (check_outputs) count("outputs", c.out.size(), info.outputs);
  count("int arguments", c.ints.size(), info.ints);
  if (check_outputs) count("float arguments", c.floats.size(), info.floats);
  for (size_t i = 0; i < c.in.size(); ++i) {
    bool optional_slot = i >= info.inputs.min_count() && i < info.inputs.names.size() && info.inputs.last_optional;
    if (!c.in[i].defined() && !optional_slot) fail(info.name, ": input ", i, " is undefined");
  }
}

}  // namespace

void check_call(const OpCall& c) {
  const OpInfo& info = op_info(c.op);
  check_counts(c, info, true);
  for (size_t i = 0; i < c.out.size(); ++i)
    if (!c.out[i].defined()) fail(info.name, ": output ", i, " is undefined");
  Ctx x{c, info, {}, false, false};
  run_signature(x);
  if (x.outputs_given) return;
  for (size_t i = 0; i < x.expect.size(); ++i) {
    const Tensor& o = c.out[i];
    if (o.shape() != x.expect[i].shape || o.dtype() != x.expect[i].dtype)
      fail(info.name, ": output ", info.outputs.names[i], " must be ", dtype_name(x.expect[i].dtype),
           x.expect[i].shape.str(), ", got ", o.str(), " (call: ", c.str(), ")");
  }
  // An output may share memory with an input only where the op allows it.
  for (size_t i = 0; i < c.out.size(); ++i)
    for (size_t j = 0; j < c.in.size(); ++j) {
      if (!c.out[i].same_memory(c.in[j])) continue;
      bool elementwise = c.op == Op::scale || c.op == Op::add || c.op == Op::sub || c.op == Op::mul ||
                         c.op == Op::div;
      bool allowed = ((c.op == Op::adamw_step || c.op == Op::adamw_q4gsw_step) && i == j) || (c.op == Op::q4gsw_requant && i == 1 && j == 0) || (c.op == Op::fused_ce && i == 1 && j == 0) ||
                     (c.op == Op::fused_ce_part && i == 1 && j == 0) ||
                     (elementwise && c.in[j].shape() == c.out[i].shape());
      if (!allowed)
        fail(info.name, ": output ", i, " shares memory with input ", j, ", which this op does not allow");
    }
  for (size_t i = 0; i < c.out.size(); ++i)
    for (size_t j = i + 1; j < c.out.size(); ++j)
      if (c.out[i].same_memory(c.out[j])) fail(info.name, ": outputs ", i, " and ", j, " share memory");
}

bool has_f16_flag(Op op) {
  const ArgList& ints = op_info(op).ints;
  return ints.last_optional && !ints.names.empty() && ints.names.back() == "f16";
}

bool f16_operands(const OpCall& c) {
  return has_f16_flag(c.op) && c.ints.size() == op_info(c.op).ints.names.size() && c.ints.back() != 0;
}

std::vector<OutSpec> infer_outputs(Op op, const std::vector<Tensor>& in, const std::vector<int64_t>& ints) {
  OpCall c{op, in, {}, ints, {}};
  const OpInfo& info = op_info(op);
  check_counts(c, info, false);
  Ctx x{c, info, {}, false, false};
  x.inferring = true;
  run_signature(x);
  return x.expect;
}

}  // namespace edgetrain

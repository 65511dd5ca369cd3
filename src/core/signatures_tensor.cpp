// Signatures of the matrix products, elementwise ops, copies and reductions; see signatures.h.
#include <algorithm>
#include <cstdint>

#include "core/signatures.h"

namespace edgetrain::sig {

// ---- matrix products ----

void sig_mm(Ctx& x) {
  const Tensor &a = x.in(0), &b = x.in(1);
  x.dtype(a, DType::f32, "a");
  x.dtype(b, DType::f32, "b");
  x.rank_is(a, 2, "a");
  x.rank_is(b, 2, "b");
  x.flag(0, "trans_a");
  x.flag(1, "trans_b");
  if (x.c.ints.size() > 2) x.flag(2, "accumulate");
  x.f16_flag(3);
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

static void binary(Ctx& x) {
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

static void compare(Ctx& x) {
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

static bool convertible(DType t) { return t == DType::f32 || t == DType::i32 || t == DType::boolean; }

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

static void reduce(Ctx& x) {
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

static void last_dim(Ctx& x, const Tensor& a) {
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

}  // namespace edgetrain::sig

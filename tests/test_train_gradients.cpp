// Gradient checks of the reference by central finite differences: fused_ce's dlogits is d(loss)/d(logits);
// linear_q4gsw_backward, linear_dW and the mm/bmm/linear gradient formulas (transpose flags included) are
// the derivatives of the forward ops. Every function value comes from the reference op itself.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "edgetrain/q4gsw.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

OpCase make(Op op, std::vector<HostTensor> in, Shape out, std::vector<int64_t> ints = {},
            std::vector<float> floats = {}) {
  OpCase c;
  c.name = "grad";
  c.op = op;
  c.in = std::move(in);
  c.out = {zeros(out, DType::f32)};
  c.ints = std::move(ints);
  c.floats = std::move(floats);
  return c;
}

HostTensor run(const OpCase& c, size_t output = 0) { return run_reference(c)[output]; }

// sum_i a[i] * b[i] in double: the scalar whose gradient a backward op computes, given b as the upstream
// gradient of a's op.
double dot(const HostTensor& a, const HostTensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += static_cast<double>(a.as<float>()[i]) * b.as<float>()[i];
  return s;
}

// Central differences of f with respect to every element of input `which` of c, against want.
// The perturbation actually applied is measured after fp32 rounding, so the quotient is honest.
void expect_fd_gradient(OpCase c, size_t which, const std::function<double(const OpCase&)>& f, const HostTensor& want,
                        float h, double atol, double rtol) {
  HostTensor& x = c.in[which];
  ASSERT_EQ(x.numel(), want.numel());
  int bad = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float x0 = x.as<float>()[i], xp = x0 + h, xm = x0 - h;
    x.as<float>()[i] = xp;
    double fp = f(c);
    x.as<float>()[i] = xm;
    double fm = f(c);
    x.as<float>()[i] = x0;
    double fd = (fp - fm) / (static_cast<double>(xp) - xm), g = want.as<float>()[i];
    if (std::fabs(fd - g) > atol + rtol * std::fabs(g) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": finite difference " << fd << ", analytic " << g;
  }
}

TEST(Gradients, FusedCeDlogitsIsLossGradient) {
  const int64_t R = 5, V = 11;
  Rng r(11);
  HostTensor labels = random_i32(r, Shape{R}, 0, V - 1);
  labels.as<int32_t>()[1] = -100;
  labels.as<int32_t>()[3] = -1;
  const float n_valid = 3.0f;
  OpCase c;
  c.name = "grad";
  c.op = Op::fused_ce;
  c.in = {random_f32(r, Shape{R, V}, -2, 2), labels};
  c.out = {zeros(Shape{}, DType::f32), zeros(Shape{R, V}, DType::f32)};
  c.floats = {n_valid};
  HostTensor d = run(c, 1);
  // Ignored rows: zero gradient, and the loss must not depend on them at all (the difference is exactly 0).
  for (int64_t j = 0; j < V; ++j) {
    EXPECT_EQ(d.as<float>()[1 * V + j], 0.0f);
    EXPECT_EQ(d.as<float>()[3 * V + j], 0.0f);
  }
  auto loss = [](const OpCase& k) { return static_cast<double>(run(k, 0).as<float>()[0]); };
  // The loss is smooth, so h = 1e-2 leaves a truncation error ~h^2/6 * |f'''| < 1e-5, and the fp32 loss
  // rounding (~1e-7) divided by 2h stays near 1e-5 too.
  expect_fd_gradient(c, 0, loss, d, 1e-2f, 1e-4, 1e-2);
  // Each valid row's gradient sums to 0 (softmax minus one-hot).
  for (int64_t rr : {0, 2, 4}) {
    double s = 0;
    for (int64_t j = 0; j < V; ++j) s += d.as<float>()[rr * V + j];
    EXPECT_NEAR(s, 0.0, 1e-6) << "row " << rr;
  }
}

// L(x) = sum(G * linear_q4gsw(x)) is linear in x, so central differences are exact up to rounding and a
// large step drowns the rounding: the check is that backward is the exact transpose of forward.
TEST(Gradients, Q4BackwardIsTransposeOfForward) {
  struct S {
    Shape x;
    int64_t N, gs;
    bool zero_scales;
  };
  Rng r(12);
  for (const S& s : {S{Shape{3, 37}, 13, 32, false}, S{Shape{2, 2, 20}, 9, 8, true}, S{Shape{1, 70}, 16, 64, false}}) {
    SCOPED_TRACE(s.x.str());
    const int64_t K = s.x.last();
    Shape yshape = s.x;
    yshape[s.x.rank() - 1] = s.N;
    Q4Weight q = random_q4(r, s.N, K, s.gs, s.zero_scales);
    HostTensor G = random_f32(r, yshape);
    HostTensor dx = run(make(Op::linear_q4gsw_backward, {G, q.w, q.scales}, s.x, {s.gs, K}));
    OpCase fwd = make(Op::linear_q4gsw, {random_f32(r, s.x), q.w, q.scales, random_f32(r, Shape{s.N})}, yshape, {s.gs});
    expect_fd_gradient(fwd, 0, [&](const OpCase& k) { return dot(run(k), G); }, dx, 0.5f, 1e-5, 1e-4);
  }
}

// linear_dW(G, x) is the gradient of sum(G * linear(x, W, b)) with respect to the fp32 weight W; with
// accumulate = 1 it adds that gradient to what dw held.
TEST(Gradients, LinearDwIsWeightGradientOfLinear) {
  Rng r(13);
  const int64_t M = 5, K = 7, N = 6;
  HostTensor x = random_f32(r, Shape{M, K}), G = random_f32(r, Shape{M, N});
  HostTensor dw = run(make(Op::linear_dW, {G, x}, Shape{N, K}, {0}));
  OpCase fwd = make(Op::linear, {x, random_f32(r, Shape{N, K}), random_f32(r, Shape{N})}, Shape{M, N});
  expect_fd_gradient(fwd, 1, [&](const OpCase& k) { return dot(run(k), G); }, dw, 0.5f, 1e-5, 1e-4);

  OpCase acc = make(Op::linear_dW, {G, x}, Shape{N, K}, {1});
  acc.out[0] = random_f32(r, Shape{N, K});
  HostTensor summed = run(acc);
  for (int64_t i = 0; i < N * K; ++i)
    EXPECT_NEAR(summed.as<float>()[i], acc.out[0].as<float>()[i] + dw.as<float>()[i], 1e-6) << i;

  // The input and bias gradients of linear, through the other ops: dx = G @ W, db = sum over rows of G.
  HostTensor dx = run(make(Op::mm, {G, fwd.in[1]}, Shape{M, K}, {0, 0}, {1.0f}));
  expect_fd_gradient(fwd, 0, [&](const OpCase& k) { return dot(run(k), G); }, dx, 0.5f, 1e-5, 1e-4);
  HostTensor db(Shape{N}, DType::f32);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) db.as<float>()[n] += G.as<float>()[m * N + n];
  expect_fd_gradient(fwd, 2, [&](const OpCase& k) { return dot(run(k), G); }, db, 0.5f, 1e-5, 1e-4);
}

// For out = alpha * op(A) @ op(B) and upstream G, the gradients written with the same op and flags:
//   dA = ta ? alpha * op(B) @ G^T : alpha * G @ op(B)^T      dB = tb ? alpha * G^T @ op(A) : alpha * op(A)^T @ G
// Checking them against finite differences checks the transpose flags' meaning from both sides.
void check_matmul_gradients(Op op, const std::vector<int64_t>& batch) {
  const int64_t M = 4, K = 5, N = 3;
  const float alpha = 0.75f;
  auto shape = [&](int64_t a, int64_t b) {
    int64_t d[kMaxRank];
    for (size_t i = 0; i < batch.size(); ++i) d[i] = batch[i];
    d[batch.size()] = a;
    d[batch.size() + 1] = b;
    return Shape::of(d, static_cast<int>(batch.size()) + 2);
  };
  Rng r(14);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(std::string(op_name(op)) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
      HostTensor A = random_f32(r, ta ? shape(K, M) : shape(M, K)), B = random_f32(r, tb ? shape(N, K) : shape(K, N));
      HostTensor G = random_f32(r, shape(M, N));
      HostTensor dA = ta ? run(make(op, {B, G}, shape(K, M), {tb, 1}, {alpha}))
                         : run(make(op, {G, B}, shape(M, K), {0, 1 - tb}, {alpha}));
      HostTensor dB = tb ? run(make(op, {G, A}, shape(N, K), {1, ta}, {alpha}))
                         : run(make(op, {A, G}, shape(K, N), {1 - ta, 0}, {alpha}));
      OpCase fwd = make(op, {A, B}, shape(M, N), {ta, tb}, {alpha});
      auto L = [&](const OpCase& k) { return dot(run(k), G); };
      expect_fd_gradient(fwd, 0, L, dA, 0.5f, 1e-5, 1e-4);
      expect_fd_gradient(fwd, 1, L, dB, 0.5f, 1e-5, 1e-4);
    }
}

TEST(Gradients, MmTransposeFlags) { check_matmul_gradients(Op::mm, {}); }
TEST(Gradients, BmmTransposeFlagsRank3) { check_matmul_gradients(Op::bmm, {2}); }
TEST(Gradients, BmmTransposeFlagsRank4) { check_matmul_gradients(Op::bmm, {2, 3}); }

}  // namespace
}  // namespace edgetrain::test

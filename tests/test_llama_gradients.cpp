// Finite-difference checks of every backward op against its forward, both run by the CPU reference:
// rms_norm_backward, rope_backward, silu_mul_backward, softmax_backward (through softmax and through
// causal_softmax), attention_backward, log_softmax's gradient, embedding_backward, and sum/mean.
//
// Method: a random projection loss L(x) = sum_i r_i * f(x)_i, evaluated in double from the f32 op output.
// For each input element, dL/dx ~ (L(x + e) - L(x - e)) / (x+e - (x-e)), with the step measured after
// rounding x +- e to f32. The analytic gradient is the backward op fed dy = r.
// Tolerance |fd - analytic| <= 2e-3 + 1e-2 * |analytic|, eps = 1e-3: each f32 output carries a relative
// rounding error of ~6e-8, so L has an error of about sqrt(n) * 6e-8 * |r f| (~1e-6 for our sizes), which
// the division by 2e-3 turns into ~5e-4 in the difference quotient; the O(eps^2) truncation error of the
// central difference is ~1e-6 relative. A wrong term in a backward (sign, factor, missing mean) is O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

constexpr double kEps = 1e-3, kAtol = 2e-3, kRtol = 1e-2;

// Runs one op of the reference on host tensors (a null input: an absent optional one); outputs are modified
// in place (as given).
void call(Op op, std::vector<HostTensor*> in, std::vector<HostTensor*> out, std::vector<int64_t> ints = {},
          std::vector<float> floats = {}) {
  ref::Call c{op, {}, {}, std::move(ints), std::move(floats)};
  for (HostTensor* t : in) c.in.push_back(t ? t->view() : ref::View{});
  for (HostTensor* t : out) c.out.push_back(t->view());
  ref::run(c);
}

double dot(const HostTensor& r, const HostTensor& y) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(r.as<float>()[i]) * y.as<float>()[i];
  return s;
}

// Compares the analytic gradient `grad` of L with respect to the f32 tensor `x` with central
// differences of `loss`, which evaluates L from the current contents of x.
void expect_gradient(const char* what, HostTensor& x, const HostTensor& grad, const std::function<double()>& loss) {
  ASSERT_EQ(x.numel(), grad.numel()) << what;
  int bad = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    float& xi = x.as<float>()[i];
    const float orig = xi;
    const float hi = static_cast<float>(orig + kEps), lo = static_cast<float>(orig - kEps);
    xi = hi;
    double lhi = loss();
    xi = lo;
    double llo = loss();
    xi = orig;
    double fd = (lhi - llo) / (static_cast<double>(hi) - lo);
    double an = grad.as<float>()[i];
    if (!(std::fabs(fd - an) <= kAtol + kRtol * std::fabs(an)) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: finite difference " << fd << ", backward " << an;
  }
}

TEST(Gradients, RmsNorm) {
  Rng rng(51);
  for (Shape s : {Shape{3, 7}, Shape{2, 2, 16}, Shape{1, 1}}) {
    SCOPED_TRACE(s.str());
    int64_t D = s.last();
    HostTensor x = random_f32(rng, s, -2.0f, 2.0f), w = random_f32(rng, Shape{D}, 0.5f, 1.5f), r = random_f32(rng, s);
    HostTensor y(s, DType::f32), rstd(Shape{s.rows()}, DType::f32);
    const float eps = 1e-2f;  // noticeable, so that a backward that forgets eps in rstd shows up
    auto loss = [&] {
      call(Op::rms_norm, {&x, &w}, {&y, &rstd}, {}, {eps});
      return dot(r, y);
    };
    loss();
    HostTensor dx(s, DType::f32), dw = random_f32(rng, Shape{D});
    HostTensor dw_before = dw;
    call(Op::rms_norm_backward, {&r, &x, &w, &rstd}, {&dx, &dw}, {0});
    expect_gradient("dx", x, dx, loss);
    expect_gradient("dw", w, dw, loss);
    // accumulate = 1 adds the same gradient to what dw held.
    HostTensor dx2(s, DType::f32), dw2 = dw_before;
    call(Op::rms_norm_backward, {&r, &x, &w, &rstd}, {&dx2, &dw2}, {1});
    for (int64_t k = 0; k < D; ++k)
      EXPECT_NEAR(dw2.as<float>()[k], dw_before.as<float>()[k] + dw.as<float>()[k], 1e-5) << "dw accumulate " << k;
  }
}

TEST(Gradients, Rope) {
  Rng rng(52);
  for (Shape s : {Shape{2, 3, 2, 8}, Shape{4, 1, 2}}) {
    SCOPED_TRACE(s.str());
    HostTensor x = random_f32(rng, s), r = random_f32(rng, s), y(s, DType::f32), dx(s, DType::f32);
    const std::vector<float> floats = {10000.0f, 5.0f};  // theta, pos_offset
    auto loss = [&] {
      call(Op::rope, {&x}, {&y}, {}, floats);
      return dot(r, y);
    };
    call(Op::rope_backward, {&r}, {&dx}, {}, floats);
    expect_gradient("dx", x, dx, loss);
    // The same with per-pair frequencies (rope scaling): the backward must rotate back by the same angles.
    HostTensor freqs = random_f32(rng, Shape{s.last() / 2}, 0.01f, 2.0f);
    auto scaled = [&] {
      call(Op::rope, {&x, &freqs}, {&y}, {}, floats);
      return dot(r, y);
    };
    call(Op::rope_backward, {&r, &freqs}, {&dx}, {}, floats);
    expect_gradient("dx with freqs", x, dx, scaled);
    // Packed samples (pos): each token rotates by its own sample's position, forward and back.
    HostTensor pos = s.rank() == 4 ? packed_positions(s[0], s[1], {{2, 1}, {3}})
                                   : HostTensor::from(Shape{s[0]}, DType::i32, std::vector<int32_t>{0, 1, 0, 1});
    auto packed = [&] {
      call(Op::rope, {&x, nullptr, &pos}, {&y}, {}, floats);
      return dot(r, y);
    };
    call(Op::rope_backward, {&r, nullptr, &pos}, {&dx}, {}, floats);
    expect_gradient("dx with pos", x, dx, packed);
    auto both = [&] {
      call(Op::rope, {&x, &freqs, &pos}, {&y}, {}, floats);
      return dot(r, y);
    };
    call(Op::rope_backward, {&r, &freqs, &pos}, {&dx}, {}, floats);
    expect_gradient("dx with freqs and pos", x, dx, both);
  }
}

TEST(Gradients, SiluMul) {
  Rng rng(53);
  Shape s{37};
  HostTensor g = random_f32(rng, s, -6.0f, 6.0f), u = random_f32(rng, s), r = random_f32(rng, s), h(s, DType::f32);
  auto loss = [&] {
    call(Op::silu_mul, {&g, &u}, {&h});
    return dot(r, h);
  };
  HostTensor dg(s, DType::f32), du(s, DType::f32);
  call(Op::silu_mul_backward, {&r, &g, &u}, {&dg, &du});
  expect_gradient("dg", g, dg, loss);
  expect_gradient("du", u, du, loss);
}

TEST(Gradients, Softmax) {
  Rng rng(54);
  for (Shape s : {Shape{3, 9}, Shape{1, 1}, Shape{2, 2, 33}}) {
    SCOPED_TRACE(s.str());
    HostTensor x = random_f32(rng, s, -3.0f, 3.0f), r = random_f32(rng, s), y(s, DType::f32), dx(s, DType::f32);
    auto loss = [&] {
      call(Op::softmax, {&x}, {&y}, {-1});
      return dot(r, y);
    };
    loss();
    call(Op::softmax_backward, {&y, &r}, {&dx}, {-1});
    expect_gradient("dx", x, dx, loss);
  }
}

// causal_softmax's backward is scale * softmax_backward(out, dout); masked entries get 0.
TEST(Gradients, CausalSoftmax) {
  Rng rng(55);
  for (Shape s : {Shape{4, 4}, Shape{2, 3, 7}}) {
    SCOPED_TRACE(s.str());
    const float scale = 0.7f;
    HostTensor x = random_f32(rng, s, -3.0f, 3.0f), r = random_f32(rng, s), y(s, DType::f32), dy(s, DType::f32);
    auto loss = [&] {
      call(Op::causal_softmax, {&x}, {&y}, {}, {scale});
      return dot(r, y);
    };
    loss();
    call(Op::softmax_backward, {&y, &r}, {&dy}, {-1});
    HostTensor dx(s, DType::f32);
    call(Op::scale, {&dy}, {&dx}, {}, {scale});
    expect_gradient("dx", x, dx, loss);
  }
}

// L = r . out of attention; attention_backward fed dout = r and the forward's out and lse must give its
// gradients for q, k and v. Shapes: grouped heads (G = 2), a KV cache (S > T: every query sees the first
// S - T keys), multi-head with an odd head dim, large scores (a softmax near one-hot), and packed samples
// (pos: windows restarting inside a row, a sample of length 1, rows packed differently).
TEST(Gradients, Attention) {
  Rng rng(59);
  struct Shp {
    int64_t B, T, S, H, KV, hd;
    float range;
  };
  for (Shp s : {Shp{2, 5, 5, 4, 2, 4, 1.0f}, Shp{1, 4, 7, 2, 1, 6, 1.0f}, Shp{1, 6, 6, 1, 1, 3, 1.0f},
                Shp{1, 5, 5, 2, 1, 4, 3.0f}}) {
    SCOPED_TRACE("B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " S" + std::to_string(s.S) + " H" +
                 std::to_string(s.H) + " KV" + std::to_string(s.KV) + " hd" + std::to_string(s.hd));
    const Shape qs{s.B, s.T, s.H, s.hd}, ks{s.B, s.S, s.KV, s.hd}, ls{s.B, s.H, s.T};
    HostTensor q = random_f32(rng, qs, -s.range, s.range), k = random_f32(rng, ks, -s.range, s.range),
               v = random_f32(rng, ks), r = random_f32(rng, qs);
    HostTensor out(qs, DType::f32), lse(ls, DType::f32);
    const float scale = 0.8f;
    auto loss = [&] {
      call(Op::attention, {&q, &k, &v}, {&out, &lse}, {}, {scale});
      return dot(r, out);
    };
    loss();
    HostTensor dq(qs, DType::f32), dk(ks, DType::f32), dv(ks, DType::f32);
    call(Op::attention_backward, {&r, &q, &k, &v, &out, &lse}, {&dq, &dk, &dv}, {}, {scale});
    expect_gradient("dq", q, dq, loss);
    expect_gradient("dk", k, dk, loss);
    expect_gradient("dv", v, dv, loss);
    if (s.S != s.T) continue;  // pos needs the training shape
    HostTensor pos = packed_positions(s.B, s.T, {{2, 1, 3}, {4}});
    auto packed = [&] {
      call(Op::attention, {&q, &k, &v, &pos}, {&out, &lse}, {}, {scale});
      return dot(r, out);
    };
    packed();
    call(Op::attention_backward, {&r, &q, &k, &v, &out, &lse, &pos}, {&dq, &dk, &dv}, {}, {scale});
    expect_gradient("dq with pos", q, dq, packed);
    expect_gradient("dk with pos", k, dk, packed);
    expect_gradient("dv with pos", v, dv, packed);
  }
}

// d/dx_j sum_k r_k log_softmax(x)_k = r_j - softmax(x)_j * sum_k r_k, row by row.
TEST(Gradients, LogSoftmax) {
  Rng rng(56);
  Shape s{3, 11};
  HostTensor x = random_f32(rng, s, -3.0f, 3.0f), r = random_f32(rng, s), y(s, DType::f32), p(s, DType::f32);
  auto loss = [&] {
    call(Op::log_softmax, {&x}, {&y}, {-1});
    return dot(r, y);
  };
  call(Op::softmax, {&x}, {&p}, {-1});
  HostTensor dx(s, DType::f32);
  int64_t n = s.last();
  for (int64_t row = 0; row < s.rows(); ++row) {
    double rs = 0.0;
    for (int64_t j = 0; j < n; ++j) rs += r.as<float>()[row * n + j];
    for (int64_t j = 0; j < n; ++j)
      dx.as<float>()[row * n + j] = static_cast<float>(r.as<float>()[row * n + j] - p.as<float>()[row * n + j] * rs);
  }
  expect_gradient("dx", x, dx, loss);
}

// L = sum over rows with a valid index of r . embedding(w, idx); rows with an out-of-range index are NaN
// in the forward and are left out of L, but their dout rows are nonzero: the backward must ignore them.
TEST(Gradients, Embedding) {
  Rng rng(57);
  const int32_t V = 6;
  const int64_t D = 5;
  HostTensor w = random_f32(rng, Shape{V, D});
  HostTensor idx = HostTensor::from(Shape{2, 4}, DType::i32, std::vector<int32_t>{3, 0, 3, -1, 5, 3, V, 1});
  Shape os{2, 4, D};
  HostTensor r = random_f32(rng, os), out(os, DType::f32);
  auto loss = [&] {
    call(Op::embedding, {&w, &idx}, {&out});
    double s = 0.0;
    for (int64_t i = 0; i < idx.numel(); ++i) {
      int32_t t = idx.as<int32_t>()[i];
      if (t < 0 || t >= V) continue;
      for (int64_t d = 0; d < D; ++d) s += static_cast<double>(r.as<float>()[i * D + d]) * out.as<float>()[i * D + d];
    }
    return s;
  };
  HostTensor dw = random_f32(rng, Shape{V, D});  // accumulate = 0 must overwrite this
  call(Op::embedding_backward, {&r, &idx}, {&dw}, {0});
  expect_gradient("dw", w, dw, loss);
}

// sum: every x element feeds one output with weight 1, so dx = r expanded over the reduced dims; mean
// divides by the number of reduced elements.
TEST(Gradients, SumAndMean) {
  Rng rng(58);
  Shape s{3, 4, 5};
  for (Op op : {Op::sum, Op::mean})
    for (std::vector<int64_t> dims : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 1}, std::vector<int64_t>{2}}) {
      SCOPED_TRACE(std::string(op_name(op)) + " dims from " + std::to_string(dims.front()));
      Shape keep = s;
      int64_t count = 1;
      for (int64_t d : dims) {
        count *= s[static_cast<int>(d)];
        keep[static_cast<int>(d)] = 1;
      }
      std::vector<int64_t> ints = {1};
      ints.insert(ints.end(), dims.begin(), dims.end());
      HostTensor x = random_f32(rng, s), r = random_f32(rng, keep), y(keep, DType::f32);
      auto loss = [&] {
        call(op, {&x}, {&y}, ints);
        return dot(r, y);
      };
      HostTensor expanded(s, DType::f32), dx(s, DType::f32);
      call(Op::expand_copy, {&r}, {&expanded});
      call(Op::scale, {&expanded}, {&dx}, {}, {op == Op::mean ? 1.0f / static_cast<float>(count) : 1.0f});
      expect_gradient("dx", x, dx, loss);
    }
}

}  // namespace
}  // namespace edgetrain::test

// The training ops' reference against hand-computed values (the 4-bit linear, fused cross-entropy and its
// vocabulary parts, requantization, AdamW, gradient norm and clipping), fused cross-entropy in vocabulary
// parts on every backend, and a recorded training step replayed with changing slots on every backend
// against the eager reference. The ops' catalogue cases: test_train_ops.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "edgetrain/graph.h"
#include "edgetrain/half.h"
#include "edgetrain/q4gsw.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

// ---- the reference against hand-computed values ----

OpCase one(Op op, std::vector<HostTensor> in, std::vector<HostTensor> out, std::vector<int64_t> ints = {},
           std::vector<float> floats = {}) {
  OpCase c;
  c.name = "hand";
  c.op = op;
  c.in = std::move(in);
  c.out = std::move(out);
  c.ints = std::move(ints);
  c.floats = std::move(floats);
  return c;
}

HostTensor f32(Shape s, std::vector<float> v) { return HostTensor::from(s, DType::f32, v); }

TEST(TrainReference, LinearQ4gswByHand) {
  // W row 0 = q {1, -1, 0} * 0.5, row 1 = q {-8, 7, 4} * 0.25 (one group: gs 4 > K 3).
  q4::Geometry g(2, 3, 4);
  std::vector<uint8_t> codes = {9, 7, 8, 0, 15, 12};
  HostTensor w = HostTensor::from(Shape{g.words()}, DType::u32, q4::pack_w4x8(g, codes.data()));
  HostTensor s = f32(Shape{1, 2}, {0.5f, 0.25f});
  OpCase c = one(Op::linear_q4gsw, {f32(Shape{1, 3}, {1, 2, 3}), w, s, f32(Shape{2}, {10, -1})},
                 {zeros(Shape{1, 2}, DType::f32)}, {4});
  auto y = run_reference(c)[0].to_vector<float>();
  EXPECT_FLOAT_EQ(y[0], 0.5f - 1.0f + 10.0f);
  EXPECT_FLOAT_EQ(y[1], -2.0f + 3.5f + 3.0f - 1.0f);
  c.in_absent = {false, false, false, true};
  y = run_reference(c)[0].to_vector<float>();
  EXPECT_FLOAT_EQ(y[1], -2.0f + 3.5f + 3.0f);

  OpCase b = one(Op::linear_q4gsw_backward, {f32(Shape{1, 2}, {1, 2}), w, s}, {zeros(Shape{1, 3}, DType::f32)},
                 {4, 3});
  auto dx = run_reference(b)[0].to_vector<float>();
  EXPECT_FLOAT_EQ(dx[0], 0.5f - 4.0f);
  EXPECT_FLOAT_EQ(dx[1], -0.5f + 3.5f);
  EXPECT_FLOAT_EQ(dx[2], 2.0f);
}

TEST(TrainReference, FusedCeByHand) {
  // Row 0: uniform over 3 classes; row 1 ignored; row 2: class 0 dominates by 1000 (needs the max shift).
  HostTensor logits = f32(Shape{3, 3}, {0, 0, 0, 5, 6, 7, 1000, 0, 0});
  HostTensor labels = HostTensor::from(Shape{3}, DType::i32, std::vector<int32_t>{2, -100, 0});
  auto o = run_reference(one(Op::fused_ce, {logits, labels}, {zeros(Shape{}, DType::f32), zeros(Shape{3, 3}, DType::f32)},
                             {}, {2.0f}));
  EXPECT_FLOAT_EQ(o[0].as<float>()[0], static_cast<float>(std::log(3.0) / 2));
  auto d = o[1].to_vector<float>();
  const float third = static_cast<float>(1.0 / 6), two_thirds = static_cast<float>(-1.0 / 3);
  EXPECT_FLOAT_EQ(d[0], third);
  EXPECT_FLOAT_EQ(d[1], third);
  EXPECT_FLOAT_EQ(d[2], two_thirds);
  for (int j = 3; j < 9; ++j) EXPECT_EQ(d[j], 0.0f) << j;

  // A label >= V poisons its row and the loss instead of reading past the row.
  labels.as<int32_t>()[1] = 3;
  o = run_reference(one(Op::fused_ce, {logits, labels}, {zeros(Shape{}, DType::f32), zeros(Shape{3, 3}, DType::f32)},
                        {}, {2.0f}));
  EXPECT_TRUE(std::isnan(o[0].as<float>()[0]));
  for (int j = 3; j < 6; ++j) EXPECT_TRUE(std::isnan(o[1].as<float>()[j])) << j;
  EXPECT_FLOAT_EQ(o[1].as<float>()[0], third);
}

TEST(TrainReference, VocabPartsByHand) {
  // Row 0 = {1, 2 | 3}: lse = log(e + e^2 + e^3), label 2 in the second part; row 1 ignored.
  HostTensor a = f32(Shape{2, 2}, {1, 2, 0, 0}), b = f32(Shape{2, 1}, {3, 0});
  HostTensor labels = HostTensor::from(Shape{2}, DType::i32, std::vector<int32_t>{2, -100});
  auto l0 = run_reference(one(Op::logsumexp_rows, {a}, {zeros(Shape{2}, DType::f32)}, {0}))[0];
  EXPECT_FLOAT_EQ(l0.as<float>()[0], static_cast<float>(std::log(std::exp(1.0) + std::exp(2.0))));
  auto lse = run_reference(one(Op::logsumexp_rows, {b}, {l0}, {1}))[0];
  const double want = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_FLOAT_EQ(lse.as<float>()[0], static_cast<float>(want));
  EXPECT_FLOAT_EQ(lse.as<float>()[1], static_cast<float>(std::log(3.0)));
  auto pa = run_reference(one(Op::fused_ce_part, {a, labels, lse}, {filled_f32(Shape{}, 9.0f), zeros(Shape{2, 2}, DType::f32)},
                              {0, 3, 0}, {1.0f}));
  EXPECT_FLOAT_EQ(pa[0].as<float>()[0], lse.as<float>()[0]);  // first part: + lse, no label term
  EXPECT_FLOAT_EQ(pa[1].as<float>()[1], static_cast<float>(std::exp(2.0 - want)));
  EXPECT_EQ(pa[1].as<float>()[2], 0.0f);
  auto pb = run_reference(one(Op::fused_ce_part, {b, labels, lse}, {pa[0], zeros(Shape{2, 1}, DType::f32)}, {2, 3, 1},
                              {1.0f}));
  EXPECT_FLOAT_EQ(pb[0].as<float>()[0], static_cast<float>(want - 3.0));
  EXPECT_FLOAT_EQ(pb[1].as<float>()[0], static_cast<float>(std::exp(3.0 - want) - 1.0));
  // A label >= total poisons its row and the loss.
  labels.as<int32_t>()[1] = 3;
  auto bad = run_reference(one(Op::fused_ce_part, {b, labels, lse}, {zeros(Shape{}, DType::f32), zeros(Shape{2, 1}, DType::f32)},
                               {2, 3, 0}, {1.0f}));
  EXPECT_TRUE(std::isnan(bad[0].as<float>()[0]));
  EXPECT_TRUE(std::isnan(bad[1].as<float>()[1]));
}

TEST(TrainReference, RequantByHand) {
  // One row at scale 1: ties go to even, the range clamps, NaN gives value 0; rows 1..7 are padding.
  HostTensor lat = f32(Shape{1, 8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 100, -100, std::nanf("")});
  q4::Geometry g(1, 8, 8);
  OpCase c = one(Op::q4gsw_requant, {lat, f32(Shape{1, 1}, {1.0f})},
                 {HostTensor::from(Shape{g.words()}, DType::u32, std::vector<uint32_t>(8, 0)), zeros(Shape{1, 8}, DType::f32)},
                 {8});
  c.out_alias = {-1, 0};
  auto out = run_reference(c);
  auto words = out[0].to_vector<uint32_t>();
  // The latents are clamped into [-8.5, 7.5] in place; NaN stays.
  auto l = out[1].to_vector<float>();
  EXPECT_EQ(std::vector<float>(l.begin(), l.begin() + 7), (std::vector<float>{0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 7.5f, -8.5f}));
  EXPECT_TRUE(std::isnan(l[7]));
  auto codes = q4::unpack_w4x8(g, words.data());
  EXPECT_EQ(codes, (std::vector<uint8_t>{8, 10, 10, 8, 6, 15, 0, 8}));
  // Word j of block k4 holds rows 2j, 2j+1: row 0 sits in the low nibble of each byte of words 0 and 4.
  EXPECT_EQ(words[0], 0x888A8A88u);  // byte b = k b: code of row 0 low, padding row 1 high
  EXPECT_EQ(words[4], 0x88808F86u);  // k 4..7 -> codes 6, 15, 0, 8
  for (int i : {1, 2, 3, 5, 6, 7}) EXPECT_EQ(words[i], 0x88888888u) << i;
}

TEST(TrainReference, AdamwByHand) {
  // The expectation is computed in double from the very fp32 hyperparameters the op receives; with a
  // grad_scale the gradient is scaled first (0.5: exact). The gradient comes back zeroed either way.
  const float hp[7] = {0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f};
  const double lr = hp[0], b1 = hp[1], b2 = hp[2], eps = hp[3], wd = hp[4], bc1 = hp[5], bc2 = hp[6];
  for (double scale : {1.0, 0.5}) {
    SCOPED_TRACE("grad_scale " + std::to_string(scale));
    std::vector<HostTensor> in = {f32(Shape{2}, {1, -2}), f32(Shape{2}, {0, 0.5f}), f32(Shape{2}, {0, 0.25f}),
                                  f32(Shape{2}, {0.5f, -1})};
    if (scale != 1.0) in.push_back(f32(Shape{}, {static_cast<float>(scale)}));
    OpCase c = one(Op::adamw_step, in,
                   {zeros(Shape{2}, DType::f32), zeros(Shape{2}, DType::f32), zeros(Shape{2}, DType::f32),
                    zeros(Shape{2}, DType::f32)},
                   {}, std::vector<float>(hp, hp + 7));
    c.out_alias = {0, 1, 2, 3};
    auto o = run_reference(c);
    const double p0[2] = {1, -2}, m0[2] = {0, 0.5}, v0[2] = {0, 0.25}, g0[2] = {0.5, -1};
    for (int i = 0; i < 2; ++i) {
      const double g = g0[i] * scale;
      double p = p0[i] - lr * wd * p0[i];
      double m = b1 * m0[i] + (1 - b1) * g;
      double v = b2 * v0[i] + (1 - b2) * g * g;
      p -= lr * (m / bc1) / (std::sqrt(v / bc2) + eps);
      EXPECT_NEAR(o[0].as<float>()[i], p, 1e-5 * std::fabs(p)) << i;
      EXPECT_NEAR(o[1].as<float>()[i], m, 1e-6 * std::fabs(m)) << i;
      EXPECT_NEAR(o[2].as<float>()[i], v, 1e-6 * std::fabs(v)) << i;
      EXPECT_EQ(o[3].as<float>()[i], 0.0f) << i;
    }
  }
}

// A model has more gradients than a kernel may bind (lavapipe: 32 buffers; a qlora model of 3 blocks with
// adapters on all seven projections has 42): Graph::grad_norm groups them under the backend's limit and
// takes the norm of the groups' norms. Recorded and replayed on every backend, against the fp64 sum.
TEST(TrainOps, GradNormOfMoreTensorsThanAKernelBinds) {
  Rng r(109);
  std::vector<HostTensor> host;
  double sum = 0;
  int64_t n = 0;
  for (int i = 0; i < 100; ++i) {
    host.push_back(random_f32(r, Shape{1 + 37 * (i % 11)}, -2, 2));
    for (float x : host.back().to_vector<float>()) sum += static_cast<double>(x) * x;
    n += host.back().numel();
  }
  for (const std::string& bname : test_backends()) {
    SCOPED_TRACE(bname);
    Backend& be = backend_for_tests(bname);
    std::vector<Tensor> xs;
    for (const HostTensor& h : host) xs.push_back(be.from_host(h.shape(), DType::f32, h.data(), h.nbytes()));
    auto prog = be.new_program();
    Graph g(be, *prog);
    Tensor norm = g.grad_norm(xs);
    prog->finalize();
    prog->replay();
    float got = 0;
    be.download(norm, &got, sizeof got);
    EXPECT_NEAR(got, std::sqrt(sum), tol::reduction(n).rtol * std::sqrt(sum)) << "binding limit " << be.max_call_bindings();
  }
}

TEST(TrainReference, GradNormAndClipByHand) {
  auto n = run_reference(one(Op::grad_norm, {f32(Shape{2}, {3, 4}), f32(Shape{}, {12})}, {zeros(Shape{}, DType::f32)}));
  EXPECT_FLOAT_EQ(n[0].as<float>()[0], 13.0f);
  auto coef = [](float norm, float max_norm) {
    return run_reference(one(Op::clip_coef, {f32(Shape{}, {norm})}, {zeros(Shape{}, DType::f32)}, {}, {max_norm}))[0]
        .as<float>()[0];
  };
  EXPECT_FLOAT_EQ(coef(13.0f, 1.0f), static_cast<float>(1.0 / (13.0 + 1e-6)));
  EXPECT_EQ(coef(0.5f, 1.0f), 1.0f);
  EXPECT_EQ(coef(0.0f, 1.0f), 1.0f);
  EXPECT_TRUE(std::isnan(coef(std::nanf(""), 1.0f)));
}

// ---- a recorded training step, replayed with changing slots ----

// A vocabulary in three parts of unequal width, each its own tensor: logsumexp_rows (accumulate 0, 1, 1)
// then fused_ce_part (accumulate 0, 1, 1) give fused_ce's loss and, concatenated, its dlogits, on every
// backend. The parts' dlogits overwrite their logits in place for some shapes, as a training step does.
class VocabParts : public ::testing::TestWithParam<std::string> {};

HostTensor columns(const HostTensor& x, int64_t c0, int64_t c1) {
  const int64_t R = x.shape()[0], V = x.shape()[1];
  HostTensor h(Shape{R, c1 - c0}, DType::f32);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = c0; j < c1; ++j) h.as<float>()[r * (c1 - c0) + j - c0] = x.as<float>()[r * V + j];
  return h;
}

TEST_P(VocabParts, MatchFusedCe) {
  Backend& b = backend_for_tests(GetParam());
  for (Op op : {Op::logsumexp_rows, Op::fused_ce_part})
    if (!b.supports(op)) GTEST_SKIP() << GetParam() << " does not support " << op_name(op);
  struct S {
    const char* name;
    int64_t R;
    std::vector<int64_t> widths;
    float lo, hi;
    std::vector<int32_t> special;
    bool in_place;
  };
  const std::vector<S> shapes = {
      {"R1_V7", 1, {1, 2, 4}, -3, 3, {5}, false},
      {"R5_V1000", 5, {255, 257, 488}, -6, 6, {-100, 0, 254, 255, 999}, true},
      {"R3_V1002", 3, {1000, 1, 1}, -4, 4, {1000, 1001, -1}, false},
      {"R17_V3000", 17, {1, 1999, 1000}, -10, 10, {0, 1, 1999, 2000, 2999, -100}, true},
      {"R4_V600_large", 4, {300, 256, 44}, 500, 520, {599, 300}, true},
      {"R3_V10_label_out_of_range", 3, {3, 3, 4}, -2, 2, {10, 2, -100}, false},
  };
  Rng r(107);
  auto up = [&](const HostTensor& h) { return b.from_host(h.shape(), h.dtype(), h.data(), h.nbytes()); };
  for (const S& s : shapes) {
    SCOPED_TRACE(s.name);
    int64_t V = 0;
    for (int64_t w : s.widths) V += w;
    HostTensor logits = random_f32(r, Shape{s.R, V}, s.lo, s.hi);
    HostTensor labels = random_i32(r, Shape{s.R}, 0, static_cast<int32_t>(V - 1));
    for (size_t i = 0; i < s.special.size(); ++i) labels.as<int32_t>()[i] = s.special[i];
    int valid = 0;
    for (int64_t i = 0; i < s.R; ++i) valid += labels.as<int32_t>()[i] >= 0;
    const float nv = static_cast<float>(std::max(valid, 1));
    auto want = run_reference(one(Op::fused_ce, {logits, labels}, {zeros(Shape{}, DType::f32), zeros(Shape{s.R, V}, DType::f32)},
                                  {}, {nv}));

    Tensor tlab = up(labels), lse = b.zeros(Shape{s.R}, DType::f32), loss = up(filled_f32(Shape{}, 77.0f));
    std::vector<Tensor> parts, grads;
    int64_t c0 = 0;
    for (int64_t w : s.widths) {
      parts.push_back(up(columns(logits, c0, c0 + w)));
      grads.push_back(s.in_place ? parts.back() : b.zeros(Shape{s.R, w}, DType::f32));
      c0 += w;
    }
    for (size_t k = 0; k < parts.size(); ++k) b.run(OpCall{Op::logsumexp_rows, {parts[k]}, {lse}, {k > 0 ? 1 : 0}, {}});
    c0 = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      b.run(OpCall{Op::fused_ce_part, {parts[k], tlab, lse}, {loss, grads[k]}, {c0, V, k > 0 ? 1 : 0}, {Scalar(nv)}});
      c0 += s.widths[k];
    }
    HostTensor got_loss(Shape{}, DType::f32), got_d(Shape{s.R, V}, DType::f32);
    b.download(loss, got_loss.data(), got_loss.nbytes());
    c0 = 0;
    for (size_t k = 0; k < grads.size(); ++k) {
      HostTensor g(Shape{s.R, s.widths[k]}, DType::f32);
      b.download(grads[k], g.data(), g.nbytes());
      for (int64_t row = 0; row < s.R; ++row)
        for (int64_t j = 0; j < s.widths[k]; ++j)
          got_d.as<float>()[row * V + c0 + j] = g.as<float>()[row * s.widths[k] + j];
      c0 += s.widths[k];
    }
    const Tolerance t = tol::cross_entropy(s.R, V);
    EXPECT_EQ(compare(got_loss, want[0], t), "") << "loss";
    EXPECT_EQ(compare(got_d, want[1], t), "") << "dlogits";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, VocabParts, ::testing::ValuesIn(test_backends()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// One step recorded once: forward through the 4-bit weight, fused CE with the gradient written over the
// logits, input gradient, weight gradient, then AdamW on the fp32 latent weight and on the input rows
// (trained like an embedding, so the loss changes from replay to replay). lr, both bias corrections and
// n_valid are slots; each replay is compared with the same step run op by op through the reference.
class ReplayStep : public ::testing::TestWithParam<std::string> {};

HostTensor download(Backend& b, const Tensor& t) {
  HostTensor h(t.shape(), t.dtype());
  b.download(t, h.data(), h.nbytes());
  return h;
}

TEST_P(ReplayStep, MatchesEagerReference) {
  Backend& b = backend_for_tests(GetParam());
  for (Op op : {Op::linear_q4gsw, Op::fused_ce, Op::linear_q4gsw_backward, Op::linear_dW, Op::adamw_step})
    if (!b.supports(op)) GTEST_SKIP() << GetParam() << " does not support " << op_name(op);
  const int64_t M = 12, K = 40, N = 24, gs = 32;  // K = 40: a partial last group
  // eps well above the fp32 noise of tiny gradients, so Adam's normalization cannot amplify it.
  const float b1 = 0.9f, b2 = 0.99f, eps = 1e-3f, wd = 0.01f;
  // Five chained steps in which a GPU may round every op differently from the reference.
  const Tolerance chained{1e-5, 1e-4};

  Rng r(300);
  Q4Weight q = random_q4(r, N, K, gs);
  HostTensor x = random_f32(r, Shape{M, K}), latent = random_f32(r, Shape{N, K}, -0.3f, 0.3f);
  HostTensor labels = random_i32(r, Shape{M}, 0, static_cast<int32_t>(N - 1));
  labels.as<int32_t>()[3] = -100;
  HostTensor mx = zeros(Shape{M, K}, DType::f32), vx = mx, mw = zeros(Shape{N, K}, DType::f32), vw = mw;

  auto up = [&](const HostTensor& h) { return b.from_host(h.shape(), h.dtype(), h.data(), h.nbytes()); };
  Tensor tx = up(x), tw = up(q.w), ts = up(q.scales), tlab = up(labels), tlat = up(latent);
  Tensor tmx = up(mx), tvx = up(vx), tmw = up(mw), tvw = up(vw);
  auto prog = b.new_program();
  Graph g(b, *prog);
  Scalar lr = prog->slot("lr"), bc1 = prog->slot("bc1"), bc2 = prog->slot("bc2"), nv = prog->slot("n_valid");
  Tensor logits = g.linear_q4gsw(tx, tw, ts, gs);
  auto [loss, dlogits] = g.fused_ce(logits, tlab, nv, /*in_place=*/true);
  Tensor dx = g.linear_q4gsw_backward(dlogits, tw, ts, gs, K);
  Tensor dw = b.zeros(Shape{N, K}, DType::f32);
  g.linear_dW_into(dlogits, tx, dw, false);
  g.adamw_step(tlat, tmw, tvw, dw, lr, b1, b2, eps, wd, bc1, bc2);
  g.adamw_step(tx, tmx, tvx, dx, lr, b1, b2, eps, 0.0f, bc1, bc2);
  prog->finalize();

  for (int t = 1; t <= 5; ++t) {
    SCOPED_TRACE("replay " + std::to_string(t));
    const float lrv = 0.05f / static_cast<float>(t);
    const float bc1v = static_cast<float>(1.0 - std::pow(static_cast<double>(b1), t));
    const float bc2v = static_cast<float>(1.0 - std::pow(static_cast<double>(b2), t));
    // 11 rows are valid; a different n_valid each replay shows the slot is read every time.
    const float nvv = 11.0f + static_cast<float>(t - 1);
    prog->set(lr, lrv);
    prog->set(bc1, bc1v);
    prog->set(bc2, bc2v);
    prog->set("n_valid", nvv);
    prog->replay();

    HostTensor lg = run_reference(one(Op::linear_q4gsw, {x, q.w, q.scales}, {zeros(Shape{M, N}, DType::f32)}, {gs}))[0];
    OpCase ce = one(Op::fused_ce, {lg, labels}, {zeros(Shape{}, DType::f32), zeros(Shape{M, N}, DType::f32)}, {}, {nvv});
    ce.out_alias = {-1, 0};
    auto ceo = run_reference(ce);
    HostTensor dxr = run_reference(one(Op::linear_q4gsw_backward, {ceo[1], q.w, q.scales},
                                       {zeros(Shape{M, K}, DType::f32)}, {gs, K}))[0];
    HostTensor dwr = run_reference(one(Op::linear_dW, {ceo[1], x}, {zeros(Shape{N, K}, DType::f32)}, {0}))[0];
    auto adam = [&](HostTensor& p, HostTensor& m, HostTensor& v, const HostTensor& grad, float decay) {
      OpCase a = one(Op::adamw_step, {p, m, v, grad}, {p, m, v, grad}, {}, {lrv, b1, b2, eps, decay, bc1v, bc2v});
      a.out_alias = {0, 1, 2, 3};
      auto o = run_reference(a);
      p = o[0];
      m = o[1];
      v = o[2];
    };
    adam(latent, mw, vw, dwr, wd);
    adam(x, mx, vx, dxr, 0.0f);

    EXPECT_EQ(compare(download(b, loss), ceo[0], chained), "") << "loss";
    EXPECT_EQ(compare(download(b, tlat), latent, chained), "") << "latent weight";
    EXPECT_EQ(compare(download(b, tvw), vw, chained), "") << "latent second moment";
    EXPECT_EQ(compare(download(b, tx), x, chained), "") << "input rows";
    EXPECT_EQ(compare(download(b, tmx), mx, chained), "") << "input first moment";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ReplayStep, ::testing::ValuesIn(test_backends()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace edgetrain::test

// Matrix products (mm, bmm, linear): op cases at GPU tile edges for the cross-backend harness (each also
// with fp16 operands), and hand-computed checks of the reference's transpose flags, alpha, batching and bias.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

// M, N, K around 64x64 output tiles, 4x4/8x8 register tiles and 16/32-wide k steps; and whole 128x128
// tiles beside partial ones with 16-byte rows (the cooperative-matrix-2 GEMM's tensor stores).
struct MNK {
  int64_t M, N, K;
};
const std::vector<MNK> kShapes = {{1, 1, 1},     {1, 64, 64},  {3, 5, 7},     {63, 64, 65},  {64, 64, 64},
                                  {65, 63, 129}, {128, 1, 33}, {1, 129, 128}, {129, 65, 16}, {64, 128, 31},
                                  {256, 136, 300}};

std::string mnk_name(const MNK& s) {
  return "M" + std::to_string(s.M) + "_N" + std::to_string(s.N) + "_K" + std::to_string(s.K);
}

// A low-rank adapter's shapes (Vulkan: gemm_narrow.comp, gemm_shallow.comp) at their kernels' edges: a
// narrow side of 1..32 (8/16/32 accumulators, 16-row and 128-column workgroups), contractions around the
// 128-deep chunks (and a long one whose last chunk is partial, over 17 row groups), and contractions of
// 1..32 over 64x128 tiles (16- and 32-deep staging; outputs whose rows are whole 16-byte vectors or not);
// [256, 16] over 384: a dB-shaped product whose stored-transposed A has no padding on either side (cm2:
// staged as its source's rows, ops_gemm_coop.cpp).
const std::vector<MNK> kLowRankShapes = {{100, 16, 300}, {130, 17, 129}, {5, 70, 257},  {64, 32, 1000},
                                         {300, 1, 64},  {70, 130, 16}, {129, 65, 5},  {64, 200, 32},
                                         {65, 64, 1},    {5, 300, 257}, {130, 260, 17}, {260, 8, 1100},
                                         {256, 16, 384}};

std::vector<OpCase> mm_cases() {
  std::vector<OpCase> cs;
  Rng r(201);
  const float alphas[] = {1.0f, 0.5f, -2.0f};
  int i = 0;
  std::vector<MNK> shapes = kShapes;
  shapes.insert(shapes.end(), kLowRankShapes.begin(), kLowRankShapes.end());
  for (const MNK& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb, ++i) {
        // Every flag combination at every shape; alpha cycles so each value meets several shapes, and
        // accumulation every other case (a nonzero old output, which overwriting must ignore).
        const int acc = (i / 3) % 2;
        OpCase c;
        c.op = Op::mm;
        c.name = mnk_name(s) + "_ta" + std::to_string(ta) + "_tb" + std::to_string(tb) + (acc ? "_acc" : "");
        c.in = {random_f32(r, ta ? Shape{s.K, s.M} : Shape{s.M, s.K}),
                random_f32(r, tb ? Shape{s.N, s.K} : Shape{s.K, s.N})};
        c.out = {random_f32(r, Shape{s.M, s.N}, -2.0f, 2.0f)};
        c.ints = {ta, tb, acc};
        c.floats = {alphas[i % 3]};
        c.tol = tol::reduction(s.K + acc);
        push_with_f16(cs, std::move(c), s.K, std::fabs(alphas[i % 3]));
      }
  return cs;
}
ET_OP_CASES(mm, mm_cases);

std::vector<OpCase> bmm_cases() {
  struct S {
    std::vector<int64_t> batch;
    MNK mnk;
  };
  const std::vector<S> shapes = {{{1}, {1, 1, 1}},       {{2}, {64, 64, 64}},  {{3}, {65, 63, 17}},
                                 {{2, 3}, {7, 129, 5}},  {{1, 2}, {128, 8, 64}}, {{4, 1}, {1, 33, 65}}};
  std::vector<OpCase> cs;
  Rng r(202);
  int i = 0;
  for (const S& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb, ++i) {
        auto with = [&](int64_t a, int64_t b) {
          int64_t d[kMaxRank];
          size_t n = s.batch.size();
          for (size_t j = 0; j < n; ++j) d[j] = s.batch[j];
          d[n] = a;
          d[n + 1] = b;
          return Shape::of(d, static_cast<int>(n) + 2);
        };
        const MNK& m = s.mnk;
        OpCase c;
        c.op = Op::bmm;
        c.name = "B" + std::to_string(s.batch.size() == 1 ? s.batch[0] : s.batch[0] * 10 + s.batch[1]) + "_" +
                 mnk_name(m) + "_ta" + std::to_string(ta) + "_tb" + std::to_string(tb);
        c.in = {random_f32(r, ta ? with(m.K, m.M) : with(m.M, m.K)), random_f32(r, tb ? with(m.N, m.K) : with(m.K, m.N))};
        c.out = {zeros(with(m.M, m.N), DType::f32)};
        c.ints = {ta, tb};
        c.floats = {i % 2 ? 0.25f : 1.0f};
        c.tol = tol::reduction(m.K);
        push_with_f16(cs, std::move(c), m.K, 1.0);
      }
  return cs;
}
ET_OP_CASES(bmm, bmm_cases);

std::vector<OpCase> linear_cases() {
  struct S {
    std::vector<int64_t> lead;  // empty: x is rank 1
    MNK mnk;                    // M is unused (the product of lead)
    bool bias;
  };
  const std::vector<S> shapes = {
      {{}, {1, 64, 64}, true},      {{1}, {1, 13, 37}, false},   {{3}, {3, 129, 128}, true},
      {{63}, {63, 63, 64}, false},  {{64}, {64, 64, 64}, true},  {{65}, {65, 65, 129}, true},
      {{2, 5}, {10, 24, 40}, false}, {{129}, {129, 1, 3}, true}, {{128}, {128, 128, 16}, false},
  };
  std::vector<OpCase> cs;
  Rng r(203);
  for (const S& s : shapes) {
    auto with = [&](int64_t last) {
      int64_t d[kMaxRank];
      for (size_t j = 0; j < s.lead.size(); ++j) d[j] = s.lead[j];
      d[s.lead.size()] = last;
      return Shape::of(d, static_cast<int>(s.lead.size()) + 1);
    };
    OpCase c;
    c.op = Op::linear;
    c.name = "rank" + std::to_string(s.lead.size() + 1) + "_" + mnk_name(s.mnk) + (s.bias ? "_bias" : "");
    c.in = {random_f32(r, with(s.mnk.K)), random_f32(r, Shape{s.mnk.N, s.mnk.K}),
            s.bias ? random_f32(r, Shape{s.mnk.N}) : zeros(Shape{s.mnk.N}, DType::f32)};
    c.in_absent = {false, false, !s.bias};
    // Without a bias, alternate between leaving the input out and passing an undefined tensor: both are
    // legal calls, and a backend binding buffers by input position must handle each.
    if (!s.bias && (cs.size() % 2 == 0)) {
      c.in.pop_back();
      c.in_absent.pop_back();
      c.name += "_bias_omitted";
    }
    c.out = {zeros(with(s.mnk.N), DType::f32)};
    c.tol = tol::reduction(s.mnk.K);
    push_with_f16(cs, std::move(c), s.mnk.K, 1.0);
  }
  return cs;
}
ET_OP_CASES(linear, linear_cases);

// ---- the reference against hand-computed values ----

HostTensor f32(Shape s, std::vector<float> v) { return HostTensor::from(s, DType::f32, v); }

std::vector<float> run1(Op op, std::vector<HostTensor> in, Shape out, std::vector<int64_t> ints = {},
                        std::vector<float> floats = {}) {
  OpCase c;
  c.name = "hand";
  c.op = op;
  c.in = std::move(in);
  c.out = {zeros(out, DType::f32)};
  c.ints = std::move(ints);
  c.floats = std::move(floats);
  return run_reference(c)[0].to_vector<float>();
}

TEST(GemmReference, MmFlagsByHand) {
  HostTensor a = f32(Shape{2, 2}, {1, 2, 3, 4}), b = f32(Shape{2, 2}, {5, 6, 7, 8});
  EXPECT_EQ(run1(Op::mm, {a, b}, Shape{2, 2}, {0, 0}, {1}), (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(run1(Op::mm, {a, b}, Shape{2, 2}, {1, 0}, {1}), (std::vector<float>{26, 30, 38, 44}));
  EXPECT_EQ(run1(Op::mm, {a, b}, Shape{2, 2}, {0, 1}, {1}), (std::vector<float>{17, 23, 39, 53}));
  EXPECT_EQ(run1(Op::mm, {a, b}, Shape{2, 2}, {1, 1}, {1}), (std::vector<float>{23, 31, 34, 46}));
  EXPECT_EQ(run1(Op::mm, {a, b}, Shape{2, 2}, {0, 0}, {-0.5f}), (std::vector<float>{-9.5f, -11, -21.5f, -25}));
  // Accumulation adds to the old output (here 1, 2, 3, 4); without it the old output is ignored.
  OpCase acc;
  acc.name = "hand_acc";
  acc.op = Op::mm;
  acc.in = {a, b};
  acc.out = {f32(Shape{2, 2}, {1, 2, 3, 4})};
  acc.ints = {0, 0, 1};
  acc.floats = {-0.5f};
  EXPECT_EQ(run_reference(acc)[0].to_vector<float>(), (std::vector<float>{-8.5f, -9, -18.5f, -21}));
  acc.ints = {0, 0, 0};
  EXPECT_EQ(run_reference(acc)[0].to_vector<float>(), (std::vector<float>{-9.5f, -11, -21.5f, -25}));
  // Non-square: [1, 3] @ [3, 2], and the same product with both operands stored transposed.
  HostTensor row = f32(Shape{1, 3}, {1, 2, 3}), m32 = f32(Shape{3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_EQ(run1(Op::mm, {row, m32}, Shape{1, 2}, {0, 0}, {1}), (std::vector<float>{4, 5}));
  HostTensor col = f32(Shape{3, 1}, {1, 2, 3}), m23 = f32(Shape{2, 3}, {1, 0, 1, 0, 1, 1});
  EXPECT_EQ(run1(Op::mm, {col, m23}, Shape{1, 2}, {1, 1}, {1}), (std::vector<float>{4, 5}));
}

TEST(GemmReference, BmmIsMmPerBatch) {
  Rng r(5);
  // Rank 4 [2, 3, M, K]: every batch must equal mm on that slice, for every flag combination.
  const int64_t B0 = 2, B1 = 3, M = 4, N = 5, K = 6;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Shape sa = ta ? Shape{B0, B1, K, M} : Shape{B0, B1, M, K}, sb = tb ? Shape{B0, B1, N, K} : Shape{B0, B1, K, N};
      HostTensor a = random_f32(r, sa), b = random_f32(r, sb);
      auto all = run1(Op::bmm, {a, b}, Shape{B0, B1, M, N}, {ta, tb}, {0.5f});
      for (int64_t i = 0; i < B0 * B1; ++i) {
        std::vector<float> ai(a.as<float>() + i * M * K, a.as<float>() + (i + 1) * M * K);
        std::vector<float> bi(b.as<float>() + i * K * N, b.as<float>() + (i + 1) * K * N);
        auto one = run1(Op::mm, {f32(ta ? Shape{K, M} : Shape{M, K}, ai), f32(tb ? Shape{N, K} : Shape{K, N}, bi)},
                        Shape{M, N}, {ta, tb}, {0.5f});
        EXPECT_EQ(std::vector<float>(all.begin() + i * M * N, all.begin() + (i + 1) * M * N), one)
            << "batch " << i << " ta " << ta << " tb " << tb;
      }
    }
}

TEST(GemmReference, LinearByHand) {
  HostTensor x = f32(Shape{2, 2}, {1, 2, -1, 0}), w = f32(Shape{3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_EQ(run1(Op::linear, {x, w, f32(Shape{3}, {0.5f, 0, -1})}, Shape{2, 3}),
            (std::vector<float>{1.5f, 2, 2, -0.5f, 0, -2}));
  EXPECT_EQ(run1(Op::linear, {x, w}, Shape{2, 3}), (std::vector<float>{1, 2, 3, -1, 0, -1}));
  // Rank-1 input: a single row.
  EXPECT_EQ(run1(Op::linear, {f32(Shape{2}, {3, 4}), w}, Shape{3}), (std::vector<float>{3, 4, 7}));
}

}  // namespace
}  // namespace edgetrain::test

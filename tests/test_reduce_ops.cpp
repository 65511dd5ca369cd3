// Op cases of the reduction family (sum, mean, softmax, log_softmax, softmax_backward, causal_softmax)
// for the cross-backend harness, plus checks of the reference's defining properties.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A softmax row is an exp (transcendental) per element over a sum of n terms: the looser of the two.
Tolerance softmax_tol(int64_t n) {
  Tolerance a = tol::transcendental, b = tol::reduction(n);
  return {std::max(a.atol, b.atol), std::max(a.rtol, b.rtol)};
}

// ---- sum / mean ----

struct Reduction {
  const char* name;
  Shape x;
  std::vector<int64_t> dims;
};
const Reduction kReductions[] = {
    {"first_4x5x6", Shape{4, 5, 6}, {0}},
    {"middle_4x5x6", Shape{4, 5, 6}, {1}},
    {"last_4x5x6", Shape{4, 5, 6}, {2}},
    {"first_two_4x5x6", Shape{4, 5, 6}, {0, 1}},
    {"last_two_unordered", Shape{4, 5, 6}, {2, 1}},
    {"all_rank3", Shape{3, 7, 5}, {0, 1, 2}},
    {"rank1_257_to_scalar", Shape{257}, {0}},
    {"rows_3x1000", Shape{3, 1000}, {-1}},
    {"cols_65x3", Shape{65, 3}, {0}},
    {"rank4_middle", Shape{2, 3, 4, 5}, {1, 2}},
    {"rank4_negative", Shape{2, 3, 4, 5}, {-3}},
    {"single_element_dim", Shape{5, 1, 7}, {1}},
    {"last_64", Shape{2, 64}, {1}},
    {"last_256", Shape{2, 256}, {1}},
};

Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim, int64_t* count) {
  int r = s.rank();
  bool red[kMaxRank] = {};
  for (int64_t d : dims) red[d < 0 ? d + r : d] = true;
  int64_t out[kMaxRank];
  int n = 0;
  *count = 1;
  for (int i = 0; i < r; ++i) {
    if (red[i]) *count *= s[i];
    if (!red[i]) out[n++] = s[i];
    else if (keepdim) out[n++] = 1;
  }
  return Shape::of(out, n);
}

std::vector<OpCase> reduce_cases(Op op, uint32_t seed) {
  Rng r(seed);
  std::vector<OpCase> cs;
  for (const Reduction& red : kReductions)
    for (int keep : {0, 1}) {
      int64_t count = 0;
      Shape o = reduced_shape(red.x, red.dims, keep, &count);
      std::vector<int64_t> ints = {keep};
      ints.insert(ints.end(), red.dims.begin(), red.dims.end());
      cs.push_back(make_case(std::string(red.name) + (keep ? "_keepdim" : ""), op, {random_f32(r, red.x)},
                             {zeros(o, DType::f32)}, ints, {}, tol::reduction(count)));
    }
  return cs;
}
std::vector<OpCase> sum_cases() { return reduce_cases(Op::sum, 31); }
std::vector<OpCase> mean_cases() { return reduce_cases(Op::mean, 32); }
ET_OP_CASES(sum, sum_cases);
ET_OP_CASES(mean, mean_cases);

// ---- softmax family ----

// Row lengths around a 32-lane subgroup, and a long row; rank 1 to 4.
struct Rows {
  const char* name;
  Shape s;
};
const Rows kRows[] = {
    {"cols1", Shape{4, 1}},    {"cols31", Shape{3, 31}},     {"cols32", Shape{3, 32}},
    {"cols33", Shape{3, 33}},  {"cols1000", Shape{2, 1000}}, {"rank1_cols65", Shape{65}},
    {"rank4", Shape{2, 2, 3, 17}},
};

// Softmax inputs with the hard parts: a large offset (exp(80) overflows f32 unless the max is
// subtracted), -inf entries (weight exactly 0) in some rows, and one row that is -inf but one entry.
HostTensor softmax_input(Rng& r, Shape s, bool hard) {
  HostTensor h = random_f32(r, s, -3.0f, 3.0f);
  if (!hard) return h;
  int64_t n = s.last(), rows = h.numel() / n;
  float* p = h.as<float>();
  for (int64_t row = 0; row < rows; ++row) {
    float* x = p + row * n;
    if (row % 3 == 0)
      for (int64_t j = 0; j < n; ++j) x[j] += 80.0f;
    if (row % 3 == 1 && n > 1)
      for (int64_t j = 0; j < n; j += 2) x[j] = -kInf;
    if (row % 3 == 2)
      for (int64_t j = 1; j < n; ++j) x[j] = -kInf;
  }
  return h;
}

std::vector<OpCase> softmax_like_cases(Op op, uint32_t seed) {
  Rng r(seed);
  std::vector<OpCase> cs;
  for (const Rows& row : kRows)
    for (bool hard : {false, true})
      cs.push_back(make_case(std::string(row.name) + (hard ? "_large_and_neginf" : ""), op,
                             {softmax_input(r, row.s, hard)}, {zeros(row.s, DType::f32)}, {-1}, {},
                             softmax_tol(row.s.last())));
  // dim given as the positive index of the last dim
  cs.push_back(make_case("dim_positive", op, {random_f32(r, Shape{3, 33})}, {zeros(Shape{3, 33}, DType::f32)}, {1}, {},
                         softmax_tol(33)));
  return cs;
}
std::vector<OpCase> softmax_cases() { return softmax_like_cases(Op::softmax, 33); }
std::vector<OpCase> log_softmax_cases() { return softmax_like_cases(Op::log_softmax, 34); }
ET_OP_CASES(softmax, softmax_cases);
ET_OP_CASES(log_softmax, log_softmax_cases);

// y is a real softmax output (rows summing to 1, some entries exactly 0), dy random.
std::vector<OpCase> softmax_backward_cases() {
  Rng r(35);
  std::vector<OpCase> cs;
  for (const Rows& row : kRows)
    for (bool hard : {false, true}) {
      HostTensor y = run_reference(make_case("", Op::softmax, {softmax_input(r, row.s, hard)},
                                             {zeros(row.s, DType::f32)}, {-1}, {}, tol::exact))[0];
      cs.push_back(make_case(std::string(row.name) + (hard ? "_with_zeros" : ""), Op::softmax_backward,
                             {y, random_f32(r, row.s)}, {zeros(row.s, DType::f32)}, {-1}, {},
                             tol::reduction(row.s.last())));
    }
  return cs;
}
ET_OP_CASES(softmax_backward, softmax_backward_cases);

// Attention scores [..., T, S]: S == T (training) and S > T (KV cache: the new rows see all S - T
// earlier positions), with the scale of a head of dim 64 and of 1.
std::vector<OpCase> causal_softmax_cases() {
  Rng r(36);
  struct Scores {
    const char* name;
    Shape s;
    float scale;
  };
  const Scores scores[] = {
      {"T1_S1", Shape{1, 1}, 0.125f},          {"T5_S5", Shape{5, 5}, 0.125f},
      {"T33_S33", Shape{33, 33}, 0.125f},      {"B2_H3_T17_S17", Shape{2, 3, 17, 17}, 0.125f},
      {"T4_S9_cache", Shape{4, 9}, 0.125f},    {"T1_S65_decode", Shape{1, 65}, 0.125f},
      {"H2_T3_S40_cache", Shape{2, 3, 40}, 1.0f}, {"B1_H2_T32_S64_cache", Shape{1, 2, 32, 64}, 0.25f},
  };
  std::vector<OpCase> cs;
  for (const Scores& s : scores) {
    cs.push_back(make_case(s.name, Op::causal_softmax, {random_f32(r, s.s, -4.0f, 4.0f)}, {zeros(s.s, DType::f32)}, {},
                           {s.scale}, softmax_tol(s.s.last())));
  }
  // Large scores: stable only if the max is taken over the visible entries after scaling.
  HostTensor big = random_f32(r, Shape{6, 10}, 600.0f, 700.0f);
  cs.push_back(make_case("large_scores", Op::causal_softmax, {big}, {zeros(Shape{6, 10}, DType::f32)}, {}, {0.125f},
                         softmax_tol(10)));
  return cs;
}
ET_OP_CASES(causal_softmax, causal_softmax_cases);

// ---- the reference's own semantics ----

TEST(ReduceReference, SumAndMeanOverAdjacentDims) {
  // x [2,3,2] = 0..11; sum over dims {1,2} gives [0+..+5, 6+..+11] = [15, 51].
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i);
  HostTensor h = HostTensor::from(Shape{2, 3, 2}, DType::f32, x);
  auto s = run_reference(make_case("", Op::sum, {h}, {zeros(Shape{2, 1, 1}, DType::f32)}, {1, 1, 2}, {}, tol::exact));
  EXPECT_EQ(s[0].to_vector<float>(), (std::vector<float>{15, 51}));
  // mean over dim 0 (keepdim 0): [3] pairs averaged: (0+6)/2, (1+7)/2, ...
  auto m = run_reference(make_case("", Op::mean, {h}, {zeros(Shape{3, 2}, DType::f32)}, {0, 0}, {}, tol::exact));
  EXPECT_EQ(m[0].to_vector<float>(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
}

TEST(ReduceReference, SoftmaxIsStableAndMasksNegInf) {
  std::vector<float> x = {1000.0f, 1000.0f, -kInf, 1000.0f - std::log(2.0f)};
  auto y = run_reference(make_case("", Op::softmax, {HostTensor::from(Shape{4}, DType::f32, x)},
                                   {zeros(Shape{4}, DType::f32)}, {-1}, {}, tol::exact))[0]
               .to_vector<float>();
  // 1000 - ln 2 rounds in f32 (ulp 6e-5), so the weights are near 0.4, 0.4, 0, 0.2 but not exactly.
  double e3 = std::exp(static_cast<double>(x[3]) - 1000.0), z = 2.0 + e3;
  EXPECT_NEAR(y[0], 1.0 / z, 1e-7);
  EXPECT_NEAR(y[1], 1.0 / z, 1e-7);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_NEAR(y[3], e3 / z, 1e-7);
  EXPECT_NEAR(y[0], 0.4, 1e-4);
  auto l = run_reference(make_case("", Op::log_softmax, {HostTensor::from(Shape{4}, DType::f32, x)},
                                   {zeros(Shape{4}, DType::f32)}, {-1}, {}, tol::exact))[0]
               .to_vector<float>();
  EXPECT_NEAR(l[0], -std::log(z), 1e-6);
  EXPECT_EQ(l[2], -kInf);
}

TEST(ReduceReference, CausalSoftmaxMasksTheFuture) {
  // T = 2, S = 3 (one cached position): row 0 sees columns 0..1, row 1 sees all three. Equal scores
  // give uniform weights over the visible columns; the masked entry is exactly 0.
  HostTensor x = filled_f32(Shape{2, 3}, 5.0f);
  auto y = run_reference(make_case("", Op::causal_softmax, {x}, {filled_f32(Shape{2, 3}, 9.0f)}, {}, {0.5f},
                                   tol::exact))[0]
               .to_vector<float>();
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_FLOAT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], 0.0f);
  for (int j = 3; j < 6; ++j) EXPECT_FLOAT_EQ(y[j], 1.0f / 3.0f);
}

}  // namespace
}  // namespace edgetrain::test

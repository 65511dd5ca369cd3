// Op cases of the elementwise family (add, sub, mul, div, scale, where, the scalar comparisons,
// logical_not, fill) for the cross-backend harness, plus checks of the reference's defined edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

OpCase make_case(std::string name, Op op, std::vector<HostTensor> in, std::vector<HostTensor> out,
                 std::vector<float> floats = {}, Tolerance t = tol::elementwise) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.in = std::move(in);
  c.out = std::move(out);
  c.floats = std::move(floats);
  c.tol = t;
  return c;
}

// Element counts just below, at and above typical GPU workgroup/tile widths (64, 256).
const int64_t kSizes[] = {1, 3, 63, 64, 65, 255, 256, 257};

std::string sized(const char* what, int64_t n) {
  std::string s(what);
  s += std::to_string(n);
  return s;
}

Shape broadcast_shape(const Shape& a, const Shape& b) {
  int r = std::max(a.rank(), b.rank());
  int64_t d[kMaxRank];
  for (int i = 0; i < r; ++i) {
    int ia = a.rank() - r + i, ib = b.rank() - r + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    d[i] = da == 1 ? db : da;
  }
  return Shape::of(d, r);
}

// Pairs of shapes (a, b) that broadcast: scalar b, row vector, column against row, rank 4, and a
// smaller than b (the output takes b's shape).
struct BcastPair {
  const char* name;
  Shape a, b;
};
const BcastPair kBcast[] = {
    {"scalar_b", Shape{7, 65}, Shape{}},
    {"N_vs_MN", Shape{5, 33}, Shape{33}},
    {"M1_vs_1N", Shape{9, 1}, Shape{1, 70}},
    {"rank4", Shape{2, 1, 3, 5}, Shape{4, 1, 5}},
    {"a_smaller", Shape{65}, Shape{3, 65}},
};

// A binary op's cases: every size same-shaped, every broadcast pair, and one in-place call (out is a).
// b's magnitude lies in [b_lo, b_hi] with both signs (div keeps b away from zero; zeros get their own case).
std::vector<OpCase> binary_cases(Op op, std::vector<float> floats, uint32_t seed, float b_lo, float b_hi) {
  Rng r(seed);
  auto rand_b = [&](Shape s) {
    HostTensor h = random_f32(r, s, b_lo, b_hi);
    for (int64_t i = 0; i < h.numel(); i += 2) h.as<float>()[i] = -h.as<float>()[i];
    return h;
  };
  std::vector<OpCase> cs;
  for (int64_t n : kSizes)
    cs.push_back(make_case(sized("n", n), op, {random_f32(r, Shape{n}), rand_b(Shape{n})},
                           {zeros(Shape{n}, DType::f32)}, floats));
  for (const BcastPair& p : kBcast)
    cs.push_back(make_case(p.name, op, {random_f32(r, p.a), rand_b(p.b)},
                           {zeros(broadcast_shape(p.a, p.b), DType::f32)}, floats));
  OpCase inplace = make_case("inplace_out_is_a", op, {random_f32(r, Shape{3, 257}), rand_b(Shape{257})},
                             {zeros(Shape{3, 257}, DType::f32)}, floats);
  inplace.out_alias = {0};
  cs.push_back(std::move(inplace));
  return cs;
}

// add and sub with alpha = 1 and with another alpha.
std::vector<OpCase> alpha_cases(Op op, float alpha, uint32_t seed) {
  auto cs = binary_cases(op, {1.0f}, seed, 0.0f, 1.0f);
  for (auto& c : binary_cases(op, {alpha}, seed + 100, 0.0f, 1.0f)) {
    c.name += "_alpha";
    cs.push_back(std::move(c));
  }
  return cs;
}

std::vector<OpCase> add_cases() { return alpha_cases(Op::add, -0.375f, 1); }
std::vector<OpCase> sub_cases() { return alpha_cases(Op::sub, 2.5f, 2); }
std::vector<OpCase> mul_cases() { return binary_cases(Op::mul, {}, 3, 0.0f, 2.0f); }

std::vector<OpCase> div_cases() {
  auto cs = binary_cases(Op::div, {}, 4, 0.25f, 2.0f);
  // IEEE division by (signed) zero and 0/0; inf/inf is NaN and finite/inf a signed zero.
  std::vector<float> a = {1.0f, -2.0f, 0.0f, 3.0f, -3.0f, kInf, 5.0f, 0.0f, -0.0f};
  std::vector<float> b = {0.0f, 0.0f, 0.0f, -0.0f, -0.0f, kInf, kInf, 1.0f, 2.0f};
  int64_t n = static_cast<int64_t>(a.size());
  cs.push_back(make_case("ieee_zero_inf", Op::div,
                         {HostTensor::from(Shape{n}, DType::f32, a), HostTensor::from(Shape{n}, DType::f32, b)},
                         {zeros(Shape{n}, DType::f32)}));
  return cs;
}

std::vector<OpCase> scale_cases() {
  Rng r(5);
  std::vector<OpCase> cs;
  for (int64_t n : kSizes)
    cs.push_back(make_case(sized("n", n), Op::scale, {random_f32(r, Shape{n})}, {zeros(Shape{n}, DType::f32)},
                           {-1.75f}));
  cs.push_back(make_case("zero_scale_rank3", Op::scale, {random_f32(r, Shape{2, 3, 65})},
                         {zeros(Shape{2, 3, 65}, DType::f32)}, {0.0f}));
  cs.push_back(make_case("rank0", Op::scale, {random_f32(r, Shape{})}, {zeros(Shape{}, DType::f32)}, {3.0f}));
  OpCase inplace = make_case("inplace", Op::scale, {random_f32(r, Shape{257})}, {zeros(Shape{257}, DType::f32)},
                             {0.5f});
  inplace.out_alias = {0};
  cs.push_back(std::move(inplace));
  return cs;
}

std::vector<OpCase> where_cases() {
  Rng r(6);
  std::vector<OpCase> cs;
  for (int64_t n : kSizes)
    cs.push_back(make_case(sized("n", n), Op::where,
                           {random_bool(r, Shape{n}), random_f32(r, Shape{n}), random_f32(r, Shape{n})},
                           {zeros(Shape{n}, DType::f32)}));
  // Each input broadcast in its own way.
  struct Three {
    const char* name;
    Shape c, a, b;
  };
  const Three shapes[] = {
      {"cond_col_a_row_b_scalar", Shape{9, 1}, Shape{1, 65}, Shape{}},
      {"cond_scalar", Shape{}, Shape{4, 33}, Shape{4, 33}},
      {"rank4", Shape{2, 1, 3, 1}, Shape{4, 1, 7}, Shape{2, 4, 3, 7}},
      {"cond_full_ab_small", Shape{3, 4, 65}, Shape{65}, Shape{4, 1}},
  };
  for (const Three& t : shapes)
    cs.push_back(make_case(t.name, Op::where, {random_bool(r, t.c), random_f32(r, t.a), random_f32(r, t.b)},
                           {zeros(broadcast_shape(broadcast_shape(t.c, t.a), t.b), DType::f32)}));
  // Bytes other than 1 still mean true.
  HostTensor cond = HostTensor::from(Shape{4}, DType::boolean, std::vector<uint8_t>{0, 2, 255, 1});
  cs.push_back(make_case("cond_nonzero_bytes", Op::where, {cond, random_f32(r, Shape{4}), random_f32(r, Shape{4})},
                         {zeros(Shape{4}, DType::f32)}));
  return cs;
}

ET_OP_CASES(add, add_cases);
ET_OP_CASES(sub, sub_cases);
ET_OP_CASES(mul, mul_cases);
ET_OP_CASES(div, div_cases);
ET_OP_CASES(scale, scale_cases);
ET_OP_CASES(where, where_cases);

// f32 data for the comparisons: random values near s, values exactly s, signed zeros, infinities, NaN.
HostTensor compare_f32(Rng& r, Shape shape, float s) {
  HostTensor h = random_f32(r, shape, s - 2.0f, s + 2.0f);
  float* p = h.as<float>();
  const float specials[] = {s, kNaN, kInf, -kInf, 0.0f, -0.0f, s, std::nextafter(s, kInf)};
  for (int64_t i = 0; i < h.numel(); i += 3) p[i] = specials[(i / 3) % 8];
  return h;
}

// Comparison cases: f32 (with NaN) and i32 at several sizes and thresholds. The i32 cases include a
// non-integer s, and 2^24 + 1 against s = 2^24, which a backend that converts x to f32 gets wrong.
std::vector<OpCase> compare_cases(Op op, uint32_t seed) {
  Rng r(seed);
  std::vector<OpCase> cs;
  auto out = [](Shape s) { return std::vector<HostTensor>{zeros(s, DType::boolean)}; };
  for (int64_t n : {1, 63, 64, 65, 257})
    cs.push_back(make_case(sized("f32_n", n), op, {compare_f32(r, Shape{n}, 0.5f)}, out(Shape{n}), {0.5f}, tol::exact));
  cs.push_back(make_case("f32_s_zero_rank2", op, {compare_f32(r, Shape{6, 11}, 0.0f)}, out(Shape{6, 11}), {0.0f},
                         tol::exact));
  cs.push_back(make_case("f32_s_nan", op, {compare_f32(r, Shape{9}, 1.0f)}, out(Shape{9}), {kNaN}, tol::exact));
  for (int64_t n : {1, 65, 256}) {
    HostTensor x = random_i32(r, Shape{n}, -4, 4);
    cs.push_back(make_case(sized("i32_n", n), op, {x}, out(Shape{n}), {1.0f}, tol::exact));
    cs.push_back(make_case(sized("i32_frac_n", n), op, {x}, out(Shape{n}), {-1.5f}, tol::exact));
  }
  std::vector<int32_t> big = {16777216, 16777217, 16777215, -16777217, 2147483647, -2147483647 - 1};
  cs.push_back(make_case("i32_beyond_f32_precision", op, {HostTensor::from(Shape{6}, DType::i32, big)}, out(Shape{6}),
                         {16777216.0f}, tol::exact));
  cs.push_back(make_case("i32_rank3", op, {random_i32(r, Shape{2, 3, 11}, -100, 100)}, out(Shape{2, 3, 11}), {7.0f},
                         tol::exact));
  return cs;
}

std::vector<OpCase> eq_cases() { return compare_cases(Op::eq, 10); }
std::vector<OpCase> ne_cases() { return compare_cases(Op::ne, 11); }
std::vector<OpCase> lt_cases() { return compare_cases(Op::lt, 12); }
std::vector<OpCase> le_cases() { return compare_cases(Op::le, 13); }
std::vector<OpCase> gt_cases() { return compare_cases(Op::gt, 14); }
std::vector<OpCase> ge_cases() { return compare_cases(Op::ge, 15); }
ET_OP_CASES(eq, eq_cases);
ET_OP_CASES(ne, ne_cases);
ET_OP_CASES(lt, lt_cases);
ET_OP_CASES(le, le_cases);
ET_OP_CASES(gt, gt_cases);
ET_OP_CASES(ge, ge_cases);

std::vector<OpCase> logical_not_cases() {
  Rng r(16);
  std::vector<OpCase> cs;
  for (int64_t n : kSizes)
    cs.push_back(make_case(sized("n", n), Op::logical_not, {random_bool(r, Shape{n})},
                           {zeros(Shape{n}, DType::boolean)}, {}, tol::exact));
  HostTensor odd = HostTensor::from(Shape{5}, DType::boolean, std::vector<uint8_t>{2, 0, 255, 1, 128});
  cs.push_back(make_case("nonzero_bytes", Op::logical_not, {odd}, {zeros(Shape{5}, DType::boolean)}, {}, tol::exact));
  return cs;
}
ET_OP_CASES(logical_not, logical_not_cases);

// fill must write every element, so the output starts as random bytes that all have to be overwritten.
HostTensor garbage(Rng& r, Shape s, DType t) {
  HostTensor h(s, t);
  auto* p = static_cast<uint8_t*>(h.data());
  for (size_t i = 0; i < h.nbytes(); ++i) p[i] = static_cast<uint8_t>(r.integer(0, 255));
  return h;
}

std::vector<OpCase> fill_cases() {
  Rng r(17);
  std::vector<OpCase> cs;
  for (int64_t n : kSizes)
    cs.push_back(make_case(sized("f32_n", n), Op::fill, {}, {garbage(r, Shape{n}, DType::f32)}, {-2.25f}, tol::exact));
  cs.push_back(make_case("f32_rank0", Op::fill, {}, {garbage(r, Shape{}, DType::f32)}, {7.0f}, tol::exact));
  cs.push_back(make_case("f32_rank4_nan", Op::fill, {}, {garbage(r, Shape{2, 3, 5, 7}, DType::f32)}, {kNaN}, tol::exact));
  cs.push_back(make_case("f32_neg_inf", Op::fill, {}, {garbage(r, Shape{65}, DType::f32)}, {-kInf}, tol::exact));
  // Conversions: truncation toward zero, NaN -> 0, saturation; bool is value != 0 (NaN -> true).
  struct Conv {
    DType t;
    float v;
    const char* name;
  };
  const Conv convs[] = {
      {DType::i32, 3.7f, "i32_pos_frac_n"},      {DType::i32, -3.7f, "i32_neg_frac_n"},  {DType::i32, kNaN, "i32_nan_n"},
      {DType::i32, 1e10f, "i32_sat_high_n"},     {DType::i32, -1e10f, "i32_sat_low_n"},  {DType::boolean, 0.0f, "bool_zero_n"},
      {DType::boolean, -0.0f, "bool_negzero_n"}, {DType::boolean, 0.25f, "bool_frac_n"}, {DType::boolean, kNaN, "bool_nan_n"},
      {DType::u8, 200.9f, "u8_frac_n"},          {DType::u8, 300.0f, "u8_sat_n"},        {DType::u8, -5.0f, "u8_negative_n"},
      {DType::u32, 4e9f, "u32_big_n"},           {DType::u32, -1.0f, "u32_negative_n"},  {DType::u32, 1e20f, "u32_sat_n"},
  };
  for (const Conv& c : convs)
    for (int64_t n : {3, 65, 257})
      cs.push_back(make_case(sized(c.name, n), Op::fill, {}, {garbage(r, Shape{n}, c.t)},
                             {c.v}, tol::exact));
  return cs;
}
ET_OP_CASES(fill, fill_cases);

// ---- the reference's own semantics, against values worked out by hand ----

std::vector<uint8_t> bools(const OpCase& c) { return run_reference(c)[0].to_vector<uint8_t>(); }

TEST(ElementwiseReference, CompareI32IsExactAndNaNIsUnordered) {
  std::vector<int32_t> x = {16777216, 16777217, -3};
  OpCase c = make_case("", Op::eq, {HostTensor::from(Shape{3}, DType::i32, x)}, {zeros(Shape{3}, DType::boolean)},
                       {16777216.0f});
  EXPECT_EQ(bools(c), (std::vector<uint8_t>{1, 0, 0}));
  c.op = Op::gt;
  EXPECT_EQ(bools(c), (std::vector<uint8_t>{0, 1, 0}));
  std::vector<float> f = {kNaN, 1.0f};
  OpCase n = make_case("", Op::ne, {HostTensor::from(Shape{2}, DType::f32, f)}, {zeros(Shape{2}, DType::boolean)},
                       {1.0f});
  EXPECT_EQ(bools(n), (std::vector<uint8_t>{1, 0}));
  n.op = Op::eq;
  EXPECT_EQ(bools(n), (std::vector<uint8_t>{0, 1}));
  n.op = Op::le;
  EXPECT_EQ(bools(n), (std::vector<uint8_t>{0, 1}));
}

TEST(ElementwiseReference, DivisionIsIeee) {
  std::vector<float> a = {1.0f, -1.0f, 0.0f, 1.0f}, b = {0.0f, 0.0f, 0.0f, -0.0f};
  OpCase c = make_case("", Op::div, {HostTensor::from(Shape{4}, DType::f32, a), HostTensor::from(Shape{4}, DType::f32, b)},
                       {zeros(Shape{4}, DType::f32)});
  auto o = run_reference(c)[0].to_vector<float>();
  EXPECT_EQ(o[0], kInf);
  EXPECT_EQ(o[1], -kInf);
  EXPECT_TRUE(std::isnan(o[2]));
  EXPECT_EQ(o[3], -kInf);
}

TEST(ElementwiseReference, BroadcastAddWithAlphaInPlace) {
  // a [2,3] + alpha * b [3] with alpha = -2, written over a.
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {10, 20, 30};
  OpCase c = make_case("", Op::add, {HostTensor::from(Shape{2, 3}, DType::f32, a), HostTensor::from(Shape{3}, DType::f32, b)},
                       {zeros(Shape{2, 3}, DType::f32)}, {-2.0f});
  c.out_alias = {0};
  EXPECT_EQ(run_reference(c)[0].to_vector<float>(), (std::vector<float>{-19, -38, -57, -16, -35, -54}));
}

TEST(ElementwiseReference, WhereBroadcastsAllThree) {
  // cond [2,1] picks a [1,3] in row 0 and the scalar b in row 1.
  OpCase c = make_case("", Op::where,
                       {HostTensor::from(Shape{2, 1}, DType::boolean, std::vector<uint8_t>{1, 0}),
                        HostTensor::from(Shape{1, 3}, DType::f32, std::vector<float>{1, 2, 3}),
                        HostTensor::from(Shape{}, DType::f32, std::vector<float>{-1})},
                       {zeros(Shape{2, 3}, DType::f32)});
  EXPECT_EQ(run_reference(c)[0].to_vector<float>(), (std::vector<float>{1, 2, 3, -1, -1, -1}));
}

TEST(ElementwiseReference, FillConvertsToTheOutputDtype) {
  auto fill = [](DType t, float v) { return run_reference(make_case("", Op::fill, {}, {zeros(Shape{1}, t)}, {v}))[0]; };
  EXPECT_EQ(fill(DType::i32, -3.9f).to_vector<int32_t>()[0], -3);
  EXPECT_EQ(fill(DType::i32, kNaN).to_vector<int32_t>()[0], 0);
  EXPECT_EQ(fill(DType::i32, 3e9f).to_vector<int32_t>()[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(fill(DType::u8, -1.0f).to_vector<uint8_t>()[0], 0);
  EXPECT_EQ(fill(DType::u8, 256.5f).to_vector<uint8_t>()[0], 255);
  EXPECT_EQ(fill(DType::u32, 7.9f).to_vector<uint32_t>()[0], 7u);
  EXPECT_EQ(fill(DType::boolean, kNaN).to_vector<uint8_t>()[0], 1);
  EXPECT_EQ(fill(DType::boolean, -0.0f).to_vector<uint8_t>()[0], 0);
  EXPECT_EQ(fill(DType::f32, 0.1f).to_vector<float>()[0], 0.1f);
}

}  // namespace
}  // namespace edgetrain::test

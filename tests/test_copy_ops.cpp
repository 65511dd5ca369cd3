// Op cases of the copy family (dim_order_copy, expand_copy, permute_copy) for the cross-backend harness,
// plus checks of the reference's conversion rules and index mapping against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

OpCase make_case(std::string name, Op op, std::vector<HostTensor> in, std::vector<HostTensor> out,
                 std::vector<int64_t> ints = {}) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.in = std::move(in);
  c.out = std::move(out);
  c.ints = std::move(ints);
  c.tol = tol::exact;  // copies and conversions are exact
  return c;
}

std::string sized(std::string what, int64_t n) {
  what += std::to_string(n);
  return what;
}

// Random bytes of any dtype: byte copies must move every byte, whatever it means.
HostTensor random_bytes(Rng& r, Shape s, DType t) {
  HostTensor h(s, t);
  auto* p = static_cast<uint8_t*>(h.data());
  for (size_t i = 0; i < h.nbytes(); ++i) p[i] = static_cast<uint8_t>(r.integer(0, 255));
  return h;
}

// Source data for a conversion: f32 with fractions of both signs, signed zeros, infinities, NaN and
// values beyond the int32 range; i32 including the extremes; bool with non-0/1 bytes (true).
HostTensor conversion_source(Rng& r, DType t, int64_t n) {
  if (t == DType::f32) {
    HostTensor h = random_f32(r, Shape{n}, -100.0f, 100.0f);
    const float specials[] = {2.9f, -2.9f, 0.0f, -0.0f, kInf, -kInf, kNaN, 3e9f, -3e9f, 0.5f, -0.5f,
                              2147483520.0f, -2147483648.0f, 1e-30f};
    for (int64_t i = 0; i < n; i += 2) h.as<float>()[i] = specials[(i / 2) % 14];
    return h;
  }
  if (t == DType::i32) {
    HostTensor h = random_i32(r, Shape{n}, -1000, 1000);
    const int32_t specials[] = {0, 1, -1, 16777217, std::numeric_limits<int32_t>::max(),
                                std::numeric_limits<int32_t>::min(), 2};
    for (int64_t i = 0; i < n; i += 2) h.as<int32_t>()[i] = specials[(i / 2) % 7];
    return h;
  }
  HostTensor h = random_bool(r, Shape{n});
  for (int64_t i = 0; i < n; i += 5) h.as<uint8_t>()[i] = static_cast<uint8_t>(r.integer(0, 255));
  return h;
}

std::vector<OpCase> dim_order_copy_cases() {
  Rng r(21);
  std::vector<OpCase> cs;
  const DType convertible[] = {DType::f32, DType::i32, DType::boolean};
  for (DType from : convertible)
    for (DType to : convertible)
      for (int64_t n : {1, 3, 64, 65, 257}) {
        std::string name = std::string(dtype_name(from)) + "_to_" + dtype_name(to) + "_n";
        cs.push_back(make_case(sized(name, n), Op::dim_order_copy, {conversion_source(r, from, n)},
                               {random_bytes(r, Shape{n}, to)}));
      }
  // Same dtype is a byte copy for every dtype, including the packed ones; odd byte counts for u8.
  for (DType t : {DType::u8, DType::u32})
    for (int64_t n : {1, 3, 255, 257})
      cs.push_back(make_case(sized(std::string(dtype_name(t)) + "_copy_n", n), Op::dim_order_copy,
                             {random_bytes(r, Shape{n}, t)}, {random_bytes(r, Shape{n}, t)}));
  cs.push_back(make_case("f32_to_i32_rank4", Op::dim_order_copy,
                         {random_f32(r, Shape{2, 3, 5, 7}, -50.0f, 50.0f)}, {zeros(Shape{2, 3, 5, 7}, DType::i32)}));
  return cs;
}
ET_OP_CASES(dim_order_copy, dim_order_copy_cases);

std::vector<OpCase> expand_copy_cases() {
  Rng r(22);
  struct Expand {
    const char* name;
    Shape from, to;
  };
  const Expand shapes[] = {
      {"1_to_257", Shape{1}, Shape{257}},
      {"scalar_to_2x3", Shape{}, Shape{2, 3}},
      {"col_3x1_to_3x65", Shape{3, 1}, Shape{3, 65}},
      {"row_N_to_MN", Shape{64}, Shape{5, 64}},
      {"row_1xN_to_MN", Shape{1, 63}, Shape{4, 63}},
      {"rank2_to_rank4", Shape{3, 1}, Shape{2, 4, 3, 5}},
      {"rank4_inner", Shape{2, 1, 3, 1}, Shape{2, 4, 3, 9}},
      {"identity", Shape{4, 5}, Shape{4, 5}},
  };
  std::vector<OpCase> cs;
  for (const Expand& e : shapes)
    for (DType t : {DType::f32, DType::i32, DType::boolean, DType::u8})
      cs.push_back(make_case(std::string(e.name) + "_" + dtype_name(t), Op::expand_copy, {random_bytes(r, e.from, t)},
                             {zeros(e.to, t)}));
  return cs;
}
ET_OP_CASES(expand_copy, expand_copy_cases);

Shape permuted(const Shape& s, const std::vector<int64_t>& dims) {
  Shape o = s;
  int r = s.rank();
  for (int i = 0; i < r; ++i) o[i] = s[static_cast<int>(dims[i] < 0 ? dims[i] + r : dims[i])];
  return o;
}

std::vector<OpCase> permute_copy_cases() {
  Rng r(23);
  struct Perm {
    const char* name;
    Shape s;
    std::vector<int64_t> dims;
  };
  const Perm perms[] = {
      {"transpose_63x65", Shape{63, 65}, {1, 0}},
      {"transpose_1x257", Shape{1, 257}, {1, 0}},
      {"transpose_64x64", Shape{64, 64}, {1, 0}},
      {"rank1", Shape{65}, {0}},
      {"rank3_201", Shape{3, 5, 7}, {2, 0, 1}},
      {"rank3_negative", Shape{3, 5, 7}, {-1, -3, -2}},
      {"heads_BTHD_to_BHTD", Shape{2, 5, 3, 8}, {0, 2, 1, 3}},
      {"rank4_reverse", Shape{2, 3, 4, 5}, {3, 2, 1, 0}},
      {"rank4_identity", Shape{2, 3, 1, 5}, {0, 1, 2, 3}},
  };
  std::vector<OpCase> cs;
  for (const Perm& p : perms)
    for (DType t : {DType::f32, DType::i32, DType::boolean, DType::u8})
      cs.push_back(make_case(std::string(p.name) + "_" + dtype_name(t), Op::permute_copy, {random_bytes(r, p.s, t)},
                             {zeros(permuted(p.s, p.dims), t)}, p.dims));
  return cs;
}
ET_OP_CASES(permute_copy, permute_copy_cases);

// ---- the reference's own semantics ----

TEST(CopyReference, F32ToI32TruncatesSaturatesAndMapsNaNToZero) {
  std::vector<float> x = {2.9f, -2.9f, -0.5f, kNaN, 3e9f, -3e9f, kInf, -kInf, 123456.0f};
  int64_t n = static_cast<int64_t>(x.size());
  auto got = run_reference(make_case("", Op::dim_order_copy, {HostTensor::from(Shape{n}, DType::f32, x)},
                                     {zeros(Shape{n}, DType::i32)}))[0]
                 .to_vector<int32_t>();
  const int32_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(got, (std::vector<int32_t>{2, -2, 0, 0, hi, lo, hi, lo, 123456}));
}

TEST(CopyReference, BoolConversions) {
  std::vector<uint8_t> b = {0, 1, 7, 255};
  auto f = run_reference(make_case("", Op::dim_order_copy, {HostTensor::from(Shape{4}, DType::boolean, b)},
                                   {zeros(Shape{4}, DType::f32)}))[0]
               .to_vector<float>();
  EXPECT_EQ(f, (std::vector<float>{0, 1, 1, 1}));
  std::vector<float> x = {0.0f, -0.0f, 1e-30f, kNaN, -2.0f};
  auto t = run_reference(make_case("", Op::dim_order_copy, {HostTensor::from(Shape{5}, DType::f32, x)},
                                   {zeros(Shape{5}, DType::boolean)}))[0]
               .to_vector<uint8_t>();
  EXPECT_EQ(t, (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  std::vector<int32_t> i = {0, -5, 3};
  auto ti = run_reference(make_case("", Op::dim_order_copy, {HostTensor::from(Shape{3}, DType::i32, i)},
                                    {zeros(Shape{3}, DType::boolean)}))[0]
                .to_vector<uint8_t>();
  EXPECT_EQ(ti, (std::vector<uint8_t>{0, 1, 1}));
}

TEST(CopyReference, PermuteAndExpandIndexMapping) {
  // x [2,3] = [[0,1,2],[3,4,5]] transposed is [[0,3],[1,4],[2,5]].
  std::vector<float> x = {0, 1, 2, 3, 4, 5};
  auto t = run_reference(make_case("", Op::permute_copy, {HostTensor::from(Shape{2, 3}, DType::f32, x)},
                                   {zeros(Shape{3, 2}, DType::f32)}, {1, 0}))[0]
               .to_vector<float>();
  EXPECT_EQ(t, (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // [2,1] expanded to [2,3] repeats each row's single value.
  std::vector<int32_t> col = {7, -8};
  auto e = run_reference(make_case("", Op::expand_copy, {HostTensor::from(Shape{2, 1}, DType::i32, col)},
                                   {zeros(Shape{2, 3}, DType::i32)}))[0]
               .to_vector<int32_t>();
  EXPECT_EQ(e, (std::vector<int32_t>{7, 7, 7, -8, -8, -8}));
}

}  // namespace
}  // namespace edgetrain::test

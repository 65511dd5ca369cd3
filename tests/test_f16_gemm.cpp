// fp16 operands of the matrix products and attention (the f16 flag of ops.inc, what --precision fp16
// records): every op with the flag has f16 twins of its cases, which the catalogue test checks against
// the fp32 reference within their stated bound (tol::f16_operands for the products; attention's in
// test_attention_ops.cpp); exact cases that pin the rounding itself (ties, fp16 subnormals,
// overflow to inf) on every backend, and hand checks of the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "edgetrain/half.h"
#include "edgetrain/q4gsw.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

HostTensor f32(Shape s, std::vector<float> v) { return HostTensor::from(s, DType::f32, v); }

// Operand values whose fp16 rounding is a corner: ties to even in the normal and subnormal ranges, the
// subnormal/normal boundary, the largest half and just past it, tiny values that round to zero. Each
// product with a one-hot B column is a single exact term, so every backend must match the reference bit
// for bit (tol::exact).
std::vector<float> rounding_corners() {
  const float u = std::ldexp(1.0f, -11), sub = std::ldexp(1.0f, -24);
  return {1.0f + u,            1.0f + 3 * u,        1.0f + u + u / 64, -(1.0f + u),      2048.0f + 1.0f,
          2048.0f + 3.0f,      sub / 2,             3 * sub / 2,       sub / 2 + sub / 64, -5 * sub / 2,
          std::ldexp(1.0f, -14) - sub / 2,          std::ldexp(1.0f, -14) - sub / 4,       65504.0f,
          65519.0f,            -65519.0f,           1e-9f,             0.1f,             -0.3333333f,
          std::ldexp(1.0f, -25), 7.0f * 0.0123f,    1.0e-5f,           -3.0e-7f,         65503.9f,
          0.0f,                -0.0f,               1234.5678f,        std::ldexp(1.0f, -15) * 1.5f, 0.5f + u / 2,
          300.3f,              -1.0f / 3.0f,        2.0f / 3.0f,       1.0f - u / 4};
}

std::vector<OpCase> mm_rounding_cases() {
  const std::vector<float> v = rounding_corners();
  const int64_t M = 64, K = 32, N = 65;  // a 64-row tile, a 32-deep contraction, a partial column tile
  std::vector<float> a(M * K), b(K * N, 0.0f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) a[m * K + k] = v[(m + k) % v.size()] * (m % 2 ? -1.0f : 1.0f);
  for (int64_t n = 0; n < N; ++n) b[(n % K) * N + n] = 1.0f;  // column n picks operand k = n % K
  OpCase c = make_case("rounding_corners_f16", Op::mm, {f32(Shape{M, K}, a), f32(Shape{K, N}, b)},
                       {zeros(Shape{M, N}, DType::f32)}, {0, 0, 0, 1}, {1.0f}, tol::exact);
  // Past the largest half: 65520 rounds to inf, and so does the sum it enters.
  OpCase over = make_case("overflow_to_inf_f16", Op::mm, {f32(Shape{2, 4}, {65520.0f, 1, 2, 3, -65519.0f, 1, 2, 3}),
                                                          f32(Shape{4, 1}, {1, 1, 1, 1})},
                          {zeros(Shape{2, 1}, DType::f32)}, {0, 0, 0, 1}, {1.0f}, tol::exact);
  return {c, over};
}
ET_OP_CASES(mm, mm_rounding_cases);

// ---- every f16 case against the fp32 reference ----
// The catalogue test (test_ops.cpp) runs every case on every backend; for an f16 twin it also compares the
// outputs with the fp32 call's reference within the twin's bound (f16_vs_fp32). Here: every op with the
// flag registers such twins.
TEST(F16Twins, EveryOpWithTheFlagHasThem) {
  int flagged = 0;
  for (const OpInfo& info : all_ops()) {
    int twins = 0;
    for (const OpCase& c : cases_for(info.op)) twins += c.f16_vs_fp32 ? 1 : 0;
    if (has_f16_flag(info.op)) {
      ++flagged;
      EXPECT_GT(twins, 5) << info.name << ": the family files register f16 twins of their cases";
    } else {
      EXPECT_EQ(twins, 0) << info.name << " has no f16 flag";
    }
  }
  EXPECT_EQ(flagged, 8) << "the six matrix products and attention (+backward)";
}

// The flag is the last int: asking for it fills the optional ints before it with their defaults. The bench
// once appended it to mm's (trans_a, trans_b), where it read as accumulate = 1 and the fp16 cases ran fp32.
TEST(F16Flag, SettingItFillsTheOptionalIntsBeforeIt) {
  OpCall mm{Op::mm, {}, {}, {0, 1}, {}};
  set_f16_operands(mm);
  EXPECT_EQ(mm.ints, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_TRUE(f16_operands(mm));
  OpCall acc{Op::mm, {}, {}, {1, 0, 1, 0}, {}};
  set_f16_operands(acc);
  EXPECT_EQ(acc.ints, (std::vector<int64_t>{1, 0, 1, 1}));  // accumulate kept
  OpCall dw{Op::linear_dW, {}, {}, {}, {}};
  set_f16_operands(dw);
  EXPECT_EQ(dw.ints, (std::vector<int64_t>{0, 1}));
  OpCall add{Op::add, {}, {}, {}, {}};
  EXPECT_THROW(set_f16_operands(add), Error);
}

// ---- the reference by hand ----

std::vector<float> ref1(Op op, std::vector<HostTensor> in, Shape out, std::vector<int64_t> ints,
                        std::vector<float> floats = {}) {
  return run_reference(make_case("hand", op, std::move(in), {zeros(out, DType::f32)}, std::move(ints),
                                 std::move(floats), tol::exact))[0]
      .to_vector<float>();
}

TEST(F16Reference, RoundsEachOperandOnceThenSumsExactly) {
  const float u = std::ldexp(1.0f, -11);
  // 1 + u is a tie between 1 and 1 + 2u: even is 1. 1 + 3u ties between 1 + 2u and 1 + 4u: even is 1 + 4u.
  HostTensor a = f32(Shape{1, 2}, {1.0f + u, 1.0f + 3 * u}), b = f32(Shape{2, 1}, {1.0f, 1.0f});
  EXPECT_EQ(ref1(Op::mm, {a, b}, Shape{1, 1}, {0, 0, 0, 1}, {1.0f})[0], 2.0f + 4 * u);
  EXPECT_EQ(ref1(Op::mm, {a, b}, Shape{1, 1}, {0, 0, 0, 0}, {1.0f})[0], 2.0f + 4 * u);  // no rounding: same sum
  HostTensor c = f32(Shape{1, 2}, {1.0f + u, 1.0f + u});
  EXPECT_EQ(ref1(Op::mm, {c, b}, Shape{1, 1}, {0, 0, 0, 1}, {1.0f})[0], 2.0f);
  EXPECT_EQ(ref1(Op::mm, {c, b}, Shape{1, 1}, {0, 0}, {1.0f})[0], 2.0f + 2 * u);
  // linear: the bias is added unrounded; the products of rounded operands are exact.
  HostTensor x = f32(Shape{1, 1}, {1.0f + u}), w = f32(Shape{1, 1}, {3.0f}), bias = f32(Shape{1}, {1.0f + u});
  EXPECT_EQ(ref1(Op::linear, {x, w, bias}, Shape{1, 1}, {1})[0], 4.0f + u);
  // Overflow: 70000 is past the largest half.
  HostTensor big = f32(Shape{1, 1}, {70000.0f});
  EXPECT_TRUE(std::isinf(ref1(Op::linear, {big, w}, Shape{1, 1}, {1})[0]));
  EXPECT_EQ(ref1(Op::linear, {big, w}, Shape{1, 1}, {0})[0], 210000.0f);
}

TEST(F16Reference, Q4WeightIsItsFp32ValueRoundedToHalf) {
  // N = 8, K = 4, gs = 4: one group; code 15 (q = 7) with scale s gives W = fp16(fp32(7 * s)).
  const float s = 0.0123f;
  std::vector<uint8_t> codes(32, 8);
  codes[0] = 15;  // W[0, 0] = 7 s
  q4::Geometry g(8, 4, 4);
  auto words = q4::pack_w4x8(g, codes.data());
  HostTensor w = HostTensor::from(Shape{g.words()}, DType::u32, words);
  std::vector<float> sc(8, s);
  HostTensor scales = f32(Shape{1, 8}, sc), x = f32(Shape{1, 4}, {1.0f, 0, 0, 0});
  const float y16 = ref1(Op::linear_q4gsw, {x, w, scales}, Shape{1, 8}, {4, 1})[0];
  EXPECT_EQ(y16, round_to_f16(7.0f * s));
  EXPECT_NE(y16, 7.0f * s);  // 7 * 0.0123 is not a half: the flag changes the result
  EXPECT_FLOAT_EQ(ref1(Op::linear_q4gsw, {x, w, scales}, Shape{1, 8}, {4})[0], 7.0f * s);
  HostTensor dy = f32(Shape{1, 8}, {1.0f, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(ref1(Op::linear_q4gsw_backward, {dy, w, scales}, Shape{1, 4}, {4, 4, 1})[0], round_to_f16(7.0f * s));
}

TEST(F16Flag, MustBeZeroOrOne) {
  Backend& b = backend_for_tests("cpu");
  Tensor a = b.zeros(Shape{2, 2}, DType::f32), c = b.zeros(Shape{2, 2}, DType::f32), o = b.zeros(Shape{2, 2}, DType::f32);
  try {
    b.run({Op::mm, {a, c}, {o}, {0, 0, 0, 2}, {Scalar(1.0f)}});
    FAIL() << "f16 = 2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f16 must be 0 or 1, got 2"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(f16_operands({Op::mm, {a, c}, {o}, {0, 0, 0, 1}, {}}));
  EXPECT_FALSE(f16_operands({Op::mm, {a, c}, {o}, {0, 0, 1}, {}}));  // accumulate, not f16
  EXPECT_FALSE(f16_operands({Op::mm, {a, c}, {o}, {0, 0}, {}}));
  EXPECT_FALSE(f16_operands({Op::linear, {a, c}, {o}, {0}, {}}));
  EXPECT_TRUE(f16_operands({Op::linear, {a, c}, {o}, {1}, {}}));
  EXPECT_FALSE(f16_operands({Op::add, {a, c}, {o}, {}, {}}));
}

}  // namespace
}  // namespace edgetrain::test

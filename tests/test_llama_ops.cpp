// Op cases of the Llama-block family (rms_norm, rope, silu_mul, their backwards, embedding,
// embedding_backward, gather) for the cross-backend harness, plus checks of the reference's semantics.
// The backwards' mathematics is checked separately, by finite differences, in test_llama_gradients.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

std::string sized(std::string what, int64_t n) {
  what += std::to_string(n);
  return what;
}

Tolerance looser(Tolerance a, Tolerance b) { return {std::max(a.atol, b.atol), std::max(a.rtol, b.rtol)}; }

// ---- rms_norm ----

// Rows of D elements for D around a subgroup and a workgroup; [B, T, D] as the model calls it.
const Shape kNormShapes[] = {Shape{3, 1}, Shape{5, 7}, Shape{3, 64}, Shape{3, 65}, Shape{2, 256}, Shape{2, 3, 33},
                             Shape{65}};

// A row sum of D squares, then one rsqrt.
Tolerance norm_tol(int64_t D) { return looser(tol::reduction(D), tol::transcendental); }

std::vector<OpCase> rms_norm_cases() {
  Rng r(41);
  std::vector<OpCase> cs;
  for (const Shape& s : kNormShapes)
    for (float eps : {1e-5f, 1e-6f}) {
      int64_t D = s.last();
      cs.push_back(make_case(sized(s.str() + "_eps", eps == 1e-5f ? 5 : 6), Op::rms_norm,
                             {random_f32(r, s, -2.0f, 2.0f), random_f32(r, Shape{D}, 0.5f, 1.5f)},
                             {zeros(s, DType::f32), zeros(Shape{s.rows()}, DType::f32)}, {}, {eps}, norm_tol(D)));
    }
  // A zero row: rstd = 1/sqrt(eps) and y = 0, no NaN.
  cs.push_back(make_case("zero_row", Op::rms_norm, {zeros(Shape{2, 8}, DType::f32), random_f32(r, Shape{8})},
                         {zeros(Shape{2, 8}, DType::f32), zeros(Shape{2}, DType::f32)}, {}, {1e-5f}, norm_tol(8)));
  return cs;
}
ET_OP_CASES(rms_norm, rms_norm_cases);

// rstd comes from the reference forward, as the model passes it along; dw starts random so that
// accumulate = 1 is seen adding, accumulate = 0 overwriting, and dw = 0 (a frozen w) leaving it as it is.
std::vector<OpCase> rms_norm_backward_cases() {
  Rng r(42);
  std::vector<OpCase> cs;
  for (const Shape& s : kNormShapes)
    for (int acc : {0, 1, 2}) {  // 2: dw = 0
      int64_t D = s.last();
      HostTensor x = random_f32(r, s, -2.0f, 2.0f), w = random_f32(r, Shape{D}, 0.5f, 1.5f);
      auto fwd = run_reference(make_case("", Op::rms_norm, {x, w}, {zeros(s, DType::f32), zeros(Shape{s.rows()}, DType::f32)},
                                         {}, {1e-5f}, tol::exact));
      const std::vector<int64_t> ints = acc == 2 ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{acc};
      cs.push_back(make_case(s.str() + (acc == 1 ? "_accumulate" : acc == 2 ? "_no_dw" : ""), Op::rms_norm_backward,
                             {random_f32(r, s), x, w, fwd[1]}, {zeros(s, DType::f32), random_f32(r, Shape{D})}, ints, {},
                             looser(norm_tol(D), tol::reduction(s.rows()))));
    }
  return cs;
}
ET_OP_CASES(rms_norm_backward, rms_norm_backward_cases);

// ---- rope ----

struct RopeCase {
  const char* name;
  Shape s;
  float theta, pos_offset;
};
const RopeCase kRope[] = {
    {"B1_T3_H2_D2", Shape{1, 3, 2, 2}, 10000.0f, 0.0f},
    {"B2_T5_H3_D8", Shape{2, 5, 3, 8}, 10000.0f, 0.0f},
    {"B2_T4_H2_D64_offset7", Shape{2, 4, 2, 64}, 10000.0f, 7.0f},
    {"T6_H4_D64_offset40", Shape{6, 4, 64}, 500000.0f, 40.0f},
    {"T1_H3_D8_decode_offset100", Shape{1, 3, 8}, 10000.0f, 100.0f},
    {"B1_T9_H1_D2_offset3", Shape{1, 9, 1, 2}, 10.0f, 3.0f},
};

// Per-pair frequencies as a Llama 3.1 rope scaling makes them (theta^(-2i/D) divided by factors between 1
// and 8), plus values a frequency table cannot hold: above 1 rad per position, tiny, zero, negative.
HostTensor scaled_freqs(Rng& r, int64_t D, double theta) {
  HostTensor f = random_f32(r, Shape{D / 2}, 1.0f, 8.0f);
  float* v = f.as<float>();
  for (int64_t i = 0; i < D / 2; ++i)
    v[i] = static_cast<float>(std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D)) / v[i]);
  const float odd[] = {3.7f, 1e-30f, 0.0f, -0.61f, 1.0f};
  for (int64_t i = 0; i < std::min<int64_t>(D / 2, 5); i += 2) v[i] = odd[(i / 2) % 5];
  return f;
}

// Head dims below, at and above a workgroup's pairs and the WebGPU frequency table (512 pairs: D = 1280 takes
// two dispatches), with and without the freqs input.
const RopeCase kRopeFreqs[] = {
    {"freqs_B1_T3_H2_D2", Shape{1, 3, 2, 2}, 10000.0f, 0.0f},
    {"freqs_B2_T5_H3_D8_offset2", Shape{2, 5, 3, 8}, 500000.0f, 2.0f},
    {"freqs_B2_T4_H2_D64_offset7", Shape{2, 4, 2, 64}, 500000.0f, 7.0f},
    {"freqs_T6_H4_D128_offset40", Shape{6, 4, 128}, 500000.0f, 40.0f},
    {"freqs_T1_H3_D130_decode_offset1000", Shape{1, 3, 130}, 10000.0f, 1000.0f},
    {"freqs_T2_H1_D1280", Shape{2, 1, 1280}, 10000.0f, 3.0f},
};

// Sample packing (the pos input): positions restarting inside a row and differing between rows, with and
// without freqs and an offset, x [T, H, D] with pos [T], positions deep into a long context, and negative
// ones (no packing makes them; the op defines them as any other position).
struct RopePosCase {
  const char* name;
  Shape s;
  float theta, pos_offset;
  bool freqs;
  HostTensor pos;
};
HostTensor i32s(Shape s, std::vector<int32_t> v) { return HostTensor::from(s, DType::i32, v); }
std::vector<RopePosCase> rope_pos_cases() {
  return {
      {"pos_B2_T5_H3_D8", Shape{2, 5, 3, 8}, 10000.0f, 0.0f, false, packed_positions(2, 5, {{2, 3}, {1, 4}})},
      {"pos_B2_T70_H2_D64_offset3", Shape{2, 70, 2, 64}, 500000.0f, 3.0f, false,
       packed_positions(2, 70, {{64, 1, 5}, {17}})},
      {"pos_freqs_B2_T6_H2_D128", Shape{2, 6, 2, 128}, 500000.0f, 0.0f, true, packed_positions(2, 6, {{3}, {1, 5}})},
      {"pos_T9_H2_D16_rank3", Shape{9, 2, 16}, 10000.0f, 0.0f, false,
       i32s(Shape{9}, {0, 1, 2, 3, 0, 1, 2, 3, 4})},
      {"pos_large_B1_T4_H1_D64", Shape{1, 4, 1, 64}, 10000.0f, 0.0f, false,
       i32s(Shape{1, 4}, {5000, 70000, 3, 1000000})},
      {"pos_negative_freqs_B1_T4_H2_D8_offset2", Shape{1, 4, 2, 8}, 10000.0f, 2.0f, true,
       i32s(Shape{1, 4}, {-7, 0, -1, 2})},
  };
}

std::vector<OpCase> rope_like_cases(Op op, uint32_t seed) {
  Rng r(seed);
  std::vector<OpCase> cs;
  for (const RopeCase& rc : kRope)
    cs.push_back(make_case(rc.name, op, {random_f32(r, rc.s)}, {zeros(rc.s, DType::f32)}, {}, {rc.theta, rc.pos_offset},
                           tol::transcendental));
  for (const RopeCase& rc : kRopeFreqs)
    cs.push_back(make_case(rc.name, op, {random_f32(r, rc.s), scaled_freqs(r, rc.s.last(), rc.theta)},
                           {zeros(rc.s, DType::f32)}, {}, {rc.theta, rc.pos_offset}, tol::transcendental));
  for (const RopePosCase& rc : rope_pos_cases()) {
    OpCase c = make_case(rc.name, op, {random_f32(r, rc.s), scaled_freqs(r, rc.s.last(), rc.theta), rc.pos},
                         {zeros(rc.s, DType::f32)}, {}, {rc.theta, rc.pos_offset}, tol::transcendental);
    c.in_absent = {false, !rc.freqs, false};
    cs.push_back(std::move(c));
  }
  return cs;
}
std::vector<OpCase> rope_cases() { return rope_like_cases(Op::rope, 43); }
std::vector<OpCase> rope_backward_cases() { return rope_like_cases(Op::rope_backward, 44); }
ET_OP_CASES(rope, rope_cases);
ET_OP_CASES(rope_backward, rope_backward_cases);

// ---- silu_mul ----

// g over the useful range, plus saturated values where a naive exp(-g) overflows f32.
HostTensor gate(Rng& r, Shape s) {
  HostTensor g = random_f32(r, s, -8.0f, 8.0f);
  const float extremes[] = {-100.0f, 100.0f, -30.0f, 30.0f, 0.0f};
  for (int64_t i = 0; i < g.numel(); i += 7) g.as<float>()[i] = extremes[(i / 7) % 5];
  return g;
}

std::vector<OpCase> silu_mul_cases() {
  Rng r(45);
  std::vector<OpCase> cs;
  for (int64_t n : {1, 3, 63, 64, 65, 255, 256, 257})
    cs.push_back(make_case(sized("n", n), Op::silu_mul, {gate(r, Shape{n}), random_f32(r, Shape{n})},
                           {zeros(Shape{n}, DType::f32)}, {}, {}, tol::transcendental));
  cs.push_back(make_case("rank3", Op::silu_mul, {gate(r, Shape{2, 3, 33}), random_f32(r, Shape{2, 3, 33})},
                         {zeros(Shape{2, 3, 33}, DType::f32)}, {}, {}, tol::transcendental));
  return cs;
}
ET_OP_CASES(silu_mul, silu_mul_cases);

std::vector<OpCase> silu_mul_backward_cases() {
  Rng r(46);
  std::vector<OpCase> cs;
  for (int64_t n : {1, 3, 63, 64, 65, 255, 256, 257})
    cs.push_back(make_case(sized("n", n), Op::silu_mul_backward,
                           {random_f32(r, Shape{n}), gate(r, Shape{n}), random_f32(r, Shape{n})},
                           {zeros(Shape{n}, DType::f32), zeros(Shape{n}, DType::f32)}, {}, {}, tol::transcendental));
  Shape s{2, 3, 33};
  cs.push_back(make_case("rank3", Op::silu_mul_backward, {random_f32(r, s), gate(r, s), random_f32(r, s)},
                         {zeros(s, DType::f32), zeros(s, DType::f32)}, {}, {}, tol::transcendental));
  return cs;
}
ET_OP_CASES(silu_mul_backward, silu_mul_backward_cases);

// ---- embedding, embedding_backward, gather ----

// Token ids over [0, V) with repeats, plus out-of-range ids (-1, V, a large one) at fixed spots.
HostTensor token_ids(Rng& r, Shape s, int32_t V, bool bad) {
  HostTensor h = random_i32(r, s, 0, V - 1);
  int32_t* p = h.as<int32_t>();
  if (h.numel() > 1) p[1] = p[0];  // a guaranteed repeat
  if (bad) {
    const int32_t outside[] = {-1, V, 1 << 30, std::numeric_limits<int32_t>::min()};
    for (int64_t i = 2; i < h.numel(); i += 5) p[i] = outside[(i / 5) % 4];
  }
  return h;
}

Shape with_dim(const Shape& s, int64_t d) {
  int64_t dims[kMaxRank];
  for (int i = 0; i < s.rank(); ++i) dims[i] = s[i];
  dims[s.rank()] = d;
  return Shape::of(dims, s.rank() + 1);
}

struct EmbedCase {
  const char* name;
  int32_t V;
  int64_t D;
  Shape idx;
  bool bad;
};
const EmbedCase kEmbed[] = {
    {"V10_D1_n7", 10, 1, Shape{7}, false},           {"V10_D7_n12_bad", 10, 7, Shape{12}, true},
    {"V50_D64_B2_T9", 50, 64, Shape{2, 9}, false},   {"V50_D65_B2_T9_bad", 50, 65, Shape{2, 9}, true},
    {"V3_D8_n65_repeats", 3, 8, Shape{65}, false},   {"V20_D4_scalar_idx", 20, 4, Shape{}, false},
    {"V7_D33_rank3_bad", 7, 33, Shape{2, 2, 4}, true},
};

// A part of a table of V rows: rows first .. first+Vp-1, here the middle of it (first = V/3, Vp = V/2, at
// least one row), so indices fall before, in and after the part.
struct Part {
  int64_t first, Vp;
};
Part middle_part(int64_t V) { return {V / 3, std::max<int64_t>(1, V / 2)}; }

std::vector<OpCase> embedding_cases() {
  Rng r(47);
  std::vector<OpCase> cs;
  for (const EmbedCase& e : kEmbed)
    cs.push_back(make_case(e.name, Op::embedding, {random_f32(r, Shape{e.V, e.D}), token_ids(r, e.idx, e.V, e.bad)},
                           {zeros(with_dim(e.idx, e.D), DType::f32)}, {}, {}, tol::exact));
  // The whole table given as a part of itself (first 0, total V), and a middle part: rows of other parts
  // must keep the output's (random) contents.
  for (const EmbedCase& e : kEmbed) {
    const Part pt = middle_part(e.V);
    cs.push_back(make_case(std::string(e.name) + "_part_first" + std::to_string(pt.first), Op::embedding,
                           {random_f32(r, Shape{pt.Vp, e.D}), token_ids(r, e.idx, e.V, e.bad)},
                           {random_f32(r, with_dim(e.idx, e.D))}, {pt.first, e.V}, {}, tol::exact));
  }
  cs.push_back(make_case("V10_D7_n12_bad_whole_as_part", Op::embedding,
                         {random_f32(r, Shape{10, 7}), token_ids(r, Shape{12}, 10, true)},
                         {random_f32(r, Shape{12, 7})}, {0, 10}, {}, tol::exact));
  return cs;
}
ET_OP_CASES(embedding, embedding_cases);

// dw starts random: accumulate = 1 must add to it, accumulate = 0 must overwrite every row (also the
// rows no index names). A row hit k times is a sum of k terms in some order.
std::vector<OpCase> embedding_backward_cases() {
  Rng r(48);
  std::vector<OpCase> cs;
  for (const EmbedCase& e : kEmbed)
    for (int acc : {0, 1})
      cs.push_back(make_case(std::string(e.name) + (acc ? "_accumulate" : ""), Op::embedding_backward,
                             {random_f32(r, with_dim(e.idx, e.D)), token_ids(r, e.idx, e.V, e.bad)},
                             {random_f32(r, Shape{e.V, e.D})}, {acc}, {}, tol::reduction(e.idx.numel() + 1)));
  for (const EmbedCase& e : kEmbed)
    for (int acc : {0, 1}) {
      const Part pt = middle_part(e.V);
      cs.push_back(make_case(std::string(e.name) + "_part_first" + std::to_string(pt.first) + (acc ? "_accumulate" : ""),
                             Op::embedding_backward, {random_f32(r, with_dim(e.idx, e.D)), token_ids(r, e.idx, e.V, e.bad)},
                             {random_f32(r, Shape{pt.Vp, e.D})}, {acc, pt.first}, {}, tol::reduction(e.idx.numel() + 1)));
    }
  return cs;
}
ET_OP_CASES(embedding_backward, embedding_backward_cases);

// Index values over [0, x.shape[dim]) with some out of range (NaN); index may be smaller than x in
// the other dims.
std::vector<OpCase> gather_cases() {
  Rng r(49);
  struct GatherCase {
    const char* name;
    Shape x, index;
    int64_t dim;
  };
  const GatherCase gs[] = {
      {"rank1", Shape{65}, Shape{33}, 0},
      {"rank2_dim0", Shape{4, 5}, Shape{6, 5}, 0},
      {"rank2_dim1", Shape{4, 65}, Shape{4, 3}, 1},
      {"rank2_dim1_smaller_rows", Shape{7, 9}, Shape{3, 9}, -1},
      {"rank3_dim1", Shape{2, 6, 5}, Shape{2, 4, 3}, 1},
      {"rank4_dim3_labels", Shape{2, 3, 4, 257}, Shape{2, 3, 4, 1}, 3},
  };
  std::vector<OpCase> cs;
  for (const GatherCase& g : gs)
    for (bool bad : {false, true}) {
      int r4 = g.x.rank();
      int64_t extent = g.x[static_cast<int>(g.dim < 0 ? g.dim + r4 : g.dim)];
      HostTensor index = random_i32(r, g.index, 0, static_cast<int32_t>(extent - 1));
      if (bad)
        for (int64_t i = 0; i < index.numel(); i += 3) index.as<int32_t>()[i] = i % 2 ? -1 : static_cast<int32_t>(extent);
      cs.push_back(make_case(std::string(g.name) + (bad ? "_out_of_range" : ""), Op::gather,
                             {random_f32(r, g.x), index}, {zeros(g.index, DType::f32)}, {g.dim}, {}, tol::exact));
    }
  return cs;
}
ET_OP_CASES(gather, gather_cases);

// ---- the reference's own semantics ----

TEST(LlamaReference, RmsNormOfAConstantRowIsTheWeight) {
  // x = c everywhere: mean x^2 = c^2, so with eps = 0, y = sign(c) * w and rstd = 1/|c|.
  HostTensor x = filled_f32(Shape{2, 5}, -4.0f);
  std::vector<float> w = {1, 2, 3, 4, 5};
  auto o = run_reference(make_case("", Op::rms_norm, {x, HostTensor::from(Shape{5}, DType::f32, w)},
                                   {zeros(Shape{2, 5}, DType::f32), zeros(Shape{2}, DType::f32)}, {}, {0.0f}, tol::exact));
  auto y = o[0].to_vector<float>();
  for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(y[i], -w[i % 5]);
  EXPECT_FLOAT_EQ(o[1].to_vector<float>()[0], 0.25f);
}

TEST(LlamaReference, RopeRotatesEachPairByPositionTimesFrequency) {
  // [T=2, H=1, D=4] of (1, 0) pairs, pos_offset 1: pair i at position p turns by p * theta^(-2i/D),
  // so it becomes (cos a, sin a).
  HostTensor x = HostTensor::from(Shape{2, 1, 4}, DType::f32, std::vector<float>{1, 0, 1, 0, 1, 0, 1, 0});
  float theta = 100.0f;
  auto y = run_reference(make_case("", Op::rope, {x}, {zeros(Shape{2, 1, 4}, DType::f32)}, {}, {theta, 1.0f},
                                   tol::exact))[0]
               .to_vector<float>();
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 2; ++i) {
      double a = (t + 1.0) * std::pow(100.0, -2.0 * i / 4.0);
      EXPECT_NEAR(y[t * 4 + 2 * i], std::cos(a), 1e-6);
      EXPECT_NEAR(y[t * 4 + 2 * i + 1], std::sin(a), 1e-6);
    }
  // rope_backward undoes rope (rotation matrices are orthogonal).
  auto back = run_reference(make_case("", Op::rope_backward, {HostTensor::from(Shape{2, 1, 4}, DType::f32, y)},
                                      {zeros(Shape{2, 1, 4}, DType::f32)}, {}, {theta, 1.0f}, tol::exact))[0]
                  .to_vector<float>();
  auto orig = x.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(back[i], orig[i], 1e-6);
}

TEST(LlamaReference, RopeFreqsReplaceThetasFrequencies) {
  // With freqs, pair i at position p turns by p * freqs[i] whatever theta is.
  HostTensor x = HostTensor::from(Shape{2, 1, 4}, DType::f32, std::vector<float>{1, 0, 1, 0, 1, 0, 1, 0});
  const std::vector<float> f = {0.25f, 3.0f};
  HostTensor freqs = HostTensor::from(Shape{2}, DType::f32, f);
  for (float theta : {100.0f, 500000.0f}) {
    auto y = run_reference(make_case("", Op::rope, {x, freqs}, {zeros(Shape{2, 1, 4}, DType::f32)}, {}, {theta, 2.0f},
                                     tol::exact))[0]
                 .to_vector<float>();
    for (int t = 0; t < 2; ++t)
      for (int i = 0; i < 2; ++i) {
        const double a = (t + 2.0) * f[i];
        EXPECT_NEAR(y[t * 4 + 2 * i], std::cos(a), 1e-6);
        EXPECT_NEAR(y[t * 4 + 2 * i + 1], std::sin(a), 1e-6);
      }
  }
}

TEST(LlamaReference, SiluMulAtKnownPoints) {
  std::vector<float> g = {0.0f, 1.0f, -100.0f, 100.0f}, u = {5.0f, 2.0f, 3.0f, 0.5f};
  auto h = run_reference(make_case("", Op::silu_mul,
                                   {HostTensor::from(Shape{4}, DType::f32, g), HostTensor::from(Shape{4}, DType::f32, u)},
                                   {zeros(Shape{4}, DType::f32)}, {}, {}, tol::exact))[0]
               .to_vector<float>();
  EXPECT_EQ(h[0], 0.0f);
  EXPECT_FLOAT_EQ(h[1], static_cast<float>(2.0 / (1.0 + std::exp(-1.0))));
  EXPECT_NEAR(h[2], 0.0f, 1e-30);
  EXPECT_FLOAT_EQ(h[3], 50.0f);
}

TEST(LlamaReference, EmbeddingOutOfRangeIsNaNAndContributesNothingBack) {
  HostTensor w = HostTensor::from(Shape{3, 2}, DType::f32, std::vector<float>{0, 1, 10, 11, 20, 21});
  HostTensor idx = HostTensor::from(Shape{4}, DType::i32, std::vector<int32_t>{2, -1, 2, 3});
  auto out = run_reference(make_case("", Op::embedding, {w, idx}, {zeros(Shape{4, 2}, DType::f32)}, {}, {}, tol::exact))[0]
                 .to_vector<float>();
  EXPECT_EQ(out[0], 20.0f);
  EXPECT_EQ(out[1], 21.0f);
  EXPECT_TRUE(std::isnan(out[2]) && std::isnan(out[3]) && std::isnan(out[6]) && std::isnan(out[7]));
  EXPECT_EQ(out[4], 20.0f);
  // Backward: row 2 gets the two dout rows that name it; rows 0, 1 are zeroed (accumulate = 0).
  HostTensor dout = HostTensor::from(Shape{4, 2}, DType::f32, std::vector<float>{1, 2, 100, 100, 3, 4, 100, 100});
  auto dw = run_reference(make_case("", Op::embedding_backward, {dout, idx}, {filled_f32(Shape{3, 2}, 7.0f)}, {0}, {},
                                    tol::exact))[0]
                .to_vector<float>();
  EXPECT_EQ(dw, (std::vector<float>{0, 0, 0, 0, 4, 6}));
  auto acc = run_reference(make_case("", Op::embedding_backward, {dout, idx}, {filled_f32(Shape{3, 2}, 7.0f)}, {1}, {},
                                     tol::exact))[0]
                 .to_vector<float>();
  EXPECT_EQ(acc, (std::vector<float>{7, 7, 7, 7, 11, 13}));
}

TEST(LlamaReference, EmbeddingPartByHand) {
  // Rows 2..3 of a 5-row table: index 3 reads w row 1, indices 0 and 4 belong to other parts (left as 7),
  // 5 and -1 are outside the table (NaN).
  HostTensor w = HostTensor::from(Shape{2, 1}, DType::f32, std::vector<float>{20, 30});
  HostTensor idx = HostTensor::from(Shape{5}, DType::i32, std::vector<int32_t>{3, 0, 5, 2, -1});
  auto out = run_reference(make_case("", Op::embedding, {w, idx}, {filled_f32(Shape{5, 1}, 7.0f)}, {2, 5}, {}, tol::exact))[0]
                 .to_vector<float>();
  EXPECT_EQ(out[0], 30.0f);
  EXPECT_EQ(out[1], 7.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 20.0f);
  EXPECT_TRUE(std::isnan(out[4]));
  HostTensor dout = HostTensor::from(Shape{5, 1}, DType::f32, std::vector<float>{1, 2, 4, 8, 16});
  auto dw = run_reference(make_case("", Op::embedding_backward, {dout, idx}, {filled_f32(Shape{2, 1}, 7.0f)}, {0, 2}, {},
                                    tol::exact))[0]
                .to_vector<float>();
  EXPECT_EQ(dw, (std::vector<float>{8, 1}));
}

// A table in three parts of unequal width, each its own tensor: embedding per part (first, total) fills
// the output as one call on the whole table does (NaN rows for ids outside it), and embedding_backward
// per part (first) gives the whole dw's rows, on every backend.
class EmbeddingParts : public ::testing::TestWithParam<std::string> {};

HostTensor rows_of(const HostTensor& x, int64_t r0, int64_t r1) {
  const int64_t D = x.shape()[1];
  HostTensor h(Shape{r1 - r0, D}, DType::f32);
  std::memcpy(h.data(), x.as<float>() + r0 * D, static_cast<size_t>((r1 - r0) * D) * sizeof(float));
  return h;
}

TEST_P(EmbeddingParts, MatchWhole) {
  Backend& b = backend_for_tests(GetParam());
  auto up = [&](const HostTensor& h) { return b.from_host(h.shape(), h.dtype(), h.data(), h.nbytes()); };
  auto down = [&](const Tensor& t) {
    HostTensor h(t.shape(), t.dtype());
    b.download(t, h.data(), h.nbytes());
    return h;
  };
  struct S {
    const char* name;
    std::vector<int64_t> widths;
    int64_t D;
    Shape idx;
  };
  const std::vector<S> shapes = {
      {"V6_D1", {1, 2, 3}, 1, Shape{7}},
      {"V1000_D33_B2_T9", {255, 257, 488}, 33, Shape{2, 9}},
      {"V300_D64_n130", {1, 290, 9}, 64, Shape{130}},
  };
  Rng r(49);
  for (const S& s : shapes) {
    SCOPED_TRACE(s.name);
    int64_t V = 0;
    for (int64_t w : s.widths) V += w;
    HostTensor w = random_f32(r, Shape{V, s.D}), idx = token_ids(r, s.idx, static_cast<int32_t>(V), true);
    // Some ids at each part's edges.
    for (int64_t i = 0, c0 = 0; i < static_cast<int64_t>(s.widths.size()) && 3 * i + 4 < idx.numel(); ++i) {
      idx.as<int32_t>()[3 * i + 3] = static_cast<int32_t>(c0);
      idx.as<int32_t>()[3 * i + 4] = static_cast<int32_t>(c0 + s.widths[i] - 1);
      c0 += s.widths[i];
    }
    const Shape os = with_dim(s.idx, s.D);
    HostTensor dout = random_f32(r, os), dw0 = random_f32(r, Shape{V, s.D});
    auto want = run_reference(make_case("", Op::embedding, {w, idx}, {zeros(os, DType::f32)}, {}, {}, tol::exact))[0];

    Tensor tidx = up(idx), out = up(filled_f32(os, 5.0f)), tdout = up(dout);
    for (int acc : {0, 1}) {
      SCOPED_TRACE(acc ? "accumulate" : "overwrite");
      auto want_dw = run_reference(make_case("", Op::embedding_backward, {dout, idx}, {dw0}, {acc}, {}, tol::exact))[0];
      HostTensor got_dw(Shape{V, s.D}, DType::f32);
      int64_t c0 = 0;
      for (int64_t width : s.widths) {
        if (acc == 0) b.run(OpCall{Op::embedding, {up(rows_of(w, c0, c0 + width)), tidx}, {out}, {c0, V}, {}});
        Tensor dw = up(rows_of(dw0, c0, c0 + width));
        b.run(OpCall{Op::embedding_backward, {tdout, tidx}, {dw}, {acc, c0}, {}});
        HostTensor part = down(dw);
        std::memcpy(got_dw.as<float>() + c0 * s.D, part.data(), part.nbytes());
        c0 += width;
      }
      if (acc == 0) {
        EXPECT_EQ(compare(down(out), want, tol::exact), "") << "embedding";
      }
      EXPECT_EQ(compare(got_dw, want_dw, tol::reduction(idx.numel() + 1)), "") << "embedding_backward";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EmbeddingParts, ::testing::ValuesIn(test_backends()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(LlamaReference, GatherFollowsAtenIndexing) {
  // x [2,3] = [[0,1,2],[3,4,5]]; gather dim 1 with index [[2,0],[1,3]] -> [[2,0],[4,NaN]].
  HostTensor x = HostTensor::from(Shape{2, 3}, DType::f32, std::vector<float>{0, 1, 2, 3, 4, 5});
  HostTensor index = HostTensor::from(Shape{2, 2}, DType::i32, std::vector<int32_t>{2, 0, 1, 3});
  auto o = run_reference(make_case("", Op::gather, {x, index}, {zeros(Shape{2, 2}, DType::f32)}, {1}, {}, tol::exact))[0]
               .to_vector<float>();
  EXPECT_EQ(o[0], 2.0f);
  EXPECT_EQ(o[1], 0.0f);
  EXPECT_EQ(o[2], 4.0f);
  EXPECT_TRUE(std::isnan(o[3]));
  // dim 0 with index [[1,0,1]] -> [[3,1,5]].
  HostTensor i0 = HostTensor::from(Shape{1, 3}, DType::i32, std::vector<int32_t>{1, 0, 1});
  auto o0 = run_reference(make_case("", Op::gather, {x, i0}, {zeros(Shape{1, 3}, DType::f32)}, {0}, {}, tol::exact))[0]
                .to_vector<float>();
  EXPECT_EQ(o0, (std::vector<float>{3, 1, 5}));
}

}  // namespace
}  // namespace edgetrain::test

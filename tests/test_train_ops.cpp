// Training and optimizer ops: op cases at GPU tile edges for the cross-backend harness (the 4-bit linear and
// its input gradient, the weight gradient, fused cross-entropy whole and in vocabulary parts,
// requantization, AdamW, gradient norm and clipping). The reference's hand-computed checks and a recorded
// training step replayed on every backend: test_train_reference.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "edgetrain/graph.h"
#include "edgetrain/half.h"
#include "edgetrain/q4gsw.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

// The shape lead[0] x ... x lead[n-1] x last (a batch of rows of `last` values).
Shape lead_plus(const std::vector<int64_t>& lead, int64_t last) {
  int64_t d[kMaxRank];
  for (size_t i = 0; i < lead.size(); ++i) d[i] = lead[i];
  d[lead.size()] = last;
  return Shape::of(d, static_cast<int>(lead.size()) + 1);
}

std::string dims_name(const std::vector<int64_t>& lead) {
  std::string s = "M";
  for (size_t i = 0; i < lead.size(); ++i) s += (i ? "x" : "") + std::to_string(lead[i]);
  return s;
}

// ---- q4gsw linear forward and input gradient ----

// Leading dims, K, N, group size, bias, zero scales. M and N straddle 64-wide output tiles and 4/8-wide
// register tiles; K covers partial last groups and K not a multiple of 4 or 8; gs covers 4..128.
struct LinShape {
  std::vector<int64_t> lead;
  int64_t K, N, gs;
  bool bias, zero_scales;
};
const std::vector<LinShape> kLinShapes = {
    {{1}, 64, 64, 32, true, false},    {{1}, 37, 13, 32, false, false},  {{1}, 256, 9, 128, true, false},
    {{3}, 128, 129, 64, true, false},  {{63}, 64, 63, 64, false, false}, {{64}, 128, 64, 128, true, false},
    {{65}, 129, 65, 32, true, true},   {{128}, 64, 128, 32, false, false}, {{129}, 96, 17, 64, true, false},
    {{2, 5}, 40, 24, 32, true, false}, {{4}, 4, 8, 128, false, false},   {{2}, 3, 5, 4, true, false},
    // Groups of 12: an 8-k chunk takes scales from two groups (the fp16 staging of gemm_split.comp); K and N
    // end inside a chunk and inside a W_4X8 block.
    {{70}, 102, 130, 12, true, false},
};

std::string lin_name(const LinShape& s) {
  return dims_name(s.lead) + "_K" + std::to_string(s.K) + "_N" + std::to_string(s.N) + "_gs" +
         std::to_string(s.gs) + (s.bias ? "_bias" : "") + (s.zero_scales ? "_zeroscales" : "");
}

std::vector<OpCase> linear_q4gsw_cases() {
  std::vector<OpCase> cs;
  Rng r(101);
  bool omit = true;
  for (const LinShape& s : kLinShapes) {
    Q4Weight q = random_q4(r, s.N, s.K, s.gs, s.zero_scales);
    OpCase c;
    c.name = lin_name(s);
    c.op = Op::linear_q4gsw;
    c.in = {random_f32(r, lead_plus(s.lead, s.K)), q.w, q.scales,
            s.bias ? random_f32(r, Shape{s.N}) : zeros(Shape{s.N}, DType::f32)};
    c.in_absent = {false, false, false, !s.bias};
    // A call may leave the optional bias out (3 inputs, as Graph does) or pass an undefined tensor;
    // both spellings occur, alternately, since a backend may bind buffers by input position.
    if (!s.bias) {
      if (omit) c.in.pop_back(), c.in_absent.pop_back();
      c.name += omit ? "_bias_omitted" : "_bias_undefined";
      omit = !omit;
    }
    c.out = {zeros(lead_plus(s.lead, s.N), DType::f32)};
    c.ints = {s.gs};
    c.tol = tol::reduction(s.K);
    push_with_f16(cs, std::move(c), s.K, 0.8);  // |x| <= 1, |W| <= 8 * 0.1 (random_q4's scales)
  }
  return cs;
}
ET_OP_CASES(linear_q4gsw, linear_q4gsw_cases);

std::vector<OpCase> linear_q4gsw_backward_cases() {
  std::vector<OpCase> cs;
  Rng r(102);
  for (const LinShape& s : kLinShapes) {
    Q4Weight q = random_q4(r, s.N, s.K, s.gs, s.zero_scales);
    OpCase c;
    c.name = lin_name(s);
    c.op = Op::linear_q4gsw_backward;
    c.in = {random_f32(r, lead_plus(s.lead, s.N)), q.w, q.scales};
    c.out = {zeros(lead_plus(s.lead, s.K), DType::f32)};
    c.ints = {s.gs, s.K};
    c.tol = tol::reduction(s.N);
    push_with_f16(cs, std::move(c), s.N, 0.8);
  }
  return cs;
}
ET_OP_CASES(linear_q4gsw_backward, linear_q4gsw_backward_cases);

// The W_4X8 decoding in the reference agrees with dequantize() + the dense linear on every case shape.
TEST(TrainReference, LinearQ4gswMatchesDequantizedLinear) {
  Rng r(7);
  for (const LinShape& s : kLinShapes) {
    SCOPED_TRACE(lin_name(s));
    Q4Weight q = random_q4(r, s.N, s.K, s.gs, s.zero_scales);
    q4::Geometry g(s.N, s.K, s.gs);
    HostTensor wd = HostTensor::from(Shape{s.N, s.K}, DType::f32,
                                     q4::dequantize(g, q.codes.data(), q.scales.as<float>()));
    HostTensor x = random_f32(r, lead_plus(s.lead, s.K)), bias = random_f32(r, Shape{s.N});
    auto got = run_reference(make_case("hand", Op::linear_q4gsw, {x, q.w, q.scales, bias},
                                      {zeros(lead_plus(s.lead, s.N), DType::f32)}, {s.gs}, {}, tol::exact))[0];
    auto want = run_reference(make_case("hand", Op::linear, {x, wd, bias}, {zeros(lead_plus(s.lead, s.N), DType::f32)}, {}, {},
                                      tol::exact))[0];
    EXPECT_EQ(compare(got, want, tol::reduction(s.K)), "");
  }
}

// ---- dense weight gradient ----

std::vector<OpCase> linear_dW_cases() {
  struct S {
    std::vector<int64_t> lead;
    int64_t N, K;
    int accumulate;
  };
  const std::vector<S> shapes = {
      {{1}, 64, 64, 0},   {{3}, 65, 63, 1},    {{64}, 64, 64, 1}, {{65}, 128, 129, 0}, {{129}, 17, 33, 1},
      {{2, 31}, 8, 12, 1}, {{128}, 1, 3, 0},  {{63}, 129, 64, 1}, {{1}, 1, 1, 1},
      // A low-rank adapter's gradients [r, K] and [N, r] over many rows (Vulkan: gemm_narrow.comp).
      {{300}, 16, 200, 1}, {{2, 150}, 150, 16, 1}, {{520}, 5, 130, 0}, {{129}, 200, 32, 1}, {{1000}, 300, 8, 0},
  };
  std::vector<OpCase> cs;
  Rng r(103);
  for (const S& s : shapes) {
    OpCase c;
    c.name = dims_name(s.lead) + "_N" + std::to_string(s.N) + "_K" + std::to_string(s.K) +
             (s.accumulate ? "_acc" : "_overwrite");
    c.op = Op::linear_dW;
    c.in = {random_f32(r, lead_plus(s.lead, s.N)), random_f32(r, lead_plus(s.lead, s.K))};
    // Nonzero initial dw in both modes: accumulate must add to it, overwrite must ignore it.
    c.out = {random_f32(r, Shape{s.N, s.K}, -2.0f, 2.0f)};
    c.ints = {s.accumulate};
    int64_t M = 1;
    for (int64_t d : s.lead) M *= d;
    c.tol = tol::reduction(M + 1);
    push_with_f16(cs, std::move(c), M, 1.0);
  }
  return cs;
}
ET_OP_CASES(linear_dW, linear_dW_cases);

// ---- fused cross-entropy ----

std::vector<OpCase> fused_ce_cases() {
  struct S {
    const char* name;
    int64_t R, V;
    float lo, hi;
    std::vector<int32_t> special;  // labels for the first rows (rest random valid)
    bool in_place;
    float n_valid;  // 0: the number of rows with label >= 0
  };
  const std::vector<S> shapes = {
      {"R1_V7", 1, 7, -3, 3, {}, false, 0},
      {"R4_V64", 4, 64, -5, 5, {}, false, 0},
      {"R9_V1000_ignored", 9, 1000, -4, 4, {-100, 3, -1, 999, 0}, false, 0},
      {"R3_V65_nvalid2.5", 3, 65, -2, 2, {}, false, 2.5f},
      {"R6_V129_label_out_of_range", 6, 129, -3, 3, {129, -100, 5, 100000}, false, 0},
      {"R5_V50_in_place", 5, 50, -3, 3, {-100, 49}, true, 0},
      {"R2_V1", 2, 1, -3, 3, {}, false, 0},
      {"R8_V257_large_logits_in_place", 8, 257, 500, 520, {-1}, true, 0},
      {"R64_V32_all_ignored", 64, 32, -3, 3, std::vector<int32_t>(64, -100), false, 1},
      {"R3_V300_wide", 3, 300, -60, 60, {}, true, 0},
      {"R65_V63", 65, 63, -8, 8, {-100, -100}, false, 0},
      // Vulkan keeps rows of up to 32 x 1024 logits in registers (fused_ce_reg.comp) and streams longer
      // ones (fused_ce.comp): both sides of that edge.
      {"R3_V32768_registers", 3, 32768, -6, 6, {32767}, true, 0},
      {"R3_V32769_streamed", 3, 32769, -6, 6, {-100, 32768}, true, 0},
  };
  std::vector<OpCase> cs;
  Rng r(104);
  for (const S& s : shapes) {
    HostTensor labels = random_i32(r, Shape{s.R}, 0, static_cast<int32_t>(s.V - 1));
    for (size_t i = 0; i < s.special.size(); ++i) labels.as<int32_t>()[i] = s.special[i];
    int valid = 0;
    for (int64_t i = 0; i < s.R; ++i) valid += labels.as<int32_t>()[i] >= 0;
    OpCase c;
    c.name = s.name;
    c.op = Op::fused_ce;
    c.in = {random_f32(r, Shape{s.R, s.V}, s.lo, s.hi), labels};
    c.out = {zeros(Shape{}, DType::f32), zeros(Shape{s.R, s.V}, DType::f32)};
    if (s.in_place) c.out_alias = {-1, 0};
    c.floats = {s.n_valid != 0 ? s.n_valid : static_cast<float>(valid)};
    c.tol = tol::cross_entropy(s.R, s.V);
    cs.push_back(std::move(c));
  }
  return cs;
}
ET_OP_CASES(fused_ce, fused_ce_cases);

// ---- cross-entropy of a vocabulary in parts: logsumexp_rows, fused_ce_part ----

// Rows of V around a workgroup (1, 255, 257, 1000 ...); accumulate = 1 merges into an old lse that starts
// random, with a -inf (adds nothing) and a NaN (stays NaN) among them.
std::vector<OpCase> logsumexp_rows_cases() {
  struct S {
    const char* name;
    int64_t R, V;
    float lo, hi;
  };
  const std::vector<S> shapes = {
      {"R1_V1", 1, 1, -3, 3},         {"R1_V255", 1, 255, -5, 5},      {"R3_V257", 3, 257, -4, 4},
      {"R4_V1000", 4, 1000, -8, 8},   {"R65_V63", 65, 63, -2, 2},      {"R2_V5000_large", 2, 5000, 500, 520},
      {"R5_V256_wide", 5, 256, -60, 60},
  };
  std::vector<OpCase> cs;
  Rng r(105);
  for (const S& s : shapes)
    for (int acc : {0, 1}) {
      HostTensor old = random_f32(r, Shape{s.R}, s.lo, s.hi + 3.0f);
      if (acc && s.R > 2) {
        old.as<float>()[1] = -std::numeric_limits<float>::infinity();
        old.as<float>()[2] = std::numeric_limits<float>::quiet_NaN();
      }
      Tolerance t = tol::cross_entropy(1, s.V);
      cs.push_back(make_case(std::string(s.name) + (acc ? "_accumulate" : ""), Op::logsumexp_rows,
                             {random_f32(r, Shape{s.R, s.V}, s.lo, s.hi)}, {old}, {acc}, {}, t));
    }
  return cs;
}
ET_OP_CASES(logsumexp_rows, logsumexp_rows_cases);

// One part of `total` columns: labels in this part, in other parts, ignored (-100, -1) and >= total (NaN);
// lse near the rows' true magnitudes; the old loss is added when accumulating.
std::vector<OpCase> fused_ce_part_cases() {
  struct S {
    const char* name;
    int64_t R, Vp, first, total;
    float lo, hi;
    std::vector<int32_t> special;  // labels of the first rows (rest random over [0, total))
    bool in_place;
  };
  const std::vector<S> shapes = {
      {"R1_Vp1_first0", 1, 1, 0, 1, -3, 3, {0}, false},
      {"R1_Vp255_first0", 1, 255, 0, 1000, -3, 3, {254}, true},
      {"R3_Vp257_first255", 3, 257, 255, 1000, -4, 4, {255, 511, 3}, false},
      {"R9_Vp1000_first1000", 9, 1000, 1000, 2000, -4, 4, {-100, 1000, -1, 1999, 0, 2000, 999}, true},
      {"R6_Vp129_last", 6, 129, 871, 1000, -3, 3, {1000, -100, 999, 100000, 871, 870}, false},
      {"R65_Vp63_first7", 65, 63, 7, 70, -8, 8, {-100, 7, 69, 6}, true},
      {"R8_Vp257_large", 8, 257, 0, 300, 500, 520, {-1, 256, 257}, true},
  };
  std::vector<OpCase> cs;
  Rng r(106);
  for (const S& s : shapes)
    for (int acc : {0, 1}) {
      HostTensor labels = random_i32(r, Shape{s.R}, 0, static_cast<int32_t>(s.total - 1));
      for (size_t i = 0; i < s.special.size() && i < static_cast<size_t>(s.R); ++i) labels.as<int32_t>()[i] = s.special[i];
      // lse of a whole row is at least its max and at most max + log(total): somewhere between.
      HostTensor lse = random_f32(r, Shape{s.R}, s.hi, s.hi + std::log(static_cast<float>(s.total)));
      OpCase c;
      c.name = std::string(s.name) + (acc ? "_accumulate" : "") + (s.in_place ? "_in_place" : "");
      c.op = Op::fused_ce_part;
      c.in = {random_f32(r, Shape{s.R, s.Vp}, s.lo, s.hi), labels, lse};
      c.out = {filled_f32(Shape{}, acc ? 1.25f : 0.0f), zeros(Shape{s.R, s.Vp}, DType::f32)};
      if (s.in_place) c.out_alias = {-1, 0};
      c.ints = {s.first, s.total, acc};
      c.floats = {static_cast<float>(s.R) - 0.5f};
      c.tol = tol::cross_entropy(s.R, s.Vp);
      cs.push_back(std::move(c));
    }
  return cs;
}
ET_OP_CASES(fused_ce_part, fused_ce_part_cases);

// ---- requantization into W_4X8 ----

std::vector<OpCase> q4gsw_requant_cases() {
  struct S {
    int64_t N, K, gs;
    bool zero_scales;
  };
  const std::vector<S> shapes = {{8, 8, 32, false},   {12, 8, 4, false},    {13, 37, 32, false},
                                 {64, 64, 64, false}, {65, 129, 128, true}, {1, 4, 32, false},
                                 {3, 7, 4, false},    {16, 256, 32, true},  {129, 33, 8, false}};
  std::vector<OpCase> cs;
  Rng r(105);
  auto make = [](std::string name, HostTensor lat, HostTensor scales, int64_t gs) {
    q4::Geometry g(lat.shape()[0], lat.shape()[1], gs);
    OpCase c;
    c.name = std::move(name);
    c.op = Op::q4gsw_requant;
    c.in = {std::move(lat), std::move(scales)};
    // Garbage in the output: every word, padding included, must be written.
    c.out = {HostTensor::from(Shape{g.words()}, DType::u32,
                              std::vector<uint32_t>(static_cast<size_t>(g.words()), 0xDEADBEEFu)),
             zeros(c.in[0].shape(), DType::f32)};
    c.out_alias = {-1, 0};  // the latent, clamped in place into [-8.5s, 7.5s]
    c.ints = {gs};
    c.tol = tol::exact;
    return c;
  };
  for (const S& s : shapes) {
    q4::Geometry g(s.N, s.K, s.gs);
    // Latents up to ~15 scales away from 0, so both rounding and clamping are exercised.
    HostTensor scales = random_f32(r, Shape{g.groups(), s.N}, 0.1f, 0.3f);
    if (s.zero_scales)
      for (int64_t i = 0; i < scales.numel(); i += 4) scales.as<float>()[i] = 0.0f;
    cs.push_back(make("N" + std::to_string(s.N) + "_K" + std::to_string(s.K) + "_gs" + std::to_string(s.gs) +
                          (s.zero_scales ? "_zeroscales" : ""),
                      random_f32(r, Shape{s.N, s.K}, -1.5f, 1.5f), scales, s.gs));
  }
  // Exact ties and special values. Power-of-two scales make latent/s exact even where a GPU divides by
  // multiplying with a reciprocal, so round-half-to-even is tested, not the division's rounding.
  {
    const int64_t N = 9, K = 20, gs = 8;
    HostTensor scales(Shape{3, N}, DType::f32);
    for (int64_t i = 0; i < scales.numel(); ++i) scales.as<float>()[i] = std::ldexp(1.0f, static_cast<int>(i % 5) - 3);
    HostTensor lat(Shape{N, K}, DType::f32);
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), 1e30f, -1e30f, -0.0f};
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        float s = scales.as<float>()[(k / gs) * N + n];
        int64_t i = n * K + k;
        lat.as<float>()[i] = i % 7 == 6 ? specials[(i / 7) % 6] : (static_cast<float>(i % 19) - 9.5f) * s;
      }
    cs.push_back(make("N9_K20_gs8_ties_and_specials", lat, scales, gs));
  }
  return cs;
}
ET_OP_CASES(q4gsw_requant, q4gsw_requant_cases);

// ---- AdamW ----

// grad_scale < 0: no grad_scale input. The gradient output (the gradient itself) must come back zeroed.
OpCase adamw_case(std::string name, Rng& r, Shape shape, float lr, float b1, float b2, float eps, float wd,
                  int step, float grad_scale = -1.0f, float grad_range = 0.2f) {
  OpCase c;
  c.name = std::move(name);
  c.op = Op::adamw_step;
  c.in = {random_f32(r, shape, -1, 1), random_f32(r, shape, -0.1f, 0.1f), random_f32(r, shape, 0.0f, 0.01f),
          random_f32(r, shape, -grad_range, grad_range)};
  if (grad_scale >= 0.0f) {
    HostTensor s(Shape{}, DType::f32);
    s.as<float>()[0] = grad_scale;
    c.in.push_back(s);
  }
  c.out = {zeros(shape, DType::f32), zeros(shape, DType::f32), zeros(shape, DType::f32), zeros(shape, DType::f32)};
  c.out_alias = {0, 1, 2, 3};
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(b1), step));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(b2), step));
  c.floats = {lr, b1, b2, eps, wd, bc1, bc2};
  // A sqrt and a few divisions per element: allowed a few ulps more than plain arithmetic.
  c.tol = tol::transcendental;
  return c;
}

std::vector<OpCase> adamw_step_cases() {
  Rng r(106);
  std::vector<OpCase> cs;
  cs.push_back(adamw_case("n1_step1", r, Shape{1}, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1));
  cs.push_back(adamw_case("n63_step1_wd", r, Shape{63}, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1));
  cs.push_back(adamw_case("8x8_step10_wd", r, Shape{8, 8}, 3e-3f, 0.9f, 0.95f, 1e-6f, 0.01f, 10));
  cs.push_back(adamw_case("n65_step1000", r, Shape{65}, 1e-4f, 0.8f, 0.99f, 1e-8f, 0.0f, 1000));
  cs.push_back(adamw_case("3x4097_step2_wd", r, Shape{3, 4097}, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f, 2));
  // With grad_scale: a clip factor; a loss scale's inverse on gradients that carry it; 0 (only decay moves p).
  cs.push_back(adamw_case("n67_scaled_clip", r, Shape{67}, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, 0.37f));
  cs.push_back(adamw_case("5x129_scaled_unscale", r, Shape{5, 129}, 2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7,
                          1.0f / 65536.0f, 0.2f * 65536.0f));
  cs.push_back(adamw_case("n9_scale0", r, Shape{9}, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, 0.0f));
  return cs;
}
ET_OP_CASES(adamw_step, adamw_step_cases);

// adamw_q4gsw_step: adamw_case's tensors on a [N, K] latent, scales as q4gsw_requant's cases (some 0), the
// words' initial contents garbage. Codes compare exactly, so a word in the wrong place or a padding nibble
// left out fails; the f32 outputs take adamw_step's tolerance.
OpCase adamw_q4gsw_case(std::string name, Rng& r, int64_t N, int64_t K, int64_t gs, float lr, float wd, int step,
                        float grad_scale = -1.0f, bool zero_scales = false) {
  OpCase c = adamw_case(std::move(name), r, Shape{N, K}, lr, 0.9f, 0.999f, 1e-8f, wd, step, grad_scale);
  c.op = Op::adamw_q4gsw_step;
  q4::Geometry g(N, K, gs);
  HostTensor scales = random_f32(r, Shape{g.groups(), N}, 0.1f, 0.3f);
  if (zero_scales)
    for (int64_t i = 0; i < scales.numel(); i += 4) scales.as<float>()[i] = 0.0f;
  // Latents up to ~15 scales away from 0: rounding and clamping both happen.
  c.in[0] = random_f32(r, Shape{N, K}, -1.5f, 1.5f);
  HostTensor grad_scale_in;
  if (c.in.size() > 4) grad_scale_in = c.in[4];
  c.in.resize(4);
  c.in.push_back(scales);
  if (grad_scale >= 0.0f) c.in.push_back(grad_scale_in);
  c.out.push_back(HostTensor::from(Shape{g.words()}, DType::u32,
                                   std::vector<uint32_t>(static_cast<size_t>(g.words()), 0xDEADBEEFu)));
  c.out_alias = {0, 1, 2, 3, -1};
  c.ints = {gs};
  return c;
}

std::vector<OpCase> adamw_q4gsw_step_cases() {
  Rng r(108);
  std::vector<OpCase> cs;
  cs.push_back(adamw_q4gsw_case("N8_K8_gs32", r, 8, 8, 32, 1e-2f, 0.0f, 1));
  cs.push_back(adamw_q4gsw_case("N13_K37_gs32_wd", r, 13, 37, 32, 3e-2f, 0.1f, 2));
  cs.push_back(adamw_q4gsw_case("N1_K4_gs32", r, 1, 4, 32, 1e-2f, 0.0f, 1));
  cs.push_back(adamw_q4gsw_case("N3_K7_gs4", r, 3, 7, 4, 5e-2f, 0.01f, 10));
  cs.push_back(adamw_q4gsw_case("N65_K129_gs128_zeroscales", r, 65, 129, 128, 1e-2f, 0.1f, 3, -1.0f, true));
  cs.push_back(adamw_q4gsw_case("N129_K33_gs8_scaled_clip", r, 129, 33, 8, 1e-2f, 0.05f, 5, 0.37f));
  cs.push_back(adamw_q4gsw_case("N64_K256_gs64_scaled0", r, 64, 256, 64, 1e-2f, 0.1f, 1, 0.0f));
  // lr 0 keeps every latent exactly (p - 0 = p), so the requantization sees exact .5 ties and special
  // values, as in q4gsw_requant's case (an infinite latent becomes NaN: 0 * inf in the decay term).
  {
    const int64_t N = 9, K = 20, gs = 8;
    OpCase c = adamw_q4gsw_case("N9_K20_gs8_lr0_ties_and_specials", r, N, K, gs, 0.0f, 0.1f, 1);
    HostTensor& scales = c.in[4];
    for (int64_t i = 0; i < scales.numel(); ++i) scales.as<float>()[i] = std::ldexp(1.0f, static_cast<int>(i % 5) - 3);
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), 1e30f, -1e30f, -0.0f};
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const float s = scales.as<float>()[(k / gs) * N + n];
        const int64_t i = n * K + k;
        c.in[0].as<float>()[i] = i % 7 == 6 ? specials[(i / 7) % 6] : (static_cast<float>(i % 19) - 9.5f) * s;
      }
    cs.push_back(std::move(c));
  }
  return cs;
}
ET_OP_CASES(adamw_q4gsw_step, adamw_q4gsw_step_cases);

// ---- gradient norm and clipping ----

std::vector<OpCase> grad_norm_cases() {
  Rng r(107);
  std::vector<std::vector<Shape>> sets = {
      {Shape{1}}, {Shape{64, 64}}, {Shape{}, Shape{63}, Shape{3, 5, 7}}, {Shape{4097}, Shape{129, 65}},
      {Shape{1000003}, Shape{0}, Shape{70001}},  // many workgroups per tensor, an empty tensor
      // More inputs than one dispatch takes (Vulkan 8, WebGPU 7), empties among them, a large one later.
      {Shape{5000}, Shape{1}, Shape{3, 3}, Shape{4096}, Shape{4097}, Shape{7}, Shape{0}, Shape{8193}, Shape{2},
       Shape{0}, Shape{120001}, Shape{1}, Shape{33}, Shape{65537}, Shape{5}, Shape{6}, Shape{17}, Shape{9}}};
  std::vector<OpCase> cs;
  for (size_t i = 0; i < sets.size(); ++i) {
    OpCase c;
    c.name = "set" + std::to_string(i);
    c.op = Op::grad_norm;
    int64_t n = 0;
    for (const Shape& s : sets[i]) {
      c.in.push_back(random_f32(r, s, -2, 2));
      n += s.numel();
    }
    c.out = {zeros(Shape{}, DType::f32)};
    c.tol = tol::reduction(n);
    cs.push_back(std::move(c));
  }
  return cs;
}
ET_OP_CASES(grad_norm, grad_norm_cases);

std::vector<OpCase> clip_coef_cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<float, float>> vals = {{0.5f, 1.0f}, {13.0f, 1.0f}, {0.0f, 1.0f}, {1.0f, 1.0f},
                                                     {nan, 1.0f},  {inf, 1.0f},   {250.0f, 0.3f}};
  std::vector<OpCase> cs;
  for (size_t i = 0; i < vals.size(); ++i) {
    OpCase c;
    c.name = "case" + std::to_string(i);
    c.op = Op::clip_coef;
    c.in = {filled_f32(Shape{}, vals[i].first)};
    c.out = {zeros(Shape{}, DType::f32)};
    c.floats = {vals[i].second};
    cs.push_back(std::move(c));
  }
  return cs;
}
ET_OP_CASES(clip_coef, clip_coef_cases);

}  // namespace
}  // namespace edgetrain::test

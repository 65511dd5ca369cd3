// Causal attention (attention, attention_backward): op cases for the cross-backend harness at the kernels'
// tile edges, the reference's defining properties, and the fused op against the unfused chain the model
// used before it (bmm + causal_softmax + bmm, and their backward) on every backend under test; sample
// packing (the pos input) at the kernels' tile edges, and pos of one sample per row against no pos.
// Finite differences of the reference's backward: test_llama_gradients.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "core/attention_tiles.h"
#include "edgetrain/graph.h"
#include "harness/op_case.h"

namespace edgetrain::test {
namespace {

Tolerance looser(Tolerance a, Tolerance b) { return {std::max(a.atol, b.atol), std::max(a.rtol, b.rtol)}; }

struct Attn {
  const char* name;
  int64_t B, T, S, H, KV, hd;
  float q_range = 1.0f;  // q uniform in [-q_range, q_range]: large values give large scores
};

// Query counts around the GPU kernels' 16/32/64-row blocks (1, 15, 16, 17, 63, 64, 65, 130) and past the
// CPU's 256-key blocks (300), head dims from 2 to 128 (multiples of 4 and not), groups of 1, 2 and 4 query heads per kv head, and KV-cache shapes
// (S > T: the queries are the last T of S positions).
const Attn kAttn[] = {
    {"T1_hd64_G2", 1, 1, 1, 2, 1, 64},
    {"T15_hd64_G2", 1, 15, 15, 2, 1, 64},
    {"T16_hd64_G2", 1, 16, 16, 2, 1, 64},
    {"T17_hd64_G2", 1, 17, 17, 2, 1, 64},
    {"T63_hd64_G1", 1, 63, 63, 2, 2, 64},
    {"T64_hd64_G1", 1, 64, 64, 1, 1, 64},
    {"T65_hd64_G2", 2, 65, 65, 2, 1, 64},
    {"T130_hd64_G2", 1, 130, 130, 2, 1, 64},
    {"T33_hd2_G2", 2, 33, 33, 4, 2, 2},
    {"T33_hd6_G2", 2, 33, 33, 4, 2, 6},
    {"T33_hd8_G4", 1, 33, 33, 4, 1, 8},
    {"T33_hd16_G1", 2, 33, 33, 3, 3, 16},
    {"T65_hd32_G2", 1, 65, 65, 4, 2, 32},
    {"T40_hd100_G2", 1, 40, 40, 2, 1, 100},
    {"T33_hd128_G2", 1, 33, 33, 2, 1, 128},
    {"T70_hd128_G1", 1, 70, 70, 1, 1, 128},
    {"cache_T5_S70_hd16_G2", 2, 5, 70, 4, 2, 16},
    {"cache_T16_S40_hd64_G2", 1, 16, 40, 2, 1, 64},
    {"decode_T1_S65_hd32_G4", 1, 1, 65, 4, 1, 32},
    {"T300_hd16_G2", 1, 300, 300, 2, 1, 16},
    {"large_scores_T40_hd32", 1, 40, 40, 2, 1, 32, 12.0f},
};

float scale_of(int64_t hd) { return 1.0f / std::sqrt(static_cast<float>(hd)); }

// Each output sums up to S exp-weighted terms of dot products of hd terms.
Tolerance forward_tol(const Attn& a) { return looser(tol::transcendental, tol::reduction(a.S + a.hd)); }
// dk and dv also sum over the G*T queries of a group; dq over S keys. Larger for large scores, whose
// softmax amplifies the rounding of a score (relative error of p ~ the absolute error of scale*q.k).
Tolerance backward_tol(const Attn& a) {
  Tolerance t = looser(tol::transcendental, tol::reduction(a.H / a.KV * a.T + a.S + a.hd));
  if (a.q_range > 1.0f) t = {t.atol * a.q_range, t.rtol * a.q_range};
  return t;
}

// The f16 twins (the flag of mixed precision, ops.inc) against the reference of the same call, and against
// the fp32 call (test_f16_gemm.cpp), within one bound: kernels may round the probabilities at a running
// max, or keep q, k, v and the probabilities in fp32, so they differ from the f16 reference by about as
// much as the f16 reference differs from the fp32 one. Forward: a score moves by the rounding of q and k
// (hd products bounded by q_range: tol::f16_operands(hd, q_range)); out = sum p v with |v - out| <= 2 moves
// by at most twice that, plus the rounding of v and of p (u each); lse by the score's error.
Tolerance forward_f16_tol(const Attn& a) {
  return looser(forward_tol(a), tol::f16_operands(a.hd, 2.0 * a.q_range + 1.0));
}
// Backward: dv sums G*T terms p dout (bounded by 1), dq and dk sum S and G*T terms dS k and dS q, where
// dS = p (dout.v - D) with |dout.v - D| up to 2 sqrt(hd) for these uniform inputs (a sum of hd terms of
// variance 1/9, four standard deviations) and p's error follows the score's.
Tolerance backward_f16_tol(const Attn& a) {
  const double dp = 2.0 * std::sqrt(static_cast<double>(a.hd));
  return looser(backward_tol(a), tol::f16_operands(a.H / a.KV * a.T + a.S + a.hd, a.q_range * (1.0 + dp)));
}
struct Inputs {
  HostTensor q, k, v;
};
Inputs inputs(Rng& r, const Attn& a) {
  return {random_f32(r, Shape{a.B, a.T, a.H, a.hd}, -a.q_range, a.q_range), random_f32(r, Shape{a.B, a.S, a.KV, a.hd}),
          random_f32(r, Shape{a.B, a.S, a.KV, a.hd})};
}
std::vector<HostTensor> forward_outputs(const Attn& a) {
  return {zeros(Shape{a.B, a.T, a.H, a.hd}, DType::f32), zeros(Shape{a.B, a.H, a.T}, DType::f32)};
}
// Outputs start as garbage: the ops overwrite them (a kernel that accumulated into them would fail).
std::vector<HostTensor> garbage(Rng& r, std::vector<Shape> shapes) {
  std::vector<HostTensor> out;
  for (const Shape& s : shapes) out.push_back(random_f32(r, s, 5.0f, 9.0f));
  return out;
}

// Sample packing (pos [B, T]): sample boundaries inside and exactly at the GPU kernels' 16/32/64-row query
// blocks and key tiles and the CPU's 64-query / 256-key blocks, samples of length 1 (alone, and every
// token its own sample: out = v), rows of one batch packed differently, odd head dims, large scores, and
// positions no packing makes (negative, past t, not increasing: clamped per query, windows not monotone).
// Head dims of two capacity classes (16 and 64) only: the window logic does not depend on the head dim,
// and every class is one more set of kernels for the GPU backends to compile.
struct Packed {
  Attn a;
  std::vector<std::vector<int64_t>> lengths;  // per row (cycled), as packed_positions() takes them
};
const Packed kPacked[] = {
    {{"pack_one_per_row_T65_hd16_G2", 2, 65, 65, 2, 1, 16}, {{65}}},
    {{"pack_short_T130_hd16_G2", 1, 130, 130, 4, 2, 16}, {{3, 1, 7, 2, 9, 5, 1, 4}}},
    {{"pack_edge64_len1_T130_hd64", 1, 130, 130, 2, 1, 64}, {{64, 1, 65}}},
    {{"pack_edges16_T70_hd16_G2", 2, 70, 70, 4, 2, 16}, {{16, 16, 32, 6}, {1, 15, 1, 17, 36}}},
    {{"pack_T33_hd6_G2", 2, 33, 33, 4, 2, 6}, {{5, 1, 27}, {33}}},
    {{"pack_T300_hd16_edge256", 1, 300, 300, 2, 1, 16}, {{100, 156, 1, 43}}},
    {{"pack_all_len1_T40_hd12", 1, 40, 40, 2, 1, 12}, {{1}}},
    {{"pack_T65_hd60_G1", 1, 65, 65, 1, 1, 60}, {{17, 31, 17}}},
    {{"pack_large_scores_T70_hd16", 1, 70, 70, 2, 1, 16, 12.0f}, {{20, 30, 20}}},
};
// Random positions in [-3, T], but 0 at every 16th query: there a block's first query sees only itself
// while later ones see back to key 0, so a kernel that took the first query's window for its block's
// would skip tiles it needs.
HostTensor odd_positions(Rng& r, int64_t B, int64_t T) {
  HostTensor p = random_i32(r, Shape{B, T}, -3, static_cast<int32_t>(T));
  for (int64_t i = 0; i < B * T; i += 16) p.as<int32_t>()[i] = 0;
  return p;
}
const Attn kOddPos{"pos_unpacked_values_T130_hd16_G2", 2, 130, 130, 4, 2, 16};

std::vector<OpCase> attention_cases() {
  Rng r(71);
  std::vector<OpCase> cs;
  for (const Attn& a : kAttn) {
    Inputs in = inputs(r, a);
    push_with_f16(cs, make_case(a.name, Op::attention, {in.q, in.k, in.v},
                                garbage(r, {in.q.shape(), Shape{a.B, a.H, a.T}}), {}, {scale_of(a.hd)}, forward_tol(a)),
                  forward_f16_tol(a), forward_f16_tol(a));
  }
  auto packed = [&](const Attn& a, const HostTensor& pos) {
    Inputs in = inputs(r, a);
    push_with_f16(cs, make_case(a.name, Op::attention, {in.q, in.k, in.v, pos},
                                garbage(r, {in.q.shape(), Shape{a.B, a.H, a.T}}), {}, {scale_of(a.hd)}, forward_tol(a)),
                  forward_f16_tol(a), forward_f16_tol(a));
  };
  for (const Packed& p : kPacked) packed(p.a, packed_positions(p.a.B, p.a.T, p.lengths));
  packed(kOddPos, odd_positions(r, kOddPos.B, kOddPos.T));
  return cs;
}
ET_OP_CASES(attention, attention_cases);

// out and lse come from the reference forward, as the model passes them along.
std::vector<OpCase> attention_backward_cases() {
  Rng r(72);
  std::vector<OpCase> cs;
  for (const Attn& a : kAttn) {
    Inputs in = inputs(r, a);
    const float scale = scale_of(a.hd);
    auto fwd = run_reference(make_case("", Op::attention, {in.q, in.k, in.v}, forward_outputs(a), {}, {scale}, tol::exact));
    HostTensor dout = random_f32(r, in.q.shape());
    push_with_f16(cs, make_case(a.name, Op::attention_backward, {dout, in.q, in.k, in.v, fwd[0], fwd[1]},
                                garbage(r, {in.q.shape(), in.k.shape(), in.k.shape()}), {}, {scale}, backward_tol(a)),
                  backward_f16_tol(a), backward_f16_tol(a));
  }
  auto packed = [&](const Attn& a, const HostTensor& pos) {
    Inputs in = inputs(r, a);
    const float scale = scale_of(a.hd);
    auto fwd = run_reference(
        make_case("", Op::attention, {in.q, in.k, in.v, pos}, forward_outputs(a), {}, {scale}, tol::exact));
    HostTensor dout = random_f32(r, in.q.shape());
    push_with_f16(cs, make_case(a.name, Op::attention_backward, {dout, in.q, in.k, in.v, fwd[0], fwd[1], pos},
                                garbage(r, {in.q.shape(), in.k.shape(), in.k.shape()}), {}, {scale}, backward_tol(a)),
                  backward_f16_tol(a), backward_f16_tol(a));
  };
  for (const Packed& p : kPacked) packed(p.a, packed_positions(p.a.B, p.a.T, p.lengths));
  packed(kOddPos, odd_positions(r, kOddPos.B, kOddPos.T));
  return cs;
}
ET_OP_CASES(attention_backward, attention_backward_cases);

// ---- the reference's own semantics ----

// One query head, hd 1, S = 3 keys, T = 2 queries (one cached position): query 0 sees keys 0..1, query 1
// all three. Equal scores give the plain mean of the visible values; lse = log(visible count) + score.
TEST(AttentionReference, MasksTheFutureAndAverages) {
  HostTensor q = filled_f32(Shape{1, 2, 1, 1}, 2.0f), k = filled_f32(Shape{1, 3, 1, 1}, 1.5f);
  HostTensor v = HostTensor::from(Shape{1, 3, 1, 1}, DType::f32, std::vector<float>{1.0f, 2.0f, 30.0f});
  auto o = run_reference(make_case("", Op::attention, {q, k, v}, {zeros(Shape{1, 2, 1, 1}, DType::f32), zeros(Shape{1, 1, 2}, DType::f32)},
                                   {}, {0.5f}, tol::exact));
  auto out = o[0].to_vector<float>(), lse = o[1].to_vector<float>();
  EXPECT_FLOAT_EQ(out[0], 1.5f);   // (1 + 2) / 2: value 30 is in query 0's future
  EXPECT_FLOAT_EQ(out[1], 11.0f);  // (1 + 2 + 30) / 3
  EXPECT_NEAR(lse[0], 0.5 * 3.0 + std::log(2.0), 1e-6);
  EXPECT_NEAR(lse[1], 0.5 * 3.0 + std::log(3.0), 1e-6);
}

// Query head h reads kv head h / (H / KV): with KV = 2 and H = 4, heads 0-1 see kv head 0's value and
// heads 2-3 kv head 1's (a single key, so out = v exactly).
TEST(AttentionReference, GroupsReadTheirKvHead) {
  Rng r(73);
  HostTensor q = random_f32(r, Shape{1, 1, 4, 2});
  HostTensor k = random_f32(r, Shape{1, 1, 2, 2});
  HostTensor v = HostTensor::from(Shape{1, 1, 2, 2}, DType::f32, std::vector<float>{1, 2, 3, 4});
  auto o = run_reference(make_case("", Op::attention, {q, k, v}, {zeros(Shape{1, 1, 4, 2}, DType::f32), zeros(Shape{1, 4, 1}, DType::f32)},
                                   {}, {1.0f}, tol::exact))[0]
               .to_vector<float>();
  EXPECT_EQ(o, (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
}

// ---- the fused op against the unfused chain ----

// The chain of the model before the fused op (src/model/step.cpp before): queries permuted to [B, H, T, hd]
// and viewed per kv head as [B, KV, G*T, hd], scores by bmm, causal_softmax, then bmm with V; backward
// through softmax_backward and the four bmms. Tolerance: both compute the same sums in fp32 in different
// orders (the chain rounds the probabilities and the scores to fp32 between ops), so per output element
// |fused - chain| <= 1e-5 + 1e-4 |chain| for out, 2e-5 + 2e-4 |chain| for the gradients (a sum over up to
// G*T + S terms more); a missing scale, mask or group sum is off by O(1).
TEST(Attention, MatchesTheUnfusedChain) {
  struct Shp {
    int64_t B, T, H, KV, hd;
  };
  for (const std::string& name : test_backends()) {
    Backend& be = backend_for_tests(name);
    for (Shp s : {Shp{2, 17, 4, 2, 16}, Shp{1, 70, 2, 1, 64}}) {
      SCOPED_TRACE(name + " B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " H" + std::to_string(s.H) +
                   " KV" + std::to_string(s.KV) + " hd" + std::to_string(s.hd));
      const int64_t G = s.H / s.KV;
      const float scale = scale_of(s.hd);
      Rng r(74);
      auto up = [&](const HostTensor& h) { return be.from_host(h.shape(), h.dtype(), h.data(), h.nbytes()); };
      Tensor q = up(random_f32(r, Shape{s.B, s.T, s.H, s.hd})), k = up(random_f32(r, Shape{s.B, s.T, s.KV, s.hd}));
      Tensor v = up(random_f32(r, Shape{s.B, s.T, s.KV, s.hd})), dout = up(random_f32(r, Shape{s.B, s.T, s.H, s.hd}));
      Graph g(be);
      // fused
      auto [out, lse] = g.attention(q, k, v, scale);
      auto [dq, dk, dv] = g.attention_backward(dout, q, k, v, out, lse, scale);
      // unfused
      Tensor qg = g.permute(q, {0, 2, 1, 3}).reshape(Shape{s.B, s.KV, G * s.T, s.hd});
      Tensor kp = g.permute(k, {0, 2, 1, 3}), vp = g.permute(v, {0, 2, 1, 3});
      Tensor P = g.causal_softmax(g.bmm(qg, kp, false, true).reshape(Shape{s.B, s.H, s.T, s.T}), scale)
                     .reshape(Shape{s.B, s.KV, G * s.T, s.T});
      Tensor out_c = g.permute(g.bmm(P, vp).reshape(Shape{s.B, s.H, s.T, s.hd}), {0, 2, 1, 3});
      Tensor dO = g.permute(dout, {0, 2, 1, 3}).reshape(Shape{s.B, s.KV, G * s.T, s.hd});
      Tensor dS = g.softmax_backward(P, g.bmm(dO, vp, false, true));
      Tensor dq_c = g.permute(g.bmm(dS, kp, false, false, scale).reshape(Shape{s.B, s.H, s.T, s.hd}), {0, 2, 1, 3});
      Tensor dk_c = g.permute(g.bmm(dS, qg, true, false, scale), {0, 2, 1, 3});
      Tensor dv_c = g.permute(g.bmm(P, dO, true, false), {0, 2, 1, 3});
      auto host = [&](const Tensor& t) {
        HostTensor h(t.shape(), t.dtype());
        be.download(t, h.data(), h.nbytes());
        return h;
      };
      std::string d = compare(host(out), host(out_c), Tolerance{1e-5, 1e-4});
      EXPECT_TRUE(d.empty()) << "out:\n" << d;
      const Tolerance grad{2e-5, 2e-4};
      d = compare(host(dq), host(dq_c), grad);
      EXPECT_TRUE(d.empty()) << "dq:\n" << d;
      d = compare(host(dk), host(dk_c), grad);
      EXPECT_TRUE(d.empty()) << "dk:\n" << d;
      d = compare(host(dv), host(dv_c), grad);
      EXPECT_TRUE(d.empty()) << "dv:\n" << d;
      // lse: the log of the softmax normaliser, so exp(scale*q.k - lse) is the chain's P (checked at the
      // diagonal entry of every row, which every query sees).
      HostTensor l = host(lse), Ph = host(P), qh = host(q), kh = host(k);
      int bad = 0;
      for (int64_t b = 0; b < s.B; ++b)
        for (int64_t h = 0; h < s.H; ++h)
          for (int64_t t = 0; t < s.T; ++t) {
            double dot = 0;
            for (int64_t e = 0; e < s.hd; ++e)
              dot += static_cast<double>(qh.as<float>()[((b * s.T + t) * s.H + h) * s.hd + e]) *
                     kh.as<float>()[((b * s.T + t) * s.KV + h / G) * s.hd + e];
            const double p = std::exp(scale * dot - l.as<float>()[(b * s.H + h) * s.T + t]);
            const double want = Ph.as<float>()[((b * s.H + h) * s.T + t) * s.T + t];
            if (std::fabs(p - want) > 1e-5 + 1e-4 * want && bad++ < 3)
              ADD_FAILURE() << "lse of b" << b << " h" << h << " t" << t << ": exp(s - lse) " << p << ", P " << want;
          }
    }
  }
}

// Packing semantics of the reference: every token its own sample gives out = v (the one visible key) and
// lse = its own score; a sample's tokens never see the previous sample's (changing those keys and values
// leaves them unchanged, bit for bit).
TEST(AttentionReference, PackedSamplesSeeOnlyThemselves) {
  Rng r(75);
  const Shape qs{1, 6, 2, 4}, ks{1, 6, 1, 4};
  HostTensor q = random_f32(r, qs), k = random_f32(r, ks), v = random_f32(r, ks);
  auto run = [&](const HostTensor& kk, const HostTensor& vv, const HostTensor& pos) {
    return run_reference(make_case("", Op::attention, {q, kk, vv, pos}, {zeros(qs, DType::f32), zeros(Shape{1, 2, 6}, DType::f32)},
                                   {}, {0.5f}, tol::exact));
  };
  auto alone = run(k, v, packed_positions(1, 6, {{1}}));
  for (int64_t t = 0; t < 6; ++t)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 4; ++e)
        EXPECT_EQ(alone[0].as<float>()[(t * 2 + h) * 4 + e], v.as<float>()[t * 4 + e]) << "t" << t << " h" << h;
  // Samples [0, 2) and [2, 6): new keys and values at 0 and 1 change nothing from token 2 on.
  const HostTensor pos = packed_positions(1, 6, {{2, 4}});
  auto base = run(k, v, pos);
  HostTensor k2 = k, v2 = v;
  for (int64_t i = 0; i < 8; ++i) k2.as<float>()[i] += 1.0f, v2.as<float>()[i] -= 2.0f;
  auto moved = run(k2, v2, pos);
  for (int64_t i = 2 * 2 * 4; i < qs.numel(); ++i) EXPECT_EQ(base[0].as<float>()[i], moved[0].as<float>()[i]) << i;
  for (int64_t i = 0; i < 2 * 2 * 4; ++i) EXPECT_NE(base[0].as<float>()[i], moved[0].as<float>()[i]) << i;
}

// pos of one sample per row (0, 1, ..., T-1) is plain causal attention: on every backend the op with it
// gives the op without it, bit for bit (the kernels' masks and loops coincide then), forward and backward
// (WebGPU: the forward only; its four kernels of each variant take SwiftShader over a minute to compile,
// and its pos backward is checked against the reference by the op cases).
TEST(Attention, OneSamplePerRowIsPlainCausal) {
  for (const std::string& name : test_backends()) {
    Backend& be = backend_for_tests(name);
    for (const Attn& a : {Attn{"T130_hd16_G2", 1, 130, 130, 2, 1, 16}}) {
      SCOPED_TRACE(name + " " + a.name);
      Rng r(76);
      Inputs in = inputs(r, a);
      const HostTensor pos = packed_positions(a.B, a.T, {{a.T}});
      const float scale = scale_of(a.hd);
      OpCase plain = make_case("", Op::attention, {in.q, in.k, in.v}, forward_outputs(a), {}, {scale}, tol::exact);
      OpCase with = make_case("", Op::attention, {in.q, in.k, in.v, pos}, forward_outputs(a), {}, {scale}, tol::exact);
      auto f0 = run_on(be, plain), f1 = run_on(be, with);
      for (size_t i = 0; i < 2; ++i) EXPECT_EQ(compare(f1[i], f0[i], tol::exact), "") << "forward output " << i;
      if (name == "webgpu") continue;
      HostTensor dout = random_f32(r, in.q.shape());
      plain = make_case("", Op::attention_backward, {dout, in.q, in.k, in.v, f0[0], f0[1]},
                        {zeros(in.q.shape(), DType::f32), zeros(in.k.shape(), DType::f32), zeros(in.k.shape(), DType::f32)},
                        {}, {scale}, tol::exact);
      with = plain;
      with.in.push_back(pos);
      auto b0 = run_on(be, plain), b1 = run_on(be, with);
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(compare(b1[i], b0[i], tol::exact), "") << "backward output " << i;
    }
  }
}

// pos only in the training shape: with a KV cache (S > T) a query's position is not its row's.
TEST(Attention, PosNeedsTheTrainingShape) {
  Backend& be = backend_for_tests("cpu");
  Tensor q = be.zeros(Shape{1, 2, 1, 4}, DType::f32), k = be.zeros(Shape{1, 5, 1, 4}, DType::f32);
  Graph g(be);
  try {
    g.attention(q, k, k, 0.5f, be.zeros(Shape{1, 2}, DType::i32));
    ADD_FAILURE() << "attention took pos with S > T";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pos (sample packing) needs k's S = 5 equal to q's T = 2"), std::string::npos)
        << e.what();
  }
  try {
    g.attention(q, q, q, 0.5f, be.zeros(Shape{1, 2}, DType::f32));
    ADD_FAILURE() << "attention took an f32 pos";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pos must be i32"), std::string::npos) << e.what();
  }
}

// Head dims past the GPU kernels' limit are refused with a message naming the op and the limit; the CPU
// takes any head dim.
TEST(Attention, GpuRefusesHeadDimsPastItsLimit) {
  for (const std::string& name : test_backends()) {
    if (name == "cpu") continue;
    Backend& be = backend_for_tests(name);
    Tensor q = be.zeros(Shape{1, 4, 1, 130}, DType::f32), k = be.zeros(Shape{1, 4, 1, 130}, DType::f32);
    Graph g(be);
    try {
      g.attention(q, k, k, 0.1f);
      ADD_FAILURE() << name << " accepted head dim 130";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("head dim 130"), std::string::npos) << e.what();
    }
  }
}

// The tensor-core kernels' tiles (the f16 flag on devices with cooperative matrices; exercised by the f16
// twins above on such a device): every head dim up to the limit gets a capacity that holds it and is a
// multiple of the 16-wide fragments and of the 64 output columns a pass takes past 64; within the 48 KiB
// the kernels ask for, B tiles of 64 rows up to head dim 64 and 32 above; nothing past the limit or in a
// device with too little memory.
TEST(AttentionTiles, TensorCoreTilesFitTheirMemory) {
  for (int64_t hd = 1; hd <= gpu::kAttnMaxHeadDim; ++hd) {
    SCOPED_TRACE("hd " + std::to_string(hd));
    const uint32_t hc = gpu::attention_capacity(hd), br = gpu::attention_coop_rows(hd, 48 * 1024);
    EXPECT_GE(hc, hd);
    EXPECT_EQ(hc % 16, 0u);
    if (hc > 64) {
      EXPECT_EQ(hc % 64, 0u);
    }
    EXPECT_EQ(br, hd <= 64 ? 64u : 32u);
    EXPECT_LE(gpu::attention_coop_shared_bytes(hc, br), 48u * 1024);
    EXPECT_GT(gpu::attention_coop_shared_bytes(hc, 64), br == 64 ? 0u : 48u * 1024);
    EXPECT_EQ(gpu::attention_coop_rows(hd, 8 * 1024), 0u);
  }
  EXPECT_EQ(gpu::attention_coop_rows(gpu::kAttnMaxHeadDim + 1, 1 << 20), 0u);
}

}  // namespace
}  // namespace edgetrain::test

// Matrix products (mm, bmm, linear): op cases at GPU tile edges for the cross-backend harness (each also
// with fp16 operands), hand-computed checks of the reference's transpose flags, alpha, batching and bias,
// and how the Vulkan tensor-core path plans a product (which products take it, split-K slices).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/op_case.h"
#include "vulkan/ops_gemm.h"

namespace edgetrain::test {
namespace {

// M, N, K around 64x64 output tiles, 4x4/8x8 register tiles and 16/32-wide k steps.
struct MNK {
  int64_t M, N, K;
};
const std::vector<MNK> kShapes = {{1, 1, 1},     {1, 64, 64},  {3, 5, 7},     {63, 64, 65},  {64, 64, 64},
                                  {65, 63, 129}, {128, 1, 33}, {1, 129, 128}, {129, 65, 16}, {64, 128, 31}};

std::string mnk_name(const MNK& s) {
  return "M" + std::to_string(s.M) + "_N" + std::to_string(s.N) + "_K" + std::to_string(s.K);
}

std::vector<OpCase> mm_cases() {
  std::vector<OpCase> cs;
  Rng r(201);
  const float alphas[] = {1.0f, 0.5f, -2.0f};
  int i = 0;
  for (const MNK& s : kShapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb, ++i) {
        // Every flag combination at every shape; alpha cycles so each value meets several shapes.
        OpCase c;
        c.op = Op::mm;
        c.name = mnk_name(s) + "_ta" + std::to_string(ta) + "_tb" + std::to_string(tb);
        c.in = {random_f32(r, ta ? Shape{s.K, s.M} : Shape{s.M, s.K}),
                random_f32(r, tb ? Shape{s.N, s.K} : Shape{s.K, s.N})};
        c.out = {zeros(Shape{s.M, s.N}, DType::f32)};
        c.ints = {ta, tb};
        c.floats = {alphas[i % 3]};
        c.tol = tol::reduction(s.K);
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

// An H200-like encode context (the encoder only reads limits: no device needed); mps = multiprocessors.
vk::EncodeContext tensor_core_context(uint32_t mps) {
  vk::EncodeContext ctx;
  ctx.coopmat = true;
  ctx.subgroup_size = 32;
  ctx.max_shared_bytes = 48 * 1024;
  ctx.max_invocations = 1024;
  ctx.max_groups[0] = ctx.max_groups[1] = ctx.max_groups[2] = 65535;
  ctx.max_storage_range = uint64_t{1} << 32;
  ctx.multiprocessors = mps;
  return ctx;
}

// The z extent of the tensor-core GEMM (its contraction slices) for linear_dW's dW [M, N] over K tokens with
// fp16 operands, and whether the split-K reduction follows it.
struct CoopPlan {
  uint32_t slices = 0;
  bool reduced = false;
  size_t scratch = 0;
};
CoopPlan coop_plan(uint64_t M, uint64_t N, uint64_t K, bool split_k, uint32_t mps) {
  const vk::EncodeContext ctx = tensor_core_context(mps);
  const vk::CoopOperand a = vk::coop_fp32(0, M, K, 1, static_cast<uint32_t>(M), 0);
  const vk::CoopOperand b = vk::coop_fp32(1, N, K, 1, static_cast<uint32_t>(N), 0);
  vk::CoopEpilogue ep;
  ep.split_k = split_k;
  vk::Encoded out;
  EXPECT_TRUE(vk::append_coop(a, b, ep, true, ctx, out));
  CoopPlan p;
  for (const vk::Dispatch& d : out.dispatches) {
    if (std::string(d.kernel.name) == "gemm_coop") p.slices = d.groups[2];
    if (std::string(d.kernel.name) == "gemm_splitk_reduce") p.reduced = true;
  }
  p.scratch = out.pooled_scratch_bytes;
  return p;
}

// A deep product with few 128x128 output tiles slices its contraction until the workgroups fill >= 90% of
// the waves they take (one resident per multiprocessor), each slice >= 512 deep; the partial sums are added
// by the reduction and fit the scratch.
TEST(GemmTiles, DeepProductsWithFewTilesSplitTheirContraction) {
  // The base step's dW [768, 768] over 8192 tokens: 36 tiles; 7 slices are 252 workgroups of 264 (95%).
  CoopPlan p = coop_plan(768, 768, 8192, true, 132);
  EXPECT_EQ(p.slices, 7u);
  EXPECT_TRUE(p.reduced);
  EXPECT_GE(p.scratch, size_t{7} * 768 * 768 * 4 + 2 * 768 * 8192 * 2);
  // dW [768, 2048]: 96 tiles; 2 and 3 slices fill no more than 1 (73%), 4 fill 384 of 396.
  EXPECT_EQ(coop_plan(768, 2048, 8192, true, 132).slices, 4u);
  // 4096^2 outputs (1024 tiles) fill 97% of 8 waves alone; a shallow product is not split.
  p = coop_plan(4096, 4096, 4096, true, 132);
  EXPECT_EQ(p.slices, 1u);
  EXPECT_FALSE(p.reduced);
  EXPECT_EQ(coop_plan(768, 768, 512, true, 132).slices, 1u);
  // Not allowed (a batch, or bias/layout 1 callers): one slice. A device that does not say its
  // multiprocessor count: ~264 workgroups (36 tiles x 8).
  EXPECT_EQ(coop_plan(768, 768, 8192, false, 132).slices, 1u);
  EXPECT_EQ(coop_plan(768, 768, 8192, true, 0).slices, 8u);
  // Over many shapes: never fewer busy multiprocessor-waves than without the split, slices >= 512 deep.
  for (uint64_t mn : {128, 384, 768, 1280, 2048})
    for (uint64_t K : {1024, 4096, 8192, 30000}) {
      const CoopPlan q = coop_plan(mn, 768, K, true, 132);
      const uint64_t tiles = mn / 128 * 6, Kp = (K + 63) / 64 * 64;
      auto busy = [&](uint64_t s) { return double(tiles * s) / double((tiles * s + 131) / 132 * 132); };
      EXPECT_GE(busy(q.slices) + 1e-9, busy(1)) << mn << " x 768 over " << K;
      if (q.slices > 1) {
        EXPECT_GE(Kp / q.slices, 512u) << mn << " x 768 over " << K;
      }
      EXPECT_EQ(q.reduced, q.slices > 1);
    }
}

// Which products take the tensor cores: both sides >= 128, or one >= 128 and the other >= 16 (a rank-16
// LoRA's products), over a contraction >= 256; K = 16 and tiny products stay on the FMA kernels.
TEST(GemmTiles, TensorCoresTakeWideAndLoraShapedDeepProducts) {
  const vk::EncodeContext ctx = tensor_core_context(132);
  EXPECT_TRUE(vk::coop_for(4096, 4096, 4096, ctx));
  EXPECT_TRUE(vk::coop_for(4096, 16, 2048, ctx));
  EXPECT_TRUE(vk::coop_for(16, 2048, 4096, ctx));
  EXPECT_FALSE(vk::coop_for(4096, 2048, 16, ctx));
  EXPECT_FALSE(vk::coop_for(4096, 8, 4096, ctx));
  EXPECT_FALSE(vk::coop_for(64, 64, 4096, ctx));
  vk::EncodeContext lavapipe_like = ctx;
  lavapipe_like.coopmat = false;
  EXPECT_FALSE(vk::coop_for(4096, 4096, 4096, lavapipe_like));
}

}  // namespace
}  // namespace edgetrain::test

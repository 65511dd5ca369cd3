// How the Vulkan tensor-core GEMM path plans a product (ops_gemm_coop.cpp): which products take it, and how a
// deep product with few output tiles slices its contraction (split-K). Encoders only read the device's
// limits, so an H200-like encode context is enough: no device is needed. (Native only: the browser's op
// tests, web/wasm/CMakeLists.txt, take the files that register op cases.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "harness/op_case.h"
#include "vulkan/coop_matrix2.h"
#include "vulkan/ops_gemm.h"

namespace edgetrain::test {
namespace {

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

// A shallow product (contraction <= 32 over a wide output) takes gemm_shallow.comp where its staging fits the
// device's workgroup memory: 12 KiB 16 deep, 24 KiB 32 deep. On a device with Vulkan's minimum of 16 KiB the
// 32-deep case is left to the tiles instead of failing at pipeline creation.
TEST(GemmTiles, ShallowProductsTakeTheirKernelWhereItsStagingFits) {
  auto kernel_for = [](uint64_t K, uint32_t shared) {
    vk::EncodeContext ctx = tensor_core_context(132);
    ctx.max_shared_bytes = shared;
    vk::GemmArgs g;
    g.M = 4096, g.N = 2048, g.K = K;
    g.sa_row = static_cast<uint32_t>(K), g.sa_red = 1, g.sb_red = 1, g.sb_col = static_cast<uint32_t>(K);
    vk::Encoded out;
    vk::append_gemm(g, ctx, out);
    return std::string(out.dispatches.empty() ? "" : out.dispatches.back().kernel.name);
  };
  EXPECT_EQ(kernel_for(16, 16 * 1024), "gemm_shallow");
  EXPECT_EQ(kernel_for(32, 24 * 1024), "gemm_shallow");
  EXPECT_NE(kernel_for(17, 16 * 1024), "gemm_shallow");
  EXPECT_NE(kernel_for(32, 16 * 1024), "gemm_shallow");
}

// With cooperative matrices 2 every fp16 product takes gemm_cm2.comp over the same staged parts: a 4-bit B
// staged k-major (gemm_split.comp MODE 4) and read as such, an fp32 B with contiguous k too (MODE 5), an fp32
// A as before, on 128x128 tiles 32 deep
// (spec 6-9: invocations, BM, BN, BK); a product at most 32 wide on a tile as wide as it (rounded up to 16),
// 64 deep; split-K counts two 128x128 workgroups per multiprocessor, four narrow ones, and slices from 256
// deep. The fp32 three-product path is unchanged.
TEST(GemmTiles, CooperativeMatrices2TakeEveryFp16Product) {
  if (!vk::cm2_built()) GTEST_SKIP() << "the build has no cooperative-matrix-2 kernels (no glslang 15)";
  vk::EncodeContext ctx = tensor_core_context(132);
  ctx.cm2 = true;
  auto kernels = [](const vk::Encoded& e) {
    std::string k;
    for (const vk::Dispatch& d : e.dispatches) {
      const std::string name = d.kernel.name;
      k += name + (name == "gemm_split" ? std::to_string(d.spec[4]) : "") + " ";  // a staging with its MODE
    }
    return k;
  };
  // y = x W^T with W 4-bit (linear_q4gsw's operands): x's rows (MODE 1), W k-major (MODE 4), then the GEMM
  // reading B k-major (spec 5).
  const vk::CoopOperand x = vk::coop_fp32(0, 4096, 2048, 2048, 1, 0);
  vk::CoopOperand w;
  w.kind = 2, w.src_bind = 1, w.scale_bind = 2, w.R = 8192, w.K = 2048, w.q4_N = 8192, w.q4_gs = 32;
  vk::CoopEpilogue ep;
  ep.bias_bind = 3, ep.out_bind = 4, ep.scalar_bind = 5, ep.scratch_bind = 6;
  vk::Encoded q4;
  ASSERT_TRUE(vk::append_coop(x, w, ep, true, ctx, q4));
  EXPECT_EQ(kernels(q4), "gemm_split1 gemm_split4 gemm_cm2 ");
  EXPECT_EQ(q4.dispatches.back().spec[5], 1u);
  EXPECT_EQ(q4.dispatches.back().spec, (std::vector<uint32_t>{4, 3, 5, 6, 0, 1, 128, 128, 128, 32}));
  EXPECT_EQ(q4.dispatches.back().groups[0], 8192u / 128);
  EXPECT_EQ(q4.dispatches.back().push.size(), vk::coop_push::words * 4);  // the words coop_push names
  // y = x W^T with W fp32 (linear; the tied head): W k-major through the transposing staging (MODE 5), read
  // k-major; its 64 x 32 tiles.
  const vk::CoopOperand w32 = vk::coop_fp32(1, 8192, 2048, 2048, 1, 0);
  vk::Encoded lin;
  ASSERT_TRUE(vk::append_coop(x, w32, ep, true, ctx, lin));
  EXPECT_EQ(kernels(lin), "gemm_split1 gemm_split5 gemm_cm2 ");
  EXPECT_EQ(lin.dispatches.back().spec[5], 1u);
  EXPECT_EQ(lin.dispatches[1].groups[0] * lin.dispatches[1].groups[1], (8192u / 64) * (2048u / 32));
  vk::Encoded q4_fp32;  // without the f16 flag: the three-product path
  ASSERT_TRUE(vk::append_coop(x, w, ep, false, ctx, q4_fp32));
  EXPECT_EQ(kernels(q4_fp32).find("gemm_cm2"), std::string::npos);
  // A rank-16 adapter's x A^T, [4096, 16] over 2048: 32 tiles of 128x16; 8 slices of 256 (the most),
  // 256 workgroups (gemm_coop.comp: 128x128 tiles, 4 slices of 512, 128 of 132 slots).
  const vk::CoopOperand a = vk::coop_fp32(1, 16, 2048, 2048, 1, 0);
  vk::CoopEpilogue lo;
  lo.split_k = true;
  vk::Encoded narrow;
  ASSERT_TRUE(vk::append_coop(x, a, lo, true, ctx, narrow));
  EXPECT_EQ(kernels(narrow), "gemm_split1 gemm_split1 gemm_cm2 gemm_splitk_reduce ");
  EXPECT_EQ(narrow.dispatches[2].groups[2], 8u);
  EXPECT_EQ(narrow.dispatches[2].groups[0], 1u);
  EXPECT_EQ(narrow.dispatches[2].groups[1], 32u);
  EXPECT_EQ(std::vector<uint32_t>(narrow.dispatches[2].spec.begin() + 6, narrow.dispatches[2].spec.end()),
            (std::vector<uint32_t>{128, 128, 16, 64}));
  // An adapter's dB = dy^T t, [2048, 16] over 4096 rows: A = dy^T (rows contiguous) is staged as the same
  // dispatch as dy's own rows (the 4-bit input gradient's staging of dy, here x's shape), which the program
  // skips while it is still there; read k-major (spec 4); t k-major (MODE 3).
  const vk::CoopOperand dyt = vk::coop_fp32(0, 2048, 4096, 1, 2048, 0), t = vk::coop_fp32(1, 16, 4096, 1, 16, 0);
  vk::Encoded db;
  ASSERT_TRUE(vk::append_coop(dyt, t, ep, true, ctx, db));
  EXPECT_EQ(kernels(db), "gemm_split1 gemm_split3 gemm_cm2 ");
  EXPECT_EQ(db.dispatches[0].spec, q4.dispatches[0].spec);
  EXPECT_EQ(db.dispatches[0].push, q4.dispatches[0].push);
  EXPECT_EQ(db.dispatches[0].pooled_end, q4.dispatches[0].pooled_end);
  EXPECT_EQ(db.dispatches.back().spec[4], 1u);
  vk::Encoded db_padded;  // 2000 rows of dy: padding on one side, staged k-major as before (MODE 3)
  ASSERT_TRUE(vk::append_coop(vk::coop_fp32(0, 2048, 2000, 1, 2048, 0), vk::coop_fp32(1, 16, 2000, 1, 16, 0), ep,
                              true, ctx, db_padded));
  EXPECT_EQ(kernels(db_padded), "gemm_split3 gemm_split3 gemm_cm2 ");
  const vk::CoopOperand a24 = vk::coop_fp32(1, 24, 2048, 2048, 1, 0);  // 24 wide: a 32-wide tile
  vk::Encoded narrow24;
  ASSERT_TRUE(vk::append_coop(x, a24, lo, true, ctx, narrow24));
  EXPECT_EQ(narrow24.dispatches[2].spec[8], 32u);
  // Parts past 2^32 halves (a device whose bindings reach 16 GiB): gemm_coop.comp, its parts padded to its
  // 128-row tiles, not the narrow tile's 16 (Np, push constant 4).
  vk::EncodeContext wide_range = ctx;
  wide_range.max_storage_range = uint64_t{1} << 34;
  const vk::CoopOperand tall = vk::coop_fp32(0, uint64_t{1} << 21, 2048, 2048, 1, 0);
  vk::Encoded large;
  ASSERT_TRUE(vk::append_coop(tall, a, ep, true, wide_range, large));
  EXPECT_EQ(kernels(large), "gemm_split1 gemm_split1 gemm_coop ");
  uint32_t np = 0;
  std::memcpy(&np, large.dispatches.back().push.data() + vk::coop_push::Np * sizeof(uint32_t), sizeof np);
  EXPECT_EQ(np, 128u);
  ctx.cm2 = false;
  vk::Encoded coop;
  ASSERT_TRUE(vk::append_coop(x, a, lo, true, ctx, coop));
  EXPECT_EQ(kernels(coop), "gemm_split1 gemm_split1 gemm_coop gemm_splitk_reduce ");
  EXPECT_EQ(coop.dispatches[2].groups[2], 4u);
}

// A low-rank update right after the 4-bit product it adds to (a qlora step's y += t B^T after y = x W^T, and
// dx += dt A after the input gradient) joins that product's GEMM: the update's call stages t's rows and B (or
// A) k-major past the product's parts in the pooled scratch, then runs the product's GEMM, moved there and
// binding the call before's set, with the update's contraction (16 padded to the k step, 32) in its push
// constants. Anything else stays two calls.
TEST(GemmTiles, LowRankUpdateJoinsTheFourBitProduct) {
  if (!vk::cm2_built()) GTEST_SKIP() << "the build has no cooperative-matrix-2 kernels (no glslang 15)";
  vk::EncodeContext ctx = tensor_core_context(132);
  ctx.cm2 = true;
  Backend& cpu = backend_for_tests("cpu");
  const int64_t M = 512, K = 512, N = 384, r = 16, gs = 32;
  auto f32 = [&](Shape s) { return cpu.zeros(s, DType::f32); };
  const Tensor x = f32({M, K}), w = cpu.zeros(Shape{N * K / 8}, DType::u32), scales = f32({K / gs, N});
  const Tensor y = f32({M, N}), t = f32({M, r}), b = f32({N, r}), dy = f32({M, N}), dx = f32({M, K}),
               dt = f32({M, r}), a = f32({r, K});
  auto kernels = [](const vk::Encoded& e) {
    std::string k;
    for (const vk::Dispatch& d : e.dispatches) {
      const std::string name = d.kernel.name;
      k += name + (name == "gemm_split" ? std::to_string(d.spec[4]) : "") + (d.binds_call_before ? "^" : "") + " ";
    }
    return k;
  };
  auto word = [](const vk::Dispatch& d, size_t i) {
    uint32_t v = 0;
    std::memcpy(&v, d.push.data() + 4 * i, 4);
    return v;
  };
  auto fuse = [&](const OpCall& prev, const OpCall& next, vk::Encoded& pe, vk::Encoded& ne, const vk::EncodeContext& c) {
    vk::encoder_for(prev.op)(prev, c, pe);
    vk::EncodeContext nc = c;
    nc.float_index = {0};  // alpha's place in the scalar block
    vk::encoder_for(next.op)(next, nc, ne);
    return vk::fuse_low_rank_update(prev, pe, next, nc, ne);
  };
  const OpCall lin{Op::linear_q4gsw, {x, w, scales}, {y}, {gs, 1}, {}};
  const OpCall up{Op::mm, {t, b}, {y}, {0, 1, 1, 1}, {Scalar(1.0f)}};
  vk::Encoded le, ue;
  ASSERT_TRUE(fuse(lin, up, le, ue, ctx));
  EXPECT_EQ(kernels(le), "gemm_split1 gemm_split4 ");
  EXPECT_EQ(kernels(ue), "gemm_split1 gemm_split5 gemm_cm2^ ");  // t's rows; B [N, r] k-major
  const vk::Dispatch& gemm = ue.dispatches.back();
  const uint32_t a2 = word(gemm, vk::coop_push::a2_hi), b2 = word(gemm, vk::coop_push::b2_hi),
                 kp2 = word(gemm, vk::coop_push::kp2);
  EXPECT_EQ(kp2, 32u);
  EXPECT_GE(uint64_t{a2} * 16, le.pooled_scratch_bytes);  // past the product's own parts
  EXPECT_EQ(uint64_t{b2} * 16, uint64_t{a2} * 16 + 512 * 32 * 2);
  EXPECT_EQ(ue.pooled_scratch_bytes, uint64_t{b2} * 16 + 384 * 32 * 2);
  for (size_t i = 0; i < 2; ++i) {  // the stagings bind the update's call: t, B, its pooled scratch at 4
    EXPECT_EQ(ue.dispatches[i].spec[0], i);
    EXPECT_EQ(ue.dispatches[i].spec[2], 4u);
    EXPECT_EQ(word(ue.dispatches[i], 7), i == 0 ? a2 : b2);  // where they write
  }
  EXPECT_EQ(gemm.spec[3], 6u);  // the GEMM still reads the 4-bit call's pooled binding
  const OpCall back{Op::linear_q4gsw_backward, {dy, w, scales}, {dx}, {gs, K, 1}, {}};
  const OpCall down{Op::mm, {dt, a}, {dx}, {0, 0, 1, 1}, {Scalar(1.0f)}};
  vk::Encoded be, de;
  ASSERT_TRUE(fuse(back, down, be, de, ctx));
  EXPECT_EQ(kernels(be), "gemm_split1 gemm_split4 ");
  EXPECT_EQ(kernels(de), "gemm_split1 gemm_split3 gemm_cm2^ ");  // dt's rows; A [r, K] as it is, k-major
  // Not joined: an alpha other than 1, another output, a slot alpha, fp32 operands, no cooperative matrices 2.
  const Tensor other = f32({M, N});
  const std::vector<std::pair<OpCall, OpCall>> apart = {
      {lin, OpCall{Op::mm, {t, b}, {y}, {0, 1, 1, 1}, {Scalar(0.5f)}}},
      {lin, OpCall{Op::mm, {t, b}, {other}, {0, 1, 1, 1}, {Scalar(1.0f)}}},
      {lin, OpCall{Op::mm, {t, b}, {y}, {0, 1, 0, 1}, {Scalar(1.0f)}}},
      {OpCall{Op::linear_q4gsw, {x, w, scales}, {y}, {gs}, {}}, OpCall{Op::mm, {t, b}, {y}, {0, 1, 1}, {Scalar(1.0f)}}}};
  for (const auto& [p, n] : apart) {
    vk::Encoded pe, ne;
    EXPECT_FALSE(fuse(p, n, pe, ne, ctx)) << n.str();
    EXPECT_EQ(ne.dispatches.empty() ? "" : std::string(ne.dispatches.back().kernel.name).substr(0, 4), "gemm");
    EXPECT_EQ(kernels(pe).find('^'), std::string::npos);
  }
  vk::EncodeContext no_cm2 = ctx;
  no_cm2.cm2 = false;
  vk::Encoded pe, ne;
  EXPECT_FALSE(fuse(lin, up, pe, ne, no_cm2));
}

// VK_KHR_cooperative_matrix's kernel is gemm_coop.comp's with the device's fragment shape: the subgroups'
// grid and fragments per subgroup tile the 128 x 128 tile, and the k step shrinks until the staged slices fit
// the device's shared memory.
TEST(GemmTiles, KhrFragmentShapesTileTheKernel) {
  struct Want {
    vk::KhrCoopShape shape;
    uint32_t shared;
    bool f16;
    vk::KhrCoopTile tile;
  };
  const Want cases[] = {
      // NVIDIA's 16x16x16 in subgroups of 32 with 48 KiB: gemm_coop.comp's own layouts (4x2 / 2x4 fragments).
      {{16, 16, 16, 32}, 48 * 1024, true, {true, 4, 4, 2, 64}},
      {{16, 16, 16, 32}, 48 * 1024, false, {true, 2, 2, 4, 32}},
      // lavapipe: 8x8x8 in subgroups of 8 with 32 KiB; the slices halve (45,344 and 49,152 bytes otherwise).
      {{8, 8, 8, 8}, 32 * 1024, true, {true, 8, 4, 2, 32}},
      {{8, 8, 8, 8}, 32 * 1024, false, {true, 4, 2, 4, 16}},
      // Subgroups of 64 (four of them): 4x4 fragments each.
      {{16, 16, 16, 64}, 64 * 1024, true, {true, 2, 4, 4, 64}},
      // 8x16 fragments in subgroups of 16: the squarest grid of the ones that tile.
      {{8, 16, 16, 16}, 64 * 1024, true, {true, 4, 4, 2, 64}},
  };
  for (const Want& w : cases) {
    const vk::KhrCoopTile t = vk::khr_coop_tile(w.shape, w.f16, w.shared);
    const std::string at = "shape " + std::to_string(w.shape.m) + "x" + std::to_string(w.shape.n) + "x" +
                           std::to_string(w.shape.k) + " subgroup " + std::to_string(w.shape.subgroup) +
                           (w.f16 ? " f16" : " fp32");
    EXPECT_EQ(t.ok, w.tile.ok) << at;
    EXPECT_EQ(t.sg_cols, w.tile.sg_cols) << at;
    EXPECT_EQ(t.fm, w.tile.fm) << at;
    EXPECT_EQ(t.fn, w.tile.fn) << at;
    EXPECT_EQ(t.bk, w.tile.bk) << at;
  }
  // Shapes the kernel cannot take: more than 4x4 fragments per subgroup (16x16 in subgroups of 128), a
  // subgroup that does not divide the fragment (4x4 in subgroups of 32), too little shared memory.
  EXPECT_FALSE(vk::khr_coop_tile({16, 16, 16, 128}, true, 64 * 1024).ok);
  EXPECT_FALSE(vk::khr_coop_tile({4, 4, 4, 32}, true, 64 * 1024).ok);
  EXPECT_FALSE(vk::khr_coop_tile({8, 8, 8, 8}, false, 16 * 1024).ok);
}

// Without NVIDIA's extension but with a KHR shape, products take khr/gemm_coop_khr.comp, specialized with the
// shape and tile, their contraction padded to its k step.
TEST(GemmTiles, KhrCooperativeMatricesTakeTheTensorCorePath) {
  vk::EncodeContext ctx = tensor_core_context(0);
  ctx.coopmat = false;
  ctx.subgroup_size = 8;
  ctx.max_shared_bytes = 32 * 1024;
  EXPECT_FALSE(vk::coop_for(512, 512, 512, ctx));
  ctx.coop_khr = vk::KhrCoopShape{8, 8, 8, 8};
  ASSERT_EQ(vk::coop_for(512, 512, 512, ctx), vk::cm2_built());  // the kernel is built with glslang 15
  for (const bool f16 : {true, false}) {
    const vk::CoopOperand a = vk::coop_fp32(0, 200, 300, 300, 1, 0), b = vk::coop_fp32(1, 136, 300, 300, 1, 0);
    vk::Encoded out;
    // Without glslang 15 the kernel is not built and the fp32 kernels take the product.
    ASSERT_EQ(vk::append_coop(a, b, vk::CoopEpilogue{}, f16, ctx, out), vk::cm2_built());
    if (!vk::cm2_built()) continue;
    const vk::Dispatch* gemm = nullptr;
    for (const vk::Dispatch& d : out.dispatches)
      if (std::string(d.kernel.name) == "gemm_coop_khr") gemm = &d;
    ASSERT_NE(gemm, nullptr);
    const uint32_t bk = f16 ? 32 : 16;
    EXPECT_EQ(gemm->spec, (std::vector<uint32_t>{2, 255, 3, 4, f16 ? 1u : 0u, 0, 0, 8, 8, 8, 8, f16 ? 8u : 4u, bk}));
    uint32_t kp = 0;
    std::memcpy(&kp, gemm->push.data() + 2 * 4, 4);  // Kp, the padded contraction
    EXPECT_EQ(kp, (300 + bk - 1) / bk * bk);
  }
}

}  // namespace
}  // namespace edgetrain::test

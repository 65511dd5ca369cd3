// The cooperative-matrix-2 kernels (src/vulkan/shaders/cm2/) on the catalogue's f16 cases: the attention
// forward (attention_cm2.comp) and the fp16 GEMM (gemm_cm2.comp, forced onto every product and split-K
// wherever allowed), against the CPU reference of the same call and of the fp32 call, with the catalogue's
// tolerances. Runs where the device has cooperative matrices 2 and the build has the kernel (an
// H200 with glslang 15 in .deps); skipped elsewhere (lavapipe has none). Its backend is made without the
// validation layer: Debian 12's layer (1.3.239) predates VK_NV_cooperative_matrix2 and cannot validate the
// kernel's SPIR-V; every other Vulkan test keeps the layer on. The profiler's report shows the kernel ran.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "edgetrain/backends.h"
#include "edgetrain/graph.h"
#include "edgetrain/model.h"
#include "harness/op_case.h"
#include "harness/scoped_env.h"

#ifdef EDGETRAIN_HAS_VULKAN
#include "vulkan/profile.h"
#include "vulkan/program.h"

namespace edgetrain::test {
namespace {

// A backend with cooperative matrices 2 (no validation layer, see above) that profiles its kernels into
// `profile`; null where there is none.
std::unique_ptr<Backend> cm2_backend(const std::string& profile) {
  if (!vulkan_usable()) return nullptr;
  std::unique_ptr<Backend> be = make_profiled_backend("vulkan", ::testing::TempDir() + profile);
  if (!dynamic_cast<vk::VulkanBackend&>(*be).context().limits().cm2) return nullptr;
  return be;
}
#define CM2_OR_SKIP(be)                                                                        \
  if (!(be)) GTEST_SKIP() << "no Vulkan device with cooperative matrices 2 (or the build has no " \
                             "glslang 15: scripts/setup.sh)";

// Runs every f16 twin of op's cases on be against the reference of the same call and of the fp32 call;
// returns how many ran.
int check_f16_cases(Backend& be, Op op) {
  int ran = 0;
  for (const OpCase& c : cases_for(op)) {
    if (!c.f16_vs_fp32) continue;  // the f16 twins only
    SCOPED_TRACE(c.name);
    expect_matches_reference(be, c);
    ++ran;
  }
  return ran;
}

// The attention forward reads fp16 copies of q, k and v (attention_cm2_copy16.comp): copies its tensor loads
// read as zeros would fail every case.
TEST(AttentionCm2, CatalogueF16Cases) {
  std::unique_ptr<Backend> be = cm2_backend("edgetrain_cm2_attention_profile.txt");
  CM2_OR_SKIP(be)
  int eligible = 0;
  for (const OpCase& c : cases_for(Op::attention))
    if (c.f16_vs_fp32) eligible += c.in[0].shape()[3] % 16 == 0 ? 1 : 0;  // head dims the kernel takes
  check_f16_cases(*be, Op::attention);
  EXPECT_GE(eligible, 15);
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*be).profiler()->report();
  EXPECT_NE(report.find("attention_cm2 "), std::string::npos) << report;
  EXPECT_NE(report.find("attention_cm2_copy16 "), std::string::npos) << "read from fp16 copies:\n" << report;
}

// The attention backward (attention_cm2_backward.comp, every pass) on the fp16 copies that
// attention_coop_copy16.comp writes: GQA (the heads' shares summed), packed samples, S > T, partial blocks,
// every head dim it takes.
TEST(AttentionCm2, BackwardCatalogueF16Cases) {
  std::unique_ptr<Backend> be = cm2_backend("edgetrain_cm2_attention_backward_profile.txt");
  CM2_OR_SKIP(be)
  int eligible = 0;
  for (const OpCase& c : cases_for(Op::attention_backward))
    if (c.f16_vs_fp32) eligible += c.in[1].shape()[3] % 16 == 0 ? 1 : 0;
  check_f16_cases(*be, Op::attention_backward);
  EXPECT_GE(eligible, 15);
  // Each case's program lists its kernels once: every eligible case took the cm2 kernel (the others,
  // attention_coop_backward.comp).
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*be).profiler()->report();
  int cm2_programs = 0;
  for (size_t at = report.find("attention_cm2_backward (attention_backward)"); at != std::string::npos;
       at = report.find("attention_cm2_backward (attention_backward)", at + 1))
    ++cm2_programs;
  EXPECT_EQ(cm2_programs, eligible) << report;
}

// Every product with the f16 flag (mm, bmm, linear, linear_dW and the 4-bit GEMMs): the tensor-core path
// forced onto every shape (EDGETRAIN_VK_COOPMAT=all) takes gemm_cm2.comp, with split-K wherever allowed
// (EDGETRAIN_VK_GEMM_SPLITK=all): k-major and row-major parts, batches, bias, alpha, accumulation, partial
// tiles, whole tiles (tensor stores); a low-rank adapter's x A^T and dy B on it, its other narrow products on
// gemm_narrow.comp and gemm_shallow.comp.
TEST(GemmCm2, CatalogueF16Cases) {
  ScopedEnv coop("EDGETRAIN_VK_COOPMAT", "all"), split("EDGETRAIN_VK_GEMM_SPLITK", "all");
  std::unique_ptr<Backend> be = cm2_backend("edgetrain_cm2_gemm_profile.txt");
  CM2_OR_SKIP(be)
  int ran = 0;
  for (const OpInfo& info : all_ops())
    if (has_f16_flag(info.op) && info.op != Op::attention && info.op != Op::attention_backward) {
      SCOPED_TRACE(info.name);
      ran += check_f16_cases(*be, info.op);
    }
  EXPECT_GE(ran, 40);
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*be).profiler()->report();
  EXPECT_NE(report.find("gemm_cm2"), std::string::npos) << report;
  EXPECT_EQ(report.find("gemm_coop "), std::string::npos) << "every product took gemm_cm2.comp:\n" << report;
}

// A qlora projection as the step records it (model/step.cpp): y = x W^T (+ bias) then y += t B^T, and
// dx = dy W then dx += dt A, with fp16 operands. Each update joins its 4-bit product's GEMM
// (fuse_low_rank_update, ops_gemm.h); values against the CPU backend running the same calls: with the
// updates' operands given (not computed here), both sides multiply the same fp16 values and differ only in
// the order of the K + r fp32 sums (the catalogue's f16 4-bit tolerance, tol::reduction). Partial tiles and a
// bias (the per-element epilogue), whole tiles (tensor stores), a tall narrow product.
TEST(GemmCm2, LowRankUpdatesJoinTheFourBitProducts) {
  std::unique_ptr<Backend> be = cm2_backend("edgetrain_cm2_lora_profile.txt");
  CM2_OR_SKIP(be)
  struct Shp {
    int64_t M, K, N;
    bool bias;
  };
  const int64_t rank = 16, gs = 32;
  // M = 4096 with N <= 1024 (and, for dx, K): products the KHR kernel would take alone (the next test) stay
  // on cm2 to be joined. (Contractions under 256 take no tensor cores at all: N = 264 keeps dx's on them.)
  for (const Shp& s : {Shp{300, 384, 264, true}, Shp{256, 512, 256, false}, Shp{4096, 256, 264, false}}) {
    SCOPED_TRACE("M " + std::to_string(s.M) + " K " + std::to_string(s.K) + " N " + std::to_string(s.N));
    Rng r(17);
    const HostTensor x = random_f32(r, Shape{s.M, s.K}), dy = random_f32(r, Shape{s.M, s.N}),
                     t = random_f32(r, Shape{s.M, rank}), b = random_f32(r, Shape{s.N, rank}),
                     dt = random_f32(r, Shape{s.M, rank}), a = random_f32(r, Shape{rank, s.K}),
                     bias = random_f32(r, Shape{s.N});
    const Q4Weight q = random_q4(r, s.N, s.K, gs);
    auto run = [&](Backend& bk, size_t* fused) {
      auto up = [&](const HostTensor& h) { return bk.from_host(h.shape(), h.dtype(), h.data(), h.nbytes()); };
      const Tensor tw = up(q.w), ts = up(q.scales), tt = up(t), tb = up(b), tdt = up(dt), ta = up(a);
      auto p = bk.new_program();
      Graph g(bk, *p);
      g.set_precision(Precision::fp16);
      Tensor y = g.linear_q4gsw(up(x), tw, ts, gs, s.bias ? up(bias) : Tensor());
      g.mm_into(tt, tb, y, false, true, 1.0f, true);
      Tensor dx = g.linear_q4gsw_backward(up(dy), tw, ts, gs, s.K);
      g.mm_into(tdt, ta, dx, false, false, 1.0f, true);
      p->finalize();
      p->replay();
      if (fused) *fused = dynamic_cast<vk::VulkanProgram&>(*p).fused_updates();
      return std::vector<HostTensor>{HostTensor::from(y.shape(), DType::f32, bk.to_vector<float>(y)),
                                     HostTensor::from(dx.shape(), DType::f32, bk.to_vector<float>(dx))};
    };
    size_t fused = 0;
    const std::vector<HostTensor> want = run(backend_for_tests("cpu"), nullptr), got = run(*be, &fused);
    EXPECT_EQ(fused, 2u);
    std::string d = compare(got[0], want[0], tol::reduction(s.K + rank));
    EXPECT_TRUE(d.empty()) << "y:\n" << d;
    d = compare(got[1], want[1], tol::reduction(s.N + rank));
    EXPECT_TRUE(d.empty()) << "dx:\n" << d;
  }
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*be).profiler()->report();
  EXPECT_NE(report.find("gemm_cm2 (linear_q4gsw + mm)"), std::string::npos) << report;
  EXPECT_NE(report.find("gemm_cm2 (linear_q4gsw_backward + mm)"), std::string::npos) << report;
}

// A 4-bit weight's tall, narrow fp16 products (M >= 4096 rows, N <= 1024) run khr/gemm_coop_khr.comp beside
// cooperative matrices 2 (append_coop: faster there); against the CPU backend running the same calls, with
// the catalogue's f16 4-bit tolerance.
TEST(GemmCm2, NarrowFourBitProductsTakeTheKhrKernel) {
  std::unique_ptr<Backend> be = cm2_backend("edgetrain_cm2_narrow_profile.txt");
  CM2_OR_SKIP(be)
  const int64_t M = 4096, K = 320, N = 264, gs = 32;  // partial tiles; dx contracts over N >= 256
  Rng r(23);
  const HostTensor x = random_f32(r, Shape{M, K}), dy = random_f32(r, Shape{M, N}), bias = random_f32(r, Shape{N});
  const Q4Weight q = random_q4(r, N, K, gs);
  auto run = [&](Backend& bk) {
    auto up = [&](const HostTensor& h) { return bk.from_host(h.shape(), h.dtype(), h.data(), h.nbytes()); };
    const Tensor tw = up(q.w), ts = up(q.scales);
    auto p = bk.new_program();
    Graph g(bk, *p);
    g.set_precision(Precision::fp16);
    Tensor y = g.linear_q4gsw(up(x), tw, ts, gs, up(bias));
    Tensor dx = g.linear_q4gsw_backward(up(dy), tw, ts, gs, K);
    p->finalize();
    p->replay();
    return std::vector<HostTensor>{HostTensor::from(y.shape(), DType::f32, bk.to_vector<float>(y)),
                                   HostTensor::from(dx.shape(), DType::f32, bk.to_vector<float>(dx))};
  };
  const std::vector<HostTensor> want = run(backend_for_tests("cpu")), got = run(*be);
  std::string d = compare(got[0], want[0], tol::reduction(K));
  EXPECT_TRUE(d.empty()) << "y:\n" << d;
  d = compare(got[1], want[1], tol::reduction(N));
  EXPECT_TRUE(d.empty()) << "dx:\n" << d;
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*be).profiler()->report();
  EXPECT_NE(report.find("gemm_coop_khr (linear_q4gsw)"), std::string::npos) << report;
  EXPECT_NE(report.find("gemm_coop_khr (linear_q4gsw_backward)"), std::string::npos) << report;
}

// A whole qlora step (model/step.cpp) on cooperative matrices 2, every product forced onto the tensor cores
// (the updates then join their 4-bit products; the profile shows it), against the CPU running the same fp16
// step, and the CPU's fp32 step as the yardstick: each fp16 step is as far from the fp32 one as rounding the
// operands to fp16 moves it (D, per gradient; the per-op bounds of test_f16_gemm.cpp keep every fp16 kernel
// that close), so the two fp16 steps must be within 2 D of each other (triangle inequality); the loss
// alike. A missing, doubled or misplaced update is off by O(1), far past D (~1e-3 relative).
TEST(GemmCm2, QloraStepMatchesTheCpu) {
  ScopedEnv coop("EDGETRAIN_VK_COOPMAT", "all");
  std::unique_ptr<Backend> be = cm2_backend("edgetrain_cm2_qlora_profile.txt");
  CM2_OR_SKIP(be)
  ModelConfig cfg = ModelConfig::preset("mini");
  cfg.mode = TrainMode::qlora;
  cfg.lora_rank = 16;
  cfg.lora_targets = "q,k,v,o,gate,up,down";
  const int64_t B = 4, T = 64;
  std::vector<int32_t> tokens, labels;
  Rng r(5);
  for (int64_t i = 0; i < B * T; ++i) tokens.push_back(r.integer(0, 255)), labels.push_back(r.integer(0, 255));
  struct Run {
    double loss = 0;
    std::map<std::string, std::vector<double>> grads;  // unscaled (fp16 runs multiply the loss by the scale)
  };
  auto run = [&](Backend& b, Precision precision) {
    Model m(b, cfg);
    m.set_precision(precision);
    m.init(3);
    // The adapters' B start at zero (no update at all): give them values, the same on every backend.
    Rng w(9);
    for (Param& p : m.params())
      if (p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".lora_b") == 0) {
        std::vector<float> v(static_cast<size_t>(p.value.numel()));
        for (float& x : v) x = w.uniform(-0.1f, 0.1f);
        b.upload(p.value, v.data(), v.size() * sizeof(float));
      }
    Run out;
    out.loss = m.accumulate(tokens, labels, B, T, B * T);
    const double scale = precision == Precision::fp16 ? m.scaler.scale : 1.0;
    for (Param& p : m.params())
      if (p.grad.defined())
        for (float g : b.to_vector<float>(p.grad)) out.grads[p.name].push_back(g / scale);
    return out;
  };
  Backend& cpu = backend_for_tests("cpu");
  const Run want = run(cpu, Precision::fp16), got = run(*be, Precision::fp16), fp32 = run(cpu, Precision::fp32);
  EXPECT_LE(std::fabs(got.loss - want.loss), 2 * std::fabs(fp32.loss - want.loss) + 1e-6 * std::fabs(want.loss));
  EXPECT_EQ(got.grads.size(), want.grads.size());
  EXPECT_EQ(want.grads.size(), 4u * 7 * 2);  // four layers, seven adapters, A and B
  auto distance = [](const std::vector<double>& a, const std::vector<double>& b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
    return std::sqrt(d);
  };
  for (const auto& [name, g] : want.grads) {
    const std::vector<double> &h = got.grads.at(name), &g32 = fp32.grads.at(name);
    ASSERT_EQ(h.size(), g.size()) << name;
    const double apart = distance(h, g), fp16_moves = distance(g32, g);
    EXPECT_GT(fp16_moves, 0.0) << name;
    EXPECT_LE(apart, 2 * fp16_moves) << name;
    std::printf("%s: tensor cores vs CPU %.3g, fp16 vs fp32 %.3g (relative to the gradient's norm)\n", name.c_str(),
                apart / distance(g, std::vector<double>(g.size(), 0.0)),
                fp16_moves / distance(g, std::vector<double>(g.size(), 0.0)));
  }
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*be).profiler()->report();
  EXPECT_NE(report.find("gemm_cm2 (linear_q4gsw + mm)"), std::string::npos) << report;
  EXPECT_NE(report.find("gemm_cm2 (linear_q4gsw_backward + mm)"), std::string::npos) << report;
}

}  // namespace
}  // namespace edgetrain::test
#endif

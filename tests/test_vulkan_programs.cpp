// Recorded Vulkan programs (vulkan/program.cpp): a training step replayed with changing slots against
// the CPU reference, staged operands reused until their source changes, barriers only between dependent
// calls, the profile, the replay's device time. Suite VulkanRuntime, as the rest of the runtime tests
// (test_vulkan_runtime.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "edgetrain/backends.h"
#include "edgetrain/graph.h"
#include "edgetrain/q4gsw.h"
#include "harness/op_case.h"

#ifdef EDGETRAIN_HAS_VULKAN
#include "vulkan/ops_gemm.h"
#include "harness/vulkan_test.h"
#include "vulkan/program.h"

namespace edgetrain::test {
namespace {

// A small training step (forward, loss, weight gradient, AdamW, requant) recorded once and replayed with
// new learning rates and bias corrections, checked against the CPU reference after every replay.
struct Step {
  Tensor x, w, scales, labels, latent, m, v, y, loss, dlogits, dw;
  std::unique_ptr<Program> p;
  Scalar lr, bc1, bc2, nvalid;
};

// Its inputs: x [M, K], latent weights [N, K], group scales, labels (from label_min: -1 includes ignored rows).
struct StepData {
  int64_t M, N, K, gs;
  std::vector<float> x, lat, sc;
  std::vector<int32_t> lab;
};

StepData random_step_data(uint64_t seed, int64_t M, int64_t N, int64_t K, int64_t gs, int32_t label_min) {
  q4::Geometry g(N, K, gs);
  Rng r(seed);
  StepData d{M, N, K, gs, std::vector<float>(M * K), std::vector<float>(N * K), std::vector<float>(g.groups() * N),
             std::vector<int32_t>(M)};
  for (auto& v : d.x) v = r.uniform(-1, 1);
  for (auto& v : d.lat) v = r.uniform(-0.5f, 0.5f);
  for (auto& v : d.sc) v = r.uniform(0.05f, 0.1f);
  for (auto& v : d.lab) v = r.integer(label_min, static_cast<int32_t>(N - 1));
  return d;
}

Step build_step(Backend& b, const StepData& d) {
  const int64_t M = d.M, N = d.N, K = d.K, gs = d.gs;
  q4::Geometry g(N, K, gs);
  Step s;
  s.x = b.from_vector(Shape{M, K}, DType::f32, d.x);
  s.latent = b.from_vector(Shape{N, K}, DType::f32, d.lat);
  s.scales = b.from_vector(Shape{g.groups(), N}, DType::f32, d.sc);
  s.labels = b.from_vector(Shape{M}, DType::i32, d.lab);
  s.w = b.zeros(Shape{g.words()}, DType::u32);
  s.m = b.zeros(Shape{N, K}, DType::f32);
  s.v = b.zeros(Shape{N, K}, DType::f32);
  s.y = b.zeros(Shape{M, N}, DType::f32);
  s.loss = b.zeros(Shape{}, DType::f32);
  s.dw = b.zeros(Shape{N, K}, DType::f32);
  s.p = b.new_program();
  s.lr = s.p->slot("lr", 1e-2f);
  s.bc1 = s.p->slot("bc1", 0.1f);
  s.bc2 = s.p->slot("bc2", 0.001f);
  s.nvalid = s.p->slot("n_valid", static_cast<float>(M));
  s.p->record({Op::q4gsw_requant, {s.latent, s.scales}, {s.w, s.latent}, {gs}, {}});
  s.p->record({Op::linear_q4gsw, {s.x, s.w, s.scales, Tensor()}, {s.y}, {gs}, {}});
  s.p->record({Op::fused_ce, {s.y, s.labels}, {s.loss, s.y}, {}, {s.nvalid}});  // dlogits in place
  s.p->record({Op::linear_dW, {s.y, s.x}, {s.dw}, {0}, {}});
  s.p->record({Op::adamw_step, {s.latent, s.m, s.v, s.dw}, {s.latent, s.m, s.v, s.dw}, {},
               {s.lr, 0.9f, 0.999f, 1e-8f, 0.01f, s.bc1, s.bc2}});
  s.p->finalize();
  return s;
}

TEST(VulkanRuntime, ProgramReplaysWithChangingSlots) {
  NEED_VULKAN();
  const StepData data = random_step_data(11, 37, 70, 52, 16, -1);
  auto cpu = make_cpu_backend();
  Step a = build_step(vb(), data);
  Step c = build_step(*cpu, data);
  for (int t = 1; t <= 5; ++t) {
    float lr = 1e-2f / t, bc1 = 1.0f - std::pow(0.9f, t), bc2 = 1.0f - std::pow(0.999f, t);
    for (Step* s : {&a, &c}) {
      s->p->set(s->lr, lr);
      s->p->set(s->bc1, bc1);
      s->p->set(s->bc2, bc2);
      s->p->replay();
    }
    SCOPED_TRACE("replay " + std::to_string(t));
    auto check = [&](const Tensor& ta, const Tensor& tc, Tolerance tol, const char* what) {
      HostTensor ha(ta.shape(), ta.dtype()), hc(tc.shape(), tc.dtype());
      vb().download(ta, ha.data(), ha.nbytes());
      cpu->download(tc, hc.data(), hc.nbytes());
      std::string d = compare(ha, hc, tol);
      EXPECT_TRUE(d.empty()) << what << ":\n" << d;
    };
    check(a.w, c.w, tol::exact, "w");
    check(a.loss, c.loss, {1e-4, 1e-4}, "loss");
    check(a.dw, c.dw, {1e-4, 1e-4}, "dw");
    check(a.m, c.m, {1e-5, 1e-4}, "m");
    check(a.latent, c.latent, {1e-5, 1e-4}, "latent");
  }
  auto* vp = dynamic_cast<vk::VulkanProgram*>(a.p.get());
  ASSERT_NE(vp, nullptr);
  // requant, gemm, ce rows, ce sum, dW, adamw; with the tensor-core path forced on these small products
  // (EDGETRAIN_VK_COOPMAT=all) each GEMM adds its operand stagings.
  if (!std::getenv("EDGETRAIN_VK_COOPMAT")) {
    EXPECT_EQ(vp->dispatch_count(), 6u);
  }
}

// A replay's device time (timestamps at its start and end, Program::device_seconds) is what `bench` sets
// beside the wall clock to tell slow kernels from slow submissions or waits: positive, within the wall time
// of the replay around it, and unknown (< 0) before the first replay and on the CPU.
TEST(VulkanRuntime, ReplayTellsItsDeviceTime) {
  NEED_VULKAN();
  const StepData data = random_step_data(12, 64, 48, 32, 16, 0);
  Step a = build_step(vb(), data);
  const auto& ctx = dynamic_cast<vk::VulkanBackend&>(vb()).context();
  if (!ctx.timestamps()) GTEST_SKIP() << "the device's compute queue writes no timestamps";
  EXPECT_LT(a.p->device_seconds(), 0.0);
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    a.p->replay();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GT(a.p->device_seconds(), 0.0);
    EXPECT_LE(a.p->device_seconds(), wall);
  }
  auto cpu = make_cpu_backend();
  Step c = build_step(*cpu, data);
  c.p->replay();
  EXPECT_LT(c.p->device_seconds(), 0.0);
}

// The tensor-core GEMMs stage each fp16 operand in the program's pooled scratch. A later call that would
// stage the same operand again (the q, k and v projections of one activation) skips it while the image is
// intact, and stages it again once the activation is rewritten. Values against the CPU backend, which a
// stale image would not match (the third product reads the rewritten x).
TEST(VulkanRuntime, StagedOperandIsReusedUntilItsSourceChanges) {
  NEED_VULKAN();
  vk::VulkanBackend& b = vb();
  if (!vk::coop_for(300, 200, 256, b.encode_context())) GTEST_SKIP() << "no cooperative matrices on " << b.device_name();
  Rng r(7);
  const HostTensor x = random_f32(r, Shape{300, 256}), w1 = random_f32(r, Shape{200, 256}),
                   w2 = random_f32(r, Shape{136, 256}), w3 = random_f32(r, Shape{200, 256});
  auto run = [&](Backend& be, size_t* skipped) {
    auto up = [&](const HostTensor& h) { return be.from_host(h.shape(), DType::f32, h.data(), h.nbytes()); };
    Tensor tx = up(x), t1 = up(w1), t2 = up(w2), t3 = up(w3);
    auto p = be.new_program();
    Graph g(be, *p);
    g.set_precision(Precision::fp16);
    Tensor y1 = g.linear(tx, t1), y2 = g.linear(tx, t2);
    g.call(Op::fill, {}, {tx}, {}, {0.5f});
    Tensor y3 = g.linear(tx, t3);
    p->finalize();
    p->replay();
    if (skipped) *skipped = dynamic_cast<vk::VulkanProgram&>(*p).skipped_stagings();
    return std::vector<std::vector<float>>{be.to_vector<float>(y1), be.to_vector<float>(y2), be.to_vector<float>(y3)};
  };
  size_t skipped = 0;
  const auto want = run(backend_for_tests("cpu"), nullptr);
  auto check = [&](const std::vector<std::vector<float>>& got) {
    EXPECT_EQ(skipped, 1u);  // the second product's x; the third's x was rewritten
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(got[i].size(), want[i].size());
      for (size_t j = 0; j < got[i].size(); ++j)
        ASSERT_NEAR(got[i][j], want[i][j], 1e-4f * (1.0f + std::fabs(want[i][j]))) << "product " << i << ", element " << j;
    }
  };
  check(run(b, &skipped));
  // Profiled (EDGETRAIN_PROFILE: timestamps around every recorded dispatch): the skipped staging has no
  // timestamps, and the replay must not wait for them (it did: the profiler read back queries for every
  // dispatch the encoders made, and waited forever for the skipped one's).
  std::unique_ptr<Backend> profiled =
      make_profiled_backend("vulkan", ::testing::TempDir() + "edgetrain_staged_profile.txt");
  check(run(*profiled, &skipped));
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*profiled).profiler()->report();
  EXPECT_NE(report.find("1 replays"), std::string::npos) << report;
}


// Barriers only where calls depend on each other (program.cpp): calls on disjoint buffers run without one
// between them, a read of a buffer written since the last barrier (RAW), a write of one read (WAR) or
// written (WAW) since then each get one, and the values are those of running the calls in order.
TEST(VulkanRuntime, BarriersOnlyBetweenDependentCalls) {
  NEED_VULKAN();
  Backend& b = vb();
  const int64_t n = 1000;
  std::vector<Tensor> t;
  for (int i = 0; i < 6; ++i) t.push_back(b.zeros(Shape{n}, DType::f32));
  auto barriers = [](Program& p) { return dynamic_cast<vk::VulkanProgram&>(p).barrier_count(); };
  {
    auto p = b.new_program();  // independent fills: no barrier
    for (int i = 0; i < 4; ++i) p->record({Op::fill, {}, {t[i]}, {}, {float(i + 1)}});
    p->finalize();
    EXPECT_EQ(barriers(*p), 0u);
    p->replay();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(b.to_vector<float>(t[i]), std::vector<float>(n, float(i + 1)));
  }
  {
    auto p = b.new_program();
    p->record({Op::add, {t[0], t[1]}, {t[4]}, {}, {1.0f}});  // t4 = 1 + 2
    p->record({Op::add, {t[2], t[3]}, {t[5]}, {}, {1.0f}});  // independent: t5 = 3 + 4
    p->record({Op::add, {t[4], t[5]}, {t[0]}, {}, {1.0f}});  // RAW on t4, t5 (and WAR on t0): t0 = 10
    p->record({Op::fill, {}, {t[1]}, {}, {-1.0f}});           // independent of the last: t1 = -1
    p->record({Op::fill, {}, {t[4]}, {}, {0.5f}});            // WAR on t4 (read by the third call): t4 = 0.5
    p->record({Op::fill, {}, {t[4]}, {}, {0.25f}});           // WAW on t4: t4 = 0.25
    p->finalize();
    EXPECT_EQ(barriers(*p), 3u);
    p->replay();
    EXPECT_EQ(b.to_vector<float>(t[0]), std::vector<float>(n, 10.0f));
    EXPECT_EQ(b.to_vector<float>(t[1]), std::vector<float>(n, -1.0f));
    EXPECT_EQ(b.to_vector<float>(t[4]), std::vector<float>(n, 0.25f));
    EXPECT_EQ(b.to_vector<float>(t[5]), std::vector<float>(n, 7.0f));
  }
}


// A program's first replay touches its memory for the first time (an H200's 1B-shaped step: 423 ms, then 195
// per replay), so once there is a second the profile leaves the first out, takes medians over the rest, and
// says so; with EDGETRAIN_PROFILE_ORDER it lists each replay's length and every dispatch in program order.
TEST(VulkanRuntime, ProfileLeavesOutTheFirstReplayAndListsDispatchesInOrder) {
  NEED_VULKAN();
  std::unique_ptr<Backend> b =
      make_profiled_backend("vulkan", ::testing::TempDir() + "edgetrain_order_profile.txt", /*in_order=*/true);
  const int64_t n = 1000;
  Tensor x = b->zeros(Shape{n}, DType::f32), y = b->zeros(Shape{n}, DType::f32);
  auto p = b->new_program();
  p->record({Op::fill, {}, {x}, {}, {2.0f}});
  p->record({Op::add, {x, x}, {y}, {}, {1.0f}});
  p->finalize();
  for (int i = 0; i < 3; ++i) p->replay();
  EXPECT_EQ(b->to_vector<float>(y), std::vector<float>(n, 4.0f));
  const std::string report = dynamic_cast<vk::VulkanBackend&>(*b).profiler()->report();
  EXPECT_NE(report.find("3 replays; medians of 2 (the first replay left out)"), std::string::npos) << report;
  const std::string lengths = "each replay, first start to last end (ms):";
  const size_t at = report.find(lengths);
  ASSERT_NE(at, std::string::npos) << report;
  std::istringstream line(report.substr(at + lengths.size(), report.find('\n', at) - at - lengths.size()));
  int replays = 0;
  for (double ms; line >> ms; ++replays) EXPECT_GE(ms, 0.0);
  EXPECT_EQ(replays, 3) << report;
  const size_t order = report.find("every dispatch in program order");
  ASSERT_NE(order, std::string::npos) << report;
  const size_t fill = report.find(": fill(", order), add = report.find(": add(", order);
  ASSERT_NE(fill, std::string::npos) << report;
  ASSERT_NE(add, std::string::npos) << report;
  EXPECT_LT(fill, add) << report;
}


}  // namespace
}  // namespace edgetrain::test
#endif  // EDGETRAIN_HAS_VULKAN

// The WebGPU runtime on Dawn: adapter choice (and refusal of Dawn's Null adapter), WGSL compile errors as
// Errors naming the shader and line, upload/download round trips, a recorded training step replayed
// with changing per-step scalars against the CPU reference, rope's accuracy at large positions and
// write_rows replayed at moving offsets. Skips when Dawn or an adapter is missing.
#ifdef EDGETRAIN_HAS_WEBGPU

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "cpu/cpu_backend.h"
#include "edgetrain/backends.h"
#include "edgetrain/q4gsw.h"
#include "harness/op_case.h"
#include "webgpu/dawn_loader.h"
#include "webgpu/program.h"

namespace edgetrain::test {
namespace {

bool webgpu_usable(std::string* why) {
  for (const DeviceInfo& d : list_devices())
    if (d.backend == "webgpu") {
      if (!d.usable) *why = d.details;
      return d.usable;
    }
  *why = "webgpu is not listed";
  return false;
}

wg::WebGpuBackend& webgpu() {
  static std::unique_ptr<Backend> b = make_backend("webgpu");
  return dynamic_cast<wg::WebGpuBackend&>(*b);
}

#define REQUIRE_WEBGPU()                                       \
  do {                                                         \
    std::string why;                                           \
    if (!webgpu_usable(&why)) GTEST_SKIP() << "no WebGPU: " << why; \
  } while (0)

TEST(WebGpuRuntime, AdapterInfo) {
  REQUIRE_WEBGPU();
  auto devs = webgpu_devices();
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].backend, "webgpu");
  EXPECT_FALSE(devs[0].name.empty());
  EXPECT_NE(devs[0].name, "Null backend");
  std::cout << "webgpu adapter: " << devs[0].name << " [" << devs[0].kind << "] " << devs[0].details << "\n";
  wg::WebGpuBackend& b = webgpu();
  EXPECT_EQ(b.name(), "webgpu");
  EXPECT_EQ(b.device_name(), devs[0].name);
  const wgpu::Limits& l = b.ctx().limits;
  EXPECT_GE(l.maxComputeInvocationsPerWorkgroup, 64u);
  EXPECT_GE(l.maxStorageBuffersPerShaderStage, 8u);
  EXPECT_NE(b.ctx().info.backend_type, wgpu::kBackendNull);
}

// Where the adapter offers f16 subgroup matrices (Mesa 26's lavapipe through Dawn: tests/khr_coop.sh),
// fp16-operand products of 64 or more each way take gemm_coop.wgsl on a hardware adapter, every one where
// forced (EDGETRAIN_WG_COOPMAT=all, which the catalogue then checks against the reference), none without
// the f16 flag or when turned off.
TEST(WebGpuRuntime, Fp16ProductsTakeSubgroupMatricesWhereOffered) {
  REQUIRE_WEBGPU();
  wg::WebGpuBackend& b = webgpu();
  const auto& m = b.ctx().info.matrix;
  if (m.M == 0) GTEST_SKIP() << "the adapter offers no f16 subgroup matrices";
  EXPECT_TRUE(m.M == 8 || m.M == 16) << m.M;
  EXPECT_EQ(m.M, m.N);
  EXPECT_EQ(m.M, m.K);
  wg::EncodeContext e = b.encode_context();
  EXPECT_EQ(e.matrix, m.M);
  wg::GemmShape g{};
  g.M = g.N = g.K = 256;
  g.a_si = g.K;
  g.a_sc = 1;
  g.b_sc = g.N;
  g.b_sj = 1;
  g.f16 = true;
  e.tuning.coopmat = gpu::Force::all;
  EXPECT_TRUE(wg::coop_gemm(g, e));
  e.tuning.coopmat = gpu::Force::automatic;
  EXPECT_EQ(wg::coop_gemm(g, e), !e.software);
  g.M = 32;
  EXPECT_FALSE(wg::coop_gemm(g, e)) << "a product under 64 rows stays on gemm.wgsl unless forced";
  e.tuning.coopmat = gpu::Force::never;
  EXPECT_FALSE(wg::coop_gemm(g, e));
  e.tuning.coopmat = gpu::Force::all;
  g.f16 = false;
  EXPECT_FALSE(wg::coop_gemm(g, e)) << "fp32 products never take fp16 matrices";
  g.f16 = true;
  e.max_shared_bytes = 1024;
  EXPECT_FALSE(wg::coop_gemm(g, e)) << "the kernel's workgroup memory must fit the device's limit";
  EXPECT_EQ(b.fp16_speed().fast, !e.software) << b.fp16_speed().why;
}

TEST(WebGpuRuntime, NullAdapterIsRefused) {
  if (!wgpu::dawn()) GTEST_SKIP() << "Dawn not found: " << wgpu::dawn_load_error();
  setenv("EDGETRAIN_WEBGPU_BACKEND", "null", 1);
  std::string msg;
  try {
    make_backend("webgpu");
  } catch (const Error& e) {
    msg = e.what();
  }
  auto devs = webgpu_devices();
  unsetenv("EDGETRAIN_WEBGPU_BACKEND");
  ASSERT_FALSE(msg.empty()) << "a Null adapter was accepted";
  EXPECT_NE(msg.find("refusing Dawn's Null backend"), std::string::npos) << msg;
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_FALSE(devs[0].usable);
  EXPECT_NE(devs[0].details.find("Null backend"), std::string::npos) << devs[0].details;
}

TEST(WebGpuRuntime, CompileErrorNamesShaderAndLine) {
  REQUIRE_WEBGPU();
  const std::string bad =
      "@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n"
      "@compute @workgroup_size(1)\n"
      "fn main() {\n"
      "  o[0] = undefined_name + 1u;\n"
      "}\n";
  std::string msg;
  try {
    webgpu().compile_check("broken_kernel", bad);
  } catch (const Error& e) {
    msg = e.what();
  }
  ASSERT_FALSE(msg.empty()) << "invalid WGSL compiled";
  EXPECT_NE(msg.find("broken_kernel"), std::string::npos) << msg;
  EXPECT_NE(msg.find(":4:"), std::string::npos) << "no line 4 in: " << msg;
  EXPECT_NE(msg.find("undefined_name"), std::string::npos) << msg;
  // A valid shader still compiles after the failure (the error scopes were balanced).
  EXPECT_NO_THROW(webgpu().compile_check("ok_kernel",
                                         "@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n"
                                         "@compute @workgroup_size(1) fn main() { o[0] = 1u; }\n"));
}

TEST(WebGpuRuntime, UploadDownloadRoundTrips) {
  REQUIRE_WEBGPU();
  wg::WebGpuBackend& b = webgpu();
  Rng r(7);
  for (int64_t n : {0, 1, 3, 4, 5, 17, 1000, 65537}) {
    SCOPED_TRACE(n);
    HostTensor f = random_f32(r, Shape{n});
    Tensor t = b.from_host(f.shape(), DType::f32, f.data(), f.nbytes());
    EXPECT_EQ(compare(HostTensor::from(Shape{n}, DType::f32, b.to_vector<float>(t)), f, tol::exact), "");
    HostTensor bl = random_bool(r, Shape{n});  // 1-byte elements: sizes that are not multiples of 4
    Tensor tb = b.from_host(bl.shape(), DType::boolean, bl.data(), bl.nbytes());
    HostTensor back(bl.shape(), DType::boolean);
    b.download(tb, back.data(), back.nbytes());
    EXPECT_EQ(compare(back, bl, tol::exact), "");
    Tensor z = b.zeros(Shape{n}, DType::i32);
    for (int32_t v : b.to_vector<int32_t>(z)) ASSERT_EQ(v, 0);
  }
}

// q4gsw_requant must match the CPU's correctly rounded latent / s bit for bit, also where that quotient is
// within a few ulps of a .5 tie and the scale is not a power of two (a GPU division off by one ulp would
// round the other way). Latents are (j + 0.5) * s nudged by -3..+3 ulps; plus denormals and huge values.
TEST(WebGpuRuntime, RequantIsExactNearTies) {
  REQUIRE_WEBGPU();
  const int64_t N = 48, K = 256, gs = 32;
  q4::Geometry g(N, K, gs);
  Rng r(23);
  HostTensor scales = random_f32(r, Shape{g.groups(), N}, 0.013f, 0.91f);
  HostTensor lat(Shape{N, K}, DType::f32);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      float s = scales.as<float>()[(k / gs) * N + n];
      float v = (static_cast<float>(r.integer(-9, 8)) + 0.5f) * s;
      for (int u = r.integer(-3, 3); u != 0; u += u > 0 ? -1 : 1)
        v = std::nextafter(v, u > 0 ? 1e30f : -1e30f);
      const int64_t i = n * K + k;
      if (i % 97 == 5) v = 1e-40f;         // denormal latent
      if (i % 97 == 6) v = -3e38f;         // clamps
      lat.as<float>()[i] = v;
    }
  scales.as<float>()[3] = 1e-39f;          // a denormal scale
  OpCase c;
  c.name = "near_ties";
  c.op = Op::q4gsw_requant;
  c.in = {lat, scales};
  c.out = {zeros(Shape{g.words()}, DType::u32), zeros(lat.shape(), DType::f32)};
  c.out_alias = {-1, 0};  // the latent, clamped in place
  c.ints = {gs};
  auto want = run_reference(c);
  auto got = run_on(webgpu(), c);
  EXPECT_EQ(compare(got[0], want[0], tol::exact), "");
}

// One training step (q4 forward -> fused CE -> weight gradient -> AdamW) recorded once and replayed five
// times with a new learning rate and bias corrections each time, on WebGPU and on the CPU reference.
TEST(WebGpuRuntime, RecordedStepReplaysWithNewScalars) {
  REQUIRE_WEBGPU();
  wg::WebGpuBackend& gpu = webgpu();
  cpu::CpuBackend cpu(BackendOptions{1, "", false, false});
  cpu.set_reference_only(true);
  const int64_t M = 37, K = 72, N = 45, gs = 32;
  Rng r(11);
  Q4Weight q = random_q4(r, N, K, gs);
  HostTensor x = random_f32(r, Shape{M, K});
  HostTensor labels = random_i32(r, Shape{M}, -1, static_cast<int32_t>(N) - 1);
  HostTensor latent = random_f32(r, Shape{N, K}, -0.3f, 0.3f);

  struct Run {
    Backend& b;
    std::unique_ptr<Program> p;
    Tensor x, w, s, lab, logits, loss, dlogits, dw, dw_seen, param, m, v;
    Scalar lr, bc1, bc2;
    Run(Backend& be, const HostTensor& xh, const Q4Weight& qh, const HostTensor& labh, const HostTensor& lat,
        int64_t M, int64_t N, int64_t K, int64_t gs)
        : b(be), p(be.new_program()) {
      auto up = [&](const HostTensor& h) { return b.from_host(h.shape(), h.dtype(), h.data(), h.nbytes()); };
      x = up(xh);
      w = up(qh.w);
      s = up(qh.scales);
      lab = up(labh);
      param = up(lat);
      logits = b.zeros(Shape{M, N}, DType::f32);
      loss = b.zeros(Shape{}, DType::f32);
      dlogits = b.zeros(Shape{M, N}, DType::f32);
      dw = b.zeros(Shape{N, K}, DType::f32);
      dw_seen = b.zeros(Shape{N, K}, DType::f32);  // dw as AdamW took it (AdamW zeroes dw)
      m = b.zeros(Shape{N, K}, DType::f32);
      v = b.zeros(Shape{N, K}, DType::f32);
      lr = p->slot("lr", 1e-3f);
      bc1 = p->slot("bc1", 1.0f);
      bc2 = p->slot("bc2", 1.0f);
      Scalar n_valid = p->slot("n_valid", 1.0f);
      p->record({Op::linear_q4gsw, {x, w, s}, {logits}, {gs}, {}});
      p->record({Op::fused_ce, {logits, lab}, {loss, dlogits}, {}, {n_valid}});
      p->record({Op::linear_dW, {dlogits, x}, {dw}, {0}, {}});
      p->record({Op::dim_order_copy, {dw}, {dw_seen}, {}, {}});
      p->record({Op::adamw_step, {param, m, v, dw}, {param, m, v, dw}, {},
                 {lr, Scalar(0.9f), Scalar(0.999f), Scalar(1e-8f), Scalar(0.01f), bc1, bc2}});
      p->finalize();
    }
    HostTensor get(const Tensor& t) {
      HostTensor h(t.shape(), t.dtype());
      b.download(t, h.data(), h.nbytes());
      return h;
    }
  };
  Run g(gpu, x, q, labels, latent, M, N, K, gs), c(cpu, x, q, labels, latent, M, N, K, gs);
  int valid = 0;
  for (int64_t i = 0; i < M; ++i) valid += labels.as<int32_t>()[i] >= 0;
  for (Run* run : {&g, &c}) run->p->set("n_valid", static_cast<float>(valid));

  // AdamW divides by sqrt(v): where a gradient is ~0 its sign decides the step, so the two backends'
  // parameters are compared one step at a time: the WebGPU step against the reference AdamW applied to
  // WebGPU's own previous state and gradient. Everything before AdamW is compared with the CPU run.
  HostTensor p_prev = g.get(g.param), m_prev = g.get(g.m), v_prev = g.get(g.v);
  for (int step = 1; step <= 5; ++step) {
    SCOPED_TRACE("replay " + std::to_string(step));
    const float lr = 1e-2f / static_cast<float>(step);
    const float bc1 = 1.0f - std::pow(0.9f, static_cast<float>(step));
    const float bc2 = 1.0f - std::pow(0.999f, static_cast<float>(step));
    for (Run* run : {&g, &c}) {
      run->p->set(run->lr, lr);
      run->p->set(run->bc1, bc1);
      run->p->set(run->bc2, bc2);
    }
    auto t0 = std::chrono::steady_clock::now();
    g.p->replay();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    c.p->replay();
    if (step == 1 || step == 5) std::cout << "webgpu replay " << step << ": " << ms << " ms\n";
    EXPECT_EQ(compare(g.get(g.logits), c.get(c.logits), tol::reduction(K)), "") << "logits";
    EXPECT_EQ(compare(g.get(g.loss), c.get(c.loss), tol::reduction(M * N)), "") << "loss";
    EXPECT_EQ(compare(g.get(g.dlogits), c.get(c.dlogits), tol::reduction(N)), "") << "dlogits";
    HostTensor dw = g.get(g.dw_seen);
    EXPECT_EQ(compare(dw, c.get(c.dw_seen), tol::reduction(M * N)), "") << "dw";
    EXPECT_EQ(compare(g.get(g.dw), HostTensor(dw.shape(), DType::f32), tol::exact), "") << "dw after AdamW";
    ref::Call call{Op::adamw_step, {p_prev.view(), m_prev.view(), v_prev.view(), dw.view()},
                   {p_prev.view(), m_prev.view(), v_prev.view(), dw.view()}, {},
                   {lr, 0.9f, 0.999f, 1e-8f, 0.01f, bc1, bc2}};
    ref::run(call);  // p_prev, m_prev, v_prev now hold the expected state after this replay
    EXPECT_EQ(compare(g.get(g.m), m_prev, tol::elementwise), "") << "m";
    EXPECT_EQ(compare(g.get(g.v), v_prev, tol::elementwise), "") << "v";
    EXPECT_EQ(compare(g.get(g.param), p_prev, tol::elementwise), "") << "param";
    p_prev = g.get(g.param);
    m_prev = g.get(g.m);
    v_prev = g.get(g.v);
  }
  // The parameters really moved, by a step that depends on the replayed learning rates.
  HostTensor pg = g.get(g.param);
  double moved = 0;
  for (int64_t i = 0; i < pg.numel(); ++i) moved += std::fabs(pg.as<float>()[i] - latent.as<float>()[i]);
  EXPECT_GT(moved / static_cast<double>(pg.numel()), 1e-3);
}

// rope's angle p * theta^(-2i/D) is reduced in fixed point: at positions near 100000 an fp32 product
// would be off by ~6e-3 rad. Constant and slot pos_offset (replayed at several positions, fractional and
// negative too), a head wider than one frequency table (D = 1280: two dispatches), and rope_backward.
TEST(WebGpuRuntime, RopeIsAccurateAtLargePositions) {
  REQUIRE_WEBGPU();
  wg::WebGpuBackend& gpu = webgpu();
  const Tolerance tight{5e-7, 1e-6};
  Rng r(31);
  for (Op op : {Op::rope, Op::rope_backward})
    for (float theta : {10000.0f, 500000.0f}) {
      SCOPED_TRACE(std::string(op_name(op)) + " theta " + std::to_string(theta));
      const Shape s{1, 3, 2, 128};
      HostTensor xh = random_f32(r, s);
      OpCase c = make_case("large_pos", op, {xh}, {zeros(s, DType::f32)}, {}, {theta, 99997.0f}, tight);
      EXPECT_EQ(compare(run_on(gpu, c)[0], run_reference(c)[0], tight), "") << "constant offset";

      Tensor x = gpu.from_host(s, DType::f32, xh.data(), xh.nbytes()), y = gpu.zeros(s, DType::f32);
      auto prog = gpu.new_program();
      Scalar pos = prog->slot("pos", 0.0f);
      prog->record({op, {x}, {y}, {}, {Scalar(theta), pos}});
      prog->finalize();
      for (float p : {0.0f, 99999.0f, 65536.5f, 12345.25f, -31.0f, -2.75f, 4097.0f}) {
        SCOPED_TRACE("pos_offset " + std::to_string(p));
        prog->set(pos, p);
        prog->replay();
        HostTensor got(s, DType::f32);
        gpu.download(y, got.data(), got.nbytes());
        c.floats = {theta, p};
        EXPECT_EQ(compare(got, run_reference(c)[0], tight), "");
      }
    }
  const Shape wide{2, 2, 1280};
  OpCase w = make_case("wide_head", Op::rope, {random_f32(r, wide)}, {zeros(wide, DType::f32)}, {}, {10000.0f, 70000.0f},
                       tight);
  EXPECT_EQ(compare(run_on(gpu, w)[0], run_reference(w)[0], tight), "") << "D = 1280";
  // Per-pair frequencies (rope scaling) are turned into turns exactly on the GPU: as tight at p ~ 1e5, for
  // frequencies from ~1e-9 to above one turn per position.
  for (Op op : {Op::rope, Op::rope_backward}) {
    const Shape s{1, 3, 2, 256};
    HostTensor f(Shape{128}, DType::f32);
    for (int64_t i = 0; i < 128; ++i) f.as<float>()[i] = static_cast<float>(7.5 * std::pow(1e-10, i / 127.0) / (1 + i % 7));
    OpCase c = make_case("freqs_large_pos", op, {random_f32(r, s), f}, {zeros(s, DType::f32)}, {}, {10000.0f, 99997.0f},
                         tight);
    EXPECT_EQ(compare(run_on(gpu, c)[0], run_reference(c)[0], tight), "") << op_name(op) << " with freqs";
  }
}

// theta as a per-replay slot (no host table): fp32 frequencies, so only moderate positions are checked.
TEST(WebGpuRuntime, RopeWithThetaSlot) {
  REQUIRE_WEBGPU();
  wg::WebGpuBackend& gpu = webgpu();
  Rng r(32);
  const Shape s{2, 5, 3, 16};
  HostTensor xh = random_f32(r, s);
  Tensor x = gpu.from_host(s, DType::f32, xh.data(), xh.nbytes()), y = gpu.zeros(s, DType::f32);
  auto prog = gpu.new_program();
  Scalar theta = prog->slot("theta", 10000.0f), pos = prog->slot("pos", 0.0f);
  prog->record({Op::rope, {x}, {y}, {}, {theta, pos}});
  prog->finalize();
  for (auto [t, p] : {std::pair{10000.0f, 3.0f}, std::pair{500000.0f, 40.0f}, std::pair{10.0f, 0.0f}}) {
    prog->set(theta, t);
    prog->set(pos, p);
    prog->replay();
    HostTensor got(s, DType::f32);
    gpu.download(y, got.data(), got.nbytes());
    OpCase c = make_case("theta_slot", Op::rope, {xh}, {zeros(s, DType::f32)}, {}, {t, p}, tol::transcendental);
    EXPECT_EQ(compare(got, run_reference(c)[0], tol::transcendental), "") << "theta " << t << " pos " << p;
  }
}

// write_rows recorded once and replayed at moving offsets (a KV cache append), on a 1-byte dtype whose
// rows straddle words, and on f32: every replay must match the reference applied to the same cache.
TEST(WebGpuRuntime, WriteRowsReplaysAtMovingOffsets) {
  REQUIRE_WEBGPU();
  wg::WebGpuBackend& gpu = webgpu();
  Rng r(33);
  for (DType t : {DType::boolean, DType::f32}) {
    SCOPED_TRACE(dtype_name(t));
    const Shape xs{3, 5}, os{9, 5};
    HostTensor xh = t == DType::f32 ? random_f32(r, xs) : random_bool(r, xs);
    HostTensor cache = t == DType::f32 ? random_f32(r, os) : random_bool(r, os);
    Tensor x = gpu.from_host(xs, t, xh.data(), xh.nbytes()), o = gpu.from_host(os, t, cache.data(), cache.nbytes());
    auto prog = gpu.new_program();
    Scalar off = prog->slot("off", 0.0f);
    prog->record({Op::write_rows, {x}, {o}, {}, {off}});
    prog->finalize();
    for (float v : {0.0f, 3.0f, -2.0f, 7.9f, -0.5f, 8.0f, 100.0f, 1e30f, -1e30f, 1.0f}) {
      SCOPED_TRACE("row_offset " + std::to_string(v));
      prog->set(off, v);
      prog->replay();
      ref::Call call{Op::write_rows, {xh.view()}, {cache.view()}, {}, {v}};
      ref::run(call);
      HostTensor got(os, t);
      gpu.download(o, got.data(), got.nbytes());
      EXPECT_EQ(compare(got, cache, tol::exact), "");
    }
  }
}

}  // namespace
}  // namespace edgetrain::test

#endif  // EDGETRAIN_HAS_WEBGPU
